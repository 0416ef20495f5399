/* gpu/placement: where the decode stage runs (docs/DESIGN.md, "GPU
 * stage"), the one rule that turns sl_options_t.placement into what a
 * loader does, and the rule that routes a batch's slots by the share knob
 * (SL_PARAM_GPU_SHARE). Pure functions, so tests need no GPU. */
#ifndef SL_GPU_PLACEMENT_H
#define SL_GPU_PLACEMENT_H

#include <stddef.h>

#include "gpu/rt.h"
#include "sched/knobs.h"

/* The share knob's unit: per mille of a batch's samples. */
#define SL__GPU_SHARE_MAX SL_KNOB_SHARE_UNIT

typedef struct sl__placement {
    int asked;      /* sl_placement_t as given (SL_PLACEMENT_AUTO for 0) */
    int gpu;        /* 1: the GPU stage takes its share of samples */
    char why[1280]; /* gpu == 0: why not ("" for placement cpu) */
} sl__placement_t;

/* "auto", "cpu", "gpu"; NULL for anything else. */
const char *sl__placement_name(int placement);
/* SL_PLACEMENT_* of a name, or -1. */
int sl__placement_parse(const char *name);

/* The rule. `stage_built`: the GPU stage is compiled into this library;
 * `st`: the runtime's status (NULL: not probed, which auto does when the
 * stage is not built: asking the CUDA runtime for a device initialises
 * CUDA in the process, which a process that forks workers must not do for
 * nothing). placement cpu: CPU. auto: the GPU when stage and runtime are
 * available, else the CPU with the reason in p->why. gpu: the GPU, or
 * SL_EUNSUPPORTED with a message naming the reason. Returns 0, or
 * SL_EINVAL for an unknown placement. */
int sl__placement_decide(int asked, int stage_built, const sl__gpu_status_t *st,
                         sl__placement_t *p, char *err, size_t errlen);

/* sl__placement_decide with this build's stage and the process's runtime
 * (sl__gpu_rt_get, probed only when the answer depends on it). auto
 * without a share asked (`share_asked` 0) uses the GPU only where the
 * scheduler will place samples (`places`: a policy that tunes, which then
 * owns the share, sched/place.h) and a GPU is seen (`gpus`: the driver's
 * count, telemetry/machine.h sl__gpu_count, which starts no CUDA);
 * otherwise it is the CPU without a probe: starting CUDA for nothing
 * costs GPU memory and breaks a process that forks afterwards. */
int sl__placement_resolve(int asked, int share_asked, int places, int gpus,
                          sl__placement_t *p, char *err, size_t errlen);

/* 1 when slot `slot` of a batch of n goes to the GPU at share `share`
 * (per mille): the first round(n x share / 1000) slots, so a batch's GPU
 * samples are one contiguous group, and which slot goes where is a
 * function of (n, share) only: never of timing. */
int sl__gpu_route(int slot, int n, int share);
/* How many of a batch's n slots go to the GPU at `share`. */
int sl__gpu_route_count(int n, int share);
/* The least share that routes at least c of a batch's n slots (0 for
 * c <= 0, SL__GPU_SHARE_MAX for c > n). */
int sl__gpu_route_share(int n, int c);

#endif
