/* sluice analyze: a data-stall analyzer in the spirit of CoorDL's
 * DS-Analyzer. Differential runs measure
 *   demand  D: what the consumer ingests (batch / step, or --rate),
 *   prep    P(n): loader throughput with the data in the page cache, for
 *                 1..N decode threads (consumer never sleeps),
 *   fetch   F: stored bytes read without decoding, cold (the dataset's own
 *              pages evicted with POSIX_FADV_DONTNEED) and warm,
 * then predicts the stall fraction from
 *   supply S = min(P(N), F_warm if the dataset fits in memory else F_cold)
 *   stall    = max(0, 1 - S / D)
 * (the consumer holds each batch B/D s, the loader makes one every B/S s)
 * and checks the prediction by running the job: N threads, the consumer
 * sleeping each step, stall = time blocked in next / wall time after the
 * first batch.
 *
 * Every loader run here uses drop_last so that all batches are full: the
 * consumer sleeps a fixed time per batch, and partial batches would make
 * its sample rate differ from batch / step. */
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "cli.h"
#include "data/source.h"
#include "sluice/sluice.h"

#define MAX_THREADS 256
#define FETCH_THREADS 4
#define MIN_BATCHES 8 /* after the first, for a rate to mean something */

typedef struct an_args {
    const char *source;
    double step_ms, rate, seconds;
    int batch, size, threads, dtype, prefetch, sweep, json;
} an_args_t;

typedef struct fetch_res {
    double secs;
    int64_t samples, stored;
    int err;
} fetch_res_t;

typedef struct run_res {
    double rate;      /* samples/s in steady state */
    double stall;     /* blocked in next / wall, after the first batch */
    double delivered; /* samples/s consumed after the first batch came:
                         n batches held and n - 1 waits in that window */
    double secs;
    double cores_used;   /* CPU seconds of this process / wall seconds */
    double hold_over_ms; /* mean consumer time per batch beyond its step */
    int64_t batches;
} run_res_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice analyze SOURCE [options]\n"
            "Which bound stalls the job (fetch, prep or consumer), by how "
            "much, and the cure.\n"
            "  --step-ms T        the consumer holds each batch T ms\n"
            "  --rate R           or: the consumer ingests R samples/s\n"
            "  --batch N          samples per batch (64)\n"
            "  --size N           output N x N (224)\n"
            "  --threads N        decode threads of the job (cores); prep is "
            "measured for 1..N\n"
            "  --prefetch N       batch buffers in flight (max(2N, 8))\n"
            "  --out uint8|float  (uint8)\n"
            "  --seconds S        length of each measured run (10)\n"
            "  --sweep            check at 50%%, 100%% and 150%% of the "
            "prep rate instead\n"
            "  --json             a JSON object of the figures as last line\n");
}

static int parse_args(int argc, char **argv, an_args_t *a)
{
    enum {
        O_STEP = 256,
        O_RATE,
        O_BATCH,
        O_SIZE,
        O_THREADS,
        O_OUT,
        O_SECS,
        O_SWEEP,
        O_JSON,
        O_PREFETCH,
        O_HELP
    };
    static const struct option lo[] = {
        {"step-ms", 1, 0, O_STEP},    {"rate", 1, 0, O_RATE},
        {"batch", 1, 0, O_BATCH},     {"size", 1, 0, O_SIZE},
        {"threads", 1, 0, O_THREADS}, {"out", 1, 0, O_OUT},
        {"seconds", 1, 0, O_SECS},    {"sweep", 0, 0, O_SWEEP},
        {"json", 0, 0, O_JSON},       {"prefetch", 1, 0, O_PREFETCH},
        {"help", 0, 0, O_HELP},       {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->batch = 64;
    a->size = 224;
    a->seconds = 10;
    a->step_ms = -1;
    a->rate = -1;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        char *end = NULL;
        const char *s = optarg;
        int bad = 0;
        switch (c) {
        case O_STEP:
            a->step_ms = strtod(s, &end);
            bad = *end || !(a->step_ms > 0);
            break;
        case O_RATE:
            a->rate = strtod(s, &end);
            bad = *end || !(a->rate > 0);
            break;
        case O_SECS:
            a->seconds = strtod(s, &end);
            bad = *end || !(a->seconds > 0 && a->seconds < 86400);
            break;
        case O_BATCH:
        case O_SIZE:
        case O_THREADS:
        case O_PREFETCH: {
            long v = strtol(s, &end, 10);
            bad = *end || v < 1 || v > (c == O_SIZE ? 8192 : 65536) ||
                  (c == O_THREADS && v > MAX_THREADS);
            if (c == O_BATCH)
                a->batch = (int)v;
            else if (c == O_SIZE)
                a->size = (int)v;
            else if (c == O_THREADS)
                a->threads = (int)v;
            else
                a->prefetch = (int)v;
            break;
        }
        case O_OUT:
            if (!strcmp(s, "uint8"))
                a->dtype = SL_DTYPE_UINT8;
            else if (!strcmp(s, "float"))
                a->dtype = SL_DTYPE_FLOAT32;
            else
                bad = 1;
            break;
        case O_SWEEP:
            a->sweep = 1;
            break;
        case O_JSON:
            a->json = 1;
            break;
        case O_HELP:
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "sluice analyze: bad value for --%s: %s\n",
                    lo[c - O_STEP].name, s);
            return -1;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return -1;
    }
    a->source = argv[optind];
    if (a->step_ms > 0 && a->rate > 0) {
        fprintf(stderr, "sluice analyze: give --step-ms or --rate, not both\n");
        return -1;
    }
    if (!a->sweep && !(a->step_ms > 0) && !(a->rate > 0)) {
        fprintf(stderr, "sluice analyze: the consumer's demand is needed: "
                        "--step-ms T, --rate R or --sweep\n");
        return -1;
    }
    if (!a->threads)
        a->threads = sl__ncpu();
    if (!a->prefetch)
        a->prefetch = a->threads * 2 > 8 ? a->threads * 2 : 8;
    return 0;
}

static double mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* ------------------------------------------------------------- the files */

typedef struct files {
    char **path;
    int n, cap;
    double bytes; /* sum of their sizes: what the page cache would hold */
} files_t;

static int files_add(files_t *f, const char *p)
{
    if (f->n && !strcmp(f->path[f->n - 1], p))
        return 0; /* a shard's records are contiguous */
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 64;
        char **np = realloc(f->path, (size_t)cap * sizeof *np);
        if (!np)
            return -1;
        f->path = np;
        f->cap = cap;
    }
    if (!(f->path[f->n] = strdup(p)))
        return -1;
    struct stat st;
    if (stat(p, &st) == 0)
        f->bytes += (double)st.st_size;
    f->n++;
    return 0;
}

static void files_free(files_t *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->path[i]);
    free(f->path);
}

/* The files holding the samples: each image of a folder, each shard.
 * sl__source_describe names the image, or "SHARD: record K (name)". */
static int list_files(const sl__source_t *s, files_t *f)
{
    char buf[4608];
    for (int64_t i = 0; i < sl__source_count(s); i++) {
        sl__source_describe(s, i, buf, sizeof buf);
        char *rec = NULL, *p = buf;
        while ((p = strstr(p, ": record ")))
            rec = p++;
        struct stat st;
        if (rec) {
            *rec = 0;
            if (stat(buf, &st) != 0)
                *rec = ':'; /* a folder file whose name has ": record " */
        }
        if (files_add(f, buf))
            return -1;
    }
    return 0;
}

/* Drops this dataset's pages from the page cache, file by file; the rest
 * of the machine's cache is left alone. Returns files it could not drop. */
static int evict(const files_t *f)
{
    int failed = 0;
    for (int i = 0; i < f->n; i++) {
        int fd = open(f->path[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
            failed++;
        if (fd >= 0)
            close(fd);
    }
    return failed;
}

/* ------------------------------------------------------------ fetch pass */

typedef struct fetch_ctx {
    const sl__source_t *src;
    atomic_llong next;
    atomic_llong samples, stored;
    atomic_int err;
    int64_t deadline_ns;
    char msg[512];
    pthread_mutex_t mu;
} fetch_ctx_t;

static void *fetch_worker(void *arg)
{
    fetch_ctx_t *c = arg;
    sl__bytes_t out = {0}, scratch = {0};
    char err[512];
    int64_t n = sl__source_count(c->src);
    for (;;) {
        long long i = atomic_fetch_add(&c->next, 1);
        if (i >= n || atomic_load(&c->err) || sl__now_ns() > c->deadline_ns)
            break;
        uint64_t stored = 0;
        int rc = sl__source_read(c->src, i, &out, &scratch, &stored, err,
                                 sizeof err);
        if (rc) {
            pthread_mutex_lock(&c->mu);
            if (!atomic_load(&c->err)) {
                snprintf(c->msg, sizeof c->msg, "%s", err);
                atomic_store(&c->err, rc);
            }
            pthread_mutex_unlock(&c->mu);
            break;
        }
        atomic_fetch_add(&c->samples, 1);
        atomic_fetch_add(&c->stored, (long long)stored);
    }
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    return NULL;
}

/* Reads every sample's stored bytes (no decode) with `nt` threads, for at
 * most max_s seconds. */
static fetch_res_t fetch_pass(const sl__source_t *src, int nt, double max_s)
{
    fetch_ctx_t c;
    memset(&c, 0, sizeof c);
    c.src = src;
    pthread_mutex_init(&c.mu, NULL);
    pthread_t th[FETCH_THREADS];
    int started = 0;
    int64_t t0 = sl__now_ns();
    c.deadline_ns = t0 + (int64_t)(max_s * 1e9);
    for (int i = 0; i < nt && i < FETCH_THREADS; i++)
        if (pthread_create(&th[i], NULL, fetch_worker, &c) == 0)
            started++;
    if (!started)
        fetch_worker(&c);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    fetch_res_t r;
    r.secs = (double)(sl__now_ns() - t0) / 1e9;
    r.samples = atomic_load(&c.samples);
    r.stored = atomic_load(&c.stored);
    r.err = atomic_load(&c.err);
    if (r.err)
        fprintf(stderr, "sluice analyze: fetch: %s\n", c.msg);
    pthread_mutex_destroy(&c.mu);
    return r;
}

/* ----------------------------------------------------------- loader runs */

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

/* Streams the source with `threads` decode threads for about `secs`
 * seconds after the first batch; the consumer holds each batch hold_ms
 * (0: hands it straight back). The rate skips the first 15% of the run
 * (pipeline filling); the stall counts everything after the first batch,
 * as a training job would feel it. */
static int run_loader(const an_args_t *a, int threads, double hold_ms,
                      double secs, run_res_t *out)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = a->batch;
    o.image_size = a->size;
    o.dtype = a->dtype;
    o.decode_threads = threads;
    o.prefetch = a->prefetch;
    o.drop_last = 1;
    o.epochs = 1000000;
    o.telemetry_ms = -1;
    sl_loader_t *l;
    int rc = sl_loader_create(a->source, &o, &l);
    if (rc) {
        fprintf(stderr, "sluice analyze: %s\n", sl_loader_last_error(NULL));
        return rc;
    }
    if (sl_loader_batches_per_epoch(l) < 1) {
        fprintf(stderr,
                "sluice analyze: %s has fewer samples than one "
                "batch\n",
                a->source);
        sl_loader_destroy(l);
        return SL_ERANGE;
    }
    size_t cap = 1024, n = 0;
    int64_t *t = malloc(cap * sizeof *t);
    if (!t || (rc = sl_loader_start(l, NULL))) {
        free(t);
        sl_loader_destroy(l);
        return rc ? rc : SL_ENOMEM;
    }
    const int64_t hold = (int64_t)(hold_ms * 1e6);
    const int64_t want = (int64_t)(secs * 1e9);
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
    sl_loader_destroy(l);
    if (rc == SL_EEND)
        rc = 0;
    if (rc) {
        fprintf(stderr, "sluice analyze: loader: %s\n", sl_strerror(rc));
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
        out->delivered = (double)n * a->batch * 1e9 / (double)(end - t_first);
    size_t k = 0;
    while (k + 2 < n && t[k] - t[0] < (t[n - 1] - t[0]) * 15 / 100)
        k++;
    if (n >= 2 && t[n - 1] > t[k])
        out->rate =
            (double)(n - 1 - k) * a->batch / ((double)(t[n - 1] - t[k]) / 1e9);
    free(t);
    return 0;
}

/* -------------------------------------------------------------- the model */

typedef struct model {
    double demand, prep, fetch_cold, fetch_warm, fetch_used, supply;
    double predicted;
    const char *bound;
} model_t;

static model_t predict(double demand, double prep, double cold, double warm,
                       int fits)
{
    model_t m;
    m.demand = demand;
    m.prep = prep;
    m.fetch_cold = cold;
    m.fetch_warm = warm;
    /* A dataset that fits stays resident after one pass: warm from then on */
    m.fetch_used = fits ? warm : cold;
    m.supply = prep < m.fetch_used ? prep : m.fetch_used;
    m.predicted = demand > 0 && m.supply < demand ? 1 - m.supply / demand : 0;
    if (demand <= m.supply)
        m.bound = "consumer";
    else
        m.bound = prep <= m.fetch_used ? "prep" : "fetch";
    return m;
}

typedef struct level {
    double demand, step_ms, predicted, measured;
    double delivered; /* what the loader achieved during the check */
    double cores_used, hold_over_ms;
} level_t;

static int check_level(const an_args_t *a, double prep, double cold,
                       double warm, int fits, double demand, level_t *lv)
{
    run_res_t r;
    lv->demand = demand;
    lv->step_ms = 1e3 * a->batch / demand;
    lv->predicted = predict(demand, prep, cold, warm, fits).predicted;
    fprintf(stderr,
            "sluice analyze: check: %d thread%s, consumer %.1f samples/s "
            "(%.2f ms/batch) for %.0f s...\n",
            a->threads, a->threads > 1 ? "s" : "", demand, lv->step_ms,
            a->seconds);
    int rc = run_loader(a, a->threads, lv->step_ms, a->seconds, &r);
    if (rc)
        return rc;
    lv->measured = r.stall;
    lv->delivered = r.delivered;
    lv->cores_used = r.cores_used;
    lv->hold_over_ms = r.hold_over_ms;
    fprintf(stderr,
            "sluice analyze:   predicted stall %.3f, measured %.3f "
            "(%" PRId64 " batches, %.1f s, %.1f samples/s "
            "delivered, %.2f cores used, consumer overhead %.2f ms/batch)\n",
            lv->predicted, lv->measured, r.batches, r.secs, r.delivered,
            r.cores_used, r.hold_over_ms);
    return 0;
}

/* Threads to reach `demand`: the first measured count that does, else a
 * straight line through the per-thread gain of the last measurements.
 * Returns -1 when more threads have not helped. */
static int64_t threads_needed(const double *r, int n, double demand)
{
    for (int i = 0; i < n; i++)
        if (r[i] >= demand)
            return i + 1;
    double slope = n > 1 ? (r[n - 1] - r[0]) / (n - 1) : r[0];
    if (!(slope > 0))
        return -1;
    double k = n + ceil((demand - r[n - 1]) / slope);
    return k > 1e15 ? (int64_t)1e15 : (int64_t)k;
}

static void fmt_bytes(double b, char *buf, size_t len)
{
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int i = 0;
    while (b >= 1000 && i < 4) {
        b /= 1000;
        i++;
    }
    snprintf(buf, len, "%.1f %s", b, u[i]);
}

int sl__cmd_analyze(int argc, char **argv)
{
    an_args_t a;
    if (parse_args(argc, argv, &a))
        return 2;
    const char *me = "sluice analyze";
    int cores = sl__ncpu();

    /* Fetch: cold (this dataset's pages evicted), then warm. */
    char err[512];
    sl__source_t *src;
    if (sl__source_open(a.source, 0, &src, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", me, err);
        return 1;
    }
    int64_t count = sl__source_count(src);
    files_t files = {0};
    if (count < 1 || list_files(src, &files)) {
        fprintf(stderr, "%s: %s: %s\n", me, a.source,
                count < 1 ? "no samples" : "out of memory");
        sl__source_close(src);
        files_free(&files);
        return 1;
    }
    double avail = mem_available();
    int fits = avail > 0 && files.bytes < avail;
    double max_fetch_s = 60 + 6 * a.seconds;
    int nevict = evict(&files);
    fprintf(stderr,
            "%s: fetch (cold): %" PRId64 " samples in %d files, %.1f MB, "
            "%d reader threads%s...\n",
            me, count, files.n, files.bytes / 1e6, FETCH_THREADS,
            nevict ? " (some files could not be evicted)" : "");
    fetch_res_t cold = fetch_pass(src, FETCH_THREADS, max_fetch_s);
    fprintf(stderr, "%s: fetch (warm)...\n", me);
    fetch_res_t warm =
        cold.err ? cold : fetch_pass(src, FETCH_THREADS, max_fetch_s);
    sl__source_close(src);
    if (cold.err || warm.err || cold.samples < 1 || warm.samples < 1) {
        files_free(&files);
        return 1;
    }
    if (cold.samples < count)
        fprintf(stderr,
                "%s: fetch stopped after %.0f s: %" PRId64 " of %" PRId64
                " samples\n",
                me, max_fetch_s, cold.samples, count);
    double f_cold = cold.samples / cold.secs, f_warm = warm.samples / warm.secs;
    double mean_stored = (double)warm.stored / (double)warm.samples;

    /* Prep, 1..N threads, data warm, consumer never sleeping. */
    double prep[MAX_THREADS], prep_cores[MAX_THREADS];
    for (int n = 1; n <= a.threads; n++) {
        run_res_t r;
        fprintf(stderr, "%s: prep with %d thread%s (%.0f s)...\n", me, n,
                n > 1 ? "s" : "", a.seconds);
        if (run_loader(&a, n, 0, a.seconds, &r)) {
            files_free(&files);
            return 1;
        }
        prep[n - 1] = r.rate;
        prep_cores[n - 1] = r.cores_used;
        fprintf(stderr, "%s:   %.1f samples/s (%.2f cores used)\n", me, r.rate,
                r.cores_used);
    }
    double p = prep[a.threads - 1];

    /* The check: the job as configured, or the sweep. */
    level_t lv[3];
    int nlv = 0, main_lv = 0;
    double demand = a.rate > 0      ? a.rate
                    : a.step_ms > 0 ? 1e3 * a.batch / a.step_ms
                                    : p;
    int rc = 0;
    double p_after = -1;
    if (a.sweep) {
        const double f[3] = {0.5, 1.0, 1.5};
        for (nlv = 0; nlv < 3 && !rc; nlv++)
            rc = check_level(&a, p, f_cold, f_warm, fits, f[nlv] * p, &lv[nlv]);
        main_lv = 1;
        demand = p;
        /* The machine may be shared: measure again, so a drift in what
         * the loader can do during the sweep is seen, not hidden. */
        run_res_t r;
        fprintf(stderr, "%s: prep with %d thread%s again (%.0f s)...\n", me,
                a.threads, a.threads > 1 ? "s" : "", a.seconds);
        if (!rc && !(rc = run_loader(&a, a.threads, 0, a.seconds, &r))) {
            p_after = r.rate;
            fprintf(stderr, "%s:   %.1f samples/s (%.2f cores used)\n", me,
                    r.rate, r.cores_used);
        }
    } else {
        rc = check_level(&a, p, f_cold, f_warm, fits, demand, &lv[0]);
        nlv = 1;
    }
    if (rc) {
        files_free(&files);
        return 1;
    }
    model_t m = predict(demand, p, f_cold, f_warm, fits);
    int64_t tn = threads_needed(prep, a.threads, demand);
    double cache_need = f_cold < demand ? files.bytes : 0;
    double bw_need = demand * mean_stored;

    /* The report. */
    char b1[32], b2[32], b3[32];
    printf("data-stall analysis of %s (%" PRId64 " samples, batch %d, "
           "%dx%d %s, %d threads, prefetch %d, %d cores)\n",
           a.source, count, a.batch, a.size, a.size,
           a.dtype ? "float" : "uint8", a.threads, a.prefetch, cores);
    printf("  %-28s %12s %10s\n", "rate", "samples/s", "MB/s");
    printf("  %-28s %12.1f %10.1f\n", "demand (consumer)", demand,
           bw_need / 1e6);
    for (int i = 0; i < a.threads; i++) {
        char name[48];
        snprintf(name, sizeof name, "prep, %d thread%s (in memory)", i + 1,
                 i ? "s" : "");
        printf("  %-28s %12.1f %10s\n", name, prep[i], "");
    }
    printf("  %-28s %12.1f %10.1f\n", "fetch, cold", f_cold,
           cold.stored / cold.secs / 1e6);
    printf("  %-28s %12.1f %10.1f\n", "fetch, warm", f_warm,
           warm.stored / warm.secs / 1e6);
    fmt_bytes(files.bytes, b1, sizeof b1);
    fmt_bytes(avail, b2, sizeof b2);
    printf("dataset %s, MemAvailable %s: %s, so fetch runs %s\n", b1, b2,
           fits ? "fits" : "does not fit", fits ? "warm" : "cold");
    printf("bound: %s; supply %.1f samples/s vs demand %.1f: predicted "
           "stall %.3f, measured %.3f\n",
           m.bound, m.supply, demand, lv[main_lv].predicted,
           lv[main_lv].measured);
    if (nlv > 1) {
        printf("  %-6s %9s %8s %9s %9s %8s %6s %5s %6s\n", "level", "demand/s",
               "step ms", "delivered", "predicted", "measured", "|diff|",
               "cores", "over ms");
        for (int i = 0; i < nlv; i++)
            printf("  %-6s %9.1f %8.2f %9.1f %9.3f %8.3f %6.3f %5.2f %6.2f\n",
                   i == 0   ? "50%"
                   : i == 1 ? "100%"
                            : "150%",
                   lv[i].demand, lv[i].step_ms, lv[i].delivered,
                   lv[i].predicted, lv[i].measured,
                   fabs(lv[i].predicted - lv[i].measured), lv[i].cores_used,
                   lv[i].hold_over_ms);
        if (p_after > 0)
            printf("prep rate %.1f before the sweep, %.1f after (%+.1f%%)%s\n",
                   p, p_after, 100 * (p_after / p - 1),
                   fabs(p_after / p - 1) > 0.05
                       ? ": the machine changed under the sweep, the "
                         "comparison is not trustworthy"
                       : "");
    }
    if (!strcmp(m.bound, "consumer")) {
        printf("cure: none needed, the loader keeps up (%.0f%% headroom)\n",
               100 * (m.supply / demand - 1));
    } else if (!strcmp(m.bound, "prep")) {
        if (tn < 0)
            printf("cure: more decode threads did not help; a cheaper "
                   "transform or more machines\n");
        else if (tn > cores)
            printf("cure: about %" PRId64 " decode threads, more than the %d "
                   "cores: more cores, a cheaper transform (smaller "
                   "--size, stored at lower resolution) or offloaded "
                   "decoding\n",
                   tn, cores);
        else
            printf("cure: %" PRId64 " decode threads (of %d cores)\n", tn,
                   cores);
    } else {
        fmt_bytes(cache_need, b1, sizeof b1);
        fmt_bytes(bw_need, b3, sizeof b3);
        printf("cure: storage at %s/s (have %.1f MB/s cold)", b3,
               cold.stored / cold.secs / 1e6);
        if (cache_need > 0)
            printf(", or %s of cache for the dataset%s", b1,
                   fits ? "" : " (more than MemAvailable)");
        printf("\n");
    }
    if (a.json) {
        printf("{\"bound\": \"%s\", \"predicted_stall\": %.4f, "
               "\"measured_stall\": %.4f, \"demand_rate\": %.2f, "
               "\"prep_rate\": %.2f, \"fetch_rate_cold\": %.2f, "
               "\"fetch_rate_warm\": %.2f, \"fetch_mb_s_cold\": %.2f, "
               "\"fetch_mb_s_warm\": %.2f, \"supply_rate\": %.2f, "
               "\"prep_rate_by_threads\": [",
               m.bound, lv[main_lv].predicted, lv[main_lv].measured, demand, p,
               f_cold, f_warm, cold.stored / cold.secs / 1e6,
               warm.stored / warm.secs / 1e6, m.supply);
        for (int i = 0; i < a.threads; i++)
            printf("%s%.2f", i ? ", " : "", prep[i]);
        printf("], \"prep_cores_used\": %.2f, \"prep_rate_after\": %.2f, "
               "\"threads\": %d, \"cores\": %d, \"threads_needed\": "
               "%" PRId64 ", \"threads_needed_exceeds_cores\": %s, "
               "\"cache_bytes_needed\": %.0f, "
               "\"bandwidth_needed_bytes_per_s\": %.0f, "
               "\"dataset_bytes\": %.0f, \"dataset_fits_in_memory\": %s, "
               "\"mem_available_bytes\": %.0f, \"samples\": %" PRId64
               ", \"batch\": %d, \"size\": %d, \"prefetch\": %d, "
               "\"step_ms\": %.3f, \"delivered_rate\": %.2f",
               prep_cores[a.threads - 1], p_after, a.threads, cores, tn,
               tn > cores ? "true" : "false", cache_need, bw_need, files.bytes,
               fits ? "true" : "false", avail, count, a.batch, a.size,
               a.prefetch, lv[main_lv].step_ms, lv[main_lv].delivered);
        if (a.sweep) {
            printf(", \"sweep\": [");
            for (int i = 0; i < nlv; i++)
                printf("%s{\"demand_rate\": %.2f, \"predicted_stall\": %.4f, "
                       "\"measured_stall\": %.4f, \"delivered_rate\": %.2f, "
                       "\"cores_used\": %.2f, \"hold_over_ms\": %.3f}",
                       i ? ", " : "", lv[i].demand, lv[i].predicted,
                       lv[i].measured, lv[i].delivered, lv[i].cores_used,
                       lv[i].hold_over_ms);
            printf("]");
        }
        printf("}\n");
    }
    files_free(&files);
    return 0;
}
