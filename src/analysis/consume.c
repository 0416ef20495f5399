/* A loader run as the analyzed job would make it: a consumer that holds
 * each batch for its step, timed from the first batch on.
 *
 * Every run uses drop_last so that all batches are full: the consumer
 * sleeps a fixed time per batch, and partial batches would make its sample
 * rate differ from batch / step. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "analysis.h"

#define MIN_BATCHES 8 /* after the first, for a rate to mean something */

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static void sleep_until(int64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000),
                          (long)(t_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

/* The loader's message for failure rc (the file and the cause), or rc's
 * words where it has none (a failure of this file's own). */
static const char *loader_why(const sl_loader_t *l, int rc)
{
    const char *m = sl_loader_last_error(l);
    return m && *m ? m : sl_strerror(rc);
}

static int open_loader(const char *source, const sl_analyze_options_t *a,
                       int threads, sl_loader_t **out, char *err, size_t errlen)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = a->batch_size;
    o.image_size = a->image_size;
    o.dtype = a->dtype;
    o.decode_threads = threads;
    o.prefetch = a->prefetch;
    o.drop_last = 1;
    o.epochs = 1000000;
    o.telemetry_ms = -1;
    int rc = sl_loader_create(source, &o, out);
    if (rc)
        return sl__fail(err, errlen, rc, "%s", sl_loader_last_error(NULL));
    if (sl_loader_batches_per_epoch(*out) < 1) {
        sl_loader_destroy(*out);
        return sl__fail(err, errlen, SL_ERANGE,
                        "%s has fewer samples than one batch", source);
    }
    return 0;
}

/* The rate skips the first 15% of the run (pipeline filling); the stall
 * counts everything after the first batch, as a training job would feel
 * it. */
int sl__analysis_consume_run(const char *source, const sl_analyze_options_t *a,
                             int threads, double hold_ms,
                             sl__analysis_consume_t *out, char *err,
                             size_t errlen)
{
    sl_loader_t *l;
    int rc = open_loader(source, a, threads, &l, err, errlen);
    if (rc)
        return rc;
    size_t cap = 1024, n = 0;
    int64_t *t = malloc(cap * sizeof *t); /* when each batch came */
    if (!t || (rc = sl_loader_start(l, NULL))) {
        free(t);
        /* the loader's own message (the file and the cause), read before
         * it goes */
        rc = sl__fail(err, errlen, rc ? rc : SL_ENOMEM, "loader: %s",
                      loader_why(l, rc ? rc : SL_ENOMEM));
        sl_loader_destroy(l);
        return rc;
    }
    const int64_t hold = (int64_t)(hold_ms * 1e6);
    const int64_t want = (int64_t)(a->seconds * 1e9);
    int64_t t_first = 0, waited = 0, end = 0, over = 0, nover = 0;
    double cpu0 = 0, cpu1 = 0;
    for (;;) {
        const sl_batch_t *b;
        int64_t w0 = sl__now_ns();
        rc = sl_loader_next(l, &b);
        int64_t w1 = sl__now_ns();
        if (rc)
            break;
        if (!t_first) {
            t_first = w1;
            cpu0 = cpu_seconds();
        } else
            waited += w1 - w0;
        if (n == cap) {
            int64_t *nt = realloc(t, 2 * cap * sizeof *t);
            if (!nt) {
                sl_loader_release(l, b);
                rc = SL_ENOMEM;
                break;
            }
            t = nt;
            cap *= 2;
        }
        t[n++] = w1;
        /* A hold longer than the run is cut at 3 x secs: the consumer is
         * then the bound and the answer is already clear. */
        int64_t until = w1 + hold, limit = t_first + 3 * want;
        if (hold > 0)
            sleep_until(until < limit ? until : limit);
        sl_loader_release(l, b);
        end = sl__now_ns();
        /* The consumer's own overhead beyond its step: oversleep, and
         * release, which wakes the workers; when they hold the cores the
         * consumer waits for one (seen: ~15 ms per batch on 2 loaded
         * cores). It lowers the demand the consumer really makes. */
        if (hold > 0 && until < limit) {
            over += end - until;
            nover++;
        }
        int64_t el = end - t_first;
        if ((el >= want && n > MIN_BATCHES) || el >= 3 * want)
            break;
    }
    cpu1 = cpu_seconds();
    if (rc == SL_EEND)
        rc = 0;
    if (rc) /* the loader's own message (the file and the cause) */
        sl__fail(err, errlen, rc, "loader: %s", loader_why(l, rc));
    sl_loader_destroy(l);
    if (rc) {
        free(t);
        return rc;
    }
    memset(out, 0, sizeof *out);
    out->batches = (int64_t)n;
    out->secs = (double)(end - t_first) / 1e9;
    out->stall = end > t_first ? (double)waited / (double)(end - t_first) : 0;
    out->hold_over_ms = nover ? (double)over / (double)nover / 1e6 : 0;
    if (end > t_first)
        out->cores_used = (cpu1 - cpu0) * 1e9 / (double)(end - t_first);
    if (end > t_first)
        out->delivered =
            (double)n * a->batch_size * 1e9 / (double)(end - t_first);
    size_t k = 0;
    while (k + 2 < n && t[k] - t[0] < (t[n - 1] - t[0]) * 15 / 100)
        k++;
    if (n >= 2 && t[n - 1] > t[k])
        out->rate = (double)(n - 1 - k) * a->batch_size /
                    ((double)(t[n - 1] - t[k]) / 1e9);
    free(t);
    return 0;
}
