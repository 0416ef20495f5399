/* The CUDA driver's module API simulated on the CPU (libcuda.so.1 in the
 * test tree's simulated folders; sim_cudart.c loads it as the real runtime
 * loads the driver): the GPU stage loads its kernels this way where the
 * runtime lacks the library API (CUDA 12.0-12.7: the sim12/ folder's
 * runtime). Counts its launches (sim_driver_launches, for tests: dlsym). */
#include <stdatomic.h>
#include <stddef.h>

#include "sim_kernels.h"

static char module_token;
static atomic_int launches;

int sim_driver_launches(void)
{
    return atomic_load(&launches);
}

int cuModuleLoadData(void **mod, const void *image)
{
    *mod = image ? &module_token : NULL;
    return image ? 0 : 200; /* CUDA_ERROR_INVALID_IMAGE */
}
int cuModuleGetFunction(void **fn, void *mod, const char *name)
{
    if (mod != &module_token)
        return 400; /* CUDA_ERROR_INVALID_HANDLE */
    *fn = sim_kernel_by_name(name);
    return *fn ? 0 : 500; /* CUDA_ERROR_NOT_FOUND */
}
int cuModuleUnload(void *mod)
{
    return mod == &module_token ? 0 : 400;
}
int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shmem, void *stream,
                   void **args, void **extra)
{
    (void)gx, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
    (void)stream, (void)extra;
    atomic_fetch_add(&launches, 1);
    return sim_kernel_run(fn, gy, args) ? 400 : 0;
}
