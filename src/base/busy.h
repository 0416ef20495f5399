/* base/busy: how long a resource has had work in it — the time with at
 * least one job entered and not yet left, summed, the in-progress stretch
 * counted up to the moment it is read (so a reader sampling every period
 * sees each period's share, not all of it when the stretch ends). For a
 * stage whose jobs overlap (the GPU stage's groups), this is its busy
 * time; samples done / busy time is its capacity. Thread-safe: any thread
 * may enter, leave or read. Depends on nothing but pthreads. */
#ifndef SL_BASE_BUSY_H
#define SL_BASE_BUSY_H

#include <pthread.h>
#include <stdint.h>

typedef struct sl__busy {
    pthread_mutex_t mu;
    int64_t inside; /* jobs entered and not left */
    int64_t since;  /* when inside last went from 0 to 1 (ns) */
    int64_t sum;    /* ns of the stretches that ended */
} sl__busy_t;

void sl__busy_init(sl__busy_t *b);
void sl__busy_destroy(sl__busy_t *b);
/* n jobs enter / leave at now_ns (sl__now_ns). Leaving more than entered
 * is clamped at none inside. */
void sl__busy_enter(sl__busy_t *b, int n, int64_t now_ns);
void sl__busy_leave(sl__busy_t *b, int n, int64_t now_ns);
/* Busy ns up to now_ns, the stretch in progress included. */
int64_t sl__busy_ns(sl__busy_t *b, int64_t now_ns);

#endif
