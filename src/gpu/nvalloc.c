/* gpu/nvalloc: nvJPEG's allocator cache (see nvalloc.h). */
#include "gpu/nvalloc.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct blk {
    void *p;
    size_t n;
    int used;
    int dev; /* the device it is on (-1: pinned host memory, any) */
    /* the stream of its last allocation (NULL: none named): a free that
     * names no stream is ordered on it */
    sl__cuda_stream_t alloc_on;
    /* its last free: the stream and an event recorded there (pending: 1
     * until known passed), made on device ev_dev */
    sl__cuda_stream_t freed_on;
    sl__cuda_event_t ev;
    int ev_dev, pending;
} blk_t;

typedef struct bcache {
    blk_t *b;
    int nb, cap, pinned;
} bcache_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static bcache_t g_dev = {NULL, 0, 0, 0}, g_pin = {NULL, 0, 0, 1};
static int g_users; /* stages using the cache (under g_mu) */

/* Under g_mu: block b may serve stream st from now on (0), or
 * cannot (1: its free's event could not be waited for). Device memory
 * for a stream: in stream order (the same stream, or a GPU-side wait on
 * another). Pinned memory, which nvJPEG fills from the host as soon as it
 * has it, and an allocation with no stream (st NULL: a GPU-side wait
 * would land on the legacy stream, the trainer's): only once the free's
 * work has passed, waited for here. */
static int order_after_free(const sl__gpu_rt_t *rt, blk_t *b,
                            sl__cuda_stream_t st, int pinned)
{
    if (!b->pending)
        return 0;
    if (rt->event_query(b->ev) == 0) {
        b->pending = 0;
        return 0;
    }
    if (!pinned && st && b->freed_on == st)
        return 0;
    if (!pinned && st && rt->stream_wait_event(st, b->ev, 0) == 0)
        return 0;
    if (rt->event_synchronize(b->ev))
        return 1;
    b->pending = 0;
    return 0;
}

static int cache_get(bcache_t *c, void **p, size_t n, sl__cuda_stream_t st)
{
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    if (!rt)
        return 1;
    /* nvJPEG allocates on the calling thread's device (the stage's); a
     * block of another device's stage is no use there */
    int dev = -1;
    if (!c->pinned && rt->get_device(&dev))
        return 1;
    pthread_mutex_lock(&g_mu);
    int best = -1;
    for (int i = 0; i < c->nb; i++)
        if (!c->b[i].used && c->b[i].dev == dev && c->b[i].n >= n &&
            c->b[i].n <= 2 * n + 4096 && (best < 0 || c->b[i].n < c->b[best].n))
            best = i;
    if (best >= 0 && !order_after_free(rt, &c->b[best], st, c->pinned)) {
        c->b[best].used = 1;
        c->b[best].alloc_on = st;
        *p = c->b[best].p;
        pthread_mutex_unlock(&g_mu);
        return 0;
    }
    if (c->nb == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        blk_t *nb = realloc(c->b, (size_t)cap * sizeof *nb);
        if (!nb) {
            pthread_mutex_unlock(&g_mu);
            return 2; /* cudaErrorMemoryAllocation */
        }
        c->b = nb;
        c->cap = cap;
    }
    sl__cuda_err_t e = c->pinned ? rt->host_malloc(p, n) : rt->dev_malloc(p, n);
    if (!e)
        c->b[c->nb++] = (blk_t){*p, n, 1, dev, st, NULL, NULL, -1, 0};
    pthread_mutex_unlock(&g_mu);
    return e;
}

/* A free that names no stream (nvJPEG's stream-less calls: a batched
 * initialise, a state's or the handle's destroy, a preallocation) is
 * ordered on the stream the block was last allocated on, the stage's
 * work that used it; where that too was none, the block is free at once:
 * the stage makes those calls only while the state's stream is idle (its
 * last group waited for, a failed one's work synchronised: launch,
 * release). Never on the legacy default stream, the trainer's in
 * PyTorch: its event would wait for the training step's work, and a
 * synchronize of it would block on it. */
static int cache_put(bcache_t *c, void *p, sl__cuda_stream_t st)
{
    const sl__gpu_rt_t *rt = sl__gpu_rt_get(NULL);
    int dev = -1;
    if (!rt || rt->get_device(&dev))
        return 1;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < c->nb; i++) {
        blk_t *b = &c->b[i];
        if (b->p != p)
            continue;
        if (!st)
            st = b->alloc_on;
        if (!st) {
            b->freed_on = NULL;
            b->pending = 0;
            b->used = 0;
            pthread_mutex_unlock(&g_mu);
            return 0;
        }
        /* the event on the freeing stream's device (the caller's) */
        if (b->ev && b->ev_dev != dev) {
            rt->event_destroy(b->ev);
            b->ev = NULL;
        }
        if (!b->ev && rt->event_create(&b->ev, 2 /* no timing */))
            b->ev = NULL;
        b->ev_dev = dev;
        b->freed_on = st;
        b->pending = b->ev && rt->event_record(b->ev, st) == 0;
        if (!b->pending) /* no event: the stream's work waited for here */
            rt->stream_synchronize(st);
        b->used = 0;
        pthread_mutex_unlock(&g_mu);
        return 0;
    }
    pthread_mutex_unlock(&g_mu);
    return 1; /* not ours: cudaErrorInvalidValue */
}

/* Under g_mu, with no stage left: the unused blocks back to CUDA,
 * each freed on its own device once its last free's work has passed (the
 * caller sets its thread's device back). */
static void cache_trim(bcache_t *c, const sl__gpu_rt_t *rt)
{
    int k = 0;
    for (int i = 0; i < c->nb; i++) {
        blk_t *b = &c->b[i];
        if (b->used) {
            c->b[k++] = *b;
            continue;
        }
        if (b->ev) {
            rt->set_device(b->ev_dev);
            rt->event_synchronize(b->ev);
            rt->event_destroy(b->ev);
        }
        if (c->pinned) {
            rt->host_free(b->p);
        } else {
            rt->set_device(b->dev);
            rt->dev_free(b->p);
        }
    }
    c->nb = k;
}

static int nv_dev_malloc(void *ctx, void **p, size_t n, sl__cuda_stream_t st)
{
    (void)ctx;
    return cache_get(&g_dev, p, n, st);
}
static int nv_dev_free(void *ctx, void *p, size_t n, sl__cuda_stream_t st)
{
    (void)ctx, (void)n;
    return cache_put(&g_dev, p, st);
}
static int nv_pin_malloc(void *ctx, void **p, size_t n, sl__cuda_stream_t st)
{
    (void)ctx; /* cudaMallocHost's portable pinned memory serves all */
    return cache_get(&g_pin, p, n, st);
}
static int nv_pin_free(void *ctx, void *p, size_t n, sl__cuda_stream_t st)
{
    (void)ctx, (void)n;
    return cache_put(&g_pin, p, st);
}

static sl__nvalloc_t g_dev_alloc = {nv_dev_malloc, nv_dev_free, NULL},
                     g_pin_alloc = {nv_pin_malloc, nv_pin_free, NULL};

sl__nvalloc_t *sl__nvalloc_dev(void)
{
    return &g_dev_alloc;
}

sl__nvalloc_t *sl__nvalloc_pinned(void)
{
    return &g_pin_alloc;
}

void sl__nvalloc_join(void)
{
    pthread_mutex_lock(&g_mu);
    g_users++;
    pthread_mutex_unlock(&g_mu);
}

void sl__nvalloc_leave(const sl__gpu_rt_t *rt, int device)
{
    pthread_mutex_lock(&g_mu);
    if (g_users > 0)
        g_users--;
    if (!g_users) {
        cache_trim(&g_dev, rt);
        cache_trim(&g_pin, rt);
        rt->set_device(device);
    }
    pthread_mutex_unlock(&g_mu);
}

int sl__nvalloc_users(void)
{
    pthread_mutex_lock(&g_mu);
    int n = g_users;
    pthread_mutex_unlock(&g_mu);
    return n;
}

size_t sl__nvalloc_dev_bytes(void)
{
    size_t n = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_dev.nb; i++)
        n += g_dev.b[i].n;
    pthread_mutex_unlock(&g_mu);
    return n;
}
