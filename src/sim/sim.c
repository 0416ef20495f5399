/* sim/sim: the discrete-event engine behind sim.h.
 *
 * Time advances from event to event. Between two events every rate is
 * constant, so the engine keeps no per-thread remaining work: it keeps
 * virtual clocks (the classic processor-sharing trick):
 *   - V: CPU seconds each full-demand thread has received. A CPU job of
 *     work w started at V0 ends when V reaches V0 + w; all our threads run
 *     at the same rate r (the processor-sharing share), so the next CPU
 *     completion is the heap minimum, reached after (key - V) / r seconds.
 *   - B: bytes each storage transfer has received (bandwidth shared
 *     equally by the transfers in flight).
 * Per-read latency is a constant, so reads in latency leave in FIFO order.
 *
 * Items are the read-ahead (profile read_ahead, the engine's SL_ITEMS):
 * free -> [latency] -> [transfer] -> read CPU -> decode queue -> decode CPU
 * -> free, the slot done. A reader is busy from the claim of a slot to the
 * end of its read; a decoder from the pop to the end of its decode, as the
 * engine's busy counters measure (wall time, so contention shows as busy).
 *
 * Counters are added when an item, a batch or a wait completes, as the
 * engine adds them, so a snapshot is what the real collector would see. */
#include "sim/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

/* A Philox purpose of the simulator's own (the loader uses 1..3). Each
 * stream holds 2^26 words; a new stream starts every 2^24 words. */
#define SIM_RNG_PURPOSE 0x53u
#define SIM_RNG_WORDS (1u << 24)

enum { IT_FREE = 0, IT_LAT, IT_IO, IT_RCPU, IT_QUEUED, IT_DCPU };
enum { BUF_NONE = 0, BUF_FREE, BUF_FILLING, BUF_READY, BUF_HELD };
enum { CONS_WAIT = 0, CONS_STEP };
enum { EV_END = 0, EV_CPU, EV_IO, EV_LAT, EV_STEP, EV_WORLD };

typedef struct hent {
    double key;
    int id;
} hent_t;

typedef struct heap {
    hent_t *a;
    int n;
} heap_t;

typedef struct item {
    int state;
    int buf;      /* batch buffer of its slot */
    double t0;    /* start of the current stage (busy time) */
    double t_lat; /* end of the latency phase */
} item_t;

typedef struct bbuf {
    int state;
    int64_t g;
    int pending;
    double t_claim;
} bbuf_t;

/* Sums over one period, turned into rates by the snapshot. */
typedef struct acc {
    double read_busy, decode_busy, wait, lat_sum;
    int64_t read_items, decode_items, lat_count;
    double cpu_self, cpu_other, psi_wait;
} acc_t;

struct sl__sim {
    sl__sim_profile_t p;
    sl__knobs_t k;
    uint64_t seed, stream;
    sl__rng_t rng;
    uint32_t words;
    double spare;
    int has_spare;
    double ln_mu[2], ln_sigma[2]; /* lognormal of read (0), decode (1) */

    double now;
    int next_ev;
    double interfere, bw, step_ms, ccpu;

    item_t *items;
    int nitems;
    int *free_stack, nfree;
    int *dq, dq_head, dq_len; /* decode queue: ring of item ids */
    int *lq, lq_head, lq_len; /* items in latency: ring, FIFO */
    heap_t cpu, io;
    double V, B;

    int r_alive, r_busy, d_alive, d_busy;

    bbuf_t *bufs;
    int cap_bufs, nalloc, nfree_bufs;
    int cur, cur_slot;
    int64_t claim_g, next_g;

    int cons;
    int held;
    int nready; /* READY buffers: the consumer looks only when some are */
    double step_rem, t_wait0;

    int64_t samples, batches, bytes, read_items, decode_items;
    double psi;
    acc_t acc;
    void (*on_batch)(void *, double, double);
    void *on_batch_ctx;
};

/* ------------------------------------------------------------ random */

static void rng_stream(sl__sim_t *s)
{
    sl__rng_init(&s->rng, s->seed, 0, s->stream++, SIM_RNG_PURPOSE);
    s->words = 0;
}

/* Uniform in [0, 1) from one 32-bit word: service times need no more
 * resolution, and it halves the Philox work. */
static double uniform01(sl__sim_t *s)
{
    if (++s->words >= SIM_RNG_WORDS)
        rng_stream(s);
    return sl__rng_u32(&s->rng) * 0x1.0p-32;
}

static double normal(sl__sim_t *s)
{
    if (s->has_spare) {
        s->has_spare = 0;
        return s->spare;
    }
    /* Marsaglia's polar method: no trigonometry, 1.27 tries on average. */
    double u, v, q;
    do {
        u = 2.0 * uniform01(s) - 1.0;
        v = 2.0 * uniform01(s) - 1.0;
        q = u * u + v * v;
    } while (q >= 1.0 || q == 0.0);
    double f = sqrt(-2.0 * log(q) / q);
    s->spare = v * f;
    s->has_spare = 1;
    return u * f;
}

/* Lognormal with mean m and CV cv: sigma^2 = ln(1 + cv^2), mu = ln m -
 * sigma^2 / 2. Seconds. */
static double draw_work(sl__sim_t *s, int stage, double mean_ms)
{
    if (mean_ms <= 0)
        return 0;
    if (s->ln_sigma[stage] <= 0)
        return mean_ms / 1000.0;
    return exp(s->ln_mu[stage] + s->ln_sigma[stage] * normal(s)) / 1000.0;
}

static void set_lognormal(sl__sim_t *s, int stage, double mean_ms, double cv)
{
    double sig2 = log(1.0 + cv * cv);
    s->ln_sigma[stage] = sqrt(sig2);
    s->ln_mu[stage] = mean_ms > 0 ? log(mean_ms) - sig2 / 2 : 0;
}

/* -------------------------------------------------------------- heaps */

static void heap_push(heap_t *h, double key, int id)
{
    int i = h->n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (h->a[up].key <= key)
            break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i].key = key;
    h->a[i].id = id;
}

static int heap_pop(heap_t *h)
{
    int id = h->a[0].id;
    hent_t last = h->a[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->a[c + 1].key < h->a[c].key)
            c++;
        if (last.key <= h->a[c].key)
            break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0)
        h->a[i] = last;
    return id;
}

/* ---------------------------------------------------------------- CPU */

/* Processor sharing by water-filling: `ncpu` cores among `nfull` threads
 * that want a whole core and up to two that want a fraction d[i] < 1.
 * Returns the share r <= 1 of a full thread; partials get min(d, r). */
static double cpu_share(double ncpu, int nfull, double *d, int nd)
{
    double total = nfull;
    for (int i = 0; i < nd; i++)
        total += d[i];
    if (total <= ncpu)
        return 1.0;
    if (nd == 2 && d[1] < d[0]) {
        double t = d[0];
        d[0] = d[1];
        d[1] = t;
    }
    double cap = ncpu;
    int left = nfull + nd;
    for (int i = 0; i < nd; i++) {
        if (d[i] >= cap / left)
            break;
        cap -= d[i];
        left--;
    }
    double r = cap / left;
    return r < 1.0 ? r : 1.0;
}

typedef struct rates {
    double r;        /* share of each of our running threads */
    double cons;     /* consumer step progress per second (<= 1) */
    double self_cpu; /* cores: ours + the consumer's */
    double other;    /* cores: foreign */
    int waiting;     /* 1: some runnable thread waits for a core */
    int runnable;
} rates_t;

static void cpu_rates(const sl__sim_t *s, rates_t *o)
{
    if (s->interfere <= 0 && (s->cons != CONS_STEP || s->ccpu <= 0)) {
        /* The common case: only our threads want the cores. */
        int n = s->cpu.n, ncpu = s->p.ncpu;
        o->r = n > ncpu ? (double)ncpu / n : 1.0;
        o->cons = 1.0;
        o->self_cpu = n * o->r;
        o->other = 0;
        o->waiting = n > ncpu;
        o->runnable = n;
        return;
    }
    double d[2];
    int nd = 0, nfull = s->cpu.n;
    int ffull = (int)floor(s->interfere);
    double ffrac = s->interfere - ffull;
    nfull += ffull;
    if (ffrac > 1e-9)
        d[nd++] = ffrac;
    int cons_idx = -1;
    double c = s->ccpu;
    if (s->cons == CONS_STEP && c > 0) {
        if (c >= 1) {
            nfull++;
        } else {
            cons_idx = nd;
            d[nd++] = c;
        }
    }
    double dd[2] = {nd > 0 ? d[0] : 0, nd > 1 ? d[1] : 0};
    double demand = nfull + dd[0] + dd[1];
    double r = cpu_share(s->p.ncpu, nfull, dd, nd);
    o->r = r;
    o->waiting = demand > s->p.ncpu + 1e-9;
    o->runnable =
        s->cpu.n + ffull + (ffrac > 1e-9) + (s->cons == CONS_STEP && c > 0);
    double cons_cpu = 0;
    if (s->cons == CONS_STEP && c > 0)
        cons_cpu = cons_idx >= 0 ? fmin(d[cons_idx], r) : r;
    o->cons = c > 0 ? fmin(1.0, cons_cpu / fmin(c, 1.0)) : 1.0;
    o->self_cpu = s->cpu.n * r + cons_cpu;
    o->other = ffull * r + (ffrac > 1e-9 ? fmin(ffrac, r) : 0);
}

/* ------------------------------------------------------------ buffers */

static int buf_get(sl__sim_t *s)
{
    if (s->nfree_bufs > 0) {
        for (int i = 0; i < s->cap_bufs; i++)
            if (s->bufs[i].state == BUF_FREE) {
                s->nfree_bufs--;
                return i;
            }
    }
    if (s->nalloc >= s->k.prefetch)
        return -1;
    for (int i = 0; i < s->cap_bufs; i++)
        if (s->bufs[i].state == BUF_NONE) {
            s->nalloc++;
            return i;
        }
    int cap = s->cap_bufs * 2;
    bbuf_t *v = realloc(s->bufs, (size_t)cap * sizeof *v);
    if (!v)
        return -1; /* out of memory: behaves as a full pool */
    memset(v + s->cap_bufs, 0, (size_t)(cap - s->cap_bufs) * sizeof *v);
    s->bufs = v;
    s->cap_bufs = cap;
    s->nalloc++;
    return cap / 2;
}

/* A buffer comes back (consumer release): freed when above the depth. */
static void buf_put(sl__sim_t *s, int b)
{
    if (s->nalloc > s->k.prefetch) {
        s->bufs[b].state = BUF_NONE;
        s->nalloc--;
    } else {
        s->bufs[b].state = BUF_FREE;
        s->nfree_bufs++;
    }
}

/* The next (batch, slot), as the engine's claim(); -1 when every buffer
 * is in use. */
static int claim(sl__sim_t *s)
{
    if (s->cur < 0) {
        int b = buf_get(s);
        if (b < 0)
            return -1;
        bbuf_t *bb = &s->bufs[b];
        bb->state = BUF_FILLING;
        bb->g = s->claim_g++;
        bb->pending = s->p.batch_size;
        bb->t_claim = s->now;
        s->cur = b;
        s->cur_slot = 0;
    }
    int b = s->cur;
    if (++s->cur_slot == s->p.batch_size)
        s->cur = -1;
    return b;
}

/* -------------------------------------------------------------- stages */

static void start_rcpu(sl__sim_t *s, int id)
{
    s->items[id].state = IT_RCPU;
    heap_push(&s->cpu, s->V + draw_work(s, 0, s->p.read_ms), id);
}

static void start_io(sl__sim_t *s, int id)
{
    if (s->bw > 0 && s->p.item_bytes > 0) {
        s->items[id].state = IT_IO;
        heap_push(&s->io, s->B + s->p.item_bytes, id);
    } else {
        start_rcpu(s, id);
    }
}

static void start_read(sl__sim_t *s, int b)
{
    int id = s->free_stack[--s->nfree];
    item_t *it = &s->items[id];
    it->buf = b;
    it->t0 = s->now;
    s->r_busy++;
    if (s->p.storage_latency_ms > 0) {
        it->state = IT_LAT;
        it->t_lat = s->now + s->p.storage_latency_ms / 1000.0;
        s->lq[(s->lq_head + s->lq_len++) % s->nitems] = id;
    } else {
        start_io(s, id);
    }
}

static void read_done(sl__sim_t *s, int id)
{
    item_t *it = &s->items[id];
    s->acc.read_busy += s->now - it->t0;
    s->acc.read_items++;
    s->read_items++;
    s->bytes += (int64_t)s->p.item_bytes;
    it->state = IT_QUEUED;
    s->dq[(s->dq_head + s->dq_len++) % s->nitems] = id;
    s->r_busy--;
    if (s->r_alive > s->k.read_threads)
        s->r_alive--; /* parks between two items */
}

static void start_decode(sl__sim_t *s)
{
    int id = s->dq[s->dq_head];
    s->dq_head = (s->dq_head + 1) % s->nitems;
    s->dq_len--;
    item_t *it = &s->items[id];
    it->state = IT_DCPU;
    it->t0 = s->now;
    s->d_busy++;
    heap_push(&s->cpu, s->V + draw_work(s, 1, s->p.decode_ms), id);
}

static void decode_done(sl__sim_t *s, int id)
{
    item_t *it = &s->items[id];
    s->acc.decode_busy += s->now - it->t0;
    s->acc.decode_items++;
    s->decode_items++;
    it->state = IT_FREE;
    s->free_stack[s->nfree++] = id;
    bbuf_t *bb = &s->bufs[it->buf];
    if (--bb->pending == 0) {
        bb->state = BUF_READY;
        s->nready++;
        s->acc.lat_sum += s->now - bb->t_claim;
        s->acc.lat_count++;
    }
    s->d_busy--;
    if (s->d_alive > s->k.decode_threads)
        s->d_alive--;
}

/* The consumer takes batch next_g when it is ready (ordered mode). */
static int consumer_take(sl__sim_t *s)
{
    for (int i = 0; i < s->cap_bufs; i++) {
        bbuf_t *bb = &s->bufs[i];
        if (bb->state == BUF_READY && bb->g == s->next_g) {
            bb->state = BUF_HELD;
            s->nready--;
            s->next_g++;
            s->acc.wait += s->now - s->t_wait0;
            if (s->on_batch)
                s->on_batch(s->on_batch_ctx, s->now, s->now - s->t_wait0);
            s->samples += s->p.batch_size;
            s->batches++;
            s->held = i;
            s->cons = CONS_STEP;
            s->step_rem = s->step_ms / 1000.0;
            return 1;
        }
    }
    return 0;
}

static void dispatch(sl__sim_t *s)
{
    int again = 1;
    while (again) {
        again = 0;
        if (s->cons == CONS_WAIT && s->nready > 0 && consumer_take(s))
            again = 1;
        while (s->d_busy < s->d_alive && s->dq_len > 0) {
            start_decode(s);
            again = 1;
        }
        while (s->r_busy < s->r_alive && s->nfree > 0) {
            int b = claim(s);
            if (b < 0)
                break;
            start_read(s, b);
            again = 1;
        }
    }
}

static void world_event(sl__sim_t *s, const sl__sim_event_t *e)
{
    switch (e->kind) {
    case SL_SIM_EV_INTERFERE:
        s->interfere = e->value > 0 ? e->value : 0;
        break;
    case SL_SIM_EV_STORAGE_BW:
        s->bw = e->value > 0 ? e->value : 0;
        if (s->bw == 0) /* unlimited: transfers in flight are done */
            while (s->io.n > 0)
                start_rcpu(s, heap_pop(&s->io));
        break;
    case SL_SIM_EV_STEP_MS:
        s->step_ms = e->value > 0 ? e->value : 0;
        break;
    case SL_SIM_EV_CONSUMER_CPU:
        s->ccpu = e->value < 0 ? 0 : e->value > 1 ? 1 : e->value;
        break;
    }
}

/* ------------------------------------------------------------- the loop */

static void run_until(sl__sim_t *s, double t_end)
{
    dispatch(s);
    for (;;) {
        rates_t rt;
        cpu_rates(s, &rt);
        double tn = t_end;
        int what = EV_END;
        if (s->cpu.n > 0) {
            double t = s->now + (s->cpu.a[0].key - s->V) / rt.r;
            if (t < tn)
                tn = t, what = EV_CPU;
        }
        double io_rate = s->io.n > 0 ? s->bw / s->io.n : 0;
        if (s->io.n > 0) {
            double t = s->now + (s->io.a[0].key - s->B) / io_rate;
            if (t < tn)
                tn = t, what = EV_IO;
        }
        if (s->lq_len > 0) {
            double t = s->items[s->lq[s->lq_head]].t_lat;
            if (t < tn)
                tn = t, what = EV_LAT;
        }
        if (s->cons == CONS_STEP) {
            double t = s->now + s->step_rem / rt.cons;
            if (t < tn)
                tn = t, what = EV_STEP;
        }
        if (s->next_ev < s->p.n_events && s->p.events[s->next_ev].t < tn) {
            tn = s->p.events[s->next_ev].t;
            what = EV_WORLD;
        }
        if (tn < s->now)
            tn = s->now;
        double dt = tn - s->now;
        if (dt > 0) {
            s->V += rt.r * dt;
            s->B += io_rate * dt;
            if (s->cons == CONS_STEP)
                s->step_rem -= rt.cons * dt;
            s->acc.cpu_self += rt.self_cpu * dt;
            s->acc.cpu_other += rt.other * dt;
            if (rt.waiting)
                s->acc.psi_wait += dt;
            s->now = tn;
        }
        switch (what) {
        case EV_END:
            return;
        case EV_CPU: {
            int id = heap_pop(&s->cpu);
            if (s->items[id].state == IT_RCPU)
                read_done(s, id);
            else
                decode_done(s, id);
            break;
        }
        case EV_IO:
            start_rcpu(s, heap_pop(&s->io));
            break;
        case EV_LAT: {
            int id = s->lq[s->lq_head];
            s->lq_head = (s->lq_head + 1) % s->nitems;
            s->lq_len--;
            start_io(s, id);
            break;
        }
        case EV_STEP:
            s->step_rem = 0;
            s->cons = CONS_WAIT;
            s->t_wait0 = s->now;
            buf_put(s, s->held);
            s->held = -1;
            break;
        case EV_WORLD:
            world_event(s, &s->p.events[s->next_ev++]);
            break;
        }
        dispatch(s);
    }
}

/* ------------------------------------------------------------- public */

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

sl__sim_t *sl__sim_create(const sl__sim_profile_t *p, const sl__knobs_t *k,
                          uint64_t seed)
{
    sl__sim_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->p = *p;
    s->p.ncpu = clampi(p->ncpu, 1, SL_SNAPSHOT_MAX_CORES);
    s->p.batch_size = p->batch_size > 0 ? p->batch_size : 1;
    s->p.read_ahead = p->read_ahead > 0 ? p->read_ahead : 1;
    s->p.n_events = clampi(p->n_events, 0, SL_SIM_MAX_EVENTS);
    s->nitems = s->p.read_ahead;
    int n = s->nitems;
    s->items = calloc((size_t)n, sizeof *s->items);
    s->free_stack = malloc((size_t)n * sizeof(int));
    s->dq = malloc((size_t)n * sizeof(int));
    s->lq = malloc((size_t)n * sizeof(int));
    s->cpu.a = malloc((size_t)n * sizeof(hent_t));
    s->io.a = malloc((size_t)n * sizeof(hent_t));
    s->cap_bufs = 8;
    s->bufs = calloc((size_t)s->cap_bufs, sizeof *s->bufs);
    if (!s->items || !s->free_stack || !s->dq || !s->lq || !s->cpu.a ||
        !s->io.a || !s->bufs) {
        sl__sim_destroy(s);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        s->free_stack[i] = n - 1 - i;
    s->nfree = n;
    s->seed = seed;
    rng_stream(s);
    set_lognormal(s, 0, s->p.read_ms, s->p.read_cv);
    set_lognormal(s, 1, s->p.decode_ms, s->p.decode_cv);
    s->interfere = s->p.interfere > 0 ? s->p.interfere : 0;
    s->bw = s->p.storage_bw > 0 ? s->p.storage_bw : 0;
    s->step_ms = s->p.step_ms > 0 ? s->p.step_ms : 0;
    s->ccpu = s->p.consumer_cpu < 0   ? 0
              : s->p.consumer_cpu > 1 ? 1
                                      : s->p.consumer_cpu;
    s->cur = -1;
    s->held = -1;
    s->cons = CONS_WAIT;
    s->psi = 0;
    s->k.read_threads = s->k.decode_threads = s->k.prefetch = 1;
    sl__sim_set_knobs(s, k);
    return s;
}

void sl__sim_destroy(sl__sim_t *s)
{
    if (!s)
        return;
    free(s->items);
    free(s->free_stack);
    free(s->dq);
    free(s->lq);
    free(s->cpu.a);
    free(s->io.a);
    free(s->bufs);
    free(s);
}

void sl__sim_on_batch(sl__sim_t *s, void (*fn)(void *, double, double),
                      void *ctx)
{
    s->on_batch = fn;
    s->on_batch_ctx = ctx;
}

void sl__sim_set_knobs(sl__sim_t *s, const sl__knobs_t *k)
{
    s->k.read_threads = clampi(k->read_threads, 1, 4096);
    s->k.decode_threads = clampi(k->decode_threads, 1, 4096);
    s->k.prefetch = clampi(k->prefetch, 1, 4096);
    /* Pools grow at once; they shrink by parking idle threads now and busy
     * ones after their item (read_done / decode_done). */
    int r = s->k.read_threads, d = s->k.decode_threads;
    s->r_alive = r > s->r_busy ? r : s->r_busy;
    s->d_alive = d > s->d_busy ? d : s->d_busy;
    /* A lower depth frees the free buffers now, the others on release. */
    for (int i = 0; i < s->cap_bufs && s->nalloc > s->k.prefetch; i++)
        if (s->bufs[i].state == BUF_FREE) {
            s->bufs[i].state = BUF_NONE;
            s->nalloc--;
            s->nfree_bufs--;
        }
}

static void fill_stage(sl_stage_stats_t *st, int workers, double busy,
                       int64_t items, int64_t total, double dt)
{
    st->workers = workers;
    st->busy = workers > 0 && dt > 0 ? busy / (workers * dt) : 0;
    if (st->busy > 1)
        st->busy = 1;
    st->items_per_s = dt > 0 ? (double)items / dt : 0;
    st->items_total = total;
}

void sl__sim_step(sl__sim_t *s, double dt, sl_snapshot_t *out)
{
    int64_t samples0 = s->samples, batches0 = s->batches, bytes0 = s->bytes;
    memset(&s->acc, 0, sizeof s->acc);
    run_until(s, s->now + (dt > 0 ? dt : 0));
    const acc_t *a = &s->acc;
    int ncpu = s->p.ncpu;
    memset(out, 0, sizeof *out);
    out->t = s->now;
    out->interval_s = dt;
    out->ncpu = ncpu;
    double cap = dt > 0 ? dt * ncpu : 1;
    out->cpu_self = fmin(1.0, a->cpu_self / cap);
    out->cpu_other = fmin(1.0, a->cpu_other / cap);
    out->cpu_total = fmin(1.0, out->cpu_self + out->cpu_other);
    for (int i = 0; i < ncpu; i++)
        out->cpu_core[i] = (float)out->cpu_total;
    rates_t rt;
    cpu_rates(s, &rt);
    out->run_queue = rt.runnable;
    /* PSI avg10 is an exponential average with a 10 s window. */
    double share = dt > 0 ? a->psi_wait / dt : 0, w = exp(-dt / 10.0);
    s->psi = s->psi * w + 100.0 * share * (1 - w);
    out->psi_cpu_some = s->psi;
    out->psi_io_some = out->psi_io_full = -1;
    out->psi_mem_some = out->psi_mem_full = -1;
    out->rss_bytes =
        (int64_t)(s->p.base_rss + (double)s->nalloc * s->p.batch_bytes);
    out->mem_total_bytes = (int64_t)s->p.mem_total;
    out->mem_available_bytes = out->mem_total_bytes - out->rss_bytes;
    if (out->mem_available_bytes < 0)
        out->mem_available_bytes = 0;
    double rb = dt > 0 ? (double)(s->bytes - bytes0) / dt : 0;
    out->read_bytes_per_s = rb;
    out->self_read_bytes_per_s = rb;
    out->disk_read_bytes_per_s = s->bw > 0 ? rb : 0;
    out->disk_busy = -1;
    out->net_rx_bytes_per_s = out->net_tx_bytes_per_s = -1;
    out->gpu_present = 0;
    out->gpu_util = out->gpu_power_w = -1;
    out->gpu_mem_used_bytes = out->gpu_mem_total_bytes = -1;
    out->gpu_pcie_rx_bytes_per_s = out->gpu_pcie_tx_bytes_per_s = -1;
    out->energy_j = -1;
    int64_t nb = s->batches - batches0;
    out->samples_per_s = dt > 0 ? (double)(s->samples - samples0) / dt : 0;
    out->stall_fraction = dt > 0 ? fmin(1.0, a->wait / dt) : 0;
    out->consumer_wait_ms = nb > 0 ? a->wait * 1000.0 / (double)nb : 0;
    out->batch_latency_ms =
        a->lat_count > 0 ? a->lat_sum * 1000.0 / (double)a->lat_count : 0;
    out->samples_total = s->samples;
    out->batches_total = s->batches;
    out->bytes_read_total = s->bytes;
    fill_stage(&out->read, s->k.read_threads, a->read_busy, a->read_items,
               s->read_items, dt);
    out->read.queue_depth = s->nitems - s->nfree;
    out->read.queue_capacity = s->nitems;
    fill_stage(&out->decode, s->k.decode_threads, a->decode_busy,
               a->decode_items, s->decode_items, dt);
    out->decode.queue_depth = s->dq_len;
    out->decode.queue_capacity = s->nitems;
    out->prefetch = s->k.prefetch;
    for (int i = 0; i < s->cap_bufs; i++) {
        out->batches_ready += s->bufs[i].state == BUF_READY;
        out->batches_filling += s->bufs[i].state == BUF_FILLING;
    }
}
