/* sim/sim_engine: the discrete-event engine behind sim.h.
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
 * Items are the read-ahead (profile read_ahead, the engine's rule):
 * free -> [latency] -> [transfer] -> read CPU -> decode queue -> decode CPU
 * -> free, the slot done. A reader is busy from the claim of a slot to the
 * end of its read; a decoder from the pop to the end of its decode, as the
 * engine's busy counters measure (wall time, so contention shows as busy).
 *
 * Counters are added when an item or a batch completes, as the engine
 * adds them, so a snapshot is what the real collector would see; a wait
 * in progress counts up to the snapshot, as the engine's does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/remote.h"
#include "sim/sim_internal.h"

/* ------------------------------------------------------------ random */

void sl__sim_rng_stream(sl__sim_t *s)
{
    sl__rng_init(&s->rng, s->seed, 0, s->stream++, SIM_RNG_PURPOSE);
    s->words = 0;
}

/* Uniform in [0, 1) from one 32-bit word: service times need no more
 * resolution, and it halves the Philox work. */
static double uniform01(sl__sim_t *s)
{
    if (++s->words >= SIM_RNG_WORDS)
        sl__sim_rng_stream(s);
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

void sl__sim_set_lognormal(sl__sim_t *s, int stage, double mean_ms, double cv)
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

/* The remote preparers' (sim/remote.c) way to the above. */
double sl__sim_draw_work(sl__sim_t *s, int stage, double mean_ms)
{
    return draw_work(s, stage, mean_ms);
}

void sl__sim_heap_push(heap_t *h, double key, int id)
{
    heap_push(h, key, id);
}

int sl__sim_heap_pop(heap_t *h)
{
    return heap_pop(h);
}

int sl__sim_cpu_push(sl__sim_t *s, double work_s, int id)
{
    if (s->cpu.n == s->cpu_cap) {
        int cap = s->cpu_cap * 2 + 16;
        hent_t *a = realloc(s->cpu.a, (size_t)cap * sizeof *a);
        if (!a)
            return SL_ENOMEM;
        s->cpu.a = a;
        s->cpu_cap = cap;
    }
    heap_push(&s->cpu, s->V + work_s, id);
    return 0;
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

void sl__sim_cpu_rates(const sl__sim_t *s, rates_t *o)
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
 * is in use. *slot: the slot's index in its batch. */
static int claim(sl__sim_t *s, int *slot)
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
    *slot = s->cur_slot;
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

static void start_read(sl__sim_t *s, int b, int slot)
{
    int id = s->free_stack[--s->nfree];
    item_t *it = &s->items[id];
    it->buf = b;
    it->slot = slot;
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
    int gpu = sl__sim_gpu_routes(s, id);
    if (gpu && s->p.gpu_cpu_ms <= 0) {
        sl__sim_gpu_give(s, id, 0); /* at once: the decoder goes on */
        return;
    }
    item_t *it = &s->items[id];
    it->state = gpu ? IT_GCPU : IT_DCPU;
    it->t0 = s->now;
    s->d_busy++;
    /* The hand-over's CPU is the mean, without the decode's spread. */
    heap_push(&s->cpu,
              s->V + (gpu ? s->p.gpu_cpu_ms / 1000.0
                          : draw_work(s, 1, s->p.decode_ms)),
              id);
}

void sl__sim_slot_done(sl__sim_t *s, int id)
{
    item_t *it = &s->items[id];
    it->state = IT_FREE;
    s->free_stack[s->nfree++] = id;
    bbuf_t *bb = &s->bufs[it->buf];
    if (--bb->pending == 0) {
        bb->state = BUF_READY;
        s->nready++;
        s->acc.lat_sum += s->now - bb->t_claim;
        s->acc.lat_count++;
    }
}

static void decode_done(sl__sim_t *s, int id)
{
    item_t *it = &s->items[id];
    s->d_busy--;
    if (s->d_alive > s->k.decode_threads)
        s->d_alive--;
    if (it->state == IT_GCPU) { /* handed over: the stage decodes it */
        /* not a decode: as the loader counts it */
        sl__sim_gpu_give(s, id, s->now - it->t0);
        return;
    }
    s->acc.decode_busy += s->now - it->t0;
    s->acc.decode_items++;
    s->decode_items++;
    sl__sim_slot_done(s, id);
}

void sl__sim_consumer_got(sl__sim_t *s)
{
    s->next_g++;
    s->acc.wait += s->now - fmax(s->t_wait0, s->t_credit);
    if (s->on_batch)
        s->on_batch(s->on_batch_ctx, s->now, s->now - s->t_wait0);
    s->samples += s->p.batch_size;
    s->batches++;
    s->cons = CONS_STEP;
    s->step_rem = s->step_ms / 1000.0;
}

/* The consumer takes batch next_g when it is ready (ordered mode). */
static int consumer_take(sl__sim_t *s)
{
    for (int i = 0; i < s->cap_bufs; i++) {
        bbuf_t *bb = &s->bufs[i];
        if (bb->state == BUF_READY && bb->g == s->next_g) {
            bb->state = BUF_HELD;
            s->nready--;
            s->held = i;
            sl__sim_consumer_got(s);
            return 1;
        }
    }
    return 0;
}

static void dispatch(sl__sim_t *s)
{
    if (s->rm) { /* remote preparers in place of the local pipeline */
        sl__sim_remote_dispatch(s);
        return;
    }
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
            int slot;
            int b = claim(s, &slot);
            if (b < 0)
                break;
            start_read(s, b, slot);
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
    case SL_SIM_EV_STORAGE_LATENCY_MS: /* reads issued from now on */
        s->p.storage_latency_ms = e->value > 0 ? e->value : 0;
        break;
    default:
        sl__sim_remote_world(s, e);
        break;
    }
}

/* ------------------------------------------------------------- the loop */

void sl__sim_run_until(sl__sim_t *s, double t_end)
{
    dispatch(s);
    for (;;) {
        rates_t rt;
        sl__sim_cpu_rates(s, &rt);
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
        double pace = rt.cons * sl__sim_gpu_pace(s); /* the consumer's */
        if (s->cons == CONS_STEP) {
            double t = s->now + s->step_rem / pace;
            if (t < tn)
                tn = t, what = EV_STEP;
        }
        if (s->gpu.cur >= 0 && s->gpu.end < tn)
            tn = s->gpu.end, what = EV_GPU;
        if (s->rm) {
            double t = sl__sim_remote_next(s);
            if (t < tn)
                tn = t, what = EV_REMOTE;
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
                s->step_rem -= pace * dt;
            if (s->gpu.cur >= 0)
                s->gpu.busy += dt;
            if (s->rm)
                sl__sim_remote_advance(s, dt);
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
            if (id >= SL_SIM_REMOTE_ID0)
                sl__sim_remote_cpu_done(s, id - SL_SIM_REMOTE_ID0);
            else if (s->items[id].state == IT_RCPU)
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
            if (s->held >= 0)
                buf_put(s, s->held);
            s->held = -1;
            break;
        case EV_WORLD:
            world_event(s, &s->p.events[s->next_ev++]);
            break;
        case EV_GPU:
            sl__sim_gpu_done(s);
            break;
        case EV_REMOTE:
            sl__sim_remote_fire(s);
            break;
        }
        dispatch(s);
    }
}
