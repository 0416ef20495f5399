/* exec/aread: one reader thread's reads in flight, many at once, and the
 * emulated storage (exec/throttle) applied to their completions instead
 * of to a sleeping thread.
 *
 * A request is the caller's: it says what to read (fd, buf, len, off; or,
 * for an object behind a URL, remote instead of fd) and when it was issued
 * (t0); aread hands it back once
 *   - the read itself is done: a file's through the thread's io_uring
 *     (exec/uring), or, without a ring, read right away in sl__aread_start
 *     ("inline": the storage then blocks the thread, the emulated waits
 *     still do not); a URL's through the thread's libcurl multi engine
 *     (data/remote_multi: many ranged requests in flight, retried by the
 *     blocking path's rules), or inline with sl__remote_read where there is
 *     no engine (built without libcurl, out of memory);
 *   - and the emulated storage lets it complete, by the rule of
 *     sl__throttle_wait: not before t0 + latency (the latency as it stands
 *     when checked), then its bytes take their place in the shared token
 *     bucket's line and it completes when the bucket has let them through.
 *     So R readers x D reads in flight see the same per-read latency and
 *     the same aggregate bandwidth as R x D threads waiting in
 *     sl__throttle_wait.
 * Only its thread may call an aread's functions (the throttle is shared
 * and locks itself). Depends on base, exec/throttle, exec/uring. */
#ifndef SL_AREAD_H
#define SL_AREAD_H

#include <stddef.h>
#include <stdint.h>

#include "data/remote.h"
#include "data/remote_multi.h"
#include "exec/throttle.h"
#include "exec/uring.h"

typedef struct sl__areq {
    /* set by the caller */
    int fd;
    sl__remote_t *remote; /* set: read from this URL's object, not fd */
    char *why;            /* remote: a failure's message, whylen bytes */
    size_t whylen;
    void *buf;
    size_t len; /* 0: nothing to read (the emulated storage still applies) */
    uint64_t off;
    int64_t t0; /* issued (sl__now_ns) */
    /* remote only: with seg set, the range [off, off + len) is scattered
     * over seg[0..nseg) (sl__rmulti_readv; len their sum) and retried at
     * most `retries` times; without a multi engine it fails at once
     * (SL_EUNSUPPORTED), a caller reads its pieces one by one instead */
    const sl__rseg_t *seg;
    int nseg, retries;
    void *user;
    /* the result: bytes read (possibly short), or -errno; remote: len, or
     * the SL_E* code (< 0) with the message in why */
    int64_t res;
    /* aread's own */
    int phase;
    double ticket;
    struct sl__areq *next;
} sl__areq_t;

typedef struct sl__aread {
    sl__uring_t *ring; /* NULL: inline reads */
    sl__throttle_t *thr;
    int in_flight; /* started, not yet handed back */
    int in_kernel; /* submitted to the ring, no completion yet */
    int unsubmitted;
    sl__areq_t *queued;      /* the unsubmitted ones, newest first */
    sl__areq_t *head, *tail; /* read, waiting on the emulated storage */
    /* The kernel refused a submission (-errno; 0: never): every read from
     * then on is inline, the queued ones were read inline at once. */
    int refused;
    /* URLs: the engine (made at the first remote read; no_multi: it could
     * not be, reads inline) and its reads not yet back. */
    sl__rmulti_t *multi;
    int no_multi;
    int in_curl;
} sl__aread_t;

/* A ring of `entries` when use_ring (else, or when the ring cannot be
 * made, inline reads; why gets the cause, may be NULL). @return 0. */
int sl__aread_init(sl__aread_t *a, sl__throttle_t *thr, unsigned entries,
                   int use_ring, char *why, size_t whylen);
/* Only with nothing in flight. */
void sl__aread_destroy(sl__aread_t *a);
/* 1 while reads go through the ring (not before a ring was made, nor
 * after the kernel refused one). */
int sl__aread_uses_ring(const sl__aread_t *a);
/* 1 when URLs are (or, before the first, can be) read through the multi
 * engine rather than inline. */
int sl__aread_uses_multi(const sl__aread_t *a);

/* Starts r (queued for the ring: sl__aread_flush hands the queue to the
 * kernel; a full queue is flushed here). */
void sl__aread_start(sl__aread_t *a, sl__areq_t *r);
void sl__aread_flush(sl__aread_t *a);
int sl__aread_in_flight(const sl__aread_t *a);

/* Up to max requests that are complete, into done[]; waits up to wait_ns
 * for the first (0: do not wait). With force, the emulated storage is
 * skipped and the call waits for at least one request whatever wait_ns
 * (a stop draining the ring: the kernel may still write into buffers;
 * remote reads still in flight are cancelled, each handed back failed).
 * @return how many. */
int sl__aread_reap(sl__aread_t *a, sl__areq_t **done, int max, int64_t wait_ns,
                   int force);

#endif
