/* core/bufpool: batch memory for both loaders, from the caller's
 * allocator (sl_options_t / sl_text_options_t buffer_alloc: e.g.
 * page-locked host memory, so a GPU copy is one DMA) or aligned_alloc.
 *
 * A pool of equal-size blocks (one batch's arrays): get() reuses a
 * returned block or makes one outside the pool's lock (an allocator may be
 * slow or take its own locks), put() returns it, trim() frees returned
 * blocks beyond a count (a lowered prefetch) unless the caller's allocator
 * made them (sl__allocator_parks). Blocks are 64-byte aligned with the
 * default allocator. Thread-safe. */
#ifndef SL_BUFPOOL_H
#define SL_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>

typedef struct sl__allocator {
    void *(*alloc)(size_t bytes, void *ctx); /* NULL: aligned_alloc(64) */
    void (*free)(void *p, void *ctx);
    void *ctx;
} sl__allocator_t;

void *sl__alloc_block(const sl__allocator_t *a, size_t bytes);
void sl__free_block(const sl__allocator_t *a, void *p);
/* 1 when a's blocks are freed only at destroy, never mid-run: the caller's
 * allocator (buffer_alloc / buffer_free) is pinned host memory as a rule,
 * and its free, cudaFreeHost, waits for the whole GPU (the training step's
 * work too) on the trainer's or the scheduler's thread. A lowered depth
 * parks such blocks (the image loader's sl__buf_drop, this pool's trim);
 * the default allocator's are freed. The one place of that rule. */
int sl__allocator_parks(const sl__allocator_t *a);

typedef struct sl__bufpool {
    sl__allocator_t a;
    size_t bytes; /* per block */
    pthread_mutex_t mu;
    void **free, **all;
    int nfree, nall, cap;
} sl__bufpool_t;

void sl__bufpool_init(sl__bufpool_t *p, const sl__allocator_t *a, size_t bytes);
/* Frees every block the pool made, returned or not. */
void sl__bufpool_free(sl__bufpool_t *p);
/* A block of p->bytes, or NULL when the allocator fails. */
void *sl__bufpool_get(sl__bufpool_t *p);
/* Returns a block got from p: 0; SL_ESTATE when it was already returned
 * (a batch released twice), SL_EINVAL when p did not make it (both leave
 * the pool as it was). NULL: 0, nothing done. */
int sl__bufpool_put(sl__bufpool_t *p, void *block);
/* Frees returned blocks until at most `keep` are left; with an allocator
 * that parks, frees none: they stay returned (get takes them before making
 * one, so blocks never outnumber the most in use at once) and
 * sl__bufpool_free frees them. */
void sl__bufpool_trim(sl__bufpool_t *p, int keep);

#endif
