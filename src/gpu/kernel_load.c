/* gpu/kernel_load: the stage's kernels loaded and launched (see
 * kernel_load.h). */
#include "gpu/kernel_load.h"

#include <stdio.h>
#include <string.h>

#ifndef SL_HAVE_GPU_STAGE
#define SL_HAVE_GPU_STAGE 0
#endif
/* The kernels (cmake/GpuKernels.cmake). Without them the stage is still
 * compiled, so a build without nvcc checks it too, and its create says
 * why it cannot make one. */
#if SL_HAVE_GPU_STAGE
extern const unsigned char sl__gpu_fatbin_bytes[];
#else
static const unsigned char sl__gpu_fatbin_bytes[1];
#endif

static const char *const names[2] = {"sl_gpu_pass1", "sl_gpu_pass2"};

int sl__gpu_kernels_built(void)
{
    return SL_HAVE_GPU_STAGE;
}

static const char *rt_why(const sl__gpu_rt_t *rt, sl__cuda_err_t e)
{
    const char *m = rt->get_error_string(e);
    return m ? m : "unknown CUDA error";
}

int sl__gpu_kernels_load(sl__gpu_kernels_t *k, const sl__gpu_rt_t *rt,
                         char *why, size_t wl)
{
    memset(k, 0, sizeof *k);
    k->rt = rt;
    k->mode = sl__gpu_rt_kernels(rt);
    if (k->mode == SL__GPU_KERNELS_LIBRARY) {
        sl__cuda_err_t e = rt->library_load_data(&k->lib, sl__gpu_fatbin_bytes,
                                                 NULL, NULL, 0, NULL, NULL, 0);
        for (int i = 0; i < 2 && !e; i++)
            e = rt->library_get_kernel(&k->k[i], k->lib, names[i]);
        if (e)
            snprintf(why, wl, "%s", rt_why(rt, e));
        return e != 0;
    }
    int r = rt->cu_module_load_data(&k->lib, sl__gpu_fatbin_bytes);
    for (int i = 0; i < 2 && !r; i++)
        r = rt->cu_module_get_function(&k->k[i], k->lib, names[i]);
    if (r)
        snprintf(why, wl, "the driver's module API: CUresult %d", r);
    return r != 0;
}

int sl__gpu_kernels_launch(const sl__gpu_kernels_t *k, int which,
                           sl__dim3_t grid, sl__dim3_t block, void **args,
                           sl__cuda_stream_t st, char *why, size_t wl)
{
    const sl__gpu_rt_t *rt = k->rt;
    if (k->mode == SL__GPU_KERNELS_LIBRARY) {
        sl__cuda_err_t e =
            rt->launch_kernel(k->k[which], grid, block, args, 0, st);
        if (e)
            snprintf(why, wl, "%s", rt_why(rt, e));
        return e != 0;
    }
    int r = rt->cu_launch_kernel(k->k[which], grid.x, grid.y, grid.z, block.x,
                                 block.y, block.z, 0, st, args, NULL);
    if (r)
        snprintf(why, wl, "cuLaunchKernel: CUresult %d", r);
    return r != 0;
}

void sl__gpu_kernels_unload(sl__gpu_kernels_t *k)
{
    if (k->lib && k->mode == SL__GPU_KERNELS_LIBRARY)
        k->rt->library_unload(k->lib);
    else if (k->lib)
        k->rt->cu_module_unload(k->lib);
    k->lib = NULL;
}
