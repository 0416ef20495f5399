/* gpu/stage: the GPU stage's interface (docs/DESIGN.md, "GPU stage").
 *
 * A caller (the loader's decoders) submits groups of samples; each job
 * carries the encoded bytes and the geometry the CPU path computes for
 * it (sl__image_geometry: the same box and flip from the same (seed,
 * epoch, index) draws), so where a sample is decoded never changes what
 * goes in its slot. The stage reports each job through `done`, from any
 * thread (the CUDA stage: its completer thread, once the group's event on
 * the stage's own stream has fired; never a device-wide or
 * training-stream sync). A job it will
 * not take (grayscale, CMYK, progressive, PNG, anything nvJPEG refuses)
 * comes back SL__GPU_REFUSED with the reason, for the CPU path to do:
 * refused is never lost. Implementations: the CUDA stage
 * (gpu/cuda_stage.h) and tests/unit/gpu_sim.c (the CPU decode behind this
 * interface, for tests). */
#ifndef SL_GPU_STAGE_H
#define SL_GPU_STAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__gpu_job {
    const uint8_t *bytes; /* encoded sample: the caller's until done */
    size_t n;
    double box[4]; /* x0, y0, x1, y1 in source pixels (sl__image_geometry) */
    int flip;      /* 1: mirror horizontally */
    void *out;     /* the slot: the sample's output in the loader's
                      transform's layout: host memory, or (out_dev) device
                      memory from the stage's dev_alloc */
    int out_dev;   /* 1: out is device memory: written there, no copy back */
    void *tag;     /* the caller's (its item) */
} sl__gpu_job_t;

/* Copies of sl__gpu_stage_t.copy. */
enum { SL__GPU_COPY_H2D = 1, SL__GPU_COPY_D2D = 3 };

enum {
    SL__GPU_DONE = 0,    /* the slot holds the sample */
    SL__GPU_REFUSED = 1, /* not taken: the CPU path must do it; why says */
    SL__GPU_FAILED = 2   /* taken and failed: an error for the sample */
};

/* Called once per submitted job, from any thread; `why` is "" for
 * SL__GPU_DONE and valid only during the call. */
typedef void (*sl__gpu_done_fn)(void *ctx, sl__gpu_job_t *job, int status,
                                const char *why);

typedef struct sl__gpu_stage sl__gpu_stage_t;
struct sl__gpu_stage {
    /* Queues n jobs (the pointers and what they point to stay valid until
     * each job's done). Returns 0, or SL_E* when none was queued (no
     * done will come). */
    int (*submit)(sl__gpu_stage_t *st, sl__gpu_job_t *const *jobs, int n,
                  sl__gpu_done_fn done, void *ctx);
    /* Returns when every job submitted so far has had its done. */
    void (*drain)(sl__gpu_stage_t *st);
    /* Drains, then frees. */
    void (*destroy)(sl__gpu_stage_t *st);
    /* Device memory on the stage's GPU for batches a caller keeps there
     * (sl_options_t.device_batches), and copies into it (kind
     * SL__GPU_COPY_*) on a stream of the stage's own, returning when done;
     * any thread. NULL where the stage has no device memory (tests' CPU
     * stage): no device batches. alloc: NULL when out of memory; copy: 0
     * or SL_ESYSTEM with the cause in why.
     *
     * release: the caller's consumer is done with the buffer at p as far
     * as the host knows, but its GPU work reading it may still be queued
     * on `stream` (a cudaStream_t; NULL: the legacy default stream,
     * PyTorch's default): the stage fences it there, and neither its
     * kernels nor copy write into that buffer before the fence has passed
     * (on the GPU: the host never waits). free waits for the fence. */
    void *(*dev_alloc)(sl__gpu_stage_t *st, size_t bytes);
    void (*dev_release)(sl__gpu_stage_t *st, void *p, void *stream);
    void (*dev_free)(sl__gpu_stage_t *st, void *p);
    int (*copy)(sl__gpu_stage_t *st, void *dst, const void *src, size_t n,
                int kind, char *why, size_t wl);
};

#endif
