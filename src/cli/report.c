/* cli/report: wait statistics, CPU and memory figures, the --state file and
 * the printed figures shared by `run` / `bench` and their text form. */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/stats.h"
#include "telemetry/machine.h"

int sl__waits_init(sl__waits_t *w, size_t cap)
{
    w->n = 0;
    w->total = 0;
    w->cap = cap ? cap : 1;
    w->v = malloc(w->cap * sizeof *w->v);
    return w->v ? 0 : -1;
}

int sl__waits_add(sl__waits_t *w, int64_t ns)
{
    if (w->n == w->cap) {
        int64_t *more = realloc(w->v, 2 * w->cap * sizeof *w->v);
        if (!more)
            return -1;
        w->v = more;
        w->cap *= 2;
    }
    w->v[w->n++] = ns;
    w->total += ns;
    return 0;
}

void sl__waits_free(sl__waits_t *w)
{
    free(w->v);
    w->v = NULL;
    w->n = w->cap = 0;
}

/* The q-quantile of sorted waits, in ms. */
static double pct_ms(const sl__waits_t *w, double q)
{
    return (double)sl__percentile_i64(w->v, w->n, q) / 1e6;
}

double sl__cpu_seconds_since(const struct rusage *ru0)
{
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    return (double)(ru1.ru_utime.tv_sec - ru0->ru_utime.tv_sec) +
           (double)(ru1.ru_stime.tv_sec - ru0->ru_stime.tv_sec) +
           (double)(ru1.ru_utime.tv_usec - ru0->ru_utime.tv_usec) / 1e6 +
           (double)(ru1.ru_stime.tv_usec - ru0->ru_stime.tv_usec) / 1e6;
}

double sl__peak_rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (kb < 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        kb = ru.ru_maxrss;
    }
    return (double)kb / 1024.0;
}

int sl__state_write(const char *path, const char *magic, const sl__state_t *s,
                    char *err, size_t errlen)
{
    char text[SL__STATE_MAX_BYTES + 1];
    int n = sl__state_format(magic, s, text, sizeof text);
    if (n < 0)
        return sl__fail(err, errlen, SL_ERANGE, "%s: a field out of range",
                        path);
    return sl__write_file_whole(path, text, (size_t)n, err, errlen);
}

int sl__state_read(const char *path, const char *magic, sl__state_t *s,
                   char *err, size_t errlen)
{
    /* never waits (a FIFO is refused), and a longer file fails */
    char *text = NULL;
    size_t n = 0;
    int rc =
        sl__read_small_file(path, SL__STATE_MAX_BYTES, &text, &n, err, errlen);
    char why[256];
    if (!rc && sl__state_parse(text, n, magic, s, why, sizeof why))
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: not a sluice state file: %s", path, why);
    free(text);
    return rc ? -1 : 0;
}

void sl__report_print(sl__report_t *r, int human, int json)
{
    sl__waits_t *w = r->waits;
    sl__sort_i64(w->v, w->n);
    double secs = r->seconds;
    double stall = secs > 0 ? (double)w->total / 1e9 / secs : 0;
    double rate = secs > 0 ? (double)r->samples / secs : 0;
    /* At most 1: the kernel brings a running thread's CPU time up to date
     * at its ticks and switches, not when another thread asks, so over a
     * run of a few ticks (one that fails before its first batch) the CPU
     * counted can exceed what the cores could give in its wall time. */
    double util = secs > 0 ? r->cpu_seconds / secs / sl__cpus_usable() : 0;
    if (util > 1)
        util = 1;
    double wait_mean = w->n ? (double)w->total / 1e6 / (double)w->n : 0;
    double p50 = pct_ms(w, 0.5), p99 = pct_ms(w, 0.99);
    double rss_mb = sl__peak_rss_mb();
    if (human) {
        printf("%" PRId64 " %s in %" PRId64 " batches, %.2f s: %.0f %s%s"
               "  stall %.1f%%  wait p50 %.2f ms p99 %.2f ms  cpu %.0f%%"
               "  peak RSS %.0f MB  skipped %" PRId64,
               r->samples, r->noun, r->batches, secs, rate, r->unit,
               r->rate_extra, 100 * stall, p50, p99, 100 * util, rss_mb,
               r->errors_skipped);
        /* Without a step every wait is a stall: a reader must not take
         * "stall 100 %" for a broken loader. */
        if (r->loader_bound)
            printf("  (no consumer work: loader-bound, %s is the capacity)",
                   r->unit);
        printf("\n");
        if (r->digest)
            printf("digest %016" PRIx64 "\n", r->h);
    }
    if (json) {
        printf("{\"samples\": %" PRId64 ", \"batches\": %" PRId64
               ", \"epochs\": %" PRId64 ", \"seconds\": %.4f"
               ", \"samples_per_s\": %.2f%s, \"stall_fraction\": %.4f"
               ", \"wait_ms_p50\": %.3f, \"wait_ms_p99\": %.3f"
               ", \"cpu_util\": %.4f, \"cpu_seconds\": %.3f"
               ", \"wait_ms_mean\": %.3f, \"peak_rss_mb\": %.1f"
               ", \"errors_skipped\": %" PRId64 ", \"bytes_read\": %" PRId64
               ", \"threads\": %d, \"batch\": %d%s"
               ", \"out\": \"%s\", \"position\": [%" PRId64 ", %" PRId64 "]",
               r->samples, r->batches, r->epochs, secs, rate, r->json_rates,
               stall, p50, p99, util, r->cpu_seconds, wait_mean, rss_mb,
               r->errors_skipped, r->bytes_read, r->threads, r->batch,
               r->json_shape, r->out, r->pos.epoch, r->pos.batch);
        if (r->digest)
            printf(", \"digest\": \"%016" PRIx64 "\"", r->h);
        if (r->rc)
            printf(", \"error\": \"%s\"", sl_strerror(r->rc));
        char *msg =
            r->rc && r->message ? sl__json_escape_dup(r->message) : NULL;
        if (msg)
            printf(", \"message\": \"%s\"", msg);
        free(msg);
        printf("}\n");
    }
}
