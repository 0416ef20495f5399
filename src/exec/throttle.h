/* exec/throttle: emulated slow or remote storage for the read stage
 * (sl_options_t.read_latency_us / read_bytes_per_s, and the knobs
 * SL_PARAM_READ_LATENCY_US / SL_PARAM_READ_BYTES_PER_S). Two parts, each
 * emulating one property of such storage:
 *
 *   latency    a read completes no sooner than L after it was issued: a
 *              request's round trip (network file system, object store,
 *              a busy disk's queue). It is waiting, not CPU. Each reader
 *              waits for its own read only, so R read threads keep R reads
 *              outstanding and hide the latency up to R / L reads a second.
 *   bandwidth  a token bucket shared by every reader: the bytes read over
 *              any interval T are at most SL_THROTTLE_BURST(rate) + rate x
 *              T (a link's or a device's throughput). More readers do not
 *              raise it.
 *
 * Waits are condition-variable waits on CLOCK_MONOTONIC: no CPU is spent,
 * a new value takes effect on readers already waiting, and
 * sl__throttle_stop wakes them all. Lock order: the loader's mu, then the
 * throttle's (readers never take mu while waiting here). */
#ifndef SL_THROTTLE_H
#define SL_THROTTLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* The bucket holds at most 50 ms of traffic, and at least 64 KiB. */
#define SL_THROTTLE_BURST(rate)                                                \
    ((rate) / 20 > (64 << 10) ? (double)(rate) / 20 : (double)(64 << 10))
#define SL_THROTTLE_MAX_LATENCY_US 60000000LL /* one minute */

typedef struct sl__throttle {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_llong latency_ns; /* written under mu; read bare on the fast path */
    atomic_llong rate;       /* bytes per second; 0: no cap */
    double issued;           /* bytes reserved by readers so far */
    double credit;           /* bytes the bucket has allowed so far:
                                credit <= issued + burst */
    int64_t last_ns;         /* when credit was last brought up to date */
    int stopping;
} sl__throttle_t;

/* Values must be >= 0 (0: that part off); the caller validates. */
void sl__throttle_init(sl__throttle_t *t, int64_t latency_us,
                       int64_t bytes_per_s);
void sl__throttle_destroy(sl__throttle_t *t);
/* Any thread; readers waiting at the time see the new value at once. */
void sl__throttle_set_latency(sl__throttle_t *t, int64_t latency_us);
void sl__throttle_set_rate(sl__throttle_t *t, int64_t bytes_per_s);
int64_t sl__throttle_latency_us(sl__throttle_t *t);
int64_t sl__throttle_rate(sl__throttle_t *t);
/* Called by a reader after it read `bytes` in a read issued at t0_ns
 * (sl__now_ns): returns when that read may complete under the emulated
 * storage, or at once while stopping. */
void sl__throttle_wait(sl__throttle_t *t, uint64_t bytes, int64_t t0_ns);
/* The same rule without waiting, for a reader that keeps many reads in
 * flight (exec/aread): a read issued at t0_ns may complete, as far as the
 * latency goes, at sl__throttle_due(t, t0_ns) (L as it stands now); then
 * its bytes take a place in the bucket's line (sl__throttle_reserve: a
 * ticket, 0 when there is no cap) and it completes once
 * sl__throttle_ready(t, ticket) returns 0 (else: about how many ns are
 * left). sl__throttle_wait is these three with waits in between, so both
 * paths emulate the same storage. While stopping, everything is due. */
int64_t sl__throttle_due(sl__throttle_t *t, int64_t t0_ns);
double sl__throttle_reserve(sl__throttle_t *t, uint64_t bytes);
int64_t sl__throttle_ready(sl__throttle_t *t, double ticket);
/* on = 1: every wait returns at once (the pipeline is stopping); 0: back
 * to normal. */
void sl__throttle_stop(sl__throttle_t *t, int on);

#endif
