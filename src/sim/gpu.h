/* sim/gpu: the GPU stage in the simulator (issue 19 item 3), so placement
 * (sched/place.h) can be run, tested and compared without a GPU.
 *
 * The model, from what the real stage does (docs/DESIGN.md "GPU stage"):
 * a decoder that pops a sample whose slot the share routes to the GPU
 * (gpu/placement.h: the first round(n x share / 1000) slots of a batch)
 * spends gpu_cpu_ms of its CPU handing it over (the real stage's parse
 * and copy of the bitstream; 0: at once) and goes on; the stage serves
 * samples in order, gpu_ms of GPU time each (its capacity 1000 / gpu_ms
 * samples/s); a finished sample fills its slot as a decode would. While the
 * stage works, the consumer's step advances 1 / (1 + gpu_slow) as fast:
 * the interference of decode kernels with training on the same GPU. The
 * snapshot reports what the real collector does: placement (gpu 1, the
 * share), gpu_samples_per_s, gpu_stage_busy and the hand-overs' CPU
 * (gpu_cpu_busy, gpu_cpu_total_s; not decodes). Depends on sim_internal
 * and gpu/placement. */
#ifndef SL_SIM_GPU_H
#define SL_SIM_GPU_H

#include <stdint.h>

#include "sched/knobs.h"
#include "sim/sim.h"

typedef struct sl__sim_gpu {
    int on;                /* the profile has a GPU stage (gpu_ms > 0) */
    int *q, head, len;     /* samples waiting for it: a ring of item ids */
    int cur;               /* the sample in service, -1: idle */
    double end;            /* when it finishes */
    double slow;           /* the step's pace while it works: 1/(1+gpu_slow) */
    double busy;           /* seconds it worked this period */
    int64_t items, total;  /* samples done this period / in all */
    double cpu, cpu_total; /* decoders' seconds handing samples over: this
                              period / in all (the snapshot's gpu_cpu_*) */
} sl__sim_gpu_t;

/* The share's budgets for profile p, as the loader's placement auto sets
 * them (exec/loader_sched.c): with a GPU stage the share is 0..1000 and
 * the scheduler's under a policy that tunes (not static); without one,
 * 0..0. */
void sl__sim_gpu_limits(const sl__sim_profile_t *p, int policy,
                        sl__limits_t *lim);

/* Gives random profile p a GPU stage, for training and judging a policy
 * that places (sim/train.h): its capacity 0.5-16x the CPU path's with all
 * cores (log-uniform), 3-12 % of a decode's CPU to hand a sample over,
 * gpu_slow 0 (40 %) or 0..1, and half the time a trainer that asks 1-4x
 * what the CPU path can make. Deterministic in seed. */
void sl__sim_gpu_random(uint64_t seed, sl__sim_profile_t *p);

/* At create (nitems: the ring's size). @return 0 or SL_ENOMEM. */
int sl__sim_gpu_init(sl__sim_t *s, int nitems);
void sl__sim_gpu_free(sl__sim_t *s);
/* Item id (its slot set) was popped by a decoder: 1 when the share routes
 * it to the stage; 0: the CPU decodes it. */
int sl__sim_gpu_routes(const sl__sim_t *s, int id);
/* The stage takes item id after its decoder spent cpu seconds handing it
 * over (gpu_cpu_ms as the engine ran it; 0: at once). */
void sl__sim_gpu_give(sl__sim_t *s, int id, double cpu);
/* The sample in service finished at s->now: its slot is filled. */
void sl__sim_gpu_done(sl__sim_t *s);
/* The consumer's pace now (1 when the stage is idle or absent). */
double sl__sim_gpu_pace(const sl__sim_t *s);

#endif
