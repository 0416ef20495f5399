#include "sched/estimate.h"

#include <math.h>
#include <string.h>

#include "analysis/analysis.h"

static int ceil_clamp(double x, int lo, int hi)
{
    if (!(x > lo))
        return lo;
    if (x >= hi)
        return hi;
    int v = (int)ceil(x - 1e-9);
    return v < lo ? lo : v > hi ? hi : v;
}

/* The least part of a batch the CPU path is taken to make (a whole share
 * still hands it the samples the GPU refuses). */
#define CPU_FRAC_MIN 0.02

double sl__estimate_cpu_part(double cpu_frac, double k)
{
    return cpu_frac + (1 - cpu_frac) * k;
}

double sl__estimate_mix_rate(double cpu_frac, double cpu, double k, double gpu)
{
    double c = sl__estimate_cpu_part(cpu_frac, k);
    double r = c > 0 ? cpu / c : INFINITY;
    if (cpu_frac < 1 && gpu > 0) {
        double g = gpu / (1 - cpu_frac);
        if (g < r)
            r = g;
    }
    return r;
}

/* The whole batch's samples/s when the CPU path could make cpu decodes/s
 * (sl__estimate_mix_rate at the window's share). */
static double batch_rate(const sl__estimate_t *e, double cpu)
{
    return sl__estimate_mix_rate(e->cpu_frac, cpu, e->gpu_cpu_k, e->gpu_rate);
}

static int need_read(double target, double read_s, const sl__limits_t *lim)
{
    return ceil_clamp(target * read_s * SL_EST_READ_HEADROOM, 1, lim->max_read);
}

sl__consumer_t sl__estimate_consumer(const sl_snapshot_t *win, int n)
{
    sl__consumer_t c = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        const sl_snapshot_t *s = &win[i];
        double dt = s->interval_s > 0 ? s->interval_s : 0;
        c.t += dt;
        c.samples += (s->samples_per_s > 0 ? s->samples_per_s : 0) * dt;
        c.waited += (s->stall_fraction > 0 ? s->stall_fraction : 0) * dt;
    }
    return c;
}

int sl__consumer_works(const sl__consumer_t *c)
{
    return c->samples > 0 && c->t - c->waited > SL_EST_CONSUMER_WORKS * c->t;
}

double sl__estimate_demand(const sl_snapshot_t *win, int n)
{
    sl__consumer_t c = sl__estimate_consumer(win, n);
    if (sl__consumer_works(&c))
        return c.samples / (c.t - c.waited);
    /* -1: takes whatever comes */
    return c.samples > 0 || c.waited > 0 ? -1 : 0;
}

void sl__estimate(const sl_snapshot_t *win, int n, const sl__limits_t *lim,
                  const sl__knobs_t *cur, sl__estimate_t *e)
{
    memset(e, 0, sizeof *e);
    e->bound = "";
    double t = 0, rbusy = 0, ritems = 0, rbytes = 0, dbusy = 0, ditems = 0;
    double other = 0, gitems = 0, gbusy = 0, gcpu = 0, ghand = 0, runq = 0;
    int ncpu = 0;
    for (int i = 0; i < n; i++) {
        const sl_snapshot_t *s = &win[i];
        double dt = s->interval_s > 0 ? s->interval_s : 0;
        t += dt;
        int slots = sl__stall_read_slots(s);
        rbusy += (s->read.busy > 0 ? s->read.busy : 0) * slots * dt;
        ritems += (s->read.items_per_s > 0 ? s->read.items_per_s : 0) * dt;
        rbytes += (s->read_bytes_per_s > 0 ? s->read_bytes_per_s : 0) * dt;
        dbusy +=
            (s->decode.busy > 0 ? s->decode.busy : 0) * s->decode.workers * dt;
        ditems += (s->decode.items_per_s > 0 ? s->decode.items_per_s : 0) * dt;
        other += (s->cpu_other > 0 ? s->cpu_other : 0) * dt;
        gitems += (s->gpu_samples_per_s > 0 ? s->gpu_samples_per_s : 0) * dt;
        gbusy += (s->gpu_stage_busy > 0 ? s->gpu_stage_busy : 0) * dt;
        gcpu += (s->gpu_cpu_busy > 0 ? s->gpu_cpu_busy : 0) * dt;
        ghand += (s->gpu_handoff_busy > 0 ? s->gpu_handoff_busy : 0) * dt;
        runq += (s->run_queue > 0 ? s->run_queue : 0) * dt;
        if (sl__snapshot_cpus(s) > ncpu)
            ncpu = sl__snapshot_cpus(s);
    }
    e->cpu_frac = 1;
    if (!(t > 0))
        return;
    e->run_queue = runq / t;
    e->contended = ncpu > 0 && e->run_queue > ncpu;
    const sl_snapshot_t *last = &win[n - 1];
    if (last->placement_gpu && last->gpu_share > 0)
        e->cpu_frac = last->gpu_share >= SL_KNOB_SHARE_UNIT
                          ? CPU_FRAC_MIN
                          : 1 - last->gpu_share / (double)SL_KNOB_SHARE_UNIT;
    if (e->cpu_frac < CPU_FRAC_MIN)
        e->cpu_frac = CPU_FRAC_MIN;
    /* Enough of the stage seen to call it a capacity. */
    if (gitems >= 8 && gbusy > 0.02 * t)
        e->gpu_rate = gitems / gbusy;
    if (ritems >= 1 && rbusy > 0) {
        e->read_s = rbusy / ritems;
        e->bytes = rbytes / ritems;
        e->fetch = cur->read_threads / e->read_s;
    }
    if (ditems >= 1 && dbusy > 0) {
        e->decode_s = dbusy / ditems;
        e->cpu_prep = cur->decode_threads / e->decode_s;
        if (gitems >= 8 && gcpu > 0) {
            /* The stage's own threads take cores, not decoders: their
             * part counts where the cores are contended (more threads
             * want them than there are), else the hand-overs alone. */
            if (ghand > 0 && ghand < gcpu && !e->contended)
                gcpu = ghand;
            double k = gcpu / gitems / e->decode_s;
            e->gpu_cpu_k = k < SL_EST_GPU_CPU_K_MAX ? k : SL_EST_GPU_CPU_K_MAX;
        }
        /* Decoders beyond the cores others leave only time-slice. */
        e->cores_free = ncpu > 0 ? ncpu * (1 - other / t) : 0;
        double dmax = lim->max_decode;
        if (lim->max_threads - 1 < dmax)
            dmax = lim->max_threads - 1;
        if (!lim->tune_decode)
            dmax = cur->decode_threads;
        if (e->cores_free > 0 && e->cores_free < dmax)
            dmax = e->cores_free > 1 ? e->cores_free : 1;
        e->cpu_prep_max = dmax / e->decode_s;
        if (e->cpu_prep > e->cpu_prep_max)
            e->cpu_prep_max = e->cpu_prep;
        e->prep = batch_rate(e, e->cpu_prep);
        e->prep_max = batch_rate(e, e->cpu_prep_max);
    }
    e->demand = sl__estimate_demand(win, n);
    if (!(e->prep_max > 0))
        return;
    e->target =
        e->demand > 0 && e->demand < e->prep_max ? e->demand : e->prep_max;
    if (e->read_s > 0)
        e->need_read = need_read(e->target, e->read_s, lim);
    double feed = e->fetch > 0 && e->need_read <= cur->read_threads ? e->fetch
                                                                    : e->target;
    if (e->demand > 0 && e->demand < feed)
        feed = e->demand;
    e->need_decode = ceil_clamp(
        feed * sl__estimate_cpu_part(e->cpu_frac, e->gpu_cpu_k) * e->decode_s *
            SL_EST_DECODE_HEADROOM,
        1,
        lim->max_decode < lim->max_threads - 1 ? lim->max_decode
                                               : lim->max_threads - 1);
    /* The bound, by the stall model's rule. */
    double demand = e->demand > 0 ? e->demand : 1e30;
    double fetch = e->fetch > 0 ? e->fetch : 1e30;
    sl__stall_model_t m = sl__stall_predict(demand, e->prep, fetch, fetch, 1);
    e->bound = sl__bound_name(m.bound);
}

int sl__estimate_deficit(const sl__estimate_t *e)
{
    double supply = e->fetch > 0 && e->prep > 0
                        ? (e->fetch < e->prep ? e->fetch : e->prep)
                        : 0;
    if (!(supply > 0))
        return 0;
    return e->demand < 0 || supply < 0.95 * e->demand;
}

int sl__estimate_draining(const sl__estimate_t *e, double ready, int prefetch)
{
    return e->demand > 0 && sl__estimate_deficit(e) && ready < 0.5 * prefetch;
}

void sl__estimate_read_floor(sl__estimate_t *e, double floor_s,
                             const sl__limits_t *lim)
{
    if (floor_s > 0 && e->need_read > 0 && e->target > 0 && floor_s < e->read_s)
        e->need_read = need_read(e->target, floor_s, lim);
}
