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

typedef struct args {
    const char *profile, *telemetry, *events, *policy_file;
    int read, decode, prefetch, max_threads, policy, json, ncpu;
    double duration, step_ms, consumer_cpu, interfere, storage_bw, latency;
    long long samples;
    unsigned long long seed;
} args_t;

static int parse_args(int argc, char **argv, args_t *a)
{
    enum {
        O_PROFILE = 256,
        O_THREADS,
        O_RTHREADS,
        O_PREFETCH,
        O_POLICY,
        O_MAXT,
        O_DURATION,
        O_SAMPLES,
        O_STEP,
        O_CCPU,
        O_INTERFERE,
        O_NCPU,
        O_EVENTS,
        O_SEED,
        O_BW,
        O_LAT,
        O_TELEMETRY,
        O_JSON,
        O_PFILE
    };
    static const struct option lo[] = {{"profile", 1, 0, O_PROFILE},
                                       {"threads", 1, 0, O_THREADS},
                                       {"decode-threads", 1, 0, O_THREADS},
                                       {"read-threads", 1, 0, O_RTHREADS},
                                       {"prefetch", 1, 0, O_PREFETCH},
                                       {"policy", 1, 0, O_POLICY},
                                       {"policy-file", 1, 0, O_PFILE},
                                       {"max-threads", 1, 0, O_MAXT},
                                       {"duration", 1, 0, O_DURATION},
                                       {"samples", 1, 0, O_SAMPLES},
                                       {"step-ms", 1, 0, O_STEP},
                                       {"consumer-cpu", 1, 0, O_CCPU},
                                       {"interfere", 1, 0, O_INTERFERE},
                                       {"ncpu", 1, 0, O_NCPU},
                                       {"events", 1, 0, O_EVENTS},
                                       {"seed", 1, 0, O_SEED},
                                       {"storage-bw", 1, 0, O_BW},
                                       {"storage-latency-ms", 1, 0, O_LAT},
                                       {"telemetry", 1, 0, O_TELEMETRY},
                                       {"json", 0, 0, O_JSON},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->policy = SL_POLICY_HEURISTIC;
    a->duration = 60;
    a->step_ms = a->consumer_cpu = a->interfere = -1;
    a->storage_bw = a->latency = -1;
    a->seed = 1;
    int c, li = -1, dur_given = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        char *end = NULL;
        const char *s = optarg;
        int bad = 0;
        long v;
        switch (c) {
        case 'h':
            usage(stdout);
            exit(0);
        case O_PROFILE:
            a->profile = s;
            break;
        case O_THREADS:
        case O_RTHREADS:
        case O_PREFETCH:
        case O_MAXT:
        case O_NCPU:
            v = strtol(s, &end, 10);
            bad = *end || v < 1 || v > 4096;
            if (c == O_THREADS)
                a->decode = (int)v;
            else if (c == O_RTHREADS)
                a->read = (int)v;
            else if (c == O_PREFETCH)
                a->prefetch = (int)v;
            else if (c == O_MAXT)
                a->max_threads = (int)v;
            else
                a->ncpu = (int)v, bad |= v > SL_SNAPSHOT_MAX_CORES;
            break;
        case O_POLICY:
            if (!strcmp(s, "heuristic"))
                a->policy = SL_POLICY_HEURISTIC;
            else if (!strcmp(s, "static"))
                a->policy = SL_POLICY_STATIC;
            else if (!strcmp(s, "rl"))
                a->policy = SL_POLICY_RL;
            else
                bad = 1;
            break;
        case O_DURATION:
            dur_given = 1;
            a->duration = strtod(s, &end);
            bad = *end || !(a->duration > 0 && a->duration <= 1e7);
            break;
        case O_SAMPLES:
            a->samples = strtoll(s, &end, 10);
            bad = *end || a->samples < 1;
            break;
        case O_STEP:
            a->step_ms = strtod(s, &end);
            bad = *end || !(a->step_ms >= 0);
            break;
        case O_CCPU:
            a->consumer_cpu = strtod(s, &end);
            bad = *end || !(a->consumer_cpu >= 0 && a->consumer_cpu <= 1);
            break;
        case O_INTERFERE:
            a->interfere = strtod(s, &end);
            bad = *end || !(a->interfere >= 0);
            break;
        case O_BW:
        case O_LAT: {
            double v = strtod(s, &end);
            bad = *end || !(v >= 0 && v <= 1e15);
            if (c == O_BW)
                a->storage_bw = v;
            else
                a->latency = v;
            break;
        }
        case O_EVENTS:
            a->events = s;
            break;
        case O_SEED:
            a->seed = strtoull(s, &end, 10);
            bad = *end != 0;
            break;
        case O_TELEMETRY:
            a->telemetry = s;
            break;
        case O_PFILE:
            a->policy_file = s;
            break;
        case O_JSON:
            a->json = 1;
            break;
        default:
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
    if (a->samples > 0 && !dur_given)
        a->duration = 1e6; /* until the samples are out */
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
    if (a->step_ms >= 0)
        p->step_ms = a->step_ms;
    if (a->consumer_cpu >= 0)
        p->consumer_cpu = a->consumer_cpu;
    if (a->interfere >= 0)
        p->interfere = a->interfere;
    if (a->ncpu > 0)
        p->ncpu = a->ncpu;
    if (a->storage_bw >= 0)
        p->storage_bw = a->storage_bw;
    if (a->latency >= 0)
        p->storage_latency_ms = a->latency;
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
    o.read_threads = a.read;
    o.decode_threads = a.decode;
    o.prefetch = a.prefetch;
    o.max_threads = a.max_threads;
    o.policy = a.policy;
    sl__limits_t lim;
    sl__knobs_t k;
    char err[512];
    if (sl__limits_make(&o, p.ncpu, (size_t)p.batch_bytes, &lim, &k, err,
                        sizeof err)) {
        fprintf(stderr, "sluice simulate: %s\n", err);
        return 2;
    }
    sl__policy_t *pol = NULL;
    if (a.policy != SL_POLICY_STATIC &&
        (lim.tune_read || lim.tune_decode || lim.tune_prefetch) &&
        sl__policy_create(a.policy, a.policy_file, 0, a.seed, &pol, err,
                          sizeof err)) {
        fprintf(stderr, "sluice simulate: %s\n", err);
        return 1;
    }
    sl__sim_run_opts_t ro = {a.duration, a.samples, a.seed, NULL, NULL};
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
