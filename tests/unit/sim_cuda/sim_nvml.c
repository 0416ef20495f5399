/* A stand-in for the driver's NVML (libnvidia-ml.so.1) beside the
 * simulated CUDA runtime: one device with fixed utilisations, so tests
 * see a GPU where the loader asks the driver (placement auto) and read
 * the JPEG decoders' use as telemetry reports it. Only the entries
 * telemetry/gpu_nvml.c looks up; the others are optional there. */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

#define SIM_DEVICE ((nvmlDevice_t)0x5151)

nvmlReturn_t nvmlInit_v2(void)
{
    return 0;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = 1;
    return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (i != 0)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *d = SIM_DEVICE;
    return 0;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    (void)d;
    u->gpu = 10;
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
