/* sluice simulate: runs the pipeline model (src/sim) on a profile under a
 * policy (sim/run.h: the loader's budget rule and scheduler tick) and
 * prints the figures `sluice run --json` prints, under the same keys.
 * --telemetry writes the simulated snapshots as the real JSON Lines, for
 * `sluice plot` and `sluice analyze`. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sched/limits.h"
#include "sim/run.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: sluice simulate --profile FILE [options]\n"
        "  --profile FILE       a profile (sluice calibrate, "
        "docs/SIMULATOR.md)\n"
        "  --threads N          decode threads (alias --decode-threads)\n"
        "  --read-threads N     read threads\n"
        "  --prefetch N         batch buffers\n"
        "  --policy static|heuristic|rl  who sets the knobs not given "
        "(heuristic)\n"
        "  --policy-file FILE   rl weights (the built-in default)\n"
        "  --max-threads N      budget: decode threads + 1 (2 x cores)\n"
        "  --duration S         simulated seconds (60)\n"
        "  --samples N          stop once N samples are handed out\n"
        "  --step-ms T          consumer step per batch (profile's)\n"
        "  --consumer-cpu C     0..1: the consumer's CPU demand while it "
        "steps\n"
        "  --interfere X        cores of foreign busy threads at t = 0\n"
        "  --storage-bw B       storage bytes/s, 0: unlimited (profile's)\n"
        "  --storage-latency-ms L  per-read storage latency (profile's)\n"
        "  --ncpu N             cores (profile's)\n"
        "  --events LIST        t:kind=value,... kinds: interfere, "
        "storage_bw,\n"
        "                       step_ms, consumer_cpu (e.g. 20:interfere=1)\n"
        "  --seed S             random seed (1)\n"
        "  --telemetry FILE     write simulated snapshots as JSON Lines\n"
        "  --json               a JSON object of the figures as last line\n");
}

/* Numeric options, checked against [lo, hi] (integers where int). */
enum {
    N_DECODE,
    N_READ,
    N_PREFETCH,
    N_MAXT,
    N_NCPU,
    N_DURATION,
    N_SAMPLES,
    N_STEP,
    N_CCPU,
    N_INTERFERE,
    N_BW,
    N_LAT,
    N_SEED,
    N_COUNT
};
static const struct {
    int is_int;
    double lo, hi;
} num_range[N_COUNT] = {{1, 1, 4096},
                        {1, 1, 4096},
                        {1, 1, 4096},
                        {1, 1, 4096},
                        {1, 1, SL_SNAPSHOT_MAX_CORES},
                        {0, 1e-300, 1e7},
                        {1, 1, 9e18},
                        {0, 0, HUGE_VAL},
                        {0, 0, 1},
                        {0, 0, HUGE_VAL},
                        {0, 0, 1e15},
                        {0, 0, 1e15},
                        {1, 0, 1.8446744073709552e19}};

typedef struct args {
    const char *profile, *telemetry, *events, *policy_file;
    int policy, json;
    double num[N_COUNT]; /* -1: not given */
    int64_t samples;
    uint64_t seed;
} args_t;

/* One numeric value; 0 when it is a number within its range. */
static int parse_num(args_t *a, int i, const char *s)
{
    char *end;
    if (i == N_SEED) { /* all 64 bits */
        a->seed = strtoull(s, &end, 10);
        return *end != 0 || !*s;
    }
    double v =
        num_range[i].is_int ? (double)strtoll(s, &end, 10) : strtod(s, &end);
    if (*end || !*s || !(v >= num_range[i].lo && v <= num_range[i].hi))
        return 1;
    a->num[i] = v;
    if (i == N_SAMPLES)
        a->samples = strtoll(s, NULL, 10);
    return 0;
}

static int parse_args(int argc, char **argv, args_t *a)
{
    enum { O_PROFILE = 256, O_POLICY, O_PFILE, O_EVENTS, O_TELEMETRY, O_JSON };
    static const struct option lo[] = {{"profile", 1, 0, O_PROFILE},
                                       {"threads", 1, 0, N_DECODE},
                                       {"decode-threads", 1, 0, N_DECODE},
                                       {"read-threads", 1, 0, N_READ},
                                       {"prefetch", 1, 0, N_PREFETCH},
                                       {"policy", 1, 0, O_POLICY},
                                       {"policy-file", 1, 0, O_PFILE},
                                       {"max-threads", 1, 0, N_MAXT},
                                       {"duration", 1, 0, N_DURATION},
                                       {"samples", 1, 0, N_SAMPLES},
                                       {"step-ms", 1, 0, N_STEP},
                                       {"consumer-cpu", 1, 0, N_CCPU},
                                       {"interfere", 1, 0, N_INTERFERE},
                                       {"ncpu", 1, 0, N_NCPU},
                                       {"events", 1, 0, O_EVENTS},
                                       {"seed", 1, 0, N_SEED},
                                       {"storage-bw", 1, 0, N_BW},
                                       {"storage-latency-ms", 1, 0, N_LAT},
                                       {"telemetry", 1, 0, O_TELEMETRY},
                                       {"json", 0, 0, O_JSON},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    for (int i = 0; i < N_COUNT; i++)
        a->num[i] = -1;
    a->policy = SL_POLICY_HEURISTIC;
    a->seed = 1;
    int c, li = -1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        const char *s = optarg;
        int bad = 0;
        if (c >= 0 && c < N_COUNT)
            bad = parse_num(a, c, s);
        else if (c == O_POLICY)
            bad = !strcmp(s, "heuristic") ? (a->policy = SL_POLICY_HEURISTIC, 0)
                  : !strcmp(s, "static")  ? (a->policy = SL_POLICY_STATIC, 0)
                  : !strcmp(s, "rl")      ? (a->policy = SL_POLICY_RL, 0)
                                          : 1;
        else if (c == O_PROFILE || c == O_PFILE || c == O_EVENTS ||
                 c == O_TELEMETRY)
            *(c == O_PROFILE  ? &a->profile
              : c == O_PFILE  ? &a->policy_file
              : c == O_EVENTS ? &a->events
                              : &a->telemetry) = s;
        else if (c == O_JSON)
            a->json = 1;
        else if (c == 'h') {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "sluice simulate: bad value '%s' for --%s\n", s,
                    li >= 0 ? lo[li].name : "?");
            return 2;
        }
    }
    if (!a->profile || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (a->num[N_DURATION] < 0) /* 60 s, or until the samples are out */
        a->num[N_DURATION] = a->samples > 0 ? 1e6 : 60;
    return 0;
}

static void write_line(void *ctx, const sl_snapshot_t *sn)
{
    char line[16384];
    int len = sl_snapshot_json(sn, line, sizeof line);
    if (len > 0 && len < (int)sizeof line)
        fprintf(ctx, "%s\n", line);
}

/* The profile with the command line's overrides. */
static int load_profile(const args_t *a, sl__sim_profile_t *p)
{
    char err[512];
    if (sl__sim_profile_load(a->profile, p, err, sizeof err)) {
        fprintf(stderr, "sluice simulate: %s\n", err);
        return 1;
    }
    const double *v = a->num;
    p->step_ms = v[N_STEP] >= 0 ? v[N_STEP] : p->step_ms;
    p->consumer_cpu = v[N_CCPU] >= 0 ? v[N_CCPU] : p->consumer_cpu;
    p->interfere = v[N_INTERFERE] >= 0 ? v[N_INTERFERE] : p->interfere;
    p->ncpu = v[N_NCPU] > 0 ? (int)v[N_NCPU] : p->ncpu;
    p->storage_bw = v[N_BW] >= 0 ? v[N_BW] : p->storage_bw;
    p->storage_latency_ms = v[N_LAT] >= 0 ? v[N_LAT] : p->storage_latency_ms;
    if (a->events && sl__sim_events_parse(a->events, p)) {
        fprintf(stderr,
                "sluice simulate: bad --events '%s' (t:kind=value,... at "
                "most %d; kinds interfere, storage_bw, step_ms, "
                "consumer_cpu)\n",
                a->events, SL_SIM_MAX_EVENTS);
        return 2;
    }
    return 0;
}

int sl__cmd_simulate(int argc, char **argv)
{
    args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    sl__sim_profile_t p;
    if ((rc = load_profile(&a, &p)))
        return rc;
    /* The knobs and budgets as the loader makes them from these options. */
    sl_options_t o;
    memset(&o, 0, sizeof o);
    o.read_threads = (int)a.num[N_READ];
    o.decode_threads = (int)a.num[N_DECODE];
    o.prefetch = (int)a.num[N_PREFETCH];
    o.max_threads = (int)a.num[N_MAXT];
    o.policy = a.policy;
    sl__limits_t lim;
    sl__knobs_t k;
    char err[512];
    if (sl__limits_make(&o, p.ncpu, (size_t)p.batch_bytes, &lim, &k, err,
                        sizeof err)) {
        fprintf(stderr, "sluice simulate: %s\n", err);
        return 2;
    }
    o.policy_file = a.policy_file;
    o.seed = a.seed;
    sl__policy_t *pol;
    if (sl__policy_for(&o, &lim, &pol, err, sizeof err)) {
        fprintf(stderr, "sluice simulate: %s\n", err);
        return 1;
    }
    sl__sim_run_opts_t ro = {a.num[N_DURATION], a.samples, a.seed, NULL, NULL};
    FILE *tf = NULL;
    if (a.telemetry && !(tf = fopen(a.telemetry, "w"))) {
        fprintf(stderr, "sluice simulate: cannot write %s\n", a.telemetry);
        sl__policy_destroy(pol);
        return 1;
    }
    if (tf) {
        ro.on_snapshot = write_line;
        ro.ctx = tf;
    }
    sl__sim_result_t r;
    rc = sl__sim_run(&p, &lim, &k, pol, &ro, &r);
    sl__policy_destroy(pol);
    if (tf)
        fclose(tf);
    if (rc) {
        fprintf(stderr, "sluice simulate: %s\n", sl_strerror(rc));
        return 1;
    }
    char json[1024];
    if (a.json) {
        sl__sim_result_json(&r, json, sizeof json);
        printf("%s\n", json);
    } else
        printf("simulated: %lld samples in %lld batches, %.2f s: %.0f img/s"
               "  stall %.1f%%  wait mean %.2f ms p50 %.2f ms p99 %.2f ms"
               "  cpu %.0f%%  knobs %d/%d/%d  decisions %lld\n",
               (long long)r.samples, (long long)r.batches, r.seconds,
               r.samples_per_s, 100 * r.stall_fraction, r.wait_ms_mean,
               r.wait_ms_p50, r.wait_ms_p99, 100 * r.cpu_util,
               r.knobs.read_threads, r.knobs.decode_threads, r.knobs.prefetch,
               (long long)r.decisions);
    return 0;
}
