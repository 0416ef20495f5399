/* gpu/devbuf: a GPU stage's device batch buffers (sl_options_t.
 * device_batches; gpu/stage.h's dev_alloc, dev_release, dev_free, copy),
 * each with the fence its consumer's release records, and the stream
 * the copies into them run on.
 *
 * A fence is an event recorded on the consumer's stream when it released
 * the buffer (NULL: the legacy default stream, PyTorch's default); the
 * stage's streams wait for it on the GPU (sl__devbufs_fence) before
 * writing into that buffer again, so the host never waits for the
 * training step. Every call works on the stage's device and sets the
 * calling thread's device back after (gpu/rt.h, the caller's device). */
#ifndef SL_GPU_DEVBUF_H
#define SL_GPU_DEVBUF_H

#include <pthread.h>
#include <stddef.h>

#include "gpu/rt.h"

typedef struct sl__devbuf sl__devbuf_t;

typedef struct sl__devbufs {
    const sl__gpu_rt_t *rt;
    int device;
    pthread_mutex_t mu; /* the table */
    sl__devbuf_t *b;
    int n;
    pthread_mutex_t xfer_mu; /* copies: one at a time, on xfer */
    sl__cuda_stream_t xfer;
} sl__devbufs_t;

/* Sets up an empty table for the stage on `device` (no CUDA call). */
void sl__devbufs_init(sl__devbufs_t *d, const sl__gpu_rt_t *rt, int device);

/* Makes the copy stream, on the calling thread's device (the stage's,
 * set by its create): 0 or the runtime's error. */
sl__cuda_err_t sl__devbufs_open(sl__devbufs_t *d);

/* Destroys the copy stream and the fences of the buffers the caller did
 * not free (their memory is the caller's to free: it never is, the
 * loader frees each), then the table. */
void sl__devbufs_close(sl__devbufs_t *d);

/* A buffer of `bytes` on the device; NULL when out of memory. */
void *sl__devbufs_alloc(sl__devbufs_t *d, size_t bytes);

/* The consumer released p (see gpu/stage.h): the fence recorded on its
 * `stream` — with an event of the stage's device, else (a stream of
 * another device) one of the caller's current device, which the stage's
 * streams wait for on the GPU all the same; where neither can be
 * recorded, that stream's work waited for here. The failed records'
 * errors are cleared (cudaGetLastError). Any thread; one release of a
 * buffer at a time, before the loader claims it again. */
void sl__devbufs_release(sl__devbufs_t *d, void *p, void *stream);

/* Waits for p's fence, then frees it (cudaFree waits for the whole
 * device: the loader calls it at destroy only); NULL is a no-op. */
void sl__devbufs_free(sl__devbufs_t *d, void *p);

/* The fence to wait for before writing at p: that of the buffer p is
 * in, once a consumer released it; NULL for memory not in the table. */
sl__cuda_event_t sl__devbufs_fence(sl__devbufs_t *d, const void *p);

/* Copies n bytes from src to dst (kind SL__GPU_COPY_*) on the copy
 * stream, behind dst's fence, returning when done: 0 or the runtime's
 * error. */
sl__cuda_err_t sl__devbufs_copy(sl__devbufs_t *d, void *dst, const void *src,
                                size_t n, int kind);

#endif
