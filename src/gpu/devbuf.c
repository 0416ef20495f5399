/* gpu/devbuf: device batch buffers and their fences (see devbuf.h). */
#include "gpu/devbuf.h"

#include <stdint.h>
#include <stdlib.h>

struct sl__devbuf {
    uint8_t *p;
    size_t n;
    sl__cuda_event_t fence;  /* on the stage's device */
    sl__cuda_event_t xfence; /* on xdev, another: made at a release there */
    int xdev;
    sl__cuda_event_t cur; /* the one the last release recorded; NULL */
};

void sl__devbufs_init(sl__devbufs_t *d, const sl__gpu_rt_t *rt, int device)
{
    *d = (sl__devbufs_t){.rt = rt, .device = device};
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->xfer_mu, NULL);
}

sl__cuda_err_t sl__devbufs_open(sl__devbufs_t *d)
{
    return d->rt->stream_create(&d->xfer, 1 /* non-blocking */);
}

void sl__devbufs_close(sl__devbufs_t *d)
{
    if (d->xfer)
        d->rt->stream_destroy(d->xfer);
    for (int i = 0; i < d->n; i++) {
        d->rt->event_destroy(d->b[i].fence);
        if (d->b[i].xfence)
            d->rt->event_destroy(d->b[i].xfence);
    }
    free(d->b);
    d->b = NULL;
    d->n = 0;
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->xfer_mu);
}

void *sl__devbufs_alloc(sl__devbufs_t *d, size_t bytes)
{
    const sl__gpu_rt_t *rt = d->rt;
    void *p = NULL;
    sl__cuda_event_t ev = NULL;
    int was = sl__gpu_rt_caller_device(rt);
    pthread_mutex_lock(&d->mu);
    sl__devbuf_t *v = realloc(d->b, (size_t)(d->n + 1) * sizeof *v);
    if (v)
        d->b = v;
    if (!v || rt->set_device(d->device) || rt->dev_malloc(&p, bytes)) {
        p = NULL;
    } else if (rt->event_create(&ev, 2 /* no timing */)) {
        rt->dev_free(p);
        p = NULL;
    } else {
        d->b[d->n++] = (sl__devbuf_t){p, bytes, ev, NULL, -1, NULL};
    }
    pthread_mutex_unlock(&d->mu);
    sl__gpu_rt_caller_back(rt, d->device, was);
    return p;
}

/* The buffer of p in the table, or -1 (under mu). */
static int find(const sl__devbufs_t *d, const void *p)
{
    for (int i = 0; i < d->n; i++)
        if (d->b[i].p == p)
            return i;
    return -1;
}

/* The last error of a call that failed as expected, cleared on this (the
 * consumer's) thread: else a caller sharing the runtime (torch) finds it
 * at its next check ("invalid resource handle"). */
static void clear_error(const sl__gpu_rt_t *rt)
{
    if (rt->get_last_error)
        rt->get_last_error();
}

/* The fence recorded on `stream` of device `dev` (the caller's: its
 * stream is most likely there), with the buffer's event of that device,
 * made the first time; the stage's streams wait for it on the GPU all
 * the same (cudaStreamWaitEvent takes another device's event). The
 * event recorded, or NULL. */
static sl__cuda_event_t record_elsewhere(const sl__gpu_rt_t *rt,
                                         sl__cuda_event_t *ev, int *evdev,
                                         int dev, void *stream)
{
    if (dev < 0 || rt->set_device(dev)) {
        clear_error(rt);
        return NULL;
    }
    if (*ev && *evdev != dev) {
        rt->event_destroy(*ev);
        *ev = NULL;
    }
    if (!*ev && !rt->event_create(ev, 2 /* no timing */))
        *evdev = dev;
    sl__cuda_event_t got =
        *ev && rt->event_record(*ev, stream) == 0 ? *ev : NULL;
    if (!got)
        clear_error(rt);
    return got;
}

void sl__devbufs_release(sl__devbufs_t *d, void *p, void *stream)
{
    const sl__gpu_rt_t *rt = d->rt;
    int was = sl__gpu_rt_caller_device(rt);
    /* The buffer's events copied out, the runtime called without the
     * table's lock (a wait below must not stop the stage's fence
     * look-ups): only its one consumer releases it, and the loader
     * claims it only after (gpu/stage.h). */
    pthread_mutex_lock(&d->mu);
    int i = find(d, p);
    sl__devbuf_t b = i >= 0 ? d->b[i] : (sl__devbuf_t){0};
    pthread_mutex_unlock(&d->mu);
    if (i < 0 || rt->set_device(d->device))
        goto out;
    b.cur = rt->event_record(b.fence, stream) == 0 ? b.fence : NULL;
    if (!b.cur) { /* a stream of another device: the caller's, most likely */
        clear_error(rt);
        if (was != d->device)
            b.cur = record_elsewhere(rt, &b.xfence, &b.xdev, was, stream);
    }
    if (!b.cur) /* nowhere to record it: its work waited for */
        rt->stream_synchronize(stream);
    pthread_mutex_lock(&d->mu);
    i = find(d, p);
    if (i >= 0) {
        d->b[i].cur = b.cur;
        d->b[i].xfence = b.xfence;
        d->b[i].xdev = b.xdev;
    }
    pthread_mutex_unlock(&d->mu);
out:
    sl__gpu_rt_caller_back(rt, d->device, was);
}

void sl__devbufs_free(sl__devbufs_t *d, void *p)
{
    const sl__gpu_rt_t *rt = d->rt;
    if (!p)
        return;
    int was = sl__gpu_rt_caller_device(rt);
    pthread_mutex_lock(&d->mu);
    int i = find(d, p);
    sl__devbuf_t b = i >= 0 ? d->b[i] : (sl__devbuf_t){.p = p};
    if (i >= 0)
        d->b[i] = d->b[--d->n];
    pthread_mutex_unlock(&d->mu);
    if (!rt->set_device(d->device)) {
        if (b.cur)
            rt->event_synchronize(b.cur);
        if (b.fence)
            rt->event_destroy(b.fence);
        if (b.xfence)
            rt->event_destroy(b.xfence);
        rt->dev_free(p);
    }
    sl__gpu_rt_caller_back(rt, d->device, was);
}

sl__cuda_event_t sl__devbufs_fence(sl__devbufs_t *d, const void *p)
{
    sl__cuda_event_t ev = NULL;
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->n; i++) {
        const sl__devbuf_t *b = &d->b[i];
        if (a >= (uintptr_t)b->p && a < (uintptr_t)b->p + b->n) {
            ev = b->cur;
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return ev;
}

sl__cuda_err_t sl__devbufs_copy(sl__devbufs_t *d, void *dst, const void *src,
                                size_t n, int kind)
{
    const sl__gpu_rt_t *rt = d->rt;
    pthread_mutex_lock(&d->xfer_mu);
    int was = sl__gpu_rt_caller_device(rt);
    sl__cuda_err_t e = rt->set_device(d->device);
    sl__cuda_event_t f = e ? NULL : sl__devbufs_fence(d, dst);
    if (f) /* a device batch's consumer may still read it */
        e = rt->stream_wait_event(d->xfer, f, 0);
    if (!e)
        e = rt->memcpy_async(dst, src, n, kind, d->xfer);
    if (!e)
        e = rt->stream_synchronize(d->xfer);
    sl__gpu_rt_caller_back(rt, d->device, was);
    pthread_mutex_unlock(&d->xfer_mu);
    return e;
}
