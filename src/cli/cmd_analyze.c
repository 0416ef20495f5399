/* sluice analyze: which bound stalls a job reading SOURCE (fetch, prep or
 * the consumer), by how much, and the cure. The analysis is a library
 * module (src/analysis/analysis.h); this prints it. */
#include <stdio.h>
#include <stdlib.h>

#include "analysis/analysis.h"
#include "analysis/report.h"
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
    sl__analysis_report(stdout, source, a);
    char *text = json ? sl__analysis_json(a) : NULL;
    if (text)
        printf("%s\n", text);
    free(text);
    sl__analysis_free(a);
    free(a);
    return json && !text ? 1 : 0;
}
