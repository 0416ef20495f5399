/* gpu/nvalloc: nvJPEG's own device and pinned allocations, through a
 * process-wide cache that keeps freed blocks for reuse while any GPU
 * stage lives.
 *
 * Why: cudaFree and cudaFreeHost synchronise the whole device, the
 * training stream included, and nvJPEG reallocates whenever a group is
 * larger than the last (its batched initialise). The cache is
 * stream-ordered, as nvJPEG's extended allocators (nvjpegCreateExV2) are
 * called: a block freed on a stream may still be read by work queued
 * there, so its free records an event on that stream, and the block goes
 * to an allocation on another stream only behind that event (a GPU-side
 * wait: cudaStreamWaitEvent; on its own stream, stream order suffices).
 * Device blocks are kept to their device. */
#ifndef SL_GPU_NVALLOC_H
#define SL_GPU_NVALLOC_H

#include <stddef.h>

#include "gpu/rt.h"

/* nvJPEG's nvjpegDevAllocatorV2_t and nvjpegPinnedAllocatorV2_t: what
 * nvjpeg_create_ex_v2 takes (sl__nvalloc_dev(), sl__nvalloc_pinned()).
 * Their functions return a cudaError_t. */
typedef struct sl__nvalloc {
    int (*malloc_fn)(void *ctx, void **p, size_t n, sl__cuda_stream_t st);
    int (*free_fn)(void *ctx, void *p, size_t n, sl__cuda_stream_t st);
    void *ctx;
} sl__nvalloc_t;
sl__nvalloc_t *sl__nvalloc_dev(void);
sl__nvalloc_t *sl__nvalloc_pinned(void);

/* A stage begins to use the cache (before its nvJPEG handle is made). */
void sl__nvalloc_join(void);

/* A stage is done with it (its nvJPEG handle and states destroyed): the
 * last one to leave returns the unused blocks to CUDA, each freed on its
 * own device once its last free's work has passed; the calling thread's
 * device is then set to `device`. */
void sl__nvalloc_leave(const sl__gpu_rt_t *rt, int device);

/* Stages using the cache now (tests: none outlives its loader). */
int sl__nvalloc_users(void);

/* Device bytes the cache holds, in use or kept. */
size_t sl__nvalloc_dev_bytes(void);

#endif
