/* The GPU stage's two kernels as the simulated runtime and driver run
 * them (sim_cudart.c's cudaLaunchKernel, sim_driver.c's cuLaunchKernel):
 * loops over gpu/resample.h's per-element functions, the code the CUDA
 * kernels run (src/gpu/kernels.cu). A kernel's handle is 1 or 2. */
#ifndef SIM_KERNELS_H
#define SIM_KERNELS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/resample.h"

typedef struct {
    unsigned x, y, z;
} sim_dim3;

/* The handle of a kernel by its name in the fatbin; NULL if none. */
static inline void *sim_kernel_by_name(const char *name)
{
    if (!strcmp(name, "sl_gpu_pass1"))
        return (void *)1;
    if (!strcmp(name, "sl_gpu_pass2"))
        return (void *)2;
    return NULL;
}

/* A launch that is to fail (tests: SIM_CUDA_LAUNCH_FAIL=N fails the Nth
 * launch counted in *n from the kernels' load, which resets it: 1 and 2
 * are the stage's warm-up at create, 3 and 4 its first group's). */
static inline int sim_launch_fails(int n)
{
    const char *f = getenv("SIM_CUDA_LAUNCH_FAIL");
    return f && atoi(f) == n;
}

/* Kernel fn over gy plans (args[0] points to their pointer); 1 when fn is
 * no kernel. */
static inline int sim_kernel_run(const void *fn, unsigned gy, void **args)
{
    const sl__gpu_plan_t *plans = *(const sl__gpu_plan_t **)args[0];
    if (fn != (void *)1 && fn != (void *)2)
        return 1;
    for (unsigned y = 0; y < gy; y++) {
        const sl__gpu_plan_t *p = &plans[y];
        if (fn == (void *)1)
            for (int e = 0, n = sl__gpu_pass1_count(p); e < n; e++)
                sl__gpu_pass1(p, e);
        else
            for (int e = 0, n = sl__gpu_pass2_count(p); e < n; e++)
                sl__gpu_pass2(p, e);
    }
    return 0;
}

#endif
