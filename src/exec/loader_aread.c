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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/coalesce.h"
#include "loader_internal.h"

#define RING_ENTRIES 256
#define REAP_MAX 64
/* Coalesced reads: remote reads begun and not yet started, at most this
 * many (then started), and the widest gap one request may span. */
#define PEND_MAX 256
#define COALESCE_GAP (16u << 10)

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

/* Coalesced reads (docs/DESIGN.md, "Coalesced reads"). A reader's
 * remote reads are begun (slot claimed, budget charged, buffer made) as
 * before but not started at once: they wait in `pend` until the reader
 * has claimed what its share allows, then sl__coalesce_plan groups those
 * of one file lying next to each other, and each group is one ranged
 * request scattered straight into its items' buffers (the gaps are
 * dropped as they arrive: no buffer beyond the items', so the read
 * budget still bounds the bytes). A group's request is tried once; when
 * it fails its items are started one by one, each with the usual retries
 * and messages, so errors and skips name the record as without
 * coalescing. */
typedef struct pend {
    item_t *it[PEND_MAX];
    int n;
    int out;            /* this reader's items whose reads are in flight */
    int reqs;           /* its requests in flight (a group's is one) */
    int runs;           /* runs of neighbours among it[0..n) */
    uint64_t run_first; /* where the run it[n - 1] ends is begins */
} pend_t;

/* [off, off + len) of obj continues the run of pending records that ends
 * with last (which begins at first): the rule sl__coalesce_plan merges
 * by, so a record claimed for it joins last's request. */
static int continues(const sl_loader_t *l, const item_t *last, uint64_t first,
                     const void *obj, uint64_t off, uint64_t len)
{
    uint64_t end = last->rq.off + last->rq.len;
    return obj == last->rq.remote && off >= end && off - end <= COALESCE_GAP &&
           off + len - first <= l->coalesce_max;
}

/* Beyond its share, a reader claims on while the next sample in the
 * order continues its last pending run: a request of several neighbours
 * costs about what a request of one does, and the items it holds are
 * charged to the read budget as any. At most EXTEND_MAX such a round. */
#define EXTEND_MAX 64
static int extends(sl_loader_t *l, const pend_t *p)
{
    int64_t next;
    const void *obj;
    uint64_t off, len;
    return p->n > 0 && p->n < PEND_MAX && sl__loader_peek(l, &next) &&
           sl__source_where(l->src, next, &obj, &off, &len) &&
           continues(l, p->it[p->n - 1], p->run_first, obj, off, len);
}

typedef struct group {
    sl__areq_t rq; /* the one request; rq.seg marks a group */
    int n;
    char why[SL_MSG];
    item_t **it; /* n, by offset */
    sl__rseg_t *seg;
} group_t;

static void start_single(sl_loader_t *l, sl__aread_t *a, pend_t *p, item_t *it)
{
    p->reqs++;
    if (it->rq.remote) {
        atomic_fetch_add(&l->req_n, 1);
        atomic_fetch_add(&l->req_records, 1);
    }
    sl__aread_start(a, &it->rq);
}

/* One request for it[order[0..k)] (by offset); 1 when it could not be
 * made (out of memory: the caller starts them one by one). */
static int start_group(sl_loader_t *l, sl__aread_t *a, pend_t *p,
                       item_t *const *its, const int *order, int k)
{
    group_t *g = malloc(sizeof *g + sizeof(item_t *) * (size_t)k +
                        sizeof(sl__rseg_t) * (size_t)(2 * k));
    if (!g)
        return 1;
    g->n = k;
    g->it = (item_t **)(g + 1);
    g->seg = (sl__rseg_t *)(g->it + k);
    int ns = 0;
    uint64_t first = its[order[0]]->rq.off, end = first;
    for (int j = 0; j < k; j++) {
        item_t *it = its[order[j]];
        g->it[j] = it;
        if (it->rq.off > end)
            g->seg[ns++] = (sl__rseg_t){NULL, (size_t)(it->rq.off - end)};
        g->seg[ns++] = (sl__rseg_t){it->rq.buf, it->rq.len};
        end = it->rq.off + it->rq.len;
    }
    g->why[0] = 0;
    g->rq = (sl__areq_t){.fd = -1,
                         .remote = g->it[0]->rq.remote,
                         .why = g->why,
                         .whylen = sizeof g->why,
                         .len = (size_t)(end - first),
                         .off = first,
                         .t0 = sl__now_ns(),
                         .seg = g->seg,
                         .nseg = ns,
                         .retries = 0,
                         .user = g};
    atomic_fetch_add(&l->req_n, 1);
    atomic_fetch_add(&l->req_records, k);
    p->reqs++;
    sl__aread_start(a, &g->rq);
    return 0;
}

/* Starts every pending read: grouped where they lie together. */
static void launch(sl_loader_t *l, sl__aread_t *a, pend_t *p)
{
    if (!p->n)
        return;
    sl__crec_t rec[PEND_MAX];
    int order[PEND_MAX], start[PEND_MAX + 1];
    for (int i = 0; i < p->n; i++)
        rec[i] = (sl__crec_t){p->it[i]->rq.remote, p->it[i]->rq.off,
                              p->it[i]->rq.len};
    int ng = sl__coalesce_plan(rec, p->n, l->coalesce_max, COALESCE_GAP, order,
                               start);
    if (ng < 0)
        ng = p->n; /* out of memory: one by one (the plan says so) */
    for (int g = 0; g < ng; g++) {
        int k = start[g + 1] - start[g];
        const int *o = order + start[g];
        if (k > 1 && !start_group(l, a, p, p->it, o, k))
            continue;
        for (int j = 0; j < k; j++)
            start_single(l, a, p, p->it[o[j]]);
    }
    p->n = 0;
    p->runs = 0;
}

/* Starts one read: the item waiting in *later, else a new claim.
 * block: nothing is in flight, so waiting is safe. A cache hit needs no
 * read: it goes straight to the finished ones in h. */
static int start_one(sl_loader_t *l, sl__aread_t *a, item_t **later, int block,
                     held_t *h, pend_t *p)
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
    p->out++;
    if (l->coalesce_max && !rc && it->rq.remote && it->rq.len &&
        sl__aread_uses_multi(a)) {
        if (!p->n || !continues(l, p->it[p->n - 1], p->run_first, it->rq.remote,
                                it->rq.off, it->rq.len)) {
            p->run_first = it->rq.off;
            p->runs++;
        }
        p->it[p->n++] = it; /* started with its neighbours */
        if (p->n == PEND_MAX)
            launch(l, a, p);
        return ST_STARTED;
    }
    start_single(l, a, p, it);
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

/* A request handed back: an item's, finished and held for the decoders;
 * or a group's, each of its items so, or, when it failed (and the
 * pipeline is not stopping), each started again on its own. Returns 1
 * when the pipeline stops. */
static int reaped(sl_loader_t *l, sl__aread_t *a, sl__areq_t *r, int stop,
                  held_t *h, pend_t *p)
{
    p->reqs--;
    if (!r->seg) {
        item_t *it = r->user;
        p->out--;
        stop = finish(l, it, stop) || stop;
        if (!stop)
            hold(h, it);
        return stop;
    }
    group_t *g = r->user;
    int ok = r->res == (int64_t)r->len;
    if (!ok && !stop) {
        atomic_fetch_add(&l->req_fallbacks, 1);
        for (int j = 0; j < g->n; j++) {
            g->it[j]->rq.t0 = sl__now_ns();
            start_single(l, a, p, g->it[j]);
        }
        free(g);
        return 0;
    }
    for (int j = 0; j < g->n; j++) {
        item_t *it = g->it[j];
        it->rq.res = ok ? (int64_t)it->rq.len : r->res;
        if (!ok)
            snprintf(it->rwhy, sizeof it->rwhy, "%s", g->why);
        p->out--;
        stop = finish(l, it, stop) || stop;
        if (!stop)
            hold(h, it);
    }
    free(g);
    return stop;
}

/* Stopping: every read the kernel still holds is waited for (it writes
 * into the item's buffer), then closed; the stop rebuilds the items. */
static void drain(sl_loader_t *l, sl__aread_t *a, pend_t *p)
{
    sl__areq_t *done[REAP_MAX];
    held_t none = {NULL, NULL, 0};
    while (sl__aread_in_flight(a) > 0) {
        int n = sl__aread_reap(a, done, REAP_MAX, 0, 1);
        for (int i = 0; i < n; i++)
            reaped(l, a, done[i], 1, &none, p);
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
    pend_t *p = calloc(1, sizeof *p);
    if (!a || !p) { /* out of memory: this thread reads one at a time */
        free(p);
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
        /* What this reader holds counts against its share: requests in
         * flight (a coalesced one is one), runs of neighbours begun and
         * waiting to be started together, and finished reads waiting for
         * the decoders. n: everything it holds (0: it may wait). */
        int n = p->out + h.n;
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
            st = start_one(l, a, &later, n == 0, &h, p);
        while (st == ST_STARTED && !later &&
               p->reqs + p->runs + h.n < share(l, id))
            st = start_one(l, a, &later, (n = p->out + h.n) == 0, &h, p);
        for (int k = 0; k < EXTEND_MAX && st == ST_STARTED && !later &&
                        l->coalesce_max && extends(l, p);
             k++)
            st = start_one(l, a, &later, 0, &h, p);
        launch(l, a, p); /* before a stop too: the drain ends them */
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
        for (int i = 0; i < got; i++) /* after a stop: closed, dropped */
            stop = reaped(l, a, done[i], stop, &h, p);
    }
    drain(l, a, p); /* held items are the stop's: it rebuilds every item */
    free(p);
}
