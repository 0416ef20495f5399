/* analysis/report: the human-readable report of an analysis, as
 * `sluice analyze` prints it (the rates, the bound, the sweep, the cure). */
#include "analysis/report.h"

#include <inttypes.h>
#include <math.h>

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

static void print_rates(FILE *f, const char *source, const sl__analysis_t *a)
{
    const sl_analyze_options_t *o = &a->opt;
    int n = o->decode_threads;
    fprintf(f,
            "data-stall analysis of %s (%" PRId64 " samples, batch %d, "
            "%dx%d %s, %d threads, prefetch %d, %d cores)\n",
            source, a->samples, o->batch_size, o->image_size, o->image_size,
            o->dtype ? "float" : "uint8", n, o->prefetch, a->cores);
    fprintf(f, "  %-28s %12s %10s\n", "rate", "samples/s", "MB/s");
    fprintf(f, "  %-28s %12.1f %10.1f\n", "demand (consumer)", a->demand,
            a->bandwidth_needed / 1e6);
    for (int i = 0; i < n; i++) {
        char name[48];
        snprintf(name, sizeof name, "prep, %d thread%s (in memory)", i + 1,
                 i ? "s" : "");
        fprintf(f, "  %-28s %12.1f %10s\n", name, a->prep[i], "");
    }
    fprintf(f, "  %-28s %12.1f %10.1f\n", "fetch, cold",
            sl__fetch_rate(&a->cold), sl__fetch_bytes_per_s(&a->cold) / 1e6);
    fprintf(f, "  %-28s %12.1f %10.1f\n", "fetch, warm",
            sl__fetch_rate(&a->warm), sl__fetch_bytes_per_s(&a->warm) / 1e6);
}

static void print_sweep(FILE *f, const sl__analysis_t *a)
{
    static const char *name[3] = {"50%", "100%", "150%"};
    fprintf(f, "  %-6s %9s %8s %9s %9s %8s %6s %5s %6s\n", "level", "demand/s",
            "step ms", "delivered", "predicted", "measured", "|diff|", "cores",
            "over ms");
    for (int i = 0; i < a->nlevels; i++) {
        const sl__analysis_level_t *lv = &a->level[i];
        fprintf(f, "  %-6s %9.1f %8.2f %9.1f %9.3f %8.3f %6.3f %5.2f %6.2f\n",
                name[i], lv->demand, lv->step_ms, lv->delivered, lv->predicted,
                lv->measured, fabs(lv->predicted - lv->measured),
                lv->cores_used, lv->hold_over_ms);
    }
    double p = a->prep[a->opt.decode_threads - 1], after = a->prep_after;
    if (after > 0)
        fprintf(f, "prep rate %.1f before the sweep, %.1f after (%+.1f%%)%s\n",
                p, after, 100 * (after / p - 1),
                fabs(after / p - 1) > 0.05
                    ? ": the machine changed under the sweep, the "
                      "comparison is not trustworthy"
                    : "");
}

static void print_cure(FILE *f, const sl__analysis_t *a)
{
    char b1[32], b2[32];
    int64_t tn = a->threads_needed;
    switch (a->cure) {
    case SL__CURE_NONE:
        fprintf(f, "cure: none needed, the loader keeps up (%.0f%% headroom)\n",
                100 * (a->model.supply / a->demand - 1));
        break;
    case SL__CURE_CHEAPER_PREP:
        fprintf(f, "cure: more decode threads did not help; a cheaper "
                   "transform or more machines\n");
        break;
    case SL__CURE_CORES:
        fprintf(f,
                "cure: about %" PRId64 " decode threads, more than the %d "
                "cores: more cores, a cheaper transform (smaller --size, "
                "stored at lower resolution) or offloaded decoding\n",
                tn, a->cores);
        break;
    case SL__CURE_THREADS:
        fprintf(f, "cure: %" PRId64 " decode threads (of %d cores)\n", tn,
                a->cores);
        break;
    case SL__CURE_STORAGE:
        fmt_bytes(a->cache_bytes_needed, b1, sizeof b1);
        fmt_bytes(a->bandwidth_needed, b2, sizeof b2);
        fprintf(f, "cure: storage at %s/s (have %.1f MB/s cold)", b2,
                sl__fetch_bytes_per_s(&a->cold) / 1e6);
        if (a->cache_bytes_needed > 0)
            fprintf(f, ", or %s of cache for the dataset%s", b1,
                    a->fits ? "" : " (more than MemAvailable)");
        fprintf(f, "\n");
        break;
    }
}

void sl__analysis_report(FILE *f, const char *source, const sl__analysis_t *a)
{
    char b1[32], b2[32];
    const sl__analysis_level_t *lv = &a->level[a->main_level];
    print_rates(f, source, a);
    fmt_bytes(a->files.bytes, b1, sizeof b1);
    fmt_bytes(a->mem_available, b2, sizeof b2);
    fprintf(f, "dataset %s, MemAvailable %s: %s, so fetch runs %s\n", b1, b2,
            a->fits ? "fits" : "does not fit", a->fits ? "warm" : "cold");
    fprintf(f,
            "bound: %s; supply %.1f samples/s vs demand %.1f: predicted "
            "stall %.3f, measured %.3f\n",
            sl__bound_name(a->model.bound), a->model.supply, a->demand,
            lv->predicted, lv->measured);
    if (a->nlevels > 1)
        print_sweep(f, a);
    print_cure(f, a);
}
