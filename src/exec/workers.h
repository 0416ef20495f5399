/* exec/workers: a pool of threads whose size can change while it runs.
 *
 * Threads are started lazily up to the largest target ever set; a thread
 * whose id is >= the current target parks (waits on a condition variable)
 * at its next checkpoint instead of exiting, so growing again is cheap and
 * no work in hand is dropped: a thread parks only between two work items.
 * Depends on base. */
#ifndef SL_WORKERS_H
#define SL_WORKERS_H

#include <stddef.h>

/* fn runs once per thread: `while (sl__workers_checkpoint(w, id)) work();` */
typedef void (*sl__worker_fn)(void *arg, int id);

typedef struct sl__workers sl__workers_t;

#define SL_WORKERS_MAX 256

sl__workers_t *sl__workers_create(sl__worker_fn fn, void *arg);
/* Sets how many threads work (0..SL_WORKERS_MAX); starts missing ones.
 * Returns 0 or SL_ETHREAD. Any thread. */
int sl__workers_set(sl__workers_t *w, int n);
int sl__workers_target(sl__workers_t *w);
/* Why the last start failed (SL_ETHREAD): "thread K of N: CAUSE", the
 * errno of pthread_create, with the limits to look at for EAGAIN. Any
 * thread. */
void sl__workers_why(sl__workers_t *w, char *buf, size_t len);
/* Called by worker `id` between items: parks while id >= target; returns 1
 * to go on, 0 when the pool is stopping. */
int sl__workers_checkpoint(sl__workers_t *w, int id);
/* Wakes parked threads with a stop order; the caller must also unblock any
 * thread waiting elsewhere (close its queues) before joining. */
void sl__workers_stop(sl__workers_t *w);
/* Joins every started thread (after stop). */
void sl__workers_join(sl__workers_t *w);
/* After join: the pool may start again (its threads restart lazily). */
void sl__workers_reset(sl__workers_t *w);
void sl__workers_destroy(sl__workers_t *w);

#endif
