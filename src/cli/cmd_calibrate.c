/* sluice calibrate: fits a simulator profile to the telemetry of one real
 * run (`sluice run --telemetry FILE`) and writes it. The fit is a library
 * module (src/analysis/calibrate.h); this parses and prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/calibrate.h"
#include "cli.h"
#include "opts.h"

typedef struct calibrate_args {
    const char *out;
    int json;
    sl_calibrate_options_t o;
    double step_ms, skip_s; /* -1: not given */
} calibrate_args_t;

#define F(f) offsetof(calibrate_args_t, f)
static const sl__opt_t calibrate_opts[] = {
    {"output", 'o', SL__OPT_STR, F(out), 0, 0, "FILE", "the profile to write",
     .need = 1},
    {"step-ms", 0, SL__OPT_DOUBLE, F(step_ms), 0, HUGE_VAL, "T",
     "the consumer step the run used", "inferred"},
    {"consumer-cpu", 0, SL__OPT_DOUBLE, F(o.consumer_cpu), 0, HUGE_VAL, "C",
     "0..1: the consumer's CPU demand", "0: it sleeps"},
    {"batch-bytes", 0, SL__OPT_DOUBLE, F(o.batch_bytes), 0, HUGE_VAL, "B",
     "bytes of one batch buffer", "batch x 224x224x3"},
    {"storage-bw", 0, SL__OPT_DOUBLE, F(o.storage_bw), 0, HUGE_VAL, "B",
     "storage bytes/s", "0: page cache"},
    {"storage-latency-ms", 0, SL__OPT_DOUBLE, F(o.storage_latency_ms), 0,
     HUGE_VAL, "L", "per-read latency", "0"},
    {"skip", 0, SL__OPT_DOUBLE, F(skip_s), 0, HUGE_VAL, "S",
     "warm-up seconds left out", "1"},
    {"json", 0, SL__OPT_FLAG, F(json), 0, 0, NULL,
     "print the fit as one JSON object"},
    {NULL},
};

static const sl__opts_t calibrate_usage = {
    "TELEMETRY.jsonl -o PROFILE.json [options]",
    NULL,
    {calibrate_opts},
    "one TELEMETRY.jsonl",
    1,
    1};

int sl__cmd_calibrate(int argc, char **argv)
{
    calibrate_args_t a = {.step_ms = -1, .skip_s = -1};
    sl_calibrate_options_init(&a.o);
    int rc = sl__opts_parse(&calibrate_usage, &a, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    /* To the library 0 means "the default" and < 0 "none" (0 ms). */
    sl_calibrate_options_t o = a.o;
    if (a.step_ms >= 0)
        o.step_ms = a.step_ms > 0 ? a.step_ms : -1;
    if (a.skip_s >= 0)
        o.skip_s = a.skip_s > 0 ? a.skip_s : -1;
    const char *out = a.out;
    int json = a.json;
    char err[1024];
    sl_calibrate_options_t resolved;
    if (sl__calibrate_options_resolve(&o, &resolved, err, sizeof err)) {
        fprintf(stderr, "sluice calibrate: %s\n", err);
        return 2;
    }
    sl__calibration_t *cal = calloc(1, sizeof *cal);
    rc = cal ? sl__calibrate_file(argv[optind], &o, cal, err, sizeof err)
             : SL_ENOMEM;
    if (!rc)
        rc = sl__sim_profile_save_note(out, &cal->profile, cal->note, err,
                                       sizeof err);
    if (rc) {
        fprintf(stderr, "sluice calibrate: %s\n", cal ? err : "out of memory");
        free(cal);
        return 1;
    }
    const sl__sim_profile_t *p = &cal->profile;
    char *text = json ? sl__calibration_fit_json(cal) : NULL;
    if (json)
        printf("%s\n", text ? text : "{}");
    else
        printf("%s: decode %.3f ms (cv %.2f), read %.3f ms (cv %.2f), "
               "%.0f B/item, step %.2f ms, batch %d, %d cores; core share "
               "%.2f, foreign load %.2f cores (%d periods used)\n",
               out, p->decode_ms, p->decode_cv, p->read_ms, p->read_cv,
               p->item_bytes, p->step_ms, p->batch_size, p->ncpu,
               cal->fit.core_share, cal->foreign_cores, cal->fit.used);
    free(text);
    free(cal);
    return 0;
}
