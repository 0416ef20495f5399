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

#include "sluice/telemetry.h"
#include "telemetry/plot_internal.h"

/* Longer lines are counted as malformed without being kept in memory; real
 * telemetry lines are 2-4 KB (more with many cores in cpu_core). */
#define PLOT_MAX_LINE (1u << 20)

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
    "io.requests_per_s",
    "io.request_records_per_s",
    "queue_depth.read",
    "queue_depth.decode",
    "queue_depth.batches",
    "knobs.read_threads",
    "knobs.decode_threads",
    "knobs.prefetch",
    "cache.hit_rate",
    "placement.gpu_share",
    "interval_s",
    "batches_total",
    "samples_per_s.smoothed",
    "stall_fraction.smoothed",
    "cpu_self.smoothed",
    "cpu_other.smoothed",
    "cpu_total.smoothed",
    "stages.read.items_per_s.smoothed",
    "stages.decode.items_per_s.smoothed",
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
    v[SL__PC_CACHE_HIT] = s->cache_hit_rate;
    v[SL__PC_GPU_SHARE] =
        s->placement_present && s->placement_gpu ? s->gpu_share / 1000.0 : NAN;
    v[SL__PC_INTERVAL] = s->interval_s;
    v[SL__PC_BATCHES] = (double)s->batches_total;
    for (int i = 0; i < SL__PC_N; i++)
        if (i < SL__PC_SPS_S && v[i] < 0) /* cannot be read */
            v[i] = NAN;
    for (int i = SL__PC_SPS_S; i < SL__PC_N; i++)
        v[i] = NAN; /* smooth() fills them */
}

static void add_decision(const sl_snapshot_t *s, sl__plot_table_t *tb)
{
    if (!s->decision_new)
        return;
    if (tb->ndec < SL__PLOT_MAX_DECISIONS) {
        sl__plot_decision_t *d = &tb->dec[tb->ndec++];
        d->t = s->t;
        snprintf(d->knob, sizeof d->knob, "%s", s->decision_knob);
        d->from = s->decision_from;
        d->to = s->decision_to;
        snprintf(d->reason, sizeof d->reason, "%s", s->decision_reason);
    }
    tb->ndec_all++;
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

/* The next line of f without its '\n' in *buf (grown as needed, up to
 * PLOT_MAX_LINE). Returns its length, -2 for a line over the limit (consumed,
 * not kept), -1 at end of file. */
static long read_line(FILE *f, char **buf, size_t *cap)
{
    size_t n = 0;
    int c, over = 0, any = 0;
    while ((c = getc(f)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (over)
            continue;
        if (n >= PLOT_MAX_LINE) {
            over = 1;
            continue;
        }
        if (n + 1 >= *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*buf, nc);
            if (!nb) {
                over = 1;
                continue;
            }
            *buf = nb;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (!any)
        return -1;
    if (over)
        return -2;
    return (long)n;
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
    tb->st.points++;
}

int sl__plot_table_write(FILE *in, FILE *out, sl__plot_table_t *tb)
{
    char *buf = NULL;
    size_t cap = 0;
    long len, lineno = 0;
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
    double prev_t = NAN, prev_b = NAN;
    fprintf(out, "#");
    for (int i = 0; i < SL__PC_N; i++)
        fprintf(out, " %s", col_names[i]);
    fprintf(out, "\n");
    while ((len = read_line(in, &buf, &cap)) != -1) {
        lineno++;
        if (len >= 0 && blank(buf, (size_t)len))
            continue;
        sl_snapshot_t s;
        sl_snapshot_init(&s);
        if (len < 0 || sl_snapshot_parse(buf, (size_t)len, &s, NULL, 0)) {
            if (!tb->st.malformed++)
                tb->st.first_bad = lineno;
            continue;
        }
        double v[SL__PC_N];
        columns(&s, v);
        smooth(sm, v, &prev_t, &prev_b);
        add_decision(&s, tb);
        add_row(out, v, tb);
    }
    int rc = ferror(in) ? -1 : 0;
    free(buf);
    free(sm);
    return rc;
}
