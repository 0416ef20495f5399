/* gpu/rt: the CUDA runtime and nvJPEG through dlopen (see rt.h). */
#include "gpu/rt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

enum { LIB_CUDART, LIB_NVJPEG, LIB_DRIVER };

/* The table's entries by symbol name: the one list both libraries are
 * checked against. */
#define E(lib, sym, member)                                                    \
    {                                                                          \
        lib, sym, offsetof(sl__gpu_rt_t, member), 0                            \
    }
#define OPT(lib, sym, member)                                                  \
    {                                                                          \
        lib, sym, offsetof(sl__gpu_rt_t, member), 1                            \
    }
static const struct {
    int lib;
    const char *sym;
    size_t off;
    int optional; /* 1: NULL when missing */
} entries[] = {
    E(LIB_CUDART, "cudaGetDeviceCount", get_device_count),
    E(LIB_CUDART, "cudaGetErrorString", get_error_string),
    E(LIB_CUDART, "cudaRuntimeGetVersion", runtime_version),
    E(LIB_CUDART, "cudaSetDevice", set_device),
    E(LIB_CUDART, "cudaGetDevice", get_device),
    E(LIB_CUDART, "cudaMemGetInfo", mem_get_info),
    E(LIB_CUDART, "cudaMalloc", dev_malloc),
    E(LIB_CUDART, "cudaFree", dev_free),
    E(LIB_CUDART, "cudaMemcpyAsync", memcpy_async),
    E(LIB_CUDART, "cudaStreamCreateWithFlags", stream_create),
    E(LIB_CUDART, "cudaStreamDestroy", stream_destroy),
    E(LIB_CUDART, "cudaEventCreateWithFlags", event_create),
    E(LIB_CUDART, "cudaEventRecord", event_record),
    E(LIB_CUDART, "cudaEventQuery", event_query),
    E(LIB_CUDART, "cudaEventDestroy", event_destroy),
    E(LIB_CUDART, "cudaLaunchHostFunc", launch_host_func),
    E(LIB_CUDART, "cudaEventSynchronize", event_synchronize),
    E(LIB_CUDART, "cudaStreamWaitEvent", stream_wait_event),
    E(LIB_CUDART, "cudaStreamSynchronize", stream_synchronize),
    E(LIB_CUDART, "cudaMallocHost", host_malloc),
    E(LIB_CUDART, "cudaFreeHost", host_free),
    E(LIB_CUDART, "cudaLaunchKernel", launch_kernel),
    E(LIB_NVJPEG, "nvjpegCreateEx", nvjpeg_create_ex),
    E(LIB_NVJPEG, "nvjpegCreateExV2", nvjpeg_create_ex_v2),
    E(LIB_NVJPEG, "nvjpegDestroy", nvjpeg_destroy),
    E(LIB_NVJPEG, "nvjpegJpegStateCreate", nvjpeg_state_create),
    E(LIB_NVJPEG, "nvjpegJpegStateDestroy", nvjpeg_state_destroy),
    E(LIB_NVJPEG, "nvjpegGetImageInfo", nvjpeg_get_image_info),
    E(LIB_NVJPEG, "nvjpegDecodeBatchedInitialize", nvjpeg_batched_init),
    E(LIB_NVJPEG, "nvjpegDecodeBatched", nvjpeg_decode_batched),
    OPT(LIB_CUDART, "cudaDeviceGetPCIBusId", device_pci_bus_id),
    OPT(LIB_CUDART, "cudaGetLastError", get_last_error),
    OPT(LIB_NVJPEG, "nvjpegDecodeParamsCreate", nvjpeg_params_create),
    OPT(LIB_NVJPEG, "nvjpegDecodeParamsDestroy", nvjpeg_params_destroy),
    OPT(LIB_NVJPEG, "nvjpegDecodeParamsSetOutputFormat",
        nvjpeg_params_set_format),
    OPT(LIB_NVJPEG, "nvjpegDecodeParamsSetROI", nvjpeg_params_set_roi),
    OPT(LIB_NVJPEG, "nvjpegDecodeBatchedEx", nvjpeg_decode_batched_ex),
    OPT(LIB_NVJPEG, "nvjpegJpegStreamCreate", nvjpeg_stream_create),
    OPT(LIB_NVJPEG, "nvjpegJpegStreamDestroy", nvjpeg_stream_destroy),
    OPT(LIB_NVJPEG, "nvjpegJpegStreamParseHeader", nvjpeg_stream_parse_header),
    OPT(LIB_NVJPEG, "nvjpegDecodeBatchedSupportedEx",
        nvjpeg_batched_supported_ex),
    OPT(LIB_NVJPEG, "nvjpegDecodeBatchedPreAllocate", nvjpeg_batched_prealloc),
    OPT(LIB_CUDART, "cudaLibraryLoadData", library_load_data),
    OPT(LIB_CUDART, "cudaLibraryGetKernel", library_get_kernel),
    OPT(LIB_CUDART, "cudaLibraryUnload", library_unload),
    OPT(LIB_DRIVER, "cuModuleLoadData", cu_module_load_data),
    OPT(LIB_DRIVER, "cuModuleGetFunction", cu_module_get_function),
    OPT(LIB_DRIVER, "cuModuleUnload", cu_module_unload),
    OPT(LIB_DRIVER, "cuLaunchKernel", cu_launch_kernel),
    OPT(LIB_DRIVER, "cuCtxGetCurrent", ctx_get_current),
};
#undef E
#undef OPT

/* The wheels' folders under one Python prefix's site-packages: CUDA
 * 12's one per library, CUDA 13's shared one. */
static const char *const wheel_sub[] = {"nvidia/cuda_runtime/lib",
                                        "nvidia/nvjpeg/lib", "nvidia/cu13/lib"};
#define NSUB (sizeof wheel_sub / sizeof *wheel_sub)

void sl__gpu_rt_default_dirs(char *out, size_t cap)
{
    sl__sbuf_t b = {out, cap, 0, 0};
    out[0] = '\0';
    /* the running Python's folders first: they are where its import of
     * nvidia finds the wheels */
    const char *site = getenv("SL_PYTHON_SITE");
    for (const char *p = site; p && *p;) {
        const char *end = strchr(p, ':');
        int n = (int)(end ? end - p : (ptrdiff_t)strlen(p));
        for (size_t w = 0; w < NSUB && n > 0; w++)
            sl__sbuf_printf(&b, "%s%.*s/%s", b.len ? ":" : "", n, p,
                            wheel_sub[w]);
        p = end ? end + 1 : p + n;
    }
    const char *venv = getenv("VIRTUAL_ENV");
    const char *prefixes[] = {venv, "/usr/local", "/usr", "/opt/conda"};
    const char *pkgs[] = {"site-packages", "dist-packages"};
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        if (!prefixes[p] || !prefixes[p][0])
            continue;
        for (int minor = 8; minor <= 14; minor++)
            for (size_t k = 0; k < 2; k++)
                for (size_t w = 0; w < NSUB; w++)
                    sl__sbuf_printf(&b, "%s%s/lib/python3.%d/%s/%s",
                                    b.len ? ":" : "", prefixes[p], minor,
                                    pkgs[k], wheel_sub[w]);
    }
}

/* A path into a fixed field, cut if it must be (a message, not a key). */
static void copy_path(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* dlopen of `soname` in each directory of `dirs` (colon-separated); with
 * `system` first by the soname alone. Appends each place tried to `tried`
 * (the system's by its dlerror). Returns the handle or NULL. */
static void *open_lib(const char *soname, int system, const char *dirs,
                      char *path, size_t pathcap, sl__sbuf_t *tried)
{
    path[0] = '\0';
    if (system) {
        void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (h) {
            copy_path(path, pathcap, soname);
            return h;
        }
        const char *e = dlerror();
        sl__sbuf_printf(tried, "system paths (%s)", e ? e : "not found");
    }
    size_t shown = 0;
    for (const char *p = dirs; p && *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && n < 4096) {
            char full[4200];
            snprintf(full, sizeof full, "%.*s/%s", (int)n, p, soname);
            void *h = dlopen(full, RTLD_NOW | RTLD_LOCAL);
            if (h) {
                copy_path(path, pathcap, full);
                return h;
            }
            /* The default list is long: name the first few and count the
             * rest, so the message stays one readable line. */
            if (shown++ < 4)
                sl__sbuf_printf(tried, "%s%.*s", tried->len ? ", " : "", (int)n,
                                p);
        }
        p = end ? end + 1 : p + n;
    }
    if (shown > 4)
        sl__sbuf_printf(tried, " and %zu more folders", shown - 4);
    return NULL;
}

/* The table from the pair rt holds (sonames[i], paths[i]): every entry
 * resolved, a device counted, a way to load the kernels. 0, or why not
 * in why (the pair is the caller's to unload). */
static int use_pair(sl__gpu_rt_t *rt, sl__gpu_status_t *st, char sonames[2][32],
                    char *const paths[2], char *why, size_t wl)
{
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++) {
        void *h = entries[i].lib == LIB_CUDART   ? rt->cudart
                  : entries[i].lib == LIB_NVJPEG ? rt->nvjpeg
                                                 : NULL;
        if (!h) /* the driver's: once the runtime has loaded it (below) */
            continue;
        void *fn = dlsym(h, entries[i].sym);
        if (!fn && entries[i].optional)
            continue;
        if (!fn) {
            snprintf(why, wl, "%s (%s) lacks %s", sonames[entries[i].lib],
                     paths[entries[i].lib], entries[i].sym);
            return 1;
        }
        /* POSIX guarantees a data pointer from dlsym converts to a
         * function pointer; memcpy keeps ISO C's pedantry out of it. */
        memcpy((char *)rt + entries[i].off, &fn, sizeof fn);
    }

    int n = 0;
    sl__cuda_err_t e = rt->get_device_count(&n);
    if (e != 0 || n <= 0) {
        const char *es = e ? rt->get_error_string(e) : "0 devices";
        snprintf(why, wl, "no CUDA device (cudaGetDeviceCount: %s)",
                 es ? es : "?");
        return 1;
    }
    st->device_count = n;
    /* The driver the runtime loaded: its optional entries (a runtime that
     * has not loaded one, as the tests' simulated one may, has none). */
    rt->driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    for (size_t i = 0; i < sizeof entries / sizeof *entries && rt->driver;
         i++) {
        void *fn = entries[i].lib == LIB_DRIVER
                       ? dlsym(rt->driver, entries[i].sym)
                       : NULL;
        if (fn)
            memcpy((char *)rt + entries[i].off, &fn, sizeof fn);
    }
    if (!sl__gpu_rt_kernels(rt)) {
        snprintf(why, wl,
                 "%s (%s) lacks cudaLibraryLoadData (CUDA 12.8 on), and the "
                 "driver's module API (cuModuleLoadData, libcuda.so.1) is "
                 "not loaded",
                 sonames[LIB_CUDART], paths[LIB_CUDART]);
        return 1;
    }
    /* No nvJPEG handle here: one is made on the thread's current device,
     * which this process-wide probe does not know (GPU 0 unless the
     * trainer set one), and on a GPU it makes and keeps a context there
     * in every rank. The stage learns its backend on its own device. */
    return 0;
}

int sl__gpu_rt_load(const char *search, sl__gpu_rt_t *rt, sl__gpu_status_t *st)
{
    memset(rt, 0, sizeof *rt);
    memset(st, 0, sizeof *st);
    int system = 0;
    char defaults[16384];
    const char *label = "";
    if (!search && (search = getenv("SL_CUDA_LIB_PATH")) != NULL)
        label = " (SL_CUDA_LIB_PATH)";
    if (!search) {
        system = 1;
        sl__gpu_rt_default_dirs(defaults, sizeof defaults);
        search = defaults;
    }

    /* Each major's pair in turn, until one is used. The reasons of those
     * not found are kept until a pair opens; one that opens and cannot be
     * used (a runtime newer than the driver: cudaGetDeviceCount's
     * "insufficient driver") is unloaded and the next major tried, its
     * reason kept with theirs: "CUDA 13: ...; then CUDA 12: ...". */
    static const int majors[] = SL__CUDA_MAJORS;
    char *paths[2] = {st->cudart, st->nvjpeg};
    void **handles[2] = {&rt->cudart, &rt->nvjpeg};
    char sonames[2][32];
    sl__sbuf_t why = {st->reason, sizeof st->reason, 0, 0};
    /* From the first pair that opened and failed on: each reason, and
     * that pair's alone (the message when no other pair comes after) */
    char failed[sizeof st->reason] = "", first[sizeof st->reason] = "";
    sl__sbuf_t fw = {failed, sizeof failed, 0, 0};
    int nfailed = 0;
    for (size_t m = 0; m < sizeof majors / sizeof *majors; m++) {
        snprintf(sonames[0], sizeof sonames[0], "libcudart.so.%d", majors[m]);
        snprintf(sonames[1], sizeof sonames[1], "libnvjpeg.so.%d", majors[m]);
        int found = 1;
        for (int i = 0; i < 2 && found; i++) {
            char tried[768];
            sl__sbuf_t t = {tried, sizeof tried, 0, 0};
            tried[0] = '\0';
            *handles[i] = open_lib(sonames[i], system, search, paths[i],
                                   sizeof st->cudart, &t);
            if (!*handles[i]) {
                if (nfailed) {
                    sl__sbuf_printf(&fw, "; then CUDA %d: ", majors[m]);
                    nfailed++;
                }
                sl__sbuf_t *to = nfailed ? &fw : &why;
                sl__sbuf_printf(to, "%sno %s found in %s%s",
                                !nfailed && why.len ? "; " : "", sonames[i],
                                tried[0] ? tried : "(no folders)", label);
                sl__gpu_rt_unload(rt);
                paths[0][0] = paths[1][0] = '\0';
                found = 0;
            }
        }
        if (!found)
            continue;
        char r[sizeof st->reason];
        if (!use_pair(rt, st, sonames, paths, r, sizeof r)) {
            st->reason[0] = '\0';
            st->available = 1;
            return 1;
        }
        if (!nfailed)
            snprintf(first, sizeof first, "%s", r);
        sl__sbuf_printf(&fw, "%sCUDA %d: %s", nfailed ? "; then " : "",
                        majors[m], r);
        nfailed++;
        st->device_count = 0;
        sl__gpu_rt_unload(rt);
        paths[0][0] = paths[1][0] = '\0';
    }
    if (nfailed == 1) { /* one pair opened, nothing tried after it */
        snprintf(st->reason, sizeof st->reason, "%s", first);
    } else if (nfailed) {
        snprintf(st->reason, sizeof st->reason, "%s", failed);
    } else if (access("/dev/nvidiactl", F_OK) != 0 &&
               access("/dev/dxg", F_OK) != 0) { /* (WSL2's GPU node) */
        /* Where no NVIDIA driver runs, that is the reason to lead with
         * (the folders stay after it, for a driver hidden from view). */
        char libs[sizeof st->reason];
        snprintf(libs, sizeof libs, "%s", st->reason);
        snprintf(st->reason, sizeof st->reason,
                 "no NVIDIA GPU driver on this machine (/dev/nvidiactl "
                 "is absent); and %.900s",
                 libs);
    }
    st->available = 0;
    return 0;
}

int sl__gpu_rt_kernels(const sl__gpu_rt_t *rt)
{
    if (rt->library_load_data && rt->library_get_kernel && rt->library_unload)
        return SL__GPU_KERNELS_LIBRARY;
    if (rt->cu_module_load_data && rt->cu_module_get_function &&
        rt->cu_module_unload && rt->cu_launch_kernel)
        return SL__GPU_KERNELS_MODULE;
    return 0;
}

int sl__gpu_rt_roi(const sl__gpu_rt_t *rt)
{
    return rt && rt->nvjpeg_params_create && rt->nvjpeg_params_destroy &&
           rt->nvjpeg_params_set_format && rt->nvjpeg_params_set_roi &&
           rt->nvjpeg_decode_batched_ex;
}

int sl__gpu_rt_hw_check(const sl__gpu_rt_t *rt)
{
    return rt && rt->nvjpeg_stream_create && rt->nvjpeg_stream_destroy &&
           rt->nvjpeg_stream_parse_header && rt->nvjpeg_batched_supported_ex &&
           rt->nvjpeg_params_create && rt->nvjpeg_params_destroy &&
           rt->nvjpeg_params_set_format;
}

void sl__gpu_rt_unload(sl__gpu_rt_t *rt)
{
    if (!rt)
        return;
    if (rt->driver)
        dlclose(rt->driver);
    if (rt->nvjpeg)
        dlclose(rt->nvjpeg);
    if (rt->cudart)
        dlclose(rt->cudart);
    memset(rt, 0, sizeof *rt);
}

/* Written once under pthread_once, read-only afterwards. */
static sl__gpu_rt_t g_rt;
static sl__gpu_status_t g_st;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void g_load(void)
{
    sl__gpu_rt_load(NULL, &g_rt, &g_st);
}

const sl__gpu_rt_t *sl__gpu_rt_get(sl__gpu_status_t *st)
{
    pthread_once(&g_once, g_load);
    if (st)
        *st = g_st;
    return g_st.available ? &g_rt : NULL;
}

int sl__gpu_rt_caller_device(const sl__gpu_rt_t *rt)
{
    int dev = -1;
    void *ctx = NULL;
    if (rt->get_device(&dev))
        return -1;
    if (rt->ctx_get_current && (rt->ctx_get_current(&ctx) || !ctx))
        return -1;
    return dev;
}

void sl__gpu_rt_caller_back(const sl__gpu_rt_t *rt, int dev, int was)
{
    if (was >= 0 && was != dev)
        rt->set_device(was);
}
