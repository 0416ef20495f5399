/* sluice analyze: which bound stalls a job reading SOURCE (fetch, prep or
 * the consumer), by how much, and the cure. The analysis is a library
 * module (src/analysis/analysis.h); this prints it. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/analysis.h"
#include "cli.h"
#include "opts.h"

typedef struct analyze_args {
    sl_analyze_options_t o;
    int json;
} analyze_args_t;

/* Zero means "the default" to the library: no value here. The ranges are
 * the library's (sl__analyze_options_resolve). */
#define F(f) offsetof(analyze_args_t, o.f)
#define N 999999999 /* whole numbers below 1e9 */
static const char *const dtypes[] = {"uint8", "float", NULL};
static const int dtype_v[] = {SL_DTYPE_UINT8, SL_DTYPE_FLOAT32};
static const sl__opt_t analyze_opts[] = {
    {"step-ms", 0, SL__OPT_DOUBLE, F(step_ms), SL__OPT_POS, 1e9, "T",
     "the consumer holds each batch T ms"},
    {"rate", 0, SL__OPT_DOUBLE, F(rate), SL__OPT_POS, 1e9, "R",
     "or: the consumer ingests R samples/s"},
    {"batch", 0, SL__OPT_INT, F(batch_size), 1, N, "N", "samples per batch",
     "64"},
    {"size", 0, SL__OPT_INT, F(image_size), 1, N, "N", "output N x N", "224"},
    {"threads", 0, SL__OPT_INT, F(decode_threads), 1, N, "N",
     "decode threads of the job; prep is measured for 1..N", "cores"},
    {"prefetch", 0, SL__OPT_INT, F(prefetch), 1, N, "N",
     "batch buffers in flight", "max(2N, 8)"},
    {"out", 0, SL__OPT_CHOICE, F(dtype), 0, 0, NULL, "pixels or float32",
     "uint8", dtypes, dtype_v},
    {"seconds", 0, SL__OPT_DOUBLE, F(seconds), SL__OPT_POS, 1e9, "S",
     "length of each measured run", "10"},
    {"sweep", 0, SL__OPT_FLAG, F(sweep), 0, 0, NULL,
     "check at 50%, 100% and 150% of the prep rate instead"},
    {"json", 0, SL__OPT_FLAG, offsetof(analyze_args_t, json), 0, 0, NULL,
     "a JSON object of the figures as last line"},
    {NULL},
};
#undef N

static const sl__opts_t analyze_usage = {
    "SOURCE [options]",
    "Which bound stalls the job (fetch, prep or consumer), by how much, and "
    "the cure.\n",
    {analyze_opts},
    "one SOURCE",
    1,
    1};

static void progress(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "sluice analyze: %s\n", line);
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

static void print_rates(const char *source, const sl__analysis_t *a)
{
    const sl_analyze_options_t *o = &a->opt;
    int n = o->decode_threads;
    printf("data-stall analysis of %s (%" PRId64 " samples, batch %d, "
           "%dx%d %s, %d threads, prefetch %d, %d cores)\n",
           source, a->samples, o->batch_size, o->image_size, o->image_size,
           o->dtype ? "float" : "uint8", n, o->prefetch, a->cores);
    printf("  %-28s %12s %10s\n", "rate", "samples/s", "MB/s");
    printf("  %-28s %12.1f %10.1f\n", "demand (consumer)", a->demand,
           a->bandwidth_needed / 1e6);
    for (int i = 0; i < n; i++) {
        char name[48];
        snprintf(name, sizeof name, "prep, %d thread%s (in memory)", i + 1,
                 i ? "s" : "");
        printf("  %-28s %12.1f %10s\n", name, a->prep[i], "");
    }
    printf("  %-28s %12.1f %10.1f\n", "fetch, cold", sl__fetch_rate(&a->cold),
           sl__fetch_bytes_per_s(&a->cold) / 1e6);
    printf("  %-28s %12.1f %10.1f\n", "fetch, warm", sl__fetch_rate(&a->warm),
           sl__fetch_bytes_per_s(&a->warm) / 1e6);
}

static void print_sweep(const sl__analysis_t *a)
{
    static const char *name[3] = {"50%", "100%", "150%"};
    printf("  %-6s %9s %8s %9s %9s %8s %6s %5s %6s\n", "level", "demand/s",
           "step ms", "delivered", "predicted", "measured", "|diff|", "cores",
           "over ms");
    for (int i = 0; i < a->nlevels; i++) {
        const sl__analysis_level_t *lv = &a->level[i];
        printf("  %-6s %9.1f %8.2f %9.1f %9.3f %8.3f %6.3f %5.2f %6.2f\n",
               name[i], lv->demand, lv->step_ms, lv->delivered, lv->predicted,
               lv->measured, fabs(lv->predicted - lv->measured), lv->cores_used,
               lv->hold_over_ms);
    }
    double p = a->prep[a->opt.decode_threads - 1], after = a->prep_after;
    if (after > 0)
        printf("prep rate %.1f before the sweep, %.1f after (%+.1f%%)%s\n", p,
               after, 100 * (after / p - 1),
               fabs(after / p - 1) > 0.05
                   ? ": the machine changed under the sweep, the "
                     "comparison is not trustworthy"
                   : "");
}

static void print_cure(const sl__analysis_t *a)
{
    char b1[32], b2[32];
    int64_t tn = a->threads_needed;
    switch (a->cure) {
    case SL__CURE_NONE:
        printf("cure: none needed, the loader keeps up (%.0f%% headroom)\n",
               100 * (a->model.supply / a->demand - 1));
        break;
    case SL__CURE_CHEAPER_PREP:
        printf("cure: more decode threads did not help; a cheaper "
               "transform or more machines\n");
        break;
    case SL__CURE_CORES:
        printf("cure: about %" PRId64 " decode threads, more than the %d "
               "cores: more cores, a cheaper transform (smaller --size, "
               "stored at lower resolution) or offloaded decoding\n",
               tn, a->cores);
        break;
    case SL__CURE_THREADS:
        printf("cure: %" PRId64 " decode threads (of %d cores)\n", tn,
               a->cores);
        break;
    case SL__CURE_STORAGE:
        fmt_bytes(a->cache_bytes_needed, b1, sizeof b1);
        fmt_bytes(a->bandwidth_needed, b2, sizeof b2);
        printf("cure: storage at %s/s (have %.1f MB/s cold)", b2,
               sl__fetch_bytes_per_s(&a->cold) / 1e6);
        if (a->cache_bytes_needed > 0)
            printf(", or %s of cache for the dataset%s", b1,
                   a->fits ? "" : " (more than MemAvailable)");
        printf("\n");
        break;
    }
}

static void print_report(const char *source, const sl__analysis_t *a)
{
    char b1[32], b2[32];
    const sl__analysis_level_t *lv = &a->level[a->main_level];
    print_rates(source, a);
    fmt_bytes(a->files.bytes, b1, sizeof b1);
    fmt_bytes(a->mem_available, b2, sizeof b2);
    printf("dataset %s, MemAvailable %s: %s, so fetch runs %s\n", b1, b2,
           a->fits ? "fits" : "does not fit", a->fits ? "warm" : "cold");
    printf("bound: %s; supply %.1f samples/s vs demand %.1f: predicted "
           "stall %.3f, measured %.3f\n",
           sl__bound_name(a->model.bound), a->model.supply, a->demand,
           lv->predicted, lv->measured);
    if (a->nlevels > 1)
        print_sweep(a);
    print_cure(a);
}

int sl__cmd_analyze(int argc, char **argv)
{
    analyze_args_t args = {.json = 0};
    sl_analyze_options_init(&args.o);
    int rc = sl__opts_parse(&analyze_usage, &args, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    sl_analyze_options_t o = args.o, resolved;
    const char *source = argv[optind];
    int json = args.json;
    char err[1024];
    if (sl__analyze_options_resolve(&o, &resolved, err, sizeof err)) {
        fprintf(stderr, "sluice analyze: %s\n", err);
        return 2;
    }
    o.progress = progress;
    sl__analysis_t *a = malloc(sizeof *a);
    if (!a || sl__analyze(source, &o, a, err, sizeof err)) {
        fprintf(stderr, "sluice analyze: %s\n", a ? err : "out of memory");
        free(a);
        return 1;
    }
    print_report(source, a);
    char *text = json ? sl__analysis_json(a) : NULL;
    if (text)
        printf("%s\n", text);
    free(text);
    sl__analysis_free(a);
    free(a);
    return json && !text ? 1 : 0;
}
