/* plot: telemetry lines -> a whitespace separated table for gnuplot, one
 * row per snapshot, NaN where a value cannot be read, with each rate also
 * smoothed (plot_smooth.c), and the scheduler's decisions gathered. The file is
 * outside bytes (cut by a crash, edited by hand, not telemetry at all): each
 * line goes through sl_snapshot_parse, and a line it refuses is counted and
 * skipped. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base.h"
#include "sluice/telemetry.h"
#include "telemetry/plot_internal.h"
#include "telemetry/snapshot_schema.h"

/* The columns' names in the table's header line (the JSON member paths). */
static const char *const col_names[SL__PC_N] = {
    "t",
    "samples_per_s",
    "stall_fraction",
    "cpu_self",
    "cpu_other",
    "cpu_total",
    "stages.read.items_per_s",
    "stages.decode.items_per_s",
    "placement.gpu_samples_per_s",
    "io.requests_per_s",
    "io.request_records_per_s",
    "queue_depth.read",
    "queue_depth.decode",
    "queue_depth.batches",
    "knobs.read_threads",
    "knobs.decode_threads",
    "knobs.prefetch",
    "io.depth",
    "cache.hit_rate",
    "placement.gpu_share",
    "cache.stored_share",
    "cache.disk.hit_rate",
    "interval_s",
    "batches_total",
    "samples_per_s.smoothed",
    "stall_fraction.smoothed",
    "cpu_self.smoothed",
    "cpu_other.smoothed",
    "cpu_total.smoothed",
    "stages.read.items_per_s.smoothed",
    "stages.decode.items_per_s.smoothed",
    "placement.gpu_samples_per_s.smoothed",
    "io.requests_per_s.smoothed",
    "io.request_records_per_s.smoothed",
    "io.records_per_request.smoothed",
};

static void columns(const sl_snapshot_t *s, double v[SL__PC_N])
{
    v[SL__PC_T] = s->t;
    v[SL__PC_SPS] = s->samples_per_s;
    v[SL__PC_STALL] = s->stall_fraction;
    v[SL__PC_CPU_SELF] = s->cpu_self;
    v[SL__PC_CPU_OTHER] = s->cpu_other;
    v[SL__PC_CPU_TOTAL] = s->cpu_total;
    v[SL__PC_READ_IPS] = s->read.items_per_s;
    v[SL__PC_DECODE_IPS] = s->decode.items_per_s;
    v[SL__PC_GPU_IPS] =
        s->placement_present && s->placement_gpu ? s->gpu_samples_per_s : NAN;
    /* Records/s from the interval's requests/s and records per request
     * (none without requests), so that the window's ratio of the two
     * smoothed rates is its records per request. */
    v[SL__PC_REQ_PS] = s->requests_per_s;
    v[SL__PC_REC_PS] = s->requests_per_s == 0 ? 0
                       : s->requests_per_s > 0 && s->records_per_request >= 0
                           ? s->requests_per_s * s->records_per_request
                           : NAN;
    v[SL__PC_Q_READ] = s->read.queue_depth;
    v[SL__PC_Q_DECODE] = s->decode.queue_depth;
    v[SL__PC_Q_BATCHES] = s->batches_ready;
    v[SL__PC_K_READ] = s->read.workers;
    v[SL__PC_K_DECODE] = s->decode.workers;
    v[SL__PC_K_PREFETCH] = s->prefetch;
    /* with io_uring the scheduler's read knob (docs/DESIGN.md) */
    v[SL__PC_K_IO_DEPTH] = s->io_async == 1 ? s->io_depth : NAN;
    v[SL__PC_CACHE_HIT] = s->cache_hit_rate;
    v[SL__PC_GPU_SHARE] =
        s->placement_present && s->placement_gpu ? s->gpu_share / 1000.0 : NAN;
    v[SL__PC_CACHE_STORED] = s->cache_raw_bytes > 0 && s->cache_bytes >= 0
                                 ? (double)s->cache_bytes / s->cache_raw_bytes
                                 : NAN;
    v[SL__PC_DISK_HIT] = NAN; /* from two lines: disk_hits() */
    v[SL__PC_INTERVAL] = s->interval_s;
    v[SL__PC_BATCHES] = (double)s->batches_total;
    for (int i = 0; i < SL__PC_N; i++)
        if (i < SL__PC_SPS_S && v[i] < 0) /* cannot be read */
            v[i] = NAN;
    for (int i = SL__PC_SPS_S; i < SL__PC_N; i++)
        v[i] = NAN; /* smooth() fills them */
}

/* What the table keeps from the line before. */
typedef struct {
    double t, b;          /* t, batches_total (smoothing) */
    char codec[16];       /* cache.codec ("": none yet) */
    int64_t dhits, dmiss; /* the disk tier's totals (-1: none yet) */
} before_t;

static sl__plot_decision_t *new_decision(sl__plot_table_t *tb)
{
    tb->ndec_all++;
    if (sl__array_reserve(&tb->dec, &tb->dec_cap, (size_t)tb->ndec + 1,
                          sizeof *tb->dec, 64))
        return NULL; /* counted, not kept */
    sl__plot_decision_t *d = &tb->dec[tb->ndec++];
    memset(d, 0, sizeof *d);
    return d;
}

static void add_decision(const sl_snapshot_t *s, sl__plot_table_t *tb)
{
    if (!s->decision_new)
        return;
    sl__plot_decision_t *d = new_decision(tb);
    if (d) {
        d->t = s->t;
        snprintf(d->knob, sizeof d->knob, "%s", s->decision_knob);
        d->from = s->decision_from;
        d->to = s->decision_to;
        snprintf(d->reason, sizeof d->reason, "%s", s->decision_reason);
    }
}

/* The cache's codec changed since the line before: listed with the
 * decisions (issue 15: each run-time choice visible in the plot). */
static void codec_change(const sl_snapshot_t *s, sl__plot_table_t *tb,
                         before_t *p)
{
    if (!s->cache_codec[0])
        return;
    if (p->codec[0] && strcmp(p->codec, s->cache_codec)) {
        sl__plot_decision_t *d = new_decision(tb);
        if (d) {
            d->t = s->t;
            snprintf(d->knob, sizeof d->knob, "cache_codec");
            snprintf(d->from_s, sizeof d->from_s, "%s", p->codec);
            snprintf(d->to_s, sizeof d->to_s, "%s", s->cache_codec);
            snprintf(d->reason, sizeof d->reason,
                     "the cache's run-time codec choice (%lld so far)",
                     (long long)s->cache_codec_choices);
        }
    }
    snprintf(p->codec, sizeof p->codec, "%s", s->cache_codec);
}

/* The disk tier's hit rate over the interval since the line before (NaN:
 * no tier, no lookup, or counters that went back: another run's file). */
static double disk_hits(const sl_snapshot_t *s, before_t *p)
{
    if (!s->cache_disk_present || s->cache_disk_hits_total < 0 ||
        s->cache_disk_misses_total < 0)
        return NAN;
    int64_t h = s->cache_disk_hits_total - p->dhits,
            m = s->cache_disk_misses_total - p->dmiss;
    int first = p->dhits < 0;
    p->dhits = s->cache_disk_hits_total;
    p->dmiss = s->cache_disk_misses_total;
    return first || h < 0 || m < 0 || h + m == 0 ? NAN : (double)h / (h + m);
}

/* Fills row v's smoothed columns: its interval is its interval_s (else
 * the time since the row before), its batches the batches_total step. */
static void smooth(sl__plot_smooth_t *sm, double v[SL__PC_N], double *prev_t,
                   double *prev_b)
{
    double t = v[SL__PC_T], iv = v[SL__PC_INTERVAL], b = v[SL__PC_BATCHES];
    double dt = isfinite(iv) && iv > 0 ? iv : t > *prev_t ? t - *prev_t : NAN;
    double nb =
        isfinite(b) && isfinite(*prev_b) && b >= *prev_b ? b - *prev_b : NAN;
    *prev_t = t;
    *prev_b = b;
    sl__plot_smooth_add(sm, dt, nb, &v[SL__PC_SPS], &v[SL__PC_SPS_S]);
    double req = v[SL__PC_REQ_PS_S];
    v[SL__PC_REC_PER_REQ_S] =
        isfinite(req) && req > 0 ? v[SL__PC_REC_PS_S] / req : NAN;
}

static int blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    return 1;
}

static void add_row(FILE *out, const double v[SL__PC_N], sl__plot_table_t *tb)
{
    for (int i = 0; i < SL__PC_N; i++) {
        if (isfinite(v[i])) {
            fprintf(out, "%s%.9g", i ? " " : "", v[i]);
            if (v[i] > tb->max[i])
                tb->max[i] = v[i];
        } else {
            fprintf(out, " NaN");
        }
    }
    fprintf(out, "\n");
    if (v[SL__PC_T] < tb->st.tmin)
        tb->st.tmin = v[SL__PC_T];
    if (v[SL__PC_T] > tb->st.tmax)
        tb->st.tmax = v[SL__PC_T];
    double dt = v[SL__PC_INTERVAL], sps = v[SL__PC_SPS];
    if (isfinite(dt) && dt > 0 && isfinite(sps)) {
        tb->st.samples += sps * dt;
        tb->st.seconds += dt;
    }
    tb->st.points++;
}

void sl__plot_table_free(sl__plot_table_t *tb)
{
    free(tb->dec);
    tb->dec = NULL;
    tb->dec_cap = 0;
    tb->ndec = 0;
}

int sl__plot_table_write(FILE *in, FILE *out, sl__plot_table_t *tb)
{
    char *buf = NULL;
    size_t cap = 0, len = 0;
    long lineno = 0;
    sl__plot_table_free(tb);
    memset(tb, 0, sizeof *tb);
    tb->st.tmin = INFINITY;
    tb->st.tmax = -INFINITY;
    for (int i = 0; i < SL__PC_N; i++)
        tb->max[i] = -INFINITY;
    sl__plot_smooth_t *sm = malloc(sizeof *sm);
    if (!sm) {
        errno = ENOMEM;
        return -1;
    }
    sl__plot_smooth_init(sm);
    before_t prev = {.t = NAN, .b = NAN, .dhits = -1, .dmiss = -1};
    fprintf(out, "#");
    for (int i = 0; i < SL__PC_N; i++)
        fprintf(out, " %s", col_names[i]);
    fprintf(out, "\n");
    int got;
    while ((got = sl__read_line(in, SL__SNAPSHOT_MAX_LINE, &buf, &cap, &len)) ==
               0 ||
           got == SL__LINE_LONG) {
        lineno++;
        if (!got && blank(buf, len))
            continue;
        sl_snapshot_t s;
        sl_snapshot_init(&s);
        if (got || sl_snapshot_parse(buf, len, &s, NULL, 0)) {
            if (!tb->st.malformed++)
                tb->st.first_bad = lineno;
            continue;
        }
        double v[SL__PC_N];
        columns(&s, v);
        v[SL__PC_DISK_HIT] = disk_hits(&s, &prev);
        smooth(sm, v, &prev.t, &prev.b);
        add_decision(&s, tb);
        codec_change(&s, tb, &prev);
        add_row(out, v, tb);
    }
    if (got == SL_ENOMEM)
        errno = ENOMEM;
    int rc = got < 0 ? -1 : 0; /* errno from the read or the allocation */
    free(buf);
    free(sm);
    return rc;
}
