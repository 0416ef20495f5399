/* base/membudget: a byte budget that large allocations are charged
 * against before they are made (issue 14: --max-memory as a bound).
 *
 * A charge waits, first come first served, until it fits under the limit:
 * a budget is held only for the span of one sample's work, so the bytes
 * come back when that work ends, and serving in order keeps a large charge
 * from waiting behind a stream of small ones. A charge larger than the
 * whole limit can never fit: it fails at once, naming both sizes, so
 * whether a sample fits never depends on timing. Holders must never wait
 * on one another's budget while holding a charge (the loader keeps read
 * items and decode scratch in two budgets for that reason).
 *
 * Any thread may call any function. Depends on nothing (pthreads). */
#ifndef SL_MEMBUDGET_H
#define SL_MEMBUDGET_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl__membudget {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t limit;            /* 0: no limit (charges are only counted) */
    int64_t used, peak;       /* bytes charged now, and the most ever */
    uint64_t ticket, serving; /* FIFO order of waiting charges */
    int stopped;
    const char *note; /* appended to a "needs X MB" message (where the
                       * limit came from), or NULL; the owner's string */
} sl__membudget_t;

/* limit <= 0: unlimited. */
void sl__membudget_init(sl__membudget_t *b, int64_t limit);
void sl__membudget_destroy(sl__membudget_t *b);

/* Charges `bytes` (what: the thing being charged, for the message), waiting
 * for room in arrival order.
 * @return 0; SL_ENOMEM at once when bytes alone exceed the limit
 *         ("WHAT needs X MB, the memory budget allows Y MB" in err);
 *         1 when the budget is stopped (nothing charged). */
int sl__membudget_charge(sl__membudget_t *b, int64_t bytes, const char *what,
                         char *err, size_t errlen);

/* As charge, but never waits: SL__MEMBUDGET_LATER (nothing charged) when
 * the bytes do not fit now or others wait before them. For a reader that
 * holds charges of reads still in flight: waiting there could wait on
 * itself (exec/aread). */
#define SL__MEMBUDGET_LATER 2
int sl__membudget_try_charge(sl__membudget_t *b, int64_t bytes,
                             const char *what, char *err, size_t errlen);

/* Returns bytes charged earlier. */
void sl__membudget_release(sl__membudget_t *b, int64_t bytes);

/* stop 1: every waiting and later charge returns 1 at once (a pipeline
 * stopping); stop 0: charges work again. */
void sl__membudget_stop(sl__membudget_t *b, int stop);

int64_t sl__membudget_used(sl__membudget_t *b);
int64_t sl__membudget_peak(sl__membudget_t *b);

/* A hook a lower layer calls with the bytes it is about to allocate for
 * one piece of work, before allocating them: 0 goes ahead, nonzero refuses
 * (message in err). Readers and decoders take one, so they never know
 * whose budget, if any, they are charged to. */
typedef struct sl__admit {
    int (*fn)(void *ctx, int64_t bytes, char *err, size_t errlen);
    void *ctx;
} sl__admit_t;

static inline int sl__admit(const sl__admit_t *a, int64_t bytes, char *err,
                            size_t errlen)
{
    return a && a->fn ? a->fn(a->ctx, bytes, err, errlen) : 0;
}

#endif
