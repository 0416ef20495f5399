/* sim/sim: a discrete-event model of the sluice pipeline, for training and
 * judging scheduling policies without running the real thing.
 *
 * It models what the scheduler can change and what it is up against:
 * reader and decoder threads with per-item service-time distributions, the
 * read-ahead queue and the batch buffers (prefetch), CPU cores shared by
 * processor sharing among every runnable thread (ours, the consumer's when
 * it computes, and interfering processes'), storage bandwidth and latency,
 * and a consumer that takes `step_ms` per batch. Events change the world
 * mid-run (interference, storage throttling, consumer speed). With remote
 * preparers (sim/remote.h) sluice.ray's trainer is fed by preparer
 * processes on its node or others through a link, in place of the local
 * pipeline.
 *
 * Each call to sl__sim_step advances simulated time by one telemetry period
 * and fills an sl_snapshot_t the way src/telemetry's collector would over
 * that interval, so a policy sees the same thing in simulation and in a
 * real run. Fields it fills: t, interval_s, ncpu, cpu_total, cpu_self,
 * cpu_other, cpu_core[], run_queue, psi_cpu_some (share of time some
 * runnable thread waited for a core, in %), mem_total_bytes,
 * mem_available_bytes, rss_bytes, read_bytes_per_s, self_read_bytes_per_s,
 * disk_read_bytes_per_s, samples_per_s, stall_fraction, batch_latency_ms,
 * consumer_wait_ms, samples_total, batches_total, bytes_read_total,
 * read.*, decode.* (workers, busy, items_per_s, items_total, queue_depth,
 * queue_capacity), prefetch, batches_ready, batches_filling. Everything
 * else is left negative/zero as on a machine that cannot read it (gpu_*,
 * energy_j, net_*, psi_io/mem).
 *
 * Deterministic: the same profile, seed and knob calls give the same
 * snapshots. Depends on base (rng) and the knob types of sched/knobs.h. */
#ifndef SL_SIM_H
#define SL_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "sched/knobs.h"
#include "sim/remote.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"

/* What may change mid-run. */
enum {
    SL_SIM_EV_INTERFERE = 1, /* value: cores' worth of busy foreign threads */
    SL_SIM_EV_STORAGE_BW,    /* value: storage bytes/s (0: unlimited) */
    SL_SIM_EV_STEP_MS,       /* value: consumer step time per batch, ms */
    SL_SIM_EV_CONSUMER_CPU,  /* value: 0..1, the consumer's CPU demand */
    SL_SIM_EV_STORAGE_LATENCY_MS, /* value: per-read latency, ms */
    SL_SIM_EV_REMOTE_PREPARERS,   /* value: live remote preparers */
    SL_SIM_EV_LINK_BW,            /* value: link bytes/s (0: unlimited) */
    SL_SIM_EV_LINK_LATENCY_MS,    /* value: per-transfer latency, ms */
    SL_SIM_EV_LAST = SL_SIM_EV_LINK_LATENCY_MS
};

#define SL_SIM_MAX_EVENTS 16

typedef struct sl__sim_event {
    double t; /* seconds from the start */
    int kind; /* SL_SIM_EV_* */
    double value;
} sl__sim_event_t;

/* A machine + dataset + consumer. `sluice calibrate` fits one to a real
 * run's telemetry; profiles are stored as JSON (keys = field names). */
typedef struct sl__sim_profile {
    int ncpu;                    /* cores */
    int batch_size;              /* samples per batch */
    double read_ms, read_cv;     /* CPU ms per item in the read stage, and the
                                    coefficient of variation of that time */
    double decode_ms, decode_cv; /* CPU ms per item in decode+transform on
                                    an uncontended core, and its CV */
    double item_bytes;           /* stored bytes per item (mean) */
    double storage_bw;           /* storage bytes/s; 0: unlimited (cache) */
    double storage_latency_ms;   /* per read, not CPU */
    double step_ms;              /* consumer time per batch */
    double consumer_cpu;         /* 0..1: share of a core the consumer computes
                                    during its step (0: sleeps, 1: a CPU trainer) */
    double batch_bytes;          /* output bytes of one batch buffer */
    double base_rss;  /* bytes the process holds besides the buffers */
    double mem_total; /* machine memory, bytes */
    int read_ahead;   /* encoded items read ahead (the decode queue); 0:
                         the engine's rule, sl__read_ahead_items */
    double interfere; /* cores' worth of foreign busy threads at t = 0 */
    /* The GPU stage (sim/gpu.h; 0 gpu_ms: none): a sample routed to it by
     * the share knob (gpu/placement.h's rule) leaves the decode queue for
     * the stage, a FIFO server taking gpu_ms of GPU time per sample, after
     * gpu_cpu_ms of its decoder's CPU (handing it over: the bitstream's
     * parse and copy; 0: none); while it works the consumer's step runs
     * 1 / (1 + gpu_slow) as fast (the stage's work slowing training on
     * the same GPU). */
    double gpu_ms, gpu_slow, gpu_cpu_ms;
    sl__sim_remote_t remote; /* remote preparers (sim/remote.h); off when
                                remote.preparers is 0 */
    int n_events;
    sl__sim_event_t events[SL_SIM_MAX_EVENTS]; /* sorted by t */
} sl__sim_profile_t;

typedef struct sl__sim sl__sim_t;

/* A profile with the defaults of this project's 2-core machine on the
 * ImageNet sample (so a caller can set only what it knows). */
void sl__sim_profile_default(sl__sim_profile_t *p);

/* JSON file <-> profile. Load: unknown keys are an error naming the key;
 * missing keys keep the defaults. Return 0 or SL_E* with err filled. */
int sl__sim_profile_load(const char *path, sl__sim_profile_t *p, char *err,
                         size_t len);
int sl__sim_profile_save(const char *path, const sl__sim_profile_t *p,
                         char *err, size_t len);
/* The same from bytes in memory (what load calls; the fuzz target's way
 * in): `json` need not be terminated. *p is changed only on success. */
int sl__sim_profile_parse(const char *json, size_t len, sl__sim_profile_t *p,
                          char *err, size_t errlen);
/* Every key of p within the range a profile file may give it (what the
 * command line's overrides are checked against): 0, or SL_ERANGE with
 * "KEY = V is out of [LO, HI]" in err. */
int sl__sim_profile_check(const sl__sim_profile_t *p, char *err, size_t len);
/* Save with a "note" key (provenance, ignored by load). */
int sl__sim_profile_save_note(const char *path, const sl__sim_profile_t *p,
                              const char *note, char *err, size_t len);

/* Domain randomisation for training: a profile drawn around `base` (NULL:
 * the default) with cores 2..64, stage costs, storage bandwidth, consumer
 * speed and CPU, and an interference / throttling / step-change schedule
 * over `duration_s`, all from `seed`. */
void sl__sim_profile_random(uint64_t seed, const sl__sim_profile_t *base,
                            double duration_s, sl__sim_profile_t *out);

/* NULL when out of memory. The knobs start at `k`. */
sl__sim_t *sl__sim_create(const sl__sim_profile_t *p, const sl__knobs_t *k,
                          uint64_t seed);
void sl__sim_destroy(sl__sim_t *s);

/* Changes the knobs as sl_loader_set would (threads start/park between
 * items, fewer batch buffers take effect as buffers come back). */
void sl__sim_set_knobs(sl__sim_t *s, const sl__knobs_t *k);

/* Calls fn(ctx, t, wait_s) each time the consumer takes a batch: the
 * simulated time and how long it waited for it (NULL: off). For per-batch
 * wait percentiles and exact run lengths (`sluice simulate`). */
void sl__sim_on_batch(sl__sim_t *s, void (*fn)(void *, double, double),
                      void *ctx);

/* Parses an event kind name ("interfere", "storage_bw", "step_ms",
 * "consumer_cpu", "storage_latency_ms", "remote_preparers", "link_bw",
 * "link_latency_ms"); 0 when unknown. */
int sl__sim_event_kind(const char *name);
const char *sl__sim_event_name(int kind);
/* 0 when t is in 0..1e9 and value within the range of the profile key
 * the kind sets (interfere 0..4096, ...); -1 otherwise. */
int sl__sim_event_check(const sl__sim_event_t *e);

/* Advances `dt` seconds (the telemetry period, 0.1) and fills *out for
 * that interval. */
void sl__sim_step(sl__sim_t *s, double dt, sl_snapshot_t *out);

#endif
