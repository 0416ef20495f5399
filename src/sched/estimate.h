/* sched/estimate: what a telemetry window says about the pipeline, in the
 * stall model's terms (analysis/stall_model: supply = min(prep, fetch),
 * stall = 1 - supply / demand), and the knobs that model asks for.
 *
 * From the window's busy times, items and bytes:
 *   read_s    seconds one read keeps one reader: busy reader-seconds per
 *             item. With R outstanding reads, fetch = R / read_s (each
 *             reader waits only for its own read; a bandwidth cap shows as
 *             read_s growing with R).
 *   decode_s  busy decoder-seconds per sample: prep = D / decode_s, at
 *             most cores_free / decode_s (decoders beyond the cores left by
 *             others only time-slice).
 *   demand    what the consumer takes while it is not waiting on us:
 *             samples / (wall - time blocked in next). A consumer that
 *             (nearly) always waits has no measurable demand: it takes
 *             whatever comes (a benchmark), and the target is the most the
 *             prep stage can make.
 * The target rate is min(demand, prep at the most decoders the CPU and the
 * budget allow); the knobs that reach it with headroom are
 *   need_read   = ceil(target x read_s x READ_HEADROOM)
 *   need_decode = ceil(min(demand, fetch) x (cpu_frac + (1 - cpu_frac) x
 *                      gpu_cpu_k) x decode_s x DECODE_HEADROOM),
 * within the limits (need_read against a floor on read_s under a link's
 * cap: sl__estimate_read_floor). Fields it cannot measure in this window are 0
 * (unknown); a policy then falls back to stepping. Pure functions. */
#ifndef SL_ESTIMATE_H
#define SL_ESTIMATE_H

#include "sched/knobs.h"
#include "sluice/telemetry.h"

#define SL_EST_READ_HEADROOM 1.25
#define SL_EST_DECODE_HEADROOM 1.15
/* Less than this share of the window spent working: the consumer takes
 * whatever comes, and its demand (or its step) cannot be measured. */
#define SL_EST_CONSUMER_WORKS 0.05
/* The most gpu_cpu_k is taken to be: a GPU path that costs about as much
 * CPU as the CPU path saves none (the placement rule then has no CPU to
 * win by placing). */
#define SL_EST_GPU_CPU_K_MAX 0.95

typedef struct sl__estimate {
    double read_s, decode_s; /* per item; 0 unknown */
    double bytes;            /* stored bytes per item; 0 unknown */
    double demand;           /* samples/s; 0 unknown; < 0: takes all */
    double fetch, prep;      /* samples/s at the current knobs; 0 unknown */
    double prep_max;         /* at the most decoders allowed */
    /* With a GPU share (the last snapshot's gpu_share, placement_gpu) the
     * CPU path makes cpu_frac = 1 - share of each batch: prep and prep_max
     * are the whole batch's rates, cpu_prep over the CPU part of a batch
     * sample (sl__estimate_cpu_part: cpu_frac + (1 - cpu_frac) k, the
     * hand-overs counted), at most what the GPU stage makes of its part
     * (gpu_rate / (1 - cpu_frac)), and need_decode asks decoders for that
     * CPU part only. */
    double cpu_frac;               /* 1 without a share */
    double cpu_prep, cpu_prep_max; /* the CPU path's samples/s */
    double gpu_rate;   /* the GPU stage's samples per second it had samples
                          in it (gpu_samples_per_s / gpu_stage_busy); 0
                          unknown */
    double gpu_cpu_k;  /* CPU a GPU sample costs (the snapshot's
                          gpu_cpu_busy over its samples) over a CPU decode's
                          (decode_s), 0..SL_EST_GPU_CPU_K_MAX; 0 unknown.
                          The stage's own threads' part (gpu_cpu_busy -
                          gpu_handoff_busy) only where more threads want
                          the cores than there are (run_queue > ncpu):
                          else spare cores run them, and the decoders pay
                          the hand-overs alone.
                          The CPU path then makes a batch sample for
                          cpu_frac + (1 - cpu_frac) x gpu_cpu_k decodes'
                          worth of CPU */
    double cores_free; /* cores not used by other processes */
    double run_queue;  /* threads wanting the cores (mean of run_queue) */
    int contended;     /* more of them than there are cores */
    double target;     /* samples/s the knobs should reach; 0 unknown */
    int need_read, need_decode; /* 0: unknown */
    const char *bound;          /* "consumer" | "prep" | "fetch" | "" */
} sl__estimate_t;

/* The consumer over win[0..n): seconds of the window, of them blocked in
 * next(), and samples it got. */
typedef struct sl__consumer {
    double t, waited, samples;
} sl__consumer_t;
sl__consumer_t sl__estimate_consumer(const sl_snapshot_t *win, int n);
/* 1 when it worked enough of the window (SL_EST_CONSUMER_WORKS) to have a
 * measurable demand, or time per sample ((t - waited) / samples). */
int sl__consumer_works(const sl__consumer_t *c);
/* The consumer's demand over win[0..n): samples / (wall - time blocked in
 * next()); -1 when it (nearly) always waits (takes whatever comes), 0 for
 * an empty window. */
double sl__estimate_demand(const sl_snapshot_t *win, int n);

/* CPU decodes' worth of CPU a batch sample costs the CPU path when it
 * decodes the part cpu_frac (0..1) of each batch and hands each of the
 * rest to the GPU stage at k of a decode's: cpu_frac + (1 - cpu_frac) k.
 * The estimate's and the placement rule's. */
double sl__estimate_cpu_part(double cpu_frac, double k);

/* The whole batch's samples/s when the CPU path decodes the part
 * cpu_frac (0..1) of each batch, could make cpu decodes/s and spends k of
 * a decode's CPU handing each of the rest to the GPU stage, and the stage
 * makes gpu samples/s of the rest (0: not measured, no cap):
 * min(cpu / (cpu_frac + (1 - cpu_frac) k), gpu / (1 - cpu_frac)). The
 * estimate's prep and the placement rule's model (sched/place.h). */
double sl__estimate_mix_rate(double cpu_frac, double cpu, double k, double gpu);

/* The estimate over win[0..n) (oldest first) for knobs cur under lim. */
void sl__estimate(const sl_snapshot_t *win, int n, const sl__limits_t *lim,
                  const sl__knobs_t *cur, sl__estimate_t *e);

/* A steady deficit: the supply (min(fetch, prep)) short of the demand
 * by 5 %, or a consumer that takes all it gets. Batch buffers absorb
 * bursts, not that. 0 where the supply is unknown. */
int sl__estimate_deficit(const sl__estimate_t *e);
/* The buffer drains: a deficit against a measured demand while fewer
 * than half of the prefetch batch buffers are ready (ready: the window's
 * mean of batches_ready). The consumer does not wait yet; it will once
 * they are gone, so a rule answers it as a wait (the heuristic's stages,
 * the placement rule's share). */
int sl__estimate_draining(const sl__estimate_t *e, double ready, int prefetch);

/* Little's law under a link's cap: at a bandwidth limit every read in
 * flight shares the link, so the time per read grows with the reads in
 * flight and target x read_s asks for ever more of them (a runaway).
 * Given floor_s, the shortest time per read seen since the world last
 * changed (fewest reads in flight), need_read is asked of that time when
 * today's is longer: the reads in flight that fill the link at the
 * target, no more. No-op when floor_s is 0 or need_read unknown. */
void sl__estimate_read_floor(sl__estimate_t *e, double floor_s,
                             const sl__limits_t *lim);

#endif
