/* The calibration fit: pure arithmetic on telemetry periods (calibrate.h).
 * Per-period figures are rates over interval_s; pooled sums are in seconds
 * of wall or CPU time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"

/* Per-item CV from per-period means x[i] over items[i] items each. */
static double cv_items(const double *x, const double *items, int k, double mean)
{
    double ss = 0;
    for (int i = 0; i < k; i++)
        ss += items[i] * (x[i] - mean) * (x[i] - mean);
    if (k < 2 || mean <= 0)
        return 0.5;
    double cv = sqrt(ss / (k - 1)) / mean;
    return cv < 0.05 ? 0.05 : cv > 1.5 ? 1.5 : cv;
}

/* The per-period estimates of one stage, for its CV. */
typedef struct stage_spread {
    double *ms_per_item; /* CPU ms per item in each period */
    double *items;       /* items of each period (weights) */
    int n;
} stage_spread_t;

static void spread_add(stage_spread_t *s, double ms_per_item, double items)
{
    s->ms_per_item[s->n] = ms_per_item;
    s->items[s->n++] = items;
}

/* Batches hold at most batch_size samples, so samples per batch over any
 * period is at most that, and equal to it in a period of only full
 * batches (an epoch's last batch may be short). */
static int batch_size_of(const sl__calib_period_t *p, int n)
{
    long long most = 0;
    for (int i = 1; i + 2 < n; i++) {
        long long batches = p[i].batches_total - p[i - 1].batches_total;
        long long samples = p[i].samples_total - p[i - 1].samples_total;
        if (batches > 0 && samples / batches > most)
            most = samples / batches;
    }
    const sl__calib_period_t *last = &p[n - 1];
    if (most > 0)
        return (int)most;
    return last->batches_total > 0 ? (int)llround((double)last->samples_total /
                                                  (double)last->batches_total)
                                   : 64;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

void sl__calib_storage_fit(const sl__calib_period_t *p, int n, double skip_s,
                           sl__calib_fit_t *f)
{
    f->storage_latency_ms = f->storage_bw = 0;
    f->storage_periods = f->storage_saturated = 0;
    double *w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
    double *bw = malloc((size_t)(n > 0 ? n : 1) * sizeof *bw);
    double *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    int k = 0;
    if (!w || !bw || !tmp)
        goto out;
    for (int i = 1; i + 2 < n; i++) {
        const sl__calib_period_t *r = &p[i];
        double ritems = r->read_items_per_s * r->interval_s;
        if (r->t < skip_s || ritems < 3 || r->read_busy <= 0)
            continue;
        w[k] = r->read_busy * r->read_slots * r->interval_s * 1000 / ritems;
        bw[k++] = r->read_bytes_per_s;
    }
    if (k < 3)
        goto out;
    memcpy(tmp, w, (size_t)k * sizeof *w);
    qsort(tmp, (size_t)k, sizeof *tmp, cmp_double);
    double least = tmp[k / 10]; /* the 10th percentile: robust to a blip */
    if (!(tmp[k / 2] > SL_CALIB_STORAGE_MS))
        goto out; /* reads do not wait on storage: the page cache */
    int ns = 0, nu = 0;
    double *sat = tmp, *lat = w; /* reuse: sat fills tmp, lat compacts w */
    for (int i = 0; i < k; i++) {
        if (w[i] >= 1.5 * least)
            sat[ns++] = bw[i];
        else
            lat[nu++] = w[i];
    }
    if (ns >= 3) {
        f->storage_bw = median(sat, ns);
        f->storage_saturated = ns;
    }
    if (nu > 0) {
        /* A read's own CPU cannot be told from its wait here: the page
         * cache's share (SL_CALIB_READ_CPU_MS) is taken off. */
        double l = median(lat, nu) - SL_CALIB_READ_CPU_MS;
        f->storage_latency_ms = l > 0 ? l : 0;
        f->storage_periods = nu;
    }
out:
    free(w);
    free(bw);
    free(tmp);
}

int sl__calib_fit(const sl__calib_period_t *p, int n,
                  const sl_calibrate_options_t *o, sl__calib_fit_t *f)
{
    memset(f, 0, sizeof *f);
    f->periods = n;
    if (n < 1)
        return SL_ECORRUPT;
    /* Sums over the periods used, in seconds (or items, bytes). */
    double read_wall = 0, read_items = 0, decode_wall = 0, decode_items = 0;
    double self_cpu = 0, busy_cpu = 0, other_cpu = 0, span = 0, waited = 0;
    double batches = 0, bytes = 0, samples = 0, run_span = 0;
    /* With storage waits in the read stage (readers that share a bandwidth
     * wait for each other too), the core share comes from the decoders
     * alone: their busy time is all CPU or core waits (the reads' own CPU
     * is small beside their waits). */
    int given = o->storage_latency_ms > 0 || o->storage_bw > 0;
    if (!given) { /* item bytes first: the fit subtracts a transfer */
        double b = 0, it = 0;
        for (int i = 1; i + 2 < n; i++)
            if (p[i].t >= o->skip_s) {
                b += p[i].read_bytes_per_s * p[i].interval_s;
                it += p[i].read_items_per_s * p[i].interval_s;
            }
        f->item_bytes = it > 0 ? b / it : 0;
        sl__calib_storage_fit(p, n, o->skip_s, f);
    }
    int storage = given || f->storage_latency_ms > 0 || f->storage_bw > 0;
    stage_spread_t read = {0}, decode = {0};
    read.ms_per_item = malloc((size_t)n * sizeof(double));
    read.items = malloc((size_t)n * sizeof(double));
    decode.ms_per_item = malloc((size_t)n * sizeof(double));
    decode.items = malloc((size_t)n * sizeof(double));
    int rc = 0;
    if (!read.ms_per_item || !read.items || !decode.ms_per_item ||
        !decode.items) {
        rc = SL_ENOMEM;
        goto out;
    }
    /* The first period fills the pipeline, the last two see it drain. */
    double gitems = 0, gbusy = 0, gcpu = 0;
    for (int i = 1; i + 2 < n; i++) {
        const sl__calib_period_t *r = &p[i];
        long long period_batches = r->batches_total - p[i - 1].batches_total;
        if (r->t >= o->skip_s && r->gpu_samples_per_s > 0 &&
            r->gpu_stage_busy > 0) {
            gitems += r->gpu_samples_per_s * r->interval_s;
            gbusy += r->gpu_stage_busy * r->interval_s;
            gcpu += (r->gpu_cpu_busy > 0 ? r->gpu_cpu_busy : 0) * r->interval_s;
            f->gpu_periods++;
        }
        if (r->t < o->skip_s)
            continue;
        /* What the run got, over every period (one where nothing was
         * decoded may be all wait): the wait is the stall fraction's
         * share of the period, which holds a wait still in progress; the
         * mean wait per batch is 0 in a period without a batch. */
        if (isfinite(r->stall_fraction) && r->stall_fraction > 0)
            waited += r->stall_fraction * r->interval_s;
        batches += (double)period_batches;
        samples += r->samples_per_s * r->interval_s;
        run_span += r->interval_s;
        if (r->decode_items_per_s <= 0)
            continue;
        double dt = r->interval_s;
        double dwall = r->decode_busy * r->decode_workers * dt;
        double rwall = r->read_busy * r->read_slots * dt;
        double ditems = r->decode_items_per_s * dt;
        double ritems = r->read_items_per_s * dt;
        double rcpu = storage || rwall < 0 ? 0 : rwall; /* its CPU part */
        double self = r->cpu_self * r->ncpu * dt;
        decode_wall += dwall;
        decode_items += ditems;
        read_wall += rwall;
        read_items += ritems;
        self_cpu += self;
        /* the GPU path's CPU (hand-overs, the stage's threads) is ours
         * too: in cpu_self, so in what the busy threads are set against */
        double gwork = r->gpu_cpu_busy > 0 ? r->gpu_cpu_busy * dt : 0;
        busy_cpu += dwall + rcpu + gwork;
        other_cpu += r->cpu_other * dt;
        bytes += r->read_bytes_per_s * dt;
        span += dt;
        /* Per-period CPU ms per item, each with its own core share, for
         * the spread (foreign load changes from period to period). */
        double share =
            dwall + rcpu + gwork > 0 ? self / (dwall + rcpu + gwork) : 1;
        share = share > 1 ? 1 : share;
        if (ditems >= 3)
            spread_add(&decode, dwall * 1000 / ditems * share, ditems);
        if (ritems >= 3)
            spread_add(&read, rwall * 1000 / ritems * share, ritems);
        if (r->rss > f->max_rss)
            f->max_rss = r->rss;
        f->used++;
    }
    const sl__calib_period_t *last = &p[n - 1];
    f->ncpu = last->ncpu;
    f->prefetch = last->prefetch > 0 ? last->prefetch : 1;
    f->batch_size = batch_size_of(p, n);
    if (f->used < 5 || decode_items <= 0) {
        rc = SL_ECORRUPT;
        goto out;
    }
    f->core_share = busy_cpu > 0 ? self_cpu / busy_cpu : 1;
    if (f->core_share > 1)
        f->core_share = 1;
    f->decode_ms = decode_wall * 1000 / decode_items * f->core_share;
    f->decode_cv =
        cv_items(decode.ms_per_item, decode.items, decode.n, f->decode_ms);
    f->read_wall_ms = read_items > 0 ? read_wall * 1000 / read_items : 0;
    f->read_ms = f->read_wall_ms * f->core_share;
    f->read_cv =
        read.n > 1 ? cv_items(read.ms_per_item, read.items, read.n, f->read_ms)
                   : 0.5;
    f->item_bytes = read_items > 0 ? bytes / read_items : 0;
    f->step_ms = batches > 0 && run_span > waited
                     ? (run_span - waited) * 1000 / batches
                     : 0;
    f->cpu_other = other_cpu / span;
    f->samples_per_s = run_span > 0 ? samples / run_span : 0;
    f->stall =
        run_span > 0 ? (waited / run_span > 1 ? 1 : waited / run_span) : 0;
    f->mem_total = last->mem_total > 0 ? last->mem_total : 0;
    if (gitems >= 8) { /* enough samples to call it the stage's */
        f->gpu_ms = gbusy * 1000 / gitems;
        f->gpu_cpu_ms = gcpu * 1000 / gitems * f->core_share;
    }
out:
    free(read.ms_per_item);
    free(read.items);
    free(decode.ms_per_item);
    free(decode.items);
    return rc;
}
