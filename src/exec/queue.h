/* exec/queue: a bounded multi-producer multi-consumer FIFO of pointers
 * (with a LIFO pop for free lists).
 * Mutex + two condition variables: the pipeline moves one item per encoded
 * image (~10 us of work each at the fastest), so a lock-free ring would buy
 * nothing measurable; blocking semantics and close() matter more.
 * Depends on base. */
#ifndef SL_QUEUE_H
#define SL_QUEUE_H

#include <stddef.h>

typedef struct sl__queue sl__queue_t;

/* capacity >= 1. Returns NULL on allocation failure. */
sl__queue_t *sl__queue_create(size_t capacity);
void sl__queue_destroy(sl__queue_t *q);

/* Blocks while full. Returns 0, or SL_ESTATE once the queue is closed (the
 * item was not queued). */
int sl__queue_push(sl__queue_t *q, void *item);
/* Non-blocking push: 0, 1 when full (not queued), or SL_ESTATE. */
int sl__queue_try_push(sl__queue_t *q, void *item);
/* Blocks while empty. Returns 0 and *item, or SL_EEND when closed and
 * drained. */
int sl__queue_pop(sl__queue_t *q, void **item);
/* As pop, but takes the item pushed last (a free list: the items in use
 * stay the few most recently freed, so their buffers stay warm and the
 * rest are never touched). */
int sl__queue_pop_newest(sl__queue_t *q, void **item);
/* Non-blocking pop: 0 and *item, or SL_EEND if nothing is there now. */
int sl__queue_try_pop(sl__queue_t *q, void **item);
/* Non-blocking pop_newest. */
int sl__queue_try_pop_newest(sl__queue_t *q, void **item);
/* Wakes every waiter; later pushes fail, pops drain what is left. */
void sl__queue_close(sl__queue_t *q);
/* Reopens an empty closed queue (pipeline restart). */
void sl__queue_reopen(sl__queue_t *q);
size_t sl__queue_len(sl__queue_t *q);
size_t sl__queue_capacity(sl__queue_t *q);

#endif
