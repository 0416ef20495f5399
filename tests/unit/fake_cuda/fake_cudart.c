/* A stand-in libcudart.so.12 for test_gpu_rt (no GPU, no CUDA needed):
 * every entry sluice's table resolves, answering as a machine with
 * FAKE_DEVICES devices would. Built in the test tree only. */
#include <stddef.h>

#ifndef FAKE_DEVICES
#define FAKE_DEVICES 0
#endif

/* FAKE_OLD_DRIVER: a runtime newer than the driver, which answers 35
 * (cudaErrorInsufficientDriver) however many GPUs there are. */
#ifdef FAKE_OLD_DRIVER
#define FAKE_NO_DEVICE 35
#else
#define FAKE_NO_DEVICE 100
#endif

int cudaGetDeviceCount(int *n)
{
    *n = FAKE_DEVICES;
    /* The real runtime answers 100 (cudaErrorNoDevice) with no device. */
    return FAKE_DEVICES ? 0 : FAKE_NO_DEVICE;
}
const char *cudaGetErrorString(int e)
{
    return e == 100  ? "no CUDA-capable device is detected"
           : e == 35 ? "CUDA driver version is insufficient for CUDA "
                       "runtime version"
                     : "fake error";
}
int cudaRuntimeGetVersion(int *v)
{
    *v = 12040;
    return 0;
}
int cudaSetDevice(int d)
{
    return d < FAKE_DEVICES ? 0 : 101;
}
int cudaGetDevice(int *d)
{
    *d = 0;
    return 0;
}
int cudaMemGetInfo(size_t *f, size_t *t)
{
    *f = *t = (size_t)1 << 30;
    return 0;
}
int cudaMalloc(void **p, size_t n)
{
    (void)n;
    *p = NULL;
    return 2;
}
int cudaFree(void *p)
{
    (void)p;
    return 0;
}
int cudaMemcpyAsync(void *d, const void *s, size_t n, int k, void *st)
{
    (void)d, (void)s, (void)n, (void)k, (void)st;
    return 0;
}
int cudaStreamCreateWithFlags(void **s, unsigned f)
{
    (void)f;
    *s = NULL;
    return 0;
}
int cudaStreamDestroy(void *s)
{
    (void)s;
    return 0;
}
int cudaEventCreateWithFlags(void **e, unsigned f)
{
    (void)f;
    *e = NULL;
    return 0;
}
int cudaEventRecord(void *e, void *s)
{
    (void)e, (void)s;
    return 0;
}
int cudaEventQuery(void *e)
{
    (void)e;
    return 0;
}
int cudaEventDestroy(void *e)
{
    (void)e;
    return 0;
}
int cudaLaunchHostFunc(void *s, void (*fn)(void *), void *arg)
{
    (void)s;
    fn(arg);
    return 0;
}
int cudaEventSynchronize(void *e)
{
    (void)e;
    return 0;
}
int cudaStreamWaitEvent(void *s, void *e, unsigned f)
{
    (void)s, (void)e, (void)f;
    return 0;
}
int cudaStreamSynchronize(void *s)
{
    (void)s;
    return 0;
}
int cudaMallocHost(void **p, size_t n)
{
    (void)n;
    *p = NULL;
    return 2;
}
int cudaFreeHost(void *p)
{
    (void)p;
    return 0;
}
int cudaLibraryLoadData(void **lib, const void *code, void *a, void **b,
                        unsigned c, void *d, void **e, unsigned f)
{
    (void)code, (void)a, (void)b, (void)c, (void)d, (void)e, (void)f;
    *lib = NULL;
    return 200; /* cudaErrorInvalidKernelImage */
}
int cudaLibraryGetKernel(void **k, void *lib, const char *name)
{
    (void)lib, (void)name;
    *k = NULL;
    return 98;
}
int cudaLibraryUnload(void *lib)
{
    (void)lib;
    return 0;
}
typedef struct {
    unsigned x, y, z;
} fake_dim3;
int cudaLaunchKernel(const void *fn, fake_dim3 g, fake_dim3 b, void **args,
                     size_t shmem, void *s)
{
    (void)fn, (void)g, (void)b, (void)args, (void)shmem, (void)s;
    return 98;
}
