/* sim/sim: the public side of the simulator (sim.h): create, knobs and
 * the snapshot of each period. The event engine is sim_engine.c. */
#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/placement.h"
#include "sched/limits.h"
#include "sim/remote.h"
#include "sim/sim_internal.h"

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
    if (p->read_ahead <= 0) { /* the engine's: its I/O depth budget + 32 */
        int depth = sl__io_depth_budget(s->p.ncpu);
        s->p.read_ahead = sl__read_ahead_items(
            k->read_threads > depth ? k->read_threads : depth);
    }
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
        !s->io.a || !s->bufs || sl__sim_gpu_init(s, n)) {
        sl__sim_destroy(s);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        s->free_stack[i] = n - 1 - i;
    s->nfree = n;
    s->cpu_cap = n;
    s->seed = seed;
    sl__sim_rng_stream(s);
    sl__sim_set_lognormal(s, 0, s->p.read_ms, s->p.read_cv);
    sl__sim_set_lognormal(s, 1, s->p.decode_ms, s->p.decode_cv);
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
    if (sl__sim_remote_wanted(s) && sl__sim_remote_create(s)) {
        sl__sim_destroy(s);
        return NULL;
    }
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
    sl__sim_gpu_free(s);
    sl__sim_remote_destroy(s);
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
    s->k.gpu_share = s->gpu.on ? clampi(k->gpu_share, 0, SL__GPU_SHARE_MAX) : 0;
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
    s->gpu.busy = 0;
    s->gpu.items = 0;
    s->gpu.cpu = 0;
    sl__sim_run_until(s, s->now + (dt > 0 ? dt : 0));
    if (s->cons == CONS_WAIT) { /* a wait in progress, up to now */
        s->acc.wait += s->now - fmax(s->t_wait0, s->t_credit);
        s->t_credit = s->now;
    }
    const acc_t *a = &s->acc;
    int ncpu = s->p.ncpu;
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
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
    sl__sim_cpu_rates(s, &rt);
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
    out->gpu_jpg_util = -1;
    out->gpu_index = -1;
    out->gpu_stage_busy = out->gpu_cpu_busy = out->gpu_cpu_total_s = -1;
    out->gpu_handoff_busy = out->gpu_handoff_total_s = -1;
    if (s->gpu.on) { /* as the loader's collector reports its stage */
        out->placement_present = 1;
        snprintf(out->placement, sizeof out->placement, "auto");
        out->placement_gpu = 1;
        out->gpu_share = s->k.gpu_share;
        out->gpu_samples_total = s->gpu.total;
        out->gpu_samples_per_s = dt > 0 ? (double)s->gpu.items / dt : 0;
        out->gpu_stage_busy = dt > 0 ? fmin(1.0, s->gpu.busy / dt) : 0;
        out->gpu_cpu_busy = dt > 0 ? s->gpu.cpu / dt : 0;
        out->gpu_cpu_total_s = s->gpu.cpu_total;
        /* the model's hand-over is all decoder time */
        out->gpu_handoff_busy = out->gpu_cpu_busy;
        out->gpu_handoff_total_s = out->gpu_cpu_total_s;
    }
    int64_t nb = s->batches - batches0;
    out->samples_per_s = dt > 0 ? (double)(s->samples - samples0) / dt : 0;
    out->stall_fraction = dt > 0 ? fmin(1.0, a->wait / dt) : 0;
    /* as the collector: with no batch handed out, the whole wait */
    out->consumer_wait_ms = a->wait * 1000.0 / (double)(nb > 0 ? nb : 1);
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
    if (s->rm)
        sl__sim_remote_snapshot(s, dt, out);
}
