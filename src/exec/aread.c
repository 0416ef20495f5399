/* Reads in flight and their emulated completion clock: see aread.h. */
#include "exec/aread.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

enum { AR_KERNEL = 0, AR_LATENCY, AR_BANDWIDTH };

/* The longest single wait: a stop or a knob change is seen this soon. */
#define AR_WAIT_MAX_NS 10000000LL

int sl__aread_init(sl__aread_t *a, sl__throttle_t *thr, unsigned entries,
                   int use_ring, char *why, size_t whylen)
{
    memset(a, 0, sizeof *a);
    a->thr = thr;
    if (why && whylen)
        why[0] = 0;
    if (!use_ring)
        return 0;
    /* A ring that cannot be made (an old kernel's RLIMIT_MEMLOCK, a
     * filter): inline reads, the cause in why. */
    sl__uring_open(&a->ring, entries, why, whylen);
    return 0;
}

void sl__aread_destroy(sl__aread_t *a)
{
    sl__uring_close(a->ring);
    a->ring = NULL;
    sl__rmulti_close(a->multi);
    a->multi = NULL;
}

int sl__aread_uses_ring(const sl__aread_t *a)
{
    return a->ring != NULL && !a->refused;
}

int sl__aread_uses_multi(const sl__aread_t *a)
{
    return !a->no_multi;
}

int sl__aread_in_flight(const sl__aread_t *a)
{
    return a->in_flight;
}

/* The read is done: on to the emulated storage's line. */
static void read_done(sl__aread_t *a, sl__areq_t *r, int64_t res)
{
    r->res = res;
    r->phase = AR_LATENCY;
    r->next = NULL;
    if (a->tail)
        a->tail->next = r;
    else
        a->head = r;
    a->tail = r;
}

/* A read without the ring, right away (short reads are the caller's). */
static int64_t read_inline(const sl__areq_t *r)
{
    ssize_t n;
    do
        n = pread(r->fd, r->buf, r->len, (off_t)r->off);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

/* The kernel will never read what is queued: read it here, oldest first
 * (queued is newest first), and read inline from now on. The ring stays
 * for completions of reads it took before. */
static void refuse(sl__aread_t *a, int rc)
{
    a->refused = rc;
    sl__areq_t *old = NULL;
    while (a->queued) { /* reverse */
        sl__areq_t *r = a->queued;
        a->queued = r->next;
        r->next = old;
        old = r;
    }
    while (old) {
        sl__areq_t *r = old;
        old = r->next;
        a->in_kernel--;
        read_done(a, r, read_inline(r));
    }
    a->unsubmitted = 0;
}

void sl__aread_flush(sl__aread_t *a)
{
    if (!a->ring || !a->unsubmitted)
        return;
    int rc = sl__uring_submit(a->ring);
    if (rc == 0) {
        a->unsubmitted = 0;
        a->queued = NULL;
    } else if (rc < 0) {
        refuse(a, rc);
    }
}

/* A URL's read: through the multi engine (made here the first time), or
 * inline where there is none. */
static void start_remote(sl__aread_t *a, sl__areq_t *r)
{
    if (!a->multi && !a->no_multi) {
        char why[256];
        a->no_multi = sl__rmulti_open(&a->multi, why, sizeof why) != 0;
    }
    r->phase = AR_KERNEL;
    if (a->multi &&
        !(r->seg ? sl__rmulti_readv(a->multi, r->remote, r->off, r->seg,
                                    r->nseg, r->retries, r, r->why, r->whylen)
                 : sl__rmulti_read(a->multi, r->remote, r->off, r->buf, r->len,
                                   r, r->why, r->whylen))) {
        a->in_curl++;
        return;
    }
    if (r->seg) { /* no engine: its pieces are the caller's to read */
        snprintf(r->why, r->whylen, "no curl multi engine");
        read_done(a, r, SL_EUNSUPPORTED);
        return;
    }
    int rc =
        sl__remote_read(r->remote, r->off, r->buf, r->len, r->why, r->whylen);
    read_done(a, r, rc ? rc : (int64_t)r->len);
}

void sl__aread_start(sl__aread_t *a, sl__areq_t *r)
{
    a->in_flight++;
    r->ticket = 0;
    if (r->len && r->remote) {
        start_remote(a, r);
        return;
    }
    if (r->len == 0 || !sl__aread_uses_ring(a)) {
        read_done(a, r, r->len ? read_inline(r) : 0);
        return;
    }
    r->phase = AR_KERNEL;
    if (sl__uring_read(a->ring, r->fd, r->buf, r->len, r->off, r)) {
        sl__aread_flush(a); /* the queue was full */
        if (a->refused ||
            sl__uring_read(a->ring, r->fd, r->buf, r->len, r->off, r)) {
            /* refused, or the kernel busy with the whole queue */
            read_done(a, r, read_inline(r));
            return;
        }
    }
    r->next = a->queued;
    a->queued = r;
    a->unsubmitted++;
    a->in_kernel++;
}

/* Moves every arrived completion to the emulated line: the ring's, then
 * the multi engine's. wait_ns is spent on the engine when it has reads
 * (its transfers only move while it runs), else on the ring. */
static void collect(sl__aread_t *a, int64_t wait_ns)
{
    void *user;
    int64_t res;
    int64_t kwait = a->in_curl > 0 ? 0 : wait_ns;
    while (a->in_kernel > 0 &&
           sl__uring_complete(a->ring, &user, &res, kwait)) {
        a->in_kernel--;
        read_done(a, user, res);
        kwait = wait_ns = 0; /* the rest only if already there */
    }
    int rc;
    while (a->in_curl > 0 &&
           sl__rmulti_complete(a->multi, &user, &rc, wait_ns)) {
        sl__areq_t *r = user;
        a->in_curl--;
        read_done(a, r, rc ? rc : (int64_t)r->len);
        wait_ns = 0;
    }
}

/* Hands back what the emulated storage lets through now; *next_ns: how
 * long until the next one might be (INT64_MAX: nothing waits). */
static int through(sl__aread_t *a, sl__areq_t **done, int max, int force,
                   int64_t *next_ns)
{
    int n = 0;
    *next_ns = INT64_MAX;
    int64_t now = sl__now_ns();
    sl__areq_t **pp = &a->head, *prev = NULL;
    while (*pp && n < max) {
        sl__areq_t *r = *pp;
        int64_t left = 0;
        if (!force && r->phase == AR_LATENCY) {
            left = sl__throttle_due(a->thr, r->t0) - now;
            if (left <= 0) { /* into the bucket's line, in this order */
                r->ticket = sl__throttle_reserve(a->thr, (uint64_t)r->len);
                r->phase = AR_BANDWIDTH;
                left = 0;
            }
        }
        if (!force && r->phase == AR_BANDWIDTH)
            left = sl__throttle_ready(a->thr, r->ticket);
        if (left > 0) {
            if (left < *next_ns)
                *next_ns = left;
            prev = r;
            pp = &r->next;
            continue;
        }
        *pp = r->next; /* through: out of the line */
        if (a->tail == r)
            a->tail = prev;
        done[n++] = r;
        a->in_flight--;
    }
    return n;
}

static void nap(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    nanosleep(&ts, NULL);
}

int sl__aread_reap(sl__aread_t *a, sl__areq_t **done, int max, int64_t wait_ns,
                   int force)
{
    sl__aread_flush(a);
    if (force && a->in_curl > 0)
        sl__rmulti_cancel(a->multi); /* each comes back failed, at once */
    int64_t end = sl__now_ns() + (wait_ns > 0 ? wait_ns : 0);
    for (;;) {
        collect(a, 0);
        int64_t next;
        int n = through(a, done, max, force, &next);
        if (n > 0 || a->in_flight == 0)
            return n;
        int64_t left = end - sl__now_ns();
        if (force)
            left = AR_WAIT_MAX_NS; /* the kernel's reads always end */
        if (left <= 0)
            return 0;
        if (next < left)
            left = next;
        if (left > AR_WAIT_MAX_NS)
            left = AR_WAIT_MAX_NS;
        if (a->in_kernel > 0 || a->in_curl > 0)
            collect(a, left); /* a completion, or the timeout */
        else
            nap(left);
    }
}
