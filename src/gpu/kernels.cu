/* gpu/kernels: the GPU stage's two resample passes over a group of
 * samples (one per blockIdx.y), each thread one element of
 * gpu/resample.h's math, grid-striding over the sample's elements. Built
 * by nvcc into a fatbin that the library embeds (cmake/GpuKernels.cmake)
 * and loads at run time with cudaLibraryLoadData (gpu/kernel_load.c); no
 * CUDA is linked. */
#include "gpu/resample.h"

extern "C" __global__ void sl_gpu_pass1(const sl__gpu_plan_t *plans)
{
    const sl__gpu_plan_t p = plans[blockIdx.y];
    int n = sl__gpu_pass1_count(&p);
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += gridDim.x * blockDim.x)
        sl__gpu_pass1(&p, e);
}

extern "C" __global__ void sl_gpu_pass2(const sl__gpu_plan_t *plans)
{
    const sl__gpu_plan_t p = plans[blockIdx.y];
    int n = sl__gpu_pass2_count(&p);
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += gridDim.x * blockDim.x)
        sl__gpu_pass2(&p, e);
}
