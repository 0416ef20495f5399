#include "core/bufpool.h"

#include <stdlib.h>

#include "sluice/sluice.h"

void *sl__alloc_block(const sl__allocator_t *a, size_t bytes)
{
    bytes = (bytes + 63) & ~(size_t)63;
    if (!bytes)
        bytes = 64;
    return a->alloc ? a->alloc(bytes, a->ctx) : aligned_alloc(64, bytes);
}

void sl__free_block(const sl__allocator_t *a, void *p)
{
    if (!p)
        return;
    if (!a->alloc)
        free(p);
    else if (a->free)
        a->free(p, a->ctx);
}

int sl__allocator_parks(const sl__allocator_t *a)
{
    return a->alloc && a->free;
}

void sl__bufpool_init(sl__bufpool_t *p, const sl__allocator_t *a, size_t bytes)
{
    p->a = *a;
    p->bytes = bytes;
    pthread_mutex_init(&p->mu, NULL);
    p->free = p->all = NULL;
    p->nfree = p->nall = p->cap = 0;
}

void sl__bufpool_free(sl__bufpool_t *p)
{
    for (int i = 0; i < p->nall; i++)
        sl__free_block(&p->a, p->all[i]);
    free(p->free);
    free(p->all);
    p->free = p->all = NULL;
    p->nfree = p->nall = p->cap = 0;
    pthread_mutex_destroy(&p->mu);
}

void *sl__bufpool_get(sl__bufpool_t *p)
{
    pthread_mutex_lock(&p->mu);
    void *b = p->nfree ? p->free[--p->nfree] : NULL;
    pthread_mutex_unlock(&p->mu);
    if (b)
        return b;
    b = sl__alloc_block(&p->a, p->bytes);
    if (!b)
        return NULL;
    pthread_mutex_lock(&p->mu);
    if (p->nall == p->cap) { /* free never outgrows all: one capacity */
        int cap = p->cap ? 2 * p->cap : 8;
        void **f = realloc(p->free, (size_t)cap * sizeof *f);
        if (f)
            p->free = f;
        void **v = f ? realloc(p->all, (size_t)cap * sizeof *v) : NULL;
        if (v)
            p->all = v, p->cap = cap;
    }
    int ok = p->nall < p->cap;
    if (ok)
        p->all[p->nall++] = b;
    pthread_mutex_unlock(&p->mu);
    if (!ok) {
        sl__free_block(&p->a, b);
        return NULL;
    }
    return b;
}

int sl__bufpool_put(sl__bufpool_t *p, void *block)
{
    if (!block)
        return 0;
    int rc = SL_EINVAL; /* not a block of this pool */
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nall; i++)
        if (p->all[i] == block) {
            rc = 0;
            break;
        }
    /* A block already returned would be in free twice: two batches would
     * share it, and nfree could pass cap. Both lists are a few entries (the
     * batches in flight), so the scans cost nothing beside a batch. */
    for (int i = 0; !rc && i < p->nfree; i++)
        if (p->free[i] == block)
            rc = SL_ESTATE;
    if (!rc)
        p->free[p->nfree++] = block; /* room: cap >= nall >= nfree + 1 */
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void sl__bufpool_trim(sl__bufpool_t *p, int keep)
{
    if (sl__allocator_parks(&p->a))
        return;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        void *b = p->nfree > keep ? p->free[--p->nfree] : NULL;
        for (int i = 0; b && i < p->nall; i++)
            if (p->all[i] == b) {
                p->all[i] = p->all[--p->nall];
                break;
            }
        pthread_mutex_unlock(&p->mu);
        if (!b)
            return;
        sl__free_block(&p->a, b);
    }
}
