/* sim/run: one simulated run of the pipeline under a scheduling policy,
 * and its figures (what `sluice simulate` prints).
 *
 * The run decides as the live loader does: every SL_SCHED_PERIODS
 * telemetry periods of 0.1 s, one sl__sched_tick (sched/policy.h) over
 * the last window of snapshots, its changes applied to the model. So a
 * policy (static, heuristic, rl) behaves here as it does in a real run.
 * Depends on sim and sched. */
#ifndef SL_SIM_RUN_H
#define SL_SIM_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "sched/policy.h"
#include "sim/sim.h"

#define SL_SIM_PERIOD_S 0.1 /* the telemetry period */

typedef struct sl__sim_run_opts {
    double duration_s; /* simulated seconds */
    int64_t samples;   /* > 0: stop once this many samples are out */
    uint64_t seed;
    /* Each period's snapshot, decision fields filled as the loader's
     * (NULL: none). */
    void (*on_snapshot)(void *ctx, const sl_snapshot_t *s);
    void *ctx;
} sl__sim_run_opts_t;

/* The figures of `sluice run --json` under the same names. Samples and
 * time as `run` counts them: up to the last batch handed out (plus its
 * step, which run waits before it stops). */
typedef struct sl__sim_result {
    int64_t samples, batches, decisions;
    double seconds, samples_per_s, stall_fraction;
    double wait_ms_mean, wait_ms_p50, wait_ms_p99; /* per batch */
    double cpu_util, cpu_seconds, peak_rss_mb;
    sl__knobs_t knobs; /* at the end */
    int batch_size;
    const char *policy; /* the policy's name; "static" without one */
    /* Remote preparers (sim/remote.h): on, and their figures at the end
     * (zeros when off). */
    int remote;
    sl__sim_remote_stats_t rm;
    double batch_bytes; /* the profile's, for the store's bytes */
    double rm_seconds;  /* simulated time rm covers (to the last period) */
} sl__sim_result_t;

/* Runs profile p from knobs `start` within lim; pol decides (NULL: the
 * knobs stay). pol keeps its state: use a fresh one per run.
 * @return 0 or SL_ENOMEM. */
int sl__sim_run(const sl__sim_profile_t *p, const sl__limits_t *lim,
                const sl__knobs_t *start, sl__policy_t *pol,
                const sl__sim_run_opts_t *o, sl__sim_result_t *r);

/* The result as one JSON object ({"simulated": true, ...}), snprintf
 * style: the length it needs, written when it fits in cap. With remote
 * preparers it ends with "remote": {"window", "hand_outs", "budget_held",
 * "budget_held_share" (of the hand-outs), "in_flight_mean",
 * "store_batches_mean", "store_bytes_mean"} (means over the run). */
int sl__sim_result_json(const sl__sim_result_t *r, char *buf, size_t cap);

/* "t:kind=value,..." (kinds as sl__sim_event_kind) appended to p's events
 * and sorted by time. @return 0, or -1 on a malformed or out-of-range
 * event or more than SL_SIM_MAX_EVENTS (p's events then unspecified). */
int sl__sim_events_parse(const char *s, sl__sim_profile_t *p);

#endif
