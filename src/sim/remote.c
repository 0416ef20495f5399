/* sim/remote: remote preparers in the simulator (what is modelled: see
 * sim/remote.h).
 *
 * The engine (sim_engine.c) keeps the trainer's node: its CPU heap holds
 * the jobs of the preparers placed there and the trainer's receive, with
 * ids SL_SIM_REMOTE_ID0 + job, so they share the cores with the consumer
 * and the interference. This file keeps the rest, with the engine's
 * virtual-clock trick: each other node a CPU heap and clock (processor
 * sharing among its jobs, no foreign load), the link a heap of transfers
 * on a byte clock (bandwidth shared equally) and a FIFO of transfers in
 * their latency (a constant, so they leave in order). Every job is a
 * record in one pool: an item's decode, a batch's serialize, store,
 * latency + transfer, the trainer's receive.
 *
 * Batches handed out and not yet taken live in a ring indexed by batch
 * number (at most SL_SIM_REMOTE_MAX_AHEAD of them); each preparer keeps
 * its not-done chunks in the order handed: the sent ones (task over,
 * batches on their way), the running one, the queued ones. */
#include "sim/remote.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

enum { J_ITEM = 1, J_SER, J_STORE, J_MOVE, J_RECV };
enum { B_FREE = 0, B_WORK, B_SENT, B_MOVING, B_HERE };
enum { CH_QUEUED = 0, CH_RUN, CH_SENT };
enum { NX_NONE = 0, NX_NODE, NX_LINK, NX_LAT };

typedef struct rjob {
    int kind, prep;
    int64_t g;
    double t0; /* an item's start (busy time); a transfer's end of latency */
} rjob_t;

typedef struct rchunk {
    int64_t g0;
    int n, state, here;
} rchunk_t;

typedef struct rprep {
    int used; /* a slot in use: live, or retired with work left */
    int live; /* takes new work */
    int node;
    rchunk_t *ch; /* not-done chunks, in the order handed */
    int nch, cap_ch;
    int run;       /* the running task's chunk (index in ch); -1: none */
    int next_item; /* the task's items handed to the decoders */
    int ser;       /* the task's batches serialized */
    int dbusy, sbusy;
} rprep_t;

typedef struct rbatch {
    int state, prep, pending; /* pending: items not yet decoded */
    double t_hand;
} rbatch_t;

typedef struct rnode {
    heap_t cpu;
    int cap;
    double V;
} rnode_t;

typedef struct sl__sim_rem {
    sl__sim_remote_t p; /* link_bw and link_latency_ms change by events */
    rprep_t *prep;
    int nprep; /* slots */
    rnode_t *node;
    int nnode; /* node[0] is the trainer's: the engine's heap, unused here */
    rjob_t *job;
    int *jfree, njfree, job_cap;
    rbatch_t *ring;
    int64_t ring_cap, hand_g;
    heap_t link;
    int link_cap;
    double BL; /* bytes each transfer in flight has received */
    int *lq, lq_head, lq_len, lq_cap;
    int receiving, dirty; /* dirty: the hand-out may have work to give */
    int bytes_known;      /* a chunk was done: the budget applies */
    int nx_what, nx_node;
    int *order;
    sl__sim_remote_stats_t st;
    double rx_bytes; /* this period's, for the snapshot */
} rem_t;

void sl__sim_remote_default(sl__sim_remote_t *r)
{
    memset(r, 0, sizeof *r);
    r->preparers = 0;
    r->threads = 1;
    r->local = 0;
    r->per_node = 16;
    r->node_cores = 16;
    r->chunk = 2;
    r->depth = 2;
    r->serialize_ms = 16.4;
    r->store_ms = 2.8;
    r->receive_ms = 2.2;
    r->link_bw = 1.25e9;
    r->link_latency_ms = 0.1;
    r->store_bytes = 0;
}

int64_t sl__sim_remote_window(int64_t count, int64_t budget,
                              int64_t batch_bytes, int64_t live, int64_t chunk)
{
    if (budget <= 0 || batch_bytes <= 0)
        return count;
    int64_t fit = budget / batch_bytes, least = live * chunk;
    int64_t w = fit > least ? fit : least; /* a chunk per live preparer */
    return w < count ? w : count;
}

/* ---------------------------------------------------------- storage */

static int heap_room(heap_t *h, int *cap)
{
    if (h->n < *cap)
        return 0;
    int c = *cap * 2 + 16;
    hent_t *a = realloc(h->a, (size_t)c * sizeof *a);
    if (!a)
        return -1;
    h->a = a;
    *cap = c;
    return 0;
}

static int job_new(rem_t *R, int kind, int prep, int64_t g)
{
    if (R->njfree == 0) {
        int c = R->job_cap * 2 + 64;
        rjob_t *j = realloc(R->job, (size_t)c * sizeof *j);
        if (j)
            R->job = j;
        int *f = j ? realloc(R->jfree, (size_t)c * sizeof *f) : NULL;
        if (!f)
            return -1;
        R->jfree = f;
        for (int i = c - 1; i >= R->job_cap; i--)
            R->jfree[R->njfree++] = i;
        R->job_cap = c;
    }
    int id = R->jfree[--R->njfree];
    R->job[id] = (rjob_t){kind, prep, g, 0};
    return id;
}

static void job_free(rem_t *R, int id)
{
    R->job[id].kind = 0;
    R->jfree[R->njfree++] = id;
}

static rbatch_t *batch(rem_t *R, int64_t g)
{
    return &R->ring[g & (R->ring_cap - 1)];
}

/* Room in the ring for batches up to hi (exclusive). */
static int ring_room(sl__sim_t *s, rem_t *R, int64_t hi)
{
    int64_t need = hi - s->next_g;
    if (need <= R->ring_cap)
        return 0;
    int64_t c = R->ring_cap ? R->ring_cap : 64;
    while (c < need)
        c *= 2;
    rbatch_t *v = calloc((size_t)c, sizeof *v);
    if (!v)
        return -1;
    for (int64_t g = s->next_g; g < R->hand_g; g++)
        v[g & (c - 1)] = *batch(R, g);
    free(R->ring);
    R->ring = v;
    R->ring_cap = c;
    return 0;
}

static int node_room(rem_t *R, int k)
{
    if (k < R->nnode)
        return 0;
    rnode_t *v = realloc(R->node, (size_t)(k + 1) * sizeof *v);
    if (!v)
        return -1;
    memset(v + R->nnode, 0, (size_t)(k + 1 - R->nnode) * sizeof *v);
    R->node = v;
    R->nnode = k + 1;
    return 0;
}

/* A job of work_s CPU seconds on node k (0: the engine's cores). */
static int cpu_job(sl__sim_t *s, int k, double work_s, int id)
{
    if (k == 0)
        return sl__sim_cpu_push(s, work_s, SL_SIM_REMOTE_ID0 + id);
    rnode_t *n = &s->rm->node[k];
    if (heap_room(&n->cpu, &n->cap))
        return -1;
    sl__sim_heap_push(&n->cpu, n->V + work_s, id);
    return 0;
}

/* ------------------------------------------------------- preparers */

static int node_of(const sl__sim_remote_t *p, int slot)
{
    return slot < p->local ? 0 : 1 + (slot - p->local) / p->per_node;
}

/* Starts what preparer `slot` can start: its next task, items for idle
 * decoders, the serialize of its next batch once decoded. */
static void kick(sl__sim_t *s, int slot)
{
    rem_t *R = s->rm;
    rprep_t *P = &R->prep[slot];
    for (int i = 0; P->run < 0 && i < P->nch; i++)
        if (P->ch[i].state == CH_QUEUED) {
            P->run = i;
            P->ch[i].state = CH_RUN;
            P->next_item = P->ser = 0;
        }
    if (P->run < 0)
        return;
    const rchunk_t *c = &P->ch[P->run];
    int bs = s->p.batch_size, total = c->n * bs;
    while (P->dbusy < R->p.threads && P->next_item < total) {
        int j = job_new(R, J_ITEM, slot, c->g0 + P->next_item / bs);
        if (j < 0)
            break; /* out of memory: the preparer waits */
        R->job[j].t0 = s->now;
        double w = sl__sim_draw_work(s, 0, s->p.read_ms) +
                   sl__sim_draw_work(s, 1, s->p.decode_ms);
        if (cpu_job(s, P->node, w, j)) {
            job_free(R, j);
            break;
        }
        P->dbusy++;
        P->next_item++;
    }
    if (!P->sbusy && P->ser < c->n && batch(R, c->g0 + P->ser)->pending == 0) {
        int j = job_new(R, J_SER, slot, c->g0 + P->ser);
        if (j >= 0 && cpu_job(s, P->node, R->p.serialize_ms / 1000.0, j) == 0)
            P->sbusy = 1;
        else if (j >= 0)
            job_free(R, j);
    }
}

static int send_chunk(sl__sim_t *s, int slot, int64_t g0, int n)
{
    rem_t *R = s->rm;
    rprep_t *P = &R->prep[slot];
    if (ring_room(s, R, g0 + n))
        return -1;
    if (P->nch == P->cap_ch) {
        int c = P->cap_ch * 2 + 4;
        rchunk_t *v = realloc(P->ch, (size_t)c * sizeof *v);
        if (!v)
            return -1;
        P->ch = v;
        P->cap_ch = c;
    }
    P->ch[P->nch++] = (rchunk_t){g0, n, CH_QUEUED, 0};
    for (int64_t g = g0; g < g0 + n; g++)
        *batch(R, g) = (rbatch_t){B_WORK, slot, s->p.batch_size, s->now};
    R->hand_g = g0 + n;
    R->st.handed += n;
    R->st.chunks++;
    kick(s, slot);
    return 0;
}

/* A live preparer has a free slot (fewer than depth chunks). */
static int slot_free(const rem_t *R)
{
    for (int i = 0; i < R->nprep; i++)
        if (R->prep[i].live && R->prep[i].nch < R->p.depth)
            return 1;
    return 0;
}

/* ray.py's _hand_out: the live preparers with the fewest chunks first, up
 * to depth chunks each, within the window ahead of the trainer, whole
 * chunks only (the simulated stream has no horizon, where ray.py sends
 * the last short one): a slot waits until the window has room for one.
 * The window: the count narrowed by the byte budget once a chunk was done
 * (sl__sim_remote_window); where the budget, not the count, leaves a free
 * slot empty, budget_held counts the hand-out (ray.py's _held_by_budget). */
static void hand_out(sl__sim_t *s)
{
    rem_t *R = s->rm;
    R->dirty = 0;
    R->st.hand_outs++;
    int64_t count = (int64_t)R->st.live * R->p.depth * R->p.chunk;
    int64_t bb = R->bytes_known ? llround(s->p.batch_bytes) : 0;
    int64_t window = sl__sim_remote_window(count, llround(R->p.store_bytes), bb,
                                           R->st.live, R->p.chunk);
    if (count > SL_SIM_REMOTE_MAX_AHEAD)
        count = SL_SIM_REMOTE_MAX_AHEAD;
    if (window > SL_SIM_REMOTE_MAX_AHEAD)
        window = SL_SIM_REMOTE_MAX_AHEAD;
    R->st.window = window;
    int64_t lim = s->next_g + window;
    /* the next chunk does not fit: held by the budget if the count alone
     * would have sent it to a free slot */
    if (R->hand_g + R->p.chunk > lim) {
        if (window < count && R->hand_g + R->p.chunk <= s->next_g + count &&
            slot_free(R))
            R->st.budget_held++;
        return;
    }
    int n = 0;
    for (int i = 0; i < R->nprep; i++) { /* insertion sort: stable */
        if (!R->prep[i].live)
            continue;
        int j = n++;
        for (; j > 0 && R->prep[R->order[j - 1]].nch > R->prep[i].nch; j--)
            R->order[j] = R->order[j - 1];
        R->order[j] = i;
    }
    for (int i = 0; i < n; i++) {
        int slot = R->order[i];
        while (R->prep[slot].nch < R->p.depth) {
            if (R->hand_g + R->p.chunk > lim) {
                if (window < count &&
                    R->hand_g + R->p.chunk <= s->next_g + count)
                    R->st.budget_held++;
                return;
            }
            if (send_chunk(s, slot, R->hand_g, R->p.chunk))
                return;
        }
    }
}

/* The live count becomes n: new preparers in the lowest free slots; the
 * highest live ones retire (no new work, they finish theirs). */
static int set_live(sl__sim_t *s, int n)
{
    rem_t *R = s->rm;
    for (int i = R->nprep - 1; i >= 0 && R->st.live > n; i--) {
        rprep_t *P = &R->prep[i];
        if (!P->live)
            continue;
        P->live = 0;
        P->used = P->nch > 0;
        R->st.live--;
    }
    for (int i = 0; R->st.live < n; i++) {
        if (i == R->nprep) {
            rprep_t *v = realloc(R->prep, (size_t)(i + 1) * sizeof *v);
            int *o = v ? realloc(R->order, (size_t)(i + 1) * sizeof *o) : NULL;
            if (v)
                R->prep = v;
            if (!o)
                return SL_ENOMEM;
            R->order = o;
            memset(&R->prep[i], 0, sizeof R->prep[i]);
            R->nprep++;
        }
        rprep_t *P = &R->prep[i];
        if (P->used)
            continue;
        int k = node_of(&R->p, i);
        if (node_room(R, k))
            return SL_ENOMEM;
        P->used = P->live = 1;
        P->node = k;
        P->run = -1;
        P->next_item = P->ser = P->dbusy = P->sbusy = 0;
        R->st.live++;
        if (k > R->st.nodes)
            R->st.nodes = k;
    }
    R->dirty = 1;
    return 0;
}

/* ---------------------------------------------------- batches' path */

/* Batch g is on the trainer's node. */
static void arrived(sl__sim_t *s, int64_t g, int crossed)
{
    rem_t *R = s->rm;
    rbatch_t *b = batch(R, g);
    b->state = B_HERE;
    s->acc.lat_sum += s->now - b->t_hand;
    s->acc.lat_count++;
    if (crossed) {
        R->st.transferred++;
        R->st.link_bytes += s->p.batch_bytes;
        R->rx_bytes += s->p.batch_bytes;
    }
    rprep_t *P = &R->prep[b->prep];
    for (int i = 0; i < P->nch; i++) {
        rchunk_t *c = &P->ch[i];
        if (g < c->g0 || g >= c->g0 + c->n)
            continue;
        if (++c->here == c->n) { /* done: its slot in the depth is free */
            R->bytes_known = 1;
            memmove(c, c + 1, (size_t)(P->nch - i - 1) * sizeof *c);
            P->nch--;
            if (P->run > i)
                P->run--;
            if (!P->live && P->nch == 0)
                P->used = 0;
            R->dirty = 1;
        }
        break;
    }
}

static void link_start(sl__sim_t *s, int j)
{
    rem_t *R = s->rm;
    if (R->p.link_bw <= 0 || s->p.batch_bytes <= 0 ||
        heap_room(&R->link, &R->link_cap)) {
        int64_t g = R->job[j].g;
        job_free(R, j);
        arrived(s, g, 1);
        return;
    }
    R->job[j].kind = J_MOVE;
    sl__sim_heap_push(&R->link, R->BL + s->p.batch_bytes, j);
}

/* Batch g leaves the object store of its preparer's node. */
static void deliver(sl__sim_t *s, int64_t g)
{
    rem_t *R = s->rm;
    rbatch_t *b = batch(R, g);
    if (R->prep[b->prep].node == 0) {
        arrived(s, g, 0);
        return;
    }
    b->state = B_MOVING;
    int j = job_new(R, J_MOVE, b->prep, g);
    if (j < 0) {
        arrived(s, g, 1); /* out of memory: as an unlimited link */
        return;
    }
    if (R->p.link_latency_ms > 0) {
        if (R->lq_len == R->lq_cap) {
            int c = R->lq_cap * 2 + 16;
            int *v = malloc((size_t)c * sizeof *v);
            if (!v) {
                link_start(s, j);
                return;
            }
            for (int i = 0; i < R->lq_len; i++)
                v[i] = R->lq[(R->lq_head + i) % R->lq_cap];
            free(R->lq);
            R->lq = v;
            R->lq_cap = c;
            R->lq_head = 0;
        }
        R->job[j].t0 = s->now + R->p.link_latency_ms / 1000.0;
        R->lq[(R->lq_head + R->lq_len++) % R->lq_cap] = j;
    } else {
        link_start(s, j);
    }
}

static void store(sl__sim_t *s, int slot, int64_t g)
{
    rem_t *R = s->rm;
    if (R->p.store_ms > 0) {
        int j = job_new(R, J_STORE, slot, g);
        if (j >= 0 &&
            cpu_job(s, R->prep[slot].node, R->p.store_ms / 1000.0, j) == 0)
            return;
        if (j >= 0)
            job_free(R, j);
    }
    deliver(s, g);
}

/* The trainer takes its next batch (received). */
static void take(sl__sim_t *s)
{
    rem_t *R = s->rm;
    batch(R, s->next_g)->state = B_FREE;
    sl__sim_consumer_got(s);
    R->dirty = 1;
}

static void job_done(sl__sim_t *s, int j)
{
    rem_t *R = s->rm;
    rjob_t job = R->job[j];
    job_free(R, j);
    if (job.kind == J_RECV) {
        R->receiving = 0;
        take(s);
        return;
    }
    if (job.kind == J_STORE) {
        deliver(s, job.g);
        return;
    }
    rprep_t *P = &R->prep[job.prep];
    if (job.kind == J_ITEM) {
        s->acc.decode_busy += s->now - job.t0;
        s->acc.decode_items++;
        s->decode_items++;
        P->dbusy--;
        batch(R, job.g)->pending--;
    } else { /* J_SER */
        P->sbusy = 0;
        batch(R, job.g)->state = B_SENT;
        rchunk_t *c = &P->ch[P->run];
        if (++P->ser == c->n) { /* the task is over: its batches leave */
            int64_t g0 = c->g0;
            int n = c->n;
            c->state = CH_SENT;
            P->run = -1;
            for (int64_t g = g0; g < g0 + n; g++)
                store(s, job.prep, g);
        }
    }
    kick(s, job.prep);
}

/* ------------------------------------------------------ engine hooks */

int sl__sim_remote_wanted(const sl__sim_t *s)
{
    if (s->p.remote.preparers > 0)
        return 1;
    for (int i = 0; i < s->p.n_events; i++)
        if (s->p.events[i].kind == SL_SIM_EV_REMOTE_PREPARERS)
            return 1;
    return 0;
}

int sl__sim_remote_create(sl__sim_t *s)
{
    rem_t *R = calloc(1, sizeof *R);
    if (!R)
        return SL_ENOMEM;
    s->rm = R;
    R->p = s->p.remote;
    sl__sim_remote_t *p = &R->p;
    p->threads = p->threads > 0 ? p->threads : 1;
    p->per_node = p->per_node > 0 ? p->per_node : 1;
    p->node_cores = p->node_cores > 0 ? p->node_cores : 1;
    p->chunk = p->chunk > 0 ? p->chunk : 1;
    p->depth = p->depth > 0 ? p->depth : 1;
    p->local = p->local > 0 ? p->local : 0;
    if (node_room(R, 0))
        return SL_ENOMEM;
    return set_live(s, p->preparers > 0 ? p->preparers : 0);
}

void sl__sim_remote_destroy(sl__sim_t *s)
{
    rem_t *R = s->rm;
    if (!R)
        return;
    for (int i = 0; i < R->nprep; i++)
        free(R->prep[i].ch);
    for (int k = 0; k < R->nnode; k++)
        free(R->node[k].cpu.a);
    free(R->prep);
    free(R->order);
    free(R->node);
    free(R->job);
    free(R->jfree);
    free(R->ring);
    free(R->link.a);
    free(R->lq);
    free(R);
    s->rm = NULL;
}

void sl__sim_remote_dispatch(sl__sim_t *s)
{
    rem_t *R = s->rm;
    for (;;) {
        if (s->cons == CONS_WAIT && !R->receiving && s->next_g < R->hand_g &&
            batch(R, s->next_g)->state == B_HERE) {
            int j =
                R->p.receive_ms > 0 ? job_new(R, J_RECV, -1, s->next_g) : -1;
            if (j >= 0 && cpu_job(s, 0, R->p.receive_ms / 1000.0, j) == 0) {
                R->receiving = 1;
            } else {
                if (j >= 0)
                    job_free(R, j);
                take(s);
            }
        }
        if (!R->dirty)
            break;
        hand_out(s);
    }
}

static double node_rate(const rem_t *R, const rnode_t *n)
{
    return n->cpu.n > R->p.node_cores ? (double)R->p.node_cores / n->cpu.n
                                      : 1.0;
}

double sl__sim_remote_next(sl__sim_t *s)
{
    rem_t *R = s->rm;
    double tn = INFINITY;
    R->nx_what = NX_NONE;
    for (int k = 1; k < R->nnode; k++) {
        const rnode_t *n = &R->node[k];
        if (n->cpu.n == 0)
            continue;
        double t = s->now + (n->cpu.a[0].key - n->V) / node_rate(R, n);
        if (t < tn) {
            tn = t;
            R->nx_what = NX_NODE;
            R->nx_node = k;
        }
    }
    if (R->link.n > 0) {
        double rate = R->p.link_bw / R->link.n;
        double t = s->now + (R->link.a[0].key - R->BL) / rate;
        if (t < tn) {
            tn = t;
            R->nx_what = NX_LINK;
        }
    }
    if (R->lq_len > 0) {
        double t = R->job[R->lq[R->lq_head]].t0;
        if (t < tn) {
            tn = t;
            R->nx_what = NX_LAT;
        }
    }
    return tn;
}

void sl__sim_remote_advance(sl__sim_t *s, double dt)
{
    rem_t *R = s->rm;
    for (int k = 1; k < R->nnode; k++) {
        rnode_t *n = &R->node[k];
        if (n->cpu.n == 0)
            continue;
        double r = node_rate(R, n);
        n->V += r * dt;
        R->st.node_cpu_s += n->cpu.n * r * dt;
    }
    if (R->link.n > 0) {
        R->BL += R->p.link_bw / R->link.n * dt;
        R->st.link_busy_s += dt;
    }
    /* chunks are whole and consecutive from batch 0: the trainer's starts
     * at next_g rounded down to a chunk */
    int64_t in_flight = R->hand_g - s->next_g;
    if (in_flight > 0) {
        R->st.in_flight_s += (double)in_flight * dt;
        R->st.store_s +=
            (double)(R->hand_g - (s->next_g - s->next_g % R->p.chunk)) * dt;
    }
}

void sl__sim_remote_fire(sl__sim_t *s)
{
    rem_t *R = s->rm;
    switch (R->nx_what) {
    case NX_NODE:
        job_done(s, sl__sim_heap_pop(&R->node[R->nx_node].cpu));
        break;
    case NX_LINK: {
        int j = sl__sim_heap_pop(&R->link);
        int64_t g = R->job[j].g;
        job_free(R, j);
        arrived(s, g, 1);
        break;
    }
    case NX_LAT: {
        int j = R->lq[R->lq_head];
        R->lq_head = (R->lq_head + 1) % R->lq_cap;
        R->lq_len--;
        link_start(s, j);
        break;
    }
    }
    R->nx_what = NX_NONE;
}

void sl__sim_remote_cpu_done(sl__sim_t *s, int job)
{
    job_done(s, job);
}

void sl__sim_remote_world(sl__sim_t *s, const sl__sim_event_t *e)
{
    rem_t *R = s->rm;
    if (!R)
        return; /* remote events without remote preparers change nothing */
    switch (e->kind) {
    case SL_SIM_EV_REMOTE_PREPARERS:
        set_live(s, e->value > 0 ? (int)e->value : 0);
        break;
    case SL_SIM_EV_LINK_BW:
        R->p.link_bw = e->value > 0 ? e->value : 0;
        while (R->p.link_bw == 0 && R->link.n > 0) { /* unlimited: done */
            int j = sl__sim_heap_pop(&R->link);
            int64_t g = R->job[j].g;
            job_free(R, j);
            arrived(s, g, 1);
        }
        break;
    case SL_SIM_EV_LINK_LATENCY_MS:
        R->p.link_latency_ms = e->value > 0 ? e->value : 0;
        break;
    }
}

void sl__sim_remote_snapshot(sl__sim_t *s, double dt, sl_snapshot_t *out)
{
    rem_t *R = s->rm;
    int workers = 0;
    for (int i = 0; i < R->nprep; i++)
        workers += R->prep[i].used ? R->p.threads : 0;
    out->decode.workers = workers;
    out->decode.busy = workers > 0 && dt > 0
                           ? fmin(1.0, s->acc.decode_busy / (workers * dt))
                           : 0;
    out->decode.queue_depth = out->decode.queue_capacity = 0;
    memset(&out->read, 0, sizeof out->read);
    out->net_rx_bytes_per_s = dt > 0 ? R->rx_bytes / dt : 0;
    R->rx_bytes = 0;
    int here = 0;
    for (int64_t g = s->next_g; g < R->hand_g; g++)
        here += batch(R, g)->state == B_HERE;
    out->batches_ready = here;
    out->batches_filling = (int)(R->hand_g - s->next_g) - here;
}

void sl__sim_remote_stats(const sl__sim_t *s, sl__sim_remote_stats_t *st)
{
    if (!s->rm) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = s->rm->st;
}
