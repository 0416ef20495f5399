/* The CUDA driver's module API simulated on the CPU (libcuda.so.1 in the
 * test tree's simulated folders; sim_cudart.c loads it as the real runtime
 * loads the driver): the GPU stage loads its kernels this way where the
 * runtime lacks the library API (CUDA 12.0-12.7: the sim12/ folder's
 * runtime). Counts its launches (sim_driver_launches, for tests: dlsym),
 * and which of the last loaded module's kernels are loaded
 * (sim_driver_kernels_loaded: bit k-1 for kernel k): with lazy loading
 * cuModuleGetFunction loads a kernel, as CUDA's guide says. Work queued on
 * a stream is counted there (the runtime's sim_cuda_stream_op). */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_kernels.h"

static char module_token;
static atomic_int launches, loaded;
static atomic_int
    since_load; /* launches since the last load (sim_launch_fails) */

int sim_driver_launches(void)
{
    return atomic_load(&launches);
}
int sim_driver_kernels_loaded(void)
{
    return atomic_load(&loaded);
}

/* The simulated runtime's count of work on stream s (it loaded us). */
static void stream_op(void *s)
{
    void *h = dlopen("libcudart.so.12", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    void (*op)(void *) =
        h ? (void (*)(void *))dlsym(h, "sim_cuda_stream_op") : NULL;
    if (op)
        op(s);
    if (h)
        dlclose(h);
}

int cuModuleLoadData(void **mod, const void *image)
{
    *mod = image ? &module_token : NULL;
    atomic_store(&loaded, 0);
    atomic_store(&since_load, 0);
    return image ? 0 : 200; /* CUDA_ERROR_INVALID_IMAGE */
}
int cuModuleGetFunction(void **fn, void *mod, const char *name)
{
    if (mod != &module_token)
        return 400; /* CUDA_ERROR_INVALID_HANDLE */
    *fn = sim_kernel_by_name(name);
    if (*fn)
        atomic_fetch_or(&loaded, 1 << ((int)(uintptr_t)*fn - 1));
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
    (void)extra;
    atomic_fetch_add(&launches, 1);
    if (sim_launch_fails(atomic_fetch_add(&since_load, 1) + 1))
        return 719; /* CUDA_ERROR_LAUNCH_FAILED */
    if (sim_kernel_run(fn, gy, args))
        return 400;
    stream_op(stream);
    return 0;
}
