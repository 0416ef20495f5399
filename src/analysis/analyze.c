/* The data-stall analysis (analysis.h): fetch cold and warm, prep for
 * 1..N threads, the check (or the sweep), the model and the cure. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "base/abi.h"
#include "telemetry/machine.h"

#define FETCH_THREADS 4

SL__ABI_INIT_PAIR(sl_analyze_options_init, sl_analyze_options_t)

int sl__analyze_options_resolve(const sl_analyze_options_t *in,
                                sl_analyze_options_t *o, char *err,
                                size_t errlen)
{
    int rc = sl__abi_in(o, sizeof *o, in, sizeof(size_t), "sl_analyze_options",
                        err, errlen);
    if (rc)
        return rc;
    const char *bad =
        o->batch_size < 0 || o->batch_size > 65536  ? "batch_size"
        : o->image_size < 0 || o->image_size > 8192 ? "image_size"
        : o->decode_threads < 0 || o->decode_threads > SL_ANALYZE_MAX_THREADS
            ? "decode_threads"
        : o->prefetch < 0 || o->prefetch > 65536   ? "prefetch"
        : !(o->seconds >= 0 && o->seconds < 86400) ? "seconds"
        : !(o->step_ms >= 0)                       ? "step_ms"
        : !(o->rate >= 0)                          ? "rate"
        : o->dtype != SL_DTYPE_UINT8 && o->dtype != SL_DTYPE_FLOAT32 ? "dtype"
                                                                     : NULL;
    if (bad)
        return sl__fail(err, errlen, SL_EINVAL, "%s out of range", bad);
    if (o->step_ms > 0 && o->rate > 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "give the consumer's step or its rate, not both");
    if (!o->sweep && !(o->step_ms > 0) && !(o->rate > 0))
        return sl__fail(err, errlen, SL_EINVAL,
                        "the consumer's demand is needed: its step (ms per "
                        "batch), its rate (samples/s) or a sweep");
    if (!o->batch_size)
        o->batch_size = 64;
    if (!o->image_size)
        o->image_size = 224;
    if (!o->seconds)
        o->seconds = 10;
    if (!o->decode_threads) {
        int n = sl__cpus_usable();
        o->decode_threads =
            n < SL_ANALYZE_MAX_THREADS ? n : SL_ANALYZE_MAX_THREADS;
    }
    if (!o->prefetch)
        o->prefetch = o->decode_threads * 2 > 8 ? o->decode_threads * 2 : 8;
    return 0;
}

static void say(const sl_analyze_options_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const sl_analyze_options_t *o, const char *fmt, ...)
{
    if (!o->progress)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->progress(o->progress_user, line);
}

/* Fetch: cold (this dataset's pages evicted), then warm. */
static int measure_fetch(const char *source, sl__analysis_t *a, char *err,
                         size_t errlen)
{
    const sl_analyze_options_t *o = &a->opt;
    sl__source_t *src;
    int rc = sl__source_open(source, 0, &src, err, errlen);
    if (rc)
        return rc;
    a->samples = sl__source_count(src);
    if (a->samples < 1)
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: no samples", source);
    else if ((rc = sl__dataset_files_list(src, &a->files)))
        sl__fail(err, errlen, rc, "%s: out of memory", source);
    if (rc) {
        sl__source_close(src);
        return rc;
    }
    a->mem_available = sl__mem_available();
    a->fits = a->mem_available > 0 && a->files.bytes < a->mem_available;
    double max_s = 60 + 6 * o->seconds;
    int64_t nevict = sl__dataset_files_evict(&a->files);
    say(o,
        "fetch (cold): %" PRId64 " samples in %" PRId64 " files, %.1f MB, "
        "%d reader threads%s...",
        a->samples, a->files.n, a->files.bytes / 1e6, FETCH_THREADS,
        nevict ? " (some files could not be evicted)" : "");
    rc = sl__fetch_pass(src, FETCH_THREADS, max_s, &a->cold, err, errlen);
    if (!rc) {
        say(o, "fetch (warm)...");
        rc = sl__fetch_pass(src, FETCH_THREADS, max_s, &a->warm, err, errlen);
    }
    sl__source_close(src);
    if (!rc && (a->cold.samples < 1 || a->warm.samples < 1))
        rc = sl__fail(err, errlen, SL_EIO, "fetch: no sample read in %.0f s",
                      max_s);
    if (!rc && a->cold.samples < a->samples)
        say(o, "fetch stopped after %.0f s: %" PRId64 " of %" PRId64 " samples",
            max_s, a->cold.samples, a->samples);
    return rc;
}

/* Prep at n threads, data warm, consumer never sleeping. */
static int measure_prep(const char *source, const sl__analysis_t *a, int n,
                        const char *again, sl__analysis_consume_t *r, char *err,
                        size_t errlen)
{
    say(&a->opt, "prep with %d thread%s%s (%.0f s)...", n, n > 1 ? "s" : "",
        again, a->opt.seconds);
    int rc = sl__analysis_consume_run(source, &a->opt, n, 0, r, err, errlen);
    if (!rc)
        say(&a->opt, "  %.1f samples/s (%.2f cores used)", r->rate,
            r->cores_used);
    return rc;
}

/* The job as configured, at one demand: predicted and measured stall. */
static int check_level(const char *source, sl__analysis_t *a, double demand,
                       sl__analysis_level_t *lv, char *err, size_t errlen)
{
    const sl_analyze_options_t *o = &a->opt;
    int n = o->decode_threads;
    sl__analysis_consume_t r;
    lv->demand = demand;
    lv->step_ms = 1e3 * o->batch_size / demand;
    lv->predicted =
        sl__stall_predict(demand, a->prep[n - 1], sl__fetch_rate(&a->cold),
                          sl__fetch_rate(&a->warm), a->fits)
            .predicted;
    say(o,
        "check: %d thread%s, consumer %.1f samples/s (%.2f ms/batch) for "
        "%.0f s...",
        n, n > 1 ? "s" : "", demand, lv->step_ms, o->seconds);
    int rc =
        sl__analysis_consume_run(source, o, n, lv->step_ms, &r, err, errlen);
    if (rc)
        return rc;
    lv->measured = r.stall;
    lv->delivered = r.delivered;
    lv->cores_used = r.cores_used;
    lv->hold_over_ms = r.hold_over_ms;
    say(o,
        "  predicted stall %.3f, measured %.3f (%" PRId64 " batches, %.1f s, "
        "%.1f samples/s delivered, %.2f cores used, consumer overhead %.2f "
        "ms/batch)",
        lv->predicted, lv->measured, r.batches, r.secs, r.delivered,
        r.cores_used, r.hold_over_ms);
    return 0;
}

static int measure(const char *source, sl__analysis_t *a, char *err,
                   size_t errlen)
{
    const sl_analyze_options_t *o = &a->opt;
    int n = o->decode_threads, rc = measure_fetch(source, a, err, errlen);
    for (int k = 1; k <= n && !rc; k++) {
        sl__analysis_consume_t r;
        if (!(rc = measure_prep(source, a, k, "", &r, err, errlen))) {
            a->prep[k - 1] = r.rate;
            a->prep_cores[k - 1] = r.cores_used;
        }
    }
    if (rc)
        return rc;
    double prep = a->prep[n - 1];
    if (!o->sweep) {
        a->demand = o->rate > 0 ? o->rate : 1e3 * o->batch_size / o->step_ms;
        a->nlevels = 1;
        return check_level(source, a, a->demand, &a->level[0], err, errlen);
    }
    const double share[3] = {0.5, 1.0, 1.5};
    for (a->nlevels = 0; a->nlevels < 3; a->nlevels++)
        if ((rc = check_level(source, a, share[a->nlevels] * prep,
                              &a->level[a->nlevels], err, errlen)))
            return rc;
    a->main_level = 1;
    a->demand = prep;
    /* The machine may be shared: measure again, so a drift in what the
     * loader can do during the sweep is seen, not hidden. */
    sl__analysis_consume_t r;
    rc = measure_prep(source, a, n, " again", &r, err, errlen);
    if (!rc)
        a->prep_after = r.rate;
    return rc;
}

int sl__analyze(const char *source, const sl_analyze_options_t *opt,
                sl__analysis_t *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    int rc = sl__analyze_options_resolve(opt, &a->opt, err, errlen);
    if (rc)
        return rc;
    if (!source)
        return sl__fail(err, errlen, SL_EINVAL, "no source");
    a->cores = sl__cpus_usable();
    a->prep_after = -1;
    if ((rc = measure(source, a, err, errlen))) {
        sl__analysis_free(a);
        return rc;
    }
    int n = a->opt.decode_threads;
    double cold = sl__fetch_rate(&a->cold);
    a->model = sl__stall_predict(a->demand, a->prep[n - 1], cold,
                                 sl__fetch_rate(&a->warm), a->fits);
    a->threads_needed = sl__threads_needed(a->prep, n, a->demand);
    a->cure = sl__stall_cure(a->model.bound, a->threads_needed, a->cores);
    a->cache_bytes_needed = cold < a->demand ? a->files.bytes : 0;
    a->bandwidth_needed =
        a->demand * (double)a->warm.stored / (double)a->warm.samples;
    return 0;
}

void sl__analysis_free(sl__analysis_t *a)
{
    if (a)
        sl__dataset_files_free(&a->files);
}

SL_API int sl_analyze(const char *source, const sl_analyze_options_t *o,
                      char **json_out, char *err, size_t errlen)
{
    if (!json_out)
        return sl__fail(err, errlen, SL_EINVAL, "json_out is NULL");
    sl__analysis_t *a = malloc(sizeof *a);
    if (!a)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int rc = sl__analyze(source, o, a, err, errlen);
    if (!rc) {
        char *json = sl__analysis_json(a);
        if (json)
            *json_out = json;
        else
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        sl__analysis_free(a);
    }
    free(a);
    return rc;
}

SL_API void sl_analysis_free(char *json)
{
    free(json);
}
