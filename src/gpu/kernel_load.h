/* gpu/kernel_load: the GPU stage's two kernels (gpu/kernels.cu, compiled
 * into the build's fatbin by cmake/GpuKernels.cmake), loaded on the
 * calling thread's device and launched through whichever API the runtime
 * has: the runtime's library API (CUDA 12.8 on), else the driver's module
 * API over the device's primary context (sl__gpu_rt_kernels). */
#ifndef SL_GPU_KERNEL_LOAD_H
#define SL_GPU_KERNEL_LOAD_H

#include <stddef.h>

#include "gpu/rt.h"

/* Kernel indices: the resize's first pass into the tmp rows, and its
 * second into the output (flip, convert, layout): gpu/resample.h. */
enum { SL__GPU_PASS1 = 0, SL__GPU_PASS2 = 1 };

typedef struct sl__gpu_kernels {
    const sl__gpu_rt_t *rt;
    int mode;  /* SL__GPU_KERNELS_LIBRARY or _MODULE */
    void *lib; /* the library or module (NULL: none loaded) */
    void *k[2];
} sl__gpu_kernels_t;

/* 1 when this build has the kernels (no nvcc: 0, and loading fails). */
int sl__gpu_kernels_built(void);

/* Loads both kernels on the calling thread's device, whose context must
 * be made (the caller has allocated on it). 0, or nonzero with the
 * failure in why. *k is zeroed first; sl__gpu_kernels_unload undoes it
 * either way. */
int sl__gpu_kernels_load(sl__gpu_kernels_t *k, const sl__gpu_rt_t *rt,
                         char *why, size_t wl);

/* Kernel `which` over grid x block with args, on stream st. 0, or nonzero
 * with the failure in why (the runtime's words, or the CUresult). */
int sl__gpu_kernels_launch(const sl__gpu_kernels_t *k, int which,
                           sl__dim3_t grid, sl__dim3_t block, void **args,
                           sl__cuda_stream_t st, char *why, size_t wl);

/* Unloads what was loaded; a zeroed or unloaded *k is a no-op. */
void sl__gpu_kernels_unload(sl__gpu_kernels_t *k);

#endif
