/* gpu/rt: the CUDA runtime and nvJPEG, loaded at run time.
 *
 * sluice never links CUDA: the GPU stage reaches it through this table,
 * filled by dlopen / dlsym, so the library builds and runs where there is
 * no CUDA, no driver and no GPU, and says in words why the stage is
 * unavailable. Only the few CUDA / nvJPEG types the stage passes around
 * are declared (opaque handles, ints); their ABI is the same in CUDA 12
 * and 13 (SL__CUDA_MAJORS).
 *
 * Where the libraries are looked for (docs/DESIGN.md, "GPU stage"): the
 * directories of SL_CUDA_LIB_PATH (colon-separated) when it is set, only
 * those; otherwise the system's search (the soname alone), then the PyPI
 * wheels' folders (sl__gpu_rt_default_dirs). */
#ifndef SL_GPU_RT_H
#define SL_GPU_RT_H

#include <stddef.h>

/* The CUDA major versions tried, newest first: libcudart.so.M and
 * libnvjpeg.so.M of one M (the entries used are the same in both). */
#define SL__CUDA_MAJORS                                                        \
    {                                                                          \
        13, 12                                                                 \
    }

typedef int sl__cuda_err_t;   /* cudaError_t: cudaSuccess = 0 */
typedef int sl__nvjpeg_err_t; /* nvjpegStatus_t: NVJPEG_STATUS_SUCCESS = 0 */
typedef void *sl__cuda_stream_t;
typedef void *sl__cuda_event_t;
typedef void *sl__nvjpeg_t;        /* nvjpegHandle_t */
typedef void *sl__nvjpeg_state_t;  /* nvjpegJpegState_t */
typedef void *sl__cuda_library_t;  /* cudaLibrary_t */
typedef void *sl__cuda_kernel_t;   /* cudaKernel_t */
typedef void *sl__nvjpeg_params_t; /* nvjpegDecodeParams_t */
typedef void *sl__nvjpeg_stream_t; /* nvjpegJpegStream_t */
typedef struct sl__dim3 {
    unsigned x, y, z;
} sl__dim3_t; /* dim3, passed by value */

/* cudaMemcpyKind values. */
enum { SL__H2D = 1, SL__D2H = 2 };
/* nvjpegOutputFormat_t: interleaved RGB. */
enum { SL__NVJPEG_OUTPUT_RGBI = 5 };
/* nvjpegImage_t: planes (only channel[0] for RGBI). */
typedef struct sl__nvjpeg_image {
    unsigned char *channel[4];
    size_t pitch[4];
} sl__nvjpeg_image_t;

/* nvjpegChromaSubsampling_t: 4:4:4 (the most chroma: a preallocation
 * for it covers 4:2:2, 4:4:0 and 4:2:0 images of the same size). */
enum { SL__NVJPEG_CSS_444 = 0 };
/* nvjpegBackend_t values the probe uses. */
enum { SL__NVJPEG_BACKEND_DEFAULT = 0, SL__NVJPEG_BACKEND_HARDWARE = 3 };
/* nvjpegStatus_t values the stage tells apart. */
enum {
    SL__NVJPEG_INVALID_PARAMETER = 2,
    SL__NVJPEG_BAD_JPEG = 3,
    SL__NVJPEG_JPEG_NOT_SUPPORTED = 4,
    SL__NVJPEG_NOT_SUPPORTED = 9 /* IMPLEMENTATION_NOT_SUPPORTED */
};

/* Every entry the GPU stage calls. Each is required, a library without
 * one unusable (sl__gpu_rt_load names the first missing), except the
 * optional ones at the end (NULL where the library lacks them). */
typedef struct sl__gpu_rt {
    /* libcudart */
    sl__cuda_err_t (*get_device_count)(int *n);
    const char *(*get_error_string)(sl__cuda_err_t e);
    sl__cuda_err_t (*runtime_version)(int *v);
    sl__cuda_err_t (*set_device)(int dev);
    sl__cuda_err_t (*get_device)(int *dev);
    sl__cuda_err_t (*mem_get_info)(size_t *free_b, size_t *total_b);
    sl__cuda_err_t (*dev_malloc)(void **p, size_t bytes);
    sl__cuda_err_t (*dev_free)(void *p);
    sl__cuda_err_t (*memcpy_async)(void *dst, const void *src, size_t n,
                                   int kind, sl__cuda_stream_t s);
    sl__cuda_err_t (*stream_create)(sl__cuda_stream_t *s, unsigned flags);
    sl__cuda_err_t (*stream_destroy)(sl__cuda_stream_t s);
    sl__cuda_err_t (*event_create)(sl__cuda_event_t *e, unsigned flags);
    sl__cuda_err_t (*event_record)(sl__cuda_event_t e, sl__cuda_stream_t s);
    sl__cuda_err_t (*event_query)(sl__cuda_event_t e);
    sl__cuda_err_t (*event_destroy)(sl__cuda_event_t e);
    sl__cuda_err_t (*launch_host_func)(sl__cuda_stream_t s, void (*fn)(void *),
                                       void *arg);
    sl__cuda_err_t (*event_synchronize)(sl__cuda_event_t e);
    sl__cuda_err_t (*stream_wait_event)(sl__cuda_stream_t s, sl__cuda_event_t e,
                                        unsigned flags);
    sl__cuda_err_t (*stream_synchronize)(sl__cuda_stream_t s);
    sl__cuda_err_t (*host_malloc)(void **p, size_t bytes); /* pinned */
    sl__cuda_err_t (*host_free)(void *p);
    sl__cuda_err_t (*launch_kernel)(const void *fn, sl__dim3_t grid,
                                    sl__dim3_t block, void **args, size_t shmem,
                                    sl__cuda_stream_t s);
    /* libnvjpeg */
    sl__nvjpeg_err_t (*nvjpeg_create_ex)(int backend, void *dev_alloc,
                                         void *pinned_alloc, unsigned flags,
                                         sl__nvjpeg_t *h);
    /* the same with the extended (stream-ordered) allocators, which the
     * stage's allocator cache is (nvjpegDevAllocatorV2_t and
     * nvjpegPinnedAllocatorV2_t: malloc, free, context) */
    sl__nvjpeg_err_t (*nvjpeg_create_ex_v2)(int backend, void *dev_alloc,
                                            void *pinned_alloc, unsigned flags,
                                            sl__nvjpeg_t *h);
    sl__nvjpeg_err_t (*nvjpeg_destroy)(sl__nvjpeg_t h);
    sl__nvjpeg_err_t (*nvjpeg_state_create)(sl__nvjpeg_t h,
                                            sl__nvjpeg_state_t *st);
    sl__nvjpeg_err_t (*nvjpeg_state_destroy)(sl__nvjpeg_state_t st);
    sl__nvjpeg_err_t (*nvjpeg_get_image_info)(sl__nvjpeg_t h,
                                              const unsigned char *data,
                                              size_t len, int *ncomp,
                                              int *subsampling, int *widths,
                                              int *heights);
    sl__nvjpeg_err_t (*nvjpeg_batched_init)(sl__nvjpeg_t h,
                                            sl__nvjpeg_state_t st, int batch,
                                            int max_threads, int out_format);
    sl__nvjpeg_err_t (*nvjpeg_decode_batched)(sl__nvjpeg_t h,
                                              sl__nvjpeg_state_t st,
                                              const unsigned char *const *d,
                                              const size_t *lens, void *outputs,
                                              sl__cuda_stream_t s);
    /* optional: the device's PCI bus id ("0000:3b:00.0"), by which NVML
     * finds the same GPU (its indices need not be CUDA's) */
    sl__cuda_err_t (*device_pci_bus_id)(char *buf, int len, int dev);
    /* optional: a batch decoded to regions (ROI), one parameter set per
     * image; nvJPEG has it from 11.6 on, for the hardware backend only
     * (sl__gpu_rt_roi) */
    sl__nvjpeg_err_t (*nvjpeg_params_create)(sl__nvjpeg_t h,
                                             sl__nvjpeg_params_t *p);
    sl__nvjpeg_err_t (*nvjpeg_params_destroy)(sl__nvjpeg_params_t p);
    sl__nvjpeg_err_t (*nvjpeg_params_set_format)(sl__nvjpeg_params_t p,
                                                 int out_format);
    sl__nvjpeg_err_t (*nvjpeg_params_set_roi)(sl__nvjpeg_params_t p, int x,
                                              int y, int w, int h);
    sl__nvjpeg_err_t (*nvjpeg_decode_batched_ex)(
        sl__nvjpeg_t h, sl__nvjpeg_state_t st, const unsigned char *const *d,
        const size_t *lens, void *outputs, sl__nvjpeg_params_t *params,
        sl__cuda_stream_t s);
    /* optional: the hardware backend asked about one image before its
     * batch (nvJPEG 11.6 on; sl__gpu_rt_hw_check): its header parsed into
     * a JPEG stream, then nvjpegDecodeBatchedSupportedEx with the image's
     * decode parameters (*supported 0: the batched decode takes it) */
    sl__nvjpeg_err_t (*nvjpeg_stream_create)(sl__nvjpeg_t h,
                                             sl__nvjpeg_stream_t *js);
    sl__nvjpeg_err_t (*nvjpeg_stream_destroy)(sl__nvjpeg_stream_t js);
    sl__nvjpeg_err_t (*nvjpeg_stream_parse_header)(sl__nvjpeg_t h,
                                                   const unsigned char *data,
                                                   size_t len,
                                                   sl__nvjpeg_stream_t js);
    sl__nvjpeg_err_t (*nvjpeg_batched_supported_ex)(sl__nvjpeg_t h,
                                                    sl__nvjpeg_stream_t js,
                                                    sl__nvjpeg_params_t p,
                                                    int *supported);
    /* optional: the hardware backend's buffers for `batch` images of up
     * to w x h at chroma subsampling css, allocated now rather than by
     * the first batches (nvjpegDecodeBatchedPreAllocate) */
    sl__nvjpeg_err_t (*nvjpeg_batched_prealloc)(sl__nvjpeg_t h,
                                                sl__nvjpeg_state_t st,
                                                int batch, int w, int hh,
                                                int css, int out_format);
    /* The kernels: a fatbin loaded as a library and launched by handle
     * with cudaLaunchKernel (the runtime's library API: CUDA 12.8 on;
     * optional) ... */
    sl__cuda_err_t (*library_load_data)(sl__cuda_library_t *lib,
                                        const void *code, void *jit_opts,
                                        void **jit_vals, unsigned njit,
                                        void *lib_opts, void **lib_vals,
                                        unsigned nlib);
    sl__cuda_err_t (*library_get_kernel)(sl__cuda_kernel_t *k,
                                         sl__cuda_library_t lib,
                                         const char *name);
    sl__cuda_err_t (*library_unload)(sl__cuda_library_t lib);
    /* ... or, where the runtime lacks it (CUDA 12.0-12.7, as PyTorch's
     * cu121 / cu124 / cu126 wheels bring), as a module of the current
     * context with the driver's module API (sl__gpu_rt_kernels says
     * which; a CUresult, 0 success, from these) */
    int (*cu_module_load_data)(void **mod, const void *image);
    int (*cu_module_get_function)(void **fn, void *mod, const char *name);
    int (*cu_module_unload)(void *mod);
    int (*cu_launch_kernel)(void *fn, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned by, unsigned bz,
                            unsigned shmem, sl__cuda_stream_t s, void **args,
                            void **extra);
    /* optional, from the driver (libcuda.so.1, loaded by the runtime):
     * the calling thread's current context (NULL: none), which tells a
     * thread that uses a GPU from one whose device is only the default
     * (the stage sets a caller's device back only for the former) */
    int (*ctx_get_current)(void **ctx);

    /* optional (every runtime has it): the calling thread's last error,
     * cleared; called after a failure the stage expects and handles, so
     * a caller sharing the runtime (torch) does not find it later */
    sl__cuda_err_t (*get_last_error)(void);

    void *cudart, *nvjpeg, *driver; /* dlopen handles */
} sl__gpu_rt_t;

/* What the probe found, in words. */
typedef struct sl__gpu_status {
    int available;     /* 1: libraries loaded, a device seen */
    int device_count;  /* CUDA devices seen (0 when not asked) */
    char reason[1024]; /* unavailable: why, naming what was tried;
                          available: "" */
    char cudart[512];  /* the files loaded ("" when not found) */
    char nvjpeg[512];
} sl__gpu_status_t;

/* The wheels' folders the default search tries after the system's,
 * colon-separated into out (cut at cap): nvidia/{cuda_runtime,nvjpeg}/lib
 * (CUDA 12) and nvidia/cu13/lib (CUDA 13) under each folder of
 * SL_PYTHON_SITE (colon-separated; the Python package sets it at import
 * to the folders of its sys.path holding nvidia/: a pyenv, conda or
 * `pip install --user` Python's too), then under lib/python3.x/
 * {site,dist}-packages of $VIRTUAL_ENV, /usr/local, /usr and /opt/conda. */
void sl__gpu_rt_default_dirs(char *out, size_t cap);

/* Loads both libraries from `search` (colon-separated directories, only
 * those; NULL: SL_CUDA_LIB_PATH when set, else the default search above),
 * resolves every entry of the table, then asks the runtime for a device
 * (cudaGetDeviceCount: no context is made, on no GPU; nvJPEG's backend
 * is the stage's to learn, on its own device). Fills *st either way; returns 1
 * when available (rt then holds both libraries: sl__gpu_rt_unload), 0
 * when not (rt zeroed, nothing left loaded). Never fails otherwise. */
int sl__gpu_rt_load(const char *search, sl__gpu_rt_t *rt, sl__gpu_status_t *st);

/* How the kernels are loaded: SL__GPU_KERNELS_LIBRARY (the runtime's
 * library API), SL__GPU_KERNELS_MODULE (the driver's module API), or 0
 * when rt has neither whole (the stage is then unavailable). */
enum { SL__GPU_KERNELS_LIBRARY = 1, SL__GPU_KERNELS_MODULE = 2 };
int sl__gpu_rt_kernels(const sl__gpu_rt_t *rt);

/* 1 when rt has every optional entry of the ROI decode. Whether the
 * backend takes it is learnt from the first call (the stage's). */
int sl__gpu_rt_roi(const sl__gpu_rt_t *rt);

/* 1 when rt has every optional entry of the hardware backend's
 * per-image check (the JPEG stream's three and SupportedEx, and the
 * decode parameters' create, destroy and output format). */
int sl__gpu_rt_hw_check(const sl__gpu_rt_t *rt);

/* A caller's thread (a stage's create, device batches' memory, their
 * copies) works on the stage's GPU and gets its own device back after,
 * so the trainer's thread keeps torch's. sl__gpu_rt_caller_device: the
 * device the thread had, where it had a context (the driver says;
 * without the driver's word, any), else -1 (setting the default back
 * would make a context on GPU 0 for nothing). sl__gpu_rt_caller_back
 * sets `was` back where it is one and differs from `dev`. */
int sl__gpu_rt_caller_device(const sl__gpu_rt_t *rt);
void sl__gpu_rt_caller_back(const sl__gpu_rt_t *rt, int dev, int was);

/* Closes what sl__gpu_rt_load opened and zeroes *rt; NULL is a no-op. */
void sl__gpu_rt_unload(sl__gpu_rt_t *rt);

/* The process's one table, loaded on first use with the default search
 * (pthread_once) and kept loaded; NULL when unavailable. *st (may be
 * NULL) gets the status. Thread-safe. */
const sl__gpu_rt_t *sl__gpu_rt_get(sl__gpu_status_t *st);

#endif
