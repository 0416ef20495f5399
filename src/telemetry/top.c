#include "top.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define M(n) "sluice_" n

static double get(const sl__prom_set_t *s, const char *name)
{
    double v = s ? sl__prom_get(s, name, NULL, NULL, -1) : -1;
    return isfinite(v) ? v : -1;
}

static double get_stage(const sl__prom_set_t *s, const char *name,
                        const char *stage)
{
    double v = s ? sl__prom_get(s, name, "stage", stage, -1) : -1;
    return isfinite(v) ? v : -1;
}

static int to_int(double v)
{
    return v >= 0 && v < 1e9 ? (int)v : -1;
}

static double clamp01(double v)
{
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* The stages in the order the job lists them (sluice_workers{stage}). */
static void stages(const sl__prom_set_t *cur, sl__top_frame_t *f)
{
    for (size_t i = 0; i < cur->n && f->nstages < SL__TOP_STAGES; i++) {
        const sl__prom_sample_t *s = &cur->s[i];
        const char *st = sl__prom_label(s, "stage");
        if (strcmp(s->name, M("workers")) || !st)
            continue;
        int dup = 0;
        for (int k = 0; k < f->nstages; k++)
            dup |= !strcmp(f->stage[k].name, st);
        if (dup)
            continue;
        sl__top_stage_t *g = &f->stage[f->nstages++];
        memset(g, 0, sizeof *g);
        size_t n = strlen(st);
        if (n >= sizeof g->name)
            n = sizeof g->name - 1;
        memcpy(g->name, st, n);
        g->threads = to_int(s->value);
        g->slots = g->threads;
        if (!strcmp(st, "read") && get(cur, M("io_async")) == 1)
            g->slots = to_int(get(cur, M("io_depth")));
        g->busy = get_stage(cur, M("stage_busy"), st);
        if (g->busy > 1)
            g->busy = 1;
        g->queue = to_int(get_stage(cur, M("queue_depth"), st));
        g->capacity = to_int(get_stage(cur, M("queue_capacity"), st));
    }
}

/* Rates over the time between two scrapes of the same job: its clock
 * moved on and no counter went back (a restarted loader starts at 0). */
static void rates(const sl__prom_set_t *prev, const sl__prom_set_t *cur,
                  sl__top_frame_t *f)
{
    double t0 = get(prev, M("uptime_seconds"));
    double dt = f->uptime_s - t0;
    double s0 = get(prev, M("samples_total"));
    double b0 = get(prev, M("batches_total"));
    double w0 = get(prev, M("consumer_wait_seconds_total"));
    double w1 = get(cur, M("consumer_wait_seconds_total"));
    if (t0 < 0 || dt <= 0 || s0 < 0 || f->samples_total < s0 || b0 < 0 ||
        f->batches_total < b0)
        return;
    f->span_s = dt;
    f->samples_per_s = (f->samples_total - s0) / dt;
    f->batches_per_s = (f->batches_total - b0) / dt;
    if (w0 >= 0 && w1 >= w0) {
        f->stall = clamp01((w1 - w0) / dt);
        double nb = f->batches_total - b0;
        f->wait_ms = nb > 0 ? (w1 - w0) * 1e3 / nb : -1;
    }
    double g0 = get(prev, M("gpu_stage_samples_total"));
    double g1 = get(cur, M("gpu_stage_samples_total"));
    if (g0 >= 0 && g1 >= g0)
        f->gpu_samples_per_s = (g1 - g0) / dt;
    for (int k = 0; k < f->nstages; k++) {
        sl__top_stage_t *g = &f->stage[k];
        double a = get_stage(prev, M("stage_busy_seconds_total"), g->name);
        double b = get_stage(cur, M("stage_busy_seconds_total"), g->name);
        if (a >= 0 && b >= a && g->slots > 0)
            g->busy = clamp01((b - a) / (dt * g->slots));
    }
}

static void copy_label(char *dst, size_t cap, const sl__prom_sample_t *s,
                       const char *label)
{
    const char *v = sl__prom_label(s, label);
    size_t n = v ? strlen(v) : 0;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v ? v : "", n);
    dst[n] = 0;
}

static int label_int(const sl__prom_sample_t *s, const char *label)
{
    const char *v = sl__prom_label(s, label);
    long n = v ? strtol(v, NULL, 10) : -1;
    return n < -1000000000 || n > 1000000000 ? -1 : (int)n;
}

static void decisions(const sl__prom_set_t *dec, sl__top_frame_t *f)
{
    size_t first = 0, n = 0;
    for (size_t i = 0; i < dec->n; i++)
        n += !strcmp(dec->s[i].name, M("decision"));
    if (n > SL__TOP_DECISIONS)
        first = n - SL__TOP_DECISIONS; /* the newest, when there are more */
    for (size_t i = 0, k = 0; i < dec->n; i++) {
        const sl__prom_sample_t *s = &dec->s[i];
        if (strcmp(s->name, M("decision")) || k++ < first)
            continue;
        sl__top_decision_t *d = &f->dec[f->ndec++];
        d->t = isfinite(s->value) ? s->value : -1;
        const char *v = sl__prom_label(s, "seq");
        d->seq = v ? strtoll(v, NULL, 10) : -1;
        copy_label(d->knob, sizeof d->knob, s, "knob");
        copy_label(d->reason, sizeof d->reason, s, "reason");
        d->from = label_int(s, "from");
        d->to = label_int(s, "to");
    }
}

void sl__top_frame_make(const sl__prom_set_t *prev, const sl__prom_set_t *cur,
                        const sl__prom_set_t *dec, sl__top_frame_t *f)
{
    memset(f, 0, sizeof *f);
    f->uptime_s = get(cur, M("uptime_seconds"));
    f->samples_total = get(cur, M("samples_total"));
    f->batches_total = get(cur, M("batches_total"));
    f->errors_skipped = get(cur, M("errors_skipped_total"));
    /* Until there are two scrapes: the job's last snapshot's gauges. */
    f->samples_per_s = get(cur, M("samples_per_second"));
    f->batches_per_s = -1;
    f->stall = get(cur, M("stall_fraction"));
    double w = get(cur, M("consumer_wait_seconds"));
    f->wait_ms = w >= 0 ? w * 1e3 : -1;
    stages(cur, f);
    f->prefetch = to_int(get(cur, M("prefetch")));
    f->batches_ready = to_int(get(cur, M("batches_ready")));
    f->cpu_self = get(cur, M("cpu_self"));
    f->cpu_other = get(cur, M("cpu_other"));
    f->cpu_total = get(cur, M("cpu_total"));
    f->run_queue = get(cur, M("run_queue"));
    f->rss_bytes = get(cur, M("rss_bytes"));
    f->mem_available_bytes = get(cur, M("mem_available_bytes"));
    f->disk_read_bytes_per_s = get(cur, M("disk_read_bytes_per_second"));
    f->gpu_util = get(cur, M("gpu_utilization"));
    f->gpu_share = get(cur, M("gpu_stage_share"));
    f->gpu_busy = get(cur, M("gpu_stage_busy"));
    f->gpu_cpu_cores = get(cur, M("gpu_stage_cpu_cores"));
    f->gpu_samples_per_s = -1;
    f->decisions_total = get(cur, M("decisions_total"));
    if (prev && prev->n)
        rates(prev, cur, f);
    if (dec)
        decisions(dec, f);
}
