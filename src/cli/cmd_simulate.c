/* sluice simulate: runs the pipeline model (src/sim) on a profile under a
 * policy (sim/run.h: the loader's budget rule and scheduler tick) and
 * prints the figures `sluice run --json` prints, under the same keys.
 * --telemetry writes the simulated snapshots as the real JSON Lines, for
 * `sluice plot` and `sluice analyze`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "sched/limits.h"
#include "sim/gpu.h"
#include "sim/run.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"

typedef struct args {
    const char *profile, *telemetry, *events, *policy_file;
    int policy, json;
    int decode, read, prefetch, max_threads, ncpu; /* 0: not given */
    int gpu_share;                                 /* -1: not given */
    double duration, step_ms, consumer_cpu, interfere, storage_bw,
        storage_latency_ms; /* -1: not given */
    int64_t samples;        /* 0: no limit */
    uint64_t seed;
} args_t;

#define F(f) offsetof(args_t, f)
static const char *const policies[] = {"heuristic", "static", "rl", NULL};
static const int policy_v[] = {SL_POLICY_HEURISTIC, SL_POLICY_STATIC,
                               SL_POLICY_RL};
static const sl__opt_t simulate_opts[] = {
    {"profile", 0, SL__OPT_STR, F(profile), 0, 0, "FILE",
     "a profile (sluice calibrate, docs/SIMULATOR.md)", .need = 1},
    {"threads", 0, SL__OPT_INT, F(decode), 1, 4096, "N", "decode threads"},
    {"decode-threads", 0, SL__OPT_INT, F(decode), 1, 4096, "N",
     "the same as --threads"},
    {"read-threads", 0, SL__OPT_INT, F(read), 1, 4096, "N", "read threads"},
    {"prefetch", 0, SL__OPT_INT, F(prefetch), 1, 4096, "N", "batch buffers"},
    {"policy", 0, SL__OPT_CHOICE, F(policy), 0, 0, NULL,
     "who sets the knobs not given", "heuristic", policies, policy_v},
    {"policy-file", 0, SL__OPT_STR, F(policy_file), 0, 0, "FILE", "rl weights",
     "the built-in default"},
    {"gpu-share", 0, SL__OPT_INT, F(gpu_share), 0, 1000, "N",
     "per mille of each batch on the GPU stage (a profile with gpu_ms), "
     "fixed",
     "the scheduler's"},
    {"max-threads", 0, SL__OPT_INT, F(max_threads), 1, 4096, "N",
     "budget: decode threads + 1", "2 x cores"},
    {"duration", 0, SL__OPT_DOUBLE, F(duration), SL__OPT_POS, 1e7, "S",
     "simulated seconds", "60"},
    {"samples", 0, SL__OPT_I64, F(samples), 1, 9e18, "N",
     "stop once N samples are handed out"},
    {"step-ms", 0, SL__OPT_DOUBLE, F(step_ms), 0, HUGE_VAL, "T",
     "consumer step per batch", "profile's"},
    {"consumer-cpu", 0, SL__OPT_DOUBLE, F(consumer_cpu), 0, 1, "C",
     "0..1: the consumer's CPU demand while it steps"},
    {"interfere", 0, SL__OPT_DOUBLE, F(interfere), 0, HUGE_VAL, "X",
     "cores of foreign busy threads at t = 0"},
    {"storage-bw", 0, SL__OPT_DOUBLE, F(storage_bw), 0, 1e15, "B",
     "storage bytes/s, 0: unlimited", "profile's"},
    {"storage-latency-ms", 0, SL__OPT_DOUBLE, F(storage_latency_ms), 0, 1e15,
     "L", "per-read storage latency", "profile's"},
    {"ncpu", 0, SL__OPT_INT, F(ncpu), 1, SL_SNAPSHOT_MAX_CORES, "N", "cores",
     "profile's"},
    {"events", 0, SL__OPT_STR, F(events), 0, 0, "LIST",
     "t:kind=value,... kinds: interfere, storage_bw, step_ms, consumer_cpu, "
     "storage_latency_ms, remote_preparers, link_bw, link_latency_ms (e.g. "
     "20:interfere=1; remote preparers: docs/SIMULATOR.md)"},
    {"seed", 0, SL__OPT_U64, F(seed), 0, 0, "S", "random seed", "1"},
    {"telemetry", 0, SL__OPT_STR, F(telemetry), 0, 0, "FILE",
     "write simulated snapshots as JSON Lines"},
    {"json", 0, SL__OPT_FLAG, F(json), 0, 0, NULL,
     "a JSON object of the figures as last line"},
    {NULL},
};

static const sl__opts_t simulate_usage = {
    "--profile FILE [options]", NULL, {simulate_opts}};

static int parse_args(int argc, char **argv, args_t *a)
{
    *a = (args_t){.policy = SL_POLICY_HEURISTIC, .seed = 1, .gpu_share = -1};
    a->duration = a->step_ms = a->consumer_cpu = a->interfere = a->storage_bw =
        a->storage_latency_ms = -1;
    int rc = sl__opts_parse(&simulate_usage, a, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    if (a->duration < 0) /* 60 s, or until the samples are out */
        a->duration = a->samples > 0 ? 1e6 : 60;
    return -1;
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
    p->step_ms = a->step_ms >= 0 ? a->step_ms : p->step_ms;
    p->consumer_cpu = a->consumer_cpu >= 0 ? a->consumer_cpu : p->consumer_cpu;
    p->interfere = a->interfere >= 0 ? a->interfere : p->interfere;
    p->ncpu = a->ncpu > 0 ? a->ncpu : p->ncpu;
    p->storage_bw = a->storage_bw >= 0 ? a->storage_bw : p->storage_bw;
    p->storage_latency_ms = a->storage_latency_ms >= 0 ? a->storage_latency_ms
                                                       : p->storage_latency_ms;
    if (sl__sim_profile_check(p, err, sizeof err)) {
        fprintf(stderr,
                "sluice simulate: %s (the range of the profile key an "
                "option sets)\n",
                err);
        return 2;
    }
    if (a->events && sl__sim_events_parse(a->events, p)) {
        fprintf(stderr,
                "sluice simulate: bad --events '%s' (t:kind=value,... at "
                "most %d; kinds interfere, storage_bw, step_ms, "
                "consumer_cpu, storage_latency_ms, remote_preparers, "
                "link_bw, link_latency_ms)\n",
                a->events, SL_SIM_MAX_EVENTS);
        return 2;
    }
    return 0;
}

int sl__cmd_simulate(int argc, char **argv)
{
    args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
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
    sl__sim_gpu_limits(&p, o.policy, &lim);
    if (a.gpu_share >= 0) { /* given: fixed, as sl_options_t.gpu_share */
        if (a.gpu_share > lim.max_gpu_share) {
            fprintf(stderr,
                    "sluice simulate: --gpu-share %d: the profile "
                    "has no GPU stage (gpu_ms 0)\n",
                    a.gpu_share);
            return 2;
        }
        k.gpu_share = a.gpu_share;
        lim.tune_gpu_share = 0;
    }
    o.policy_file = a.policy_file;
    o.seed = a.seed;
    sl__policy_t *pol;
    if (sl__policy_for(&o, &lim, &pol, err, sizeof err)) {
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
    char json[2048];
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
    if (!a.json && r.remote)
        printf("remote: window %lld batches, budget held %lld of %lld "
               "hand-outs, in flight %.1f batches, store %.1f batches "
               "(means)\n",
               (long long)r.rm.window, (long long)r.rm.budget_held,
               (long long)r.rm.hand_outs,
               r.rm_seconds > 0 ? r.rm.in_flight_s / r.rm_seconds : 0,
               r.rm_seconds > 0 ? r.rm.store_s / r.rm_seconds : 0);
    return 0;
}
