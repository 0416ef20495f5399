/* sim/gpu: the GPU stage's model (see gpu.h). */
#include "sim/gpu.h"

#include <stdlib.h>

#include "base/base.h"
#include "gpu/placement.h"
#include "sim/sim_internal.h"

void sl__sim_gpu_limits(const sl__sim_profile_t *p, int policy,
                        sl__limits_t *lim)
{
    int on = p->gpu_ms > 0;
    lim->max_gpu_share = on ? SL__GPU_SHARE_MAX : 0;
    lim->tune_gpu_share = on && policy != SL_POLICY_STATIC;
}

void sl__sim_gpu_random(uint64_t seed, sl__sim_profile_t *p)
{
    sl__rng_t r;
    sl__rng_init(&r, seed, 0, 0, 0x677075);       /* "gpu" */
    double cap = p->ncpu * 1000.0 / p->decode_ms; /* the CPU path's */
    p->gpu_ms = 1000.0 / (cap * sl__rng_log_uniform(&r, 0.5, 16));
    p->gpu_cpu_ms = p->decode_ms * sl__rng_uniform(&r, 0.03, 0.12);
    p->gpu_slow = sl__rng_double(&r) < 0.4 ? 0 : sl__rng_uniform(&r, 0, 1);
    if (sl__rng_double(&r) < 0.5)
        p->step_ms =
            1000.0 * p->batch_size / (cap * sl__rng_log_uniform(&r, 1, 4));
}

int sl__sim_gpu_init(sl__sim_t *s, int nitems)
{
    sl__sim_gpu_t *g = &s->gpu;
    g->on = s->p.gpu_ms > 0;
    g->cur = -1;
    g->slow = 1.0 / (1.0 + (s->p.gpu_slow > 0 ? s->p.gpu_slow : 0));
    if (!g->on)
        return 0;
    g->q = malloc((size_t)nitems * sizeof(int));
    return g->q ? 0 : SL_ENOMEM;
}

void sl__sim_gpu_free(sl__sim_t *s)
{
    free(s->gpu.q);
    s->gpu.q = NULL;
}

static void start(sl__sim_t *s)
{
    sl__sim_gpu_t *g = &s->gpu;
    if (g->cur >= 0 || g->len == 0)
        return;
    g->cur = g->q[g->head];
    g->head = (g->head + 1) % s->nitems;
    g->len--;
    g->end = s->now + s->p.gpu_ms / 1000.0;
}

int sl__sim_gpu_routes(const sl__sim_t *s, int id)
{
    return s->gpu.on &&
           sl__gpu_route(s->items[id].slot, s->p.batch_size, s->k.gpu_share);
}

void sl__sim_gpu_give(sl__sim_t *s, int id, double cpu)
{
    sl__sim_gpu_t *g = &s->gpu;
    g->cpu += cpu;
    g->cpu_total += cpu;
    s->items[id].state = IT_GPU;
    g->q[(g->head + g->len++) % s->nitems] = id;
    start(s);
}

void sl__sim_gpu_done(sl__sim_t *s)
{
    sl__sim_gpu_t *g = &s->gpu;
    int id = g->cur;
    g->cur = -1;
    g->items++;
    g->total++;
    sl__sim_slot_done(s, id);
    start(s);
}

double sl__sim_gpu_pace(const sl__sim_t *s)
{
    return s->gpu.cur >= 0 ? s->gpu.slow : 1.0;
}
