/* telemetry/gpu_nvml: a GPU through NVML, loaded at run time so that the
 * library builds and runs on machines without the NVIDIA driver. Only the
 * few NVML types used are declared here (from nvml.h's stable v2 ABI). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "telemetry/machine.h"

typedef int nvmlReturn_t; /* NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlUtilization_st {
    unsigned int gpu, memory; /* percent over the last sample period */
} nvmlUtilization_t;
typedef struct nvmlMemory_st {
    unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;

enum { NVML_SUCCESS = 0 };
enum { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };

/* Written once under pthread_once, read-only afterwards. NVML itself is
 * thread-safe, so callers need no lock of ours. */
static struct {
    int ok;
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);        /* mW */
    nvmlReturn_t (*pcie)(nvmlDevice_t, int, unsigned int *);    /* KB/s */
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *); /* mJ */
    nvmlReturn_t (*jpg)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*by_bus)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*index)(nvmlDevice_t, unsigned int *);
} nv;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

/* SL_CUDA_LIB_PATH's directories first (a driver kept beside the CUDA
 * libraries, or the tests' simulated one), then the system's search. */
static void *nv_open(void)
{
    const char *dirs = getenv("SL_CUDA_LIB_PATH");
    while (dirs && *dirs) {
        size_t n = strcspn(dirs, ":");
        /* on the heap: the first call is at start-up, on a main thread
         * whose stack may be 32 KB in all (ulimit -s 32) */
        char *dir = n > 0 ? strndup(dirs, n) : NULL;
        char *path = dir ? sl__path_join(dir, "libnvidia-ml.so.1") : NULL;
        void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
        free(path);
        free(dir);
        if (lib)
            return lib;
        dirs += n + (dirs[n] == ':');
    }
    return dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
}

static void nv_load(void)
{
    void *lib = nv_open();
    if (!lib)
        return;
    nvmlReturn_t (*init)(void) =
        (nvmlReturn_t(*)(void))dlsym(lib, "nvmlInit_v2");
    nv.count =
        (nvmlReturn_t(*)(unsigned int *))dlsym(lib, "nvmlDeviceGetCount_v2");
    nv.handle = (nvmlReturn_t(*)(unsigned int, nvmlDevice_t *))dlsym(
        lib, "nvmlDeviceGetHandleByIndex_v2");
    /* The rest are optional: a missing one leaves its field absent. */
    nv.util = (nvmlReturn_t(*)(nvmlDevice_t, nvmlUtilization_t *))dlsym(
        lib, "nvmlDeviceGetUtilizationRates");
    nv.mem = (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))dlsym(
        lib, "nvmlDeviceGetMemoryInfo");
    nv.power = (nvmlReturn_t(*)(nvmlDevice_t, unsigned int *))dlsym(
        lib, "nvmlDeviceGetPowerUsage");
    nv.pcie = (nvmlReturn_t(*)(nvmlDevice_t, int, unsigned int *))dlsym(
        lib, "nvmlDeviceGetPcieThroughput");
    nv.energy = (nvmlReturn_t(*)(nvmlDevice_t, unsigned long long *))dlsym(
        lib, "nvmlDeviceGetTotalEnergyConsumption");
    nv.jpg =
        (nvmlReturn_t(*)(nvmlDevice_t, unsigned int *, unsigned int *))dlsym(
            lib, "nvmlDeviceGetJpgUtilization");
    nv.by_bus = (nvmlReturn_t(*)(const char *, nvmlDevice_t *))dlsym(
        lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nv.index = (nvmlReturn_t(*)(nvmlDevice_t, unsigned int *))dlsym(
        lib, "nvmlDeviceGetIndex");
    if (!init || !nv.count || !nv.handle || init() != NVML_SUCCESS) {
        memset(&nv, 0, sizeof nv);
        dlclose(lib);
        return;
    }
    /* Kept loaded and initialised for the life of the process: a shutdown
     * would race with other threads' reads. */
    nv.ok = 1;
}

void sl__gpu_read(sl__gpu_t *g, const char *pci_bus_id)
{
    if (!g)
        return;
    memset(g, 0, sizeof *g);
    g->util = g->jpg_util = g->power_w = -1;
    g->pcie_rx_bytes_per_s = g->pcie_tx_bytes_per_s = -1;
    g->energy_j = -1;
    pthread_once(&nv_once, nv_load);
    if (!nv.ok)
        return;
    unsigned int count = 0, index = 0;
    nvmlDevice_t d;
    if (nv.count(&count) != NVML_SUCCESS || count == 0)
        return;
    int asked = pci_bus_id && *pci_bus_id;
    char id[32]; /* CUDA's "0000:3b:00.0" in NVML's own form */
    unsigned dom, bus, dev, fn;
    if (asked && sscanf(pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4)
        snprintf(id, sizeof id, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
    else
        snprintf(id, sizeof id, "%s", asked ? pci_bus_id : "");
    int by_bus = asked && nv.by_bus && nv.by_bus(id, &d) == NVML_SUCCESS;
    /* A GPU NVML cannot find is not guessed among several: nothing read. */
    if (!by_bus && ((asked && count > 1) || nv.handle(0, &d) != NVML_SUCCESS))
        return;
    g->valid = 1;
    g->count = count > INT_MAX ? INT_MAX : (int)count;
    g->index =
        !by_bus ? 0
        : nv.index && nv.index(d, &index) == NVML_SUCCESS && index <= INT_MAX
            ? (int)index
            : -1;

    nvmlUtilization_t u;
    if (nv.util && nv.util(d, &u) == NVML_SUCCESS && u.gpu <= 100)
        g->util = u.gpu / 100.0;
    nvmlMemory_t m;
    if (nv.mem && nv.mem(d, &m) == NVML_SUCCESS) {
        g->mem_used = m.used;
        g->mem_total = m.total;
    }
    unsigned int jpg, period_us;
    if (nv.jpg && nv.jpg(d, &jpg, &period_us) == NVML_SUCCESS && jpg <= 100)
        g->jpg_util = jpg / 100.0;
    unsigned int mw, kbs;
    if (nv.power && nv.power(d, &mw) == NVML_SUCCESS)
        g->power_w = mw / 1000.0;
    if (nv.pcie && nv.pcie(d, NVML_PCIE_UTIL_RX_BYTES, &kbs) == NVML_SUCCESS)
        g->pcie_rx_bytes_per_s = kbs * 1024.0;
    if (nv.pcie && nv.pcie(d, NVML_PCIE_UTIL_TX_BYTES, &kbs) == NVML_SUCCESS)
        g->pcie_tx_bytes_per_s = kbs * 1024.0;
    unsigned long long mj;
    if (nv.energy && nv.energy(d, &mj) == NVML_SUCCESS)
        g->energy_j = mj / 1000.0;
}

int sl__gpu_count(void)
{
    pthread_once(&nv_once, nv_load);
    unsigned int count = 0;
    if (!nv.ok || nv.count(&count) != NVML_SUCCESS)
        return 0;
    return count > INT_MAX ? INT_MAX : (int)count;
}
