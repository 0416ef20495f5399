/* The loader's read stage with reads in flight (docs/DESIGN.md, "I/O
 * depth"): each reader thread keeps its share of io_depth reads going
 * through its own exec/aread (an io_uring), instead of one blocking read
 * at a time. A read is: claim (batch, slot) -> open / locate and charge
 * the read budget (sl__source_read_begin) -> the read in flight -> its
 * completion, when the emulated storage lets it through ->
 * sl__source_read_end -> decode_q. Slots make order free, as with threads:
 * the stream does not depend on the depth.
 *
 * Nothing here may wait on what only this thread can give back: with
 * reads in flight, a claim, a free item, a budget charge and a push to
 * decode_q are only tried (a claimed slot whose charge did not fit waits
 * in `later`, a finished read in `held`, until after later completions);
 * with none in flight they wait as the thread-per-read path does.
 *
 * RING_ENTRIES bounds submissions at once, not reads in flight: a fuller
 * queue is submitted and refilled, and completions beyond the ring's
 * (twice the entries) wait in the kernel's overflow list
 * (IORING_FEAT_NODROP, Linux 5.5). */
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

#define RING_ENTRIES 256
#define REAP_MAX 64

enum { ST_STARTED = 0, ST_LATER, ST_STOP };

int sl__loader_io_depth(const sl_loader_t *l)
{
    int d = atomic_load(&((sl_loader_t *)l)->io_depth);
    return d > 0 ? d : atomic_load(&((sl_loader_t *)l)->readers_now);
}

/* Reads in flight this reader keeps: its share of the depth. */
static int share(const sl_loader_t *l, int id)
{
    int r = atomic_load(&((sl_loader_t *)l)->readers_now);
    int d = sl__loader_io_depth(l);
    if (r < 1 || id >= r)
        return 0;
    return d / r + (id < d % r);
}

static sl__aread_t *ring_of(sl_loader_t *l, int id)
{
    if (l->aread[id])
        return l->aread[id];
    sl__aread_t *a = calloc(1, sizeof *a);
    char why[160];
    if (!a || sl__aread_init(a, &l->thr, RING_ENTRIES, 1, why, sizeof why)) {
        free(a);
        return NULL;
    }
    l->aread[id] = a;
    return a;
}

void sl__loader_aread_free(sl_loader_t *l)
{
    for (int i = 0; i < SL_WORKERS_MAX; i++) {
        if (l->aread[i])
            sl__aread_destroy(l->aread[i]);
        free(l->aread[i]);
        l->aread[i] = NULL;
    }
}

/* Finished reads waiting for room in decode_q, oldest first (chained
 * through rq.next, which aread no longer uses). A reader never blocks on
 * a full decode_q while reads are in flight: it would start no read while
 * it waits, and the decoders would find nothing read when they free up. */
typedef struct held {
    item_t *head, *tail;
    int n;
} held_t;

static void hold(held_t *h, item_t *it)
{
    it->rq.next = NULL;
    if (h->tail)
        h->tail->rq.next = &it->rq;
    else
        h->head = it;
    h->tail = it;
    h->n++;
}

/* Starts one read: the item waiting in *later, else a new claim.
 * block: nothing is in flight, so waiting is safe. A cache hit needs no
 * read: it goes straight to the finished ones in h. */
static int start_one(sl_loader_t *l, sl__aread_t *a, item_t **later, int block,
                     held_t *h)
{
    item_t *it = *later;
    if (!it) {
        int rc = block ? sl__queue_pop_newest(l->free_items, (void **)&it)
                       : sl__queue_try_pop_newest(l->free_items, (void **)&it);
        if (rc)
            return block ? ST_STOP : ST_LATER;
        bbuf_t *bb;
        int slot;
        int64_t sample;
        rc = sl__loader_claim(l, block, &bb, &slot, &sample);
        if (rc) {
            sl__queue_push(l->free_items, it); /* fails only when stopping */
            return rc == SL__CLAIM_LATER ? ST_LATER : ST_STOP;
        }
        it->bb = bb;
        it->slot = slot;
        it->sample = sample;
        it->err[0] = 0;
        it->rc = 0;
        it->t0 = sl__now_ns();
    }
    charge_t ch = {&l->rbud, "reading it", 0, 0, !block};
    sl__admit_t adm = {sl__loader_admit_charge, &ch};
    int hit = sl__loader_cache_hit(l, it, &adm);
    if (hit == 1) {
        it->charged = ch.bytes;
        *later = NULL;
        atomic_fetch_add(&l->read_busy_ns, sl__now_ns() - it->t0);
        atomic_fetch_add(&l->read_items, 1);
        it->rq = (sl__areq_t){.fd = -1, .user = it}; /* held by rq.next */
        hold(h, it);
        return ST_STARTED;
    }
    if (ch.stopped)
        return ST_STOP;
    if (hit == SL__MEMBUDGET_LATER) {
        *later = it;
        return ST_LATER;
    }
    int rc = sl__source_read_begin(l->src, it->sample, &it->data, &it->scratch,
                                   &adm, &it->rd, it->err, sizeof it->err);
    it->charged = ch.bytes; /* given back when the sample is decoded */
    if (ch.stopped)
        return ST_STOP; /* the stop gives back the charge, rebuilds items */
    if (rc == SL__MEMBUDGET_LATER) {
        *later = it;
        return ST_LATER;
    }
    *later = NULL;
    it->rc = rc;
    /* A read that failed before it began still passes the emulated
     * storage, as a blocking read's error does. */
    it->rq = (sl__areq_t){.fd = rc ? -1 : it->rd.fd,
                          .remote = rc ? NULL : it->rd.remote,
                          .why = it->rwhy,
                          .whylen = sizeof it->rwhy,
                          .buf = it->rd.dst,
                          .len = rc ? 0 : it->rd.len,
                          .off = it->rd.off,
                          .t0 = it->t0,
                          .user = it};
    atomic_fetch_add(&l->reads_in_flight, 1);
    sl__aread_start(a, &it->rq);
    return ST_STARTED;
}

/* A read handed back: finished (what begin opened is closed, whatever
 * the result) and counted. Returns 1 when the pipeline stops (the item is
 * left to the stop). */
static int finish(sl_loader_t *l, item_t *it, int stopping)
{
    uint64_t stored = 0;
    atomic_fetch_sub(&l->reads_in_flight, 1);
    it->rd.why = it->rwhy;
    if (!it->rc)
        it->rc =
            sl__source_read_end(l->src, &it->rd, it->rq.res, &it->data,
                                &it->scratch, &stored, it->err, sizeof it->err);
    if (stopping)
        return 1;
    sl__loader_cache_fill(l, it);
    atomic_fetch_add(&l->bytes_read, (long long)stored);
    atomic_fetch_add(&l->read_busy_ns, sl__now_ns() - it->t0);
    atomic_fetch_add(&l->read_items, 1);
    return 0;
}

/* Hands held items to the decoders (block: waits for room for the
 * first). Returns 1 when decode_q is closed (stopping). */
static int hand_over(sl_loader_t *l, held_t *h, int block)
{
    while (h->head) {
        /* Read before the push: from then on the item is a decoder's. */
        sl__areq_t *next = h->head->rq.next;
        int rc = block ? sl__queue_push(l->decode_q, h->head)
                       : sl__queue_try_push(l->decode_q, h->head);
        if (rc == 1)
            return 0; /* full */
        if (rc)
            return 1;
        h->head = next ? next->user : NULL;
        if (!h->head)
            h->tail = NULL;
        h->n--;
        block = 0;
    }
    return 0;
}

/* Stopping: every read the kernel still holds is waited for (it writes
 * into the item's buffer), then closed; the stop rebuilds the items. */
static void drain(sl_loader_t *l, sl__aread_t *a)
{
    sl__areq_t *done[REAP_MAX];
    while (sl__aread_in_flight(a) > 0) {
        int n = sl__aread_reap(a, done, REAP_MAX, 0, 1);
        for (int i = 0; i < n; i++)
            finish(l, done[i]->user, 1);
    }
}

/* A reader whose share is 0 (io_depth below the read threads) waits for
 * the knobs to change or the pipeline to stop. */
static void idle(sl_loader_t *l, int id)
{
    pthread_mutex_lock(&l->mu);
    while (!l->stopping && share(l, id) == 0 &&
           id < atomic_load(&l->readers_now))
        pthread_cond_wait(&l->cv_work, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

/* The wait for completions: short while finished reads wait for room or
 * a claim was refused for now (neither signals this thread), else until
 * a completion is due (aread caps each wait at 10 ms). */
#define WAIT_HELD_NS 1000000
#define WAIT_LATER_NS 2000000
#define WAIT_NS 20000000

void sl__loader_reader_async(sl_loader_t *l, int id)
{
    sl__aread_t *a = ring_of(l, id);
    if (!a) { /* out of memory: this thread reads one at a time */
        sl__loader_reader_sync(l, id);
        return;
    }
    item_t *later = NULL;
    held_t h = {NULL, NULL, 0};
    sl__areq_t *done[REAP_MAX];
    int stop = 0;
    while (!stop && !atomic_load(&l->halt)) {
        if (hand_over(l, &h, 0))
            break;
        /* What this reader holds counts against its share: reads in
         * flight and finished ones waiting for the decoders. */
        int n = sl__aread_in_flight(a) + h.n;
        if (n == 0 && !later) {
            if (!sl__workers_checkpoint(l->readers, id))
                break;
            if (share(l, id) == 0) {
                idle(l, id);
                continue;
            }
        }
        int st = ST_STARTED;
        if (later) /* a claimed slot comes first, whatever the share */
            st = start_one(l, a, &later, n == 0, &h);
        while (st == ST_STARTED && !later &&
               (n = sl__aread_in_flight(a) + h.n) < share(l, id))
            st = start_one(l, a, &later, n == 0, &h);
        if (st == ST_STOP)
            break;
        sl__aread_flush(a);
        if (sl__aread_in_flight(a) == 0) {
            /* Nothing in flight: waiting for room is safe now. */
            if (h.n && hand_over(l, &h, 1))
                break;
            continue;
        }
        int64_t wait = h.n              ? WAIT_HELD_NS
                       : st == ST_LATER ? WAIT_LATER_NS
                                        : WAIT_NS;
        int got = sl__aread_reap(a, done, REAP_MAX, wait, 0);
        for (int i = 0; i < got; i++) { /* after a stop: closed, dropped */
            item_t *it = done[i]->user;
            stop = finish(l, it, stop) || stop;
            if (!stop)
                hold(&h, it);
        }
    }
    drain(l, a); /* held items are the stop's: it rebuilds every item */
}
