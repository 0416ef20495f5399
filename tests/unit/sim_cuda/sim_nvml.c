/* A stand-in for the driver's NVML (libnvidia-ml.so.1) beside the
 * simulated CUDA runtime: devices with fixed utilisations, so tests see a
 * GPU where the loader asks the driver (placement auto) and read the
 * JPEG decoders' use as telemetry reports it. Only the entries
 * telemetry/gpu_nvml.c looks up; the others are optional there.
 *   SIM_CUDA_DEVICES=N  N devices (default 1), as the simulated runtime;
 *                       NVML numbers them the other way round (its index
 *                       i is CUDA's N-1-i: the same PCI bus id,
 *                       sim_cudart.c's cudaDeviceGetPCIBusId), as a driver
 *                       may, so a test sees which one telemetry reads;
 *   SIM_NVML_DEVICES=M  NVML sees M of them (default N): CUDA's device
 *                       M..N-1 it cannot find;
 *   SIM_NVML_GPU_UTIL=P the GPU's use (kernels running) P % (default 10)
 *                       on NVML's device 0, P + i on device i. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

#define SIM_DEVICE0 0x5150 /* device i's handle: SIM_DEVICE0 + i */

static unsigned count(void)
{
    const char *e = getenv("SIM_NVML_DEVICES");
    if (!e)
        e = getenv("SIM_CUDA_DEVICES");
    int n = e ? atoi(e) : 1;
    return n > 0 ? (unsigned)n : 1;
}

static unsigned index_of(nvmlDevice_t d)
{
    return (unsigned)((uintptr_t)d - SIM_DEVICE0);
}

nvmlReturn_t nvmlInit_v2(void)
{
    return 0;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = count();
    return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (i >= count())
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *d = (nvmlDevice_t)(uintptr_t)(SIM_DEVICE0 + i);
    return 0;
}

/* NVML's own form, "00000000:11:00.0" (8 hex digits of domain; what
 * telemetry/gpu_nvml.c hands it); CUDA's device c sits on bus 0x10 + c. */
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *id, nvmlDevice_t *d)
{
    unsigned dom, bus, dev, fn;
    int at = 0;
    if (sscanf(id, "%8x:%2x:%2x.%1x%n", &dom, &bus, &dev, &fn, &at) != 4 ||
        at != 16 || bus < 0x10 || bus - 0x10 >= count() || dom || dev || fn)
        return 6; /* NVML_ERROR_NOT_FOUND */
    return nvmlDeviceGetHandleByIndex_v2(count() - 1 - (bus - 0x10), d);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i)
{
    *i = index_of(d);
    return 0;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    const char *g = getenv("SIM_NVML_GPU_UTIL");
    u->gpu = (g ? (unsigned)atoi(g) : 10) + index_of(d);
    u->memory = 5;
    return 0;
}

nvmlReturn_t nvmlDeviceGetJpgUtilization(nvmlDevice_t d, unsigned int *u,
                                         unsigned int *period_us)
{
    (void)d;
    *u = 25;
    *period_us = 166666;
    return 0;
}
