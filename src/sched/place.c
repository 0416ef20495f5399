/* sched/place: the GPU share's rule (see place.h). */
#include "sched/place.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu/placement.h"
#include "sched/estimate.h"

void sl__place_init(sl__place_t *p)
{
    memset(p, 0, sizeof *p);
}

/* What the window says of the trainer beyond the estimate: the rate it
 * got, its stall, and its time per sample outside next() (its step). */
typedef struct meas {
    double t, rate, stall, work;
} meas_t;

static void measure(const sl_snapshot_t *win, int n, meas_t *m)
{
    sl__consumer_t c = sl__estimate_consumer(win, n);
    memset(m, 0, sizeof *m);
    if (!(c.t > 0))
        return;
    m->t = c.t;
    m->rate = c.samples / c.t;
    m->stall = c.waited / c.t;
    /* A consumer that (nearly) always waits has no step to measure. */
    m->work = sl__consumer_works(&c) ? (c.t - c.waited) / c.samples : 0;
}

/* NVML's mean use over the window (0..1), of the JPEG decoders (jpg) or
 * of the GPU (kernels running); < 0 where it cannot tell. */
static double nvml_use(const sl_snapshot_t *win, int n, int jpg)
{
    double sum = 0, t = 0;
    for (int i = 0; i < n; i++) {
        double u = jpg ? win[i].gpu_jpg_util : win[i].gpu_util;
        double dt = win[i].interval_s > 0 ? win[i].interval_s : 0;
        if (win[i].gpu_present && u >= 0) {
            sum += u * dt;
            t += dt;
        }
    }
    return t > 0 ? sum / t : -1;
}

int sl__place_gpu_full(const sl_snapshot_t *win, int n, double *jpg,
                       double *kern)
{
    double j = nvml_use(win, n, 1), k = nvml_use(win, n, 0);
    if (jpg)
        *jpg = j;
    if (kern)
        *kern = k;
    return j >= SL_PLACE_JPG_FULL || k >= SL_PLACE_GPU_FULL;
}

/* The placement model (place.h): the whole batch's rate at share s
 * (0..1) with the CPU path able to make cpu decodes/s, a GPU sample
 * costing k of a decode's CPU and the stage g samples/s (0: not
 * measured). */
static double model_rate(double s, double cpu, double k, double g)
{
    return sl__estimate_mix_rate(1 - s, cpu, k, g);
}

/* The least share at which that CPU path keeps up with rate (0 when it
 * does with none): 1 - s + s k <= cpu / rate. */
static double share_for(double rate, double cpu, double k)
{
    double s = rate > 0 ? (1 - cpu / rate) / (1 - k) : 0;
    return s > 0 ? s : 0;
}

/* The batch size the window's loader makes (its samples over its
 * batches so far); 0 when it cannot tell. */
static int batch_size(const sl_snapshot_t *win, int n)
{
    const sl_snapshot_t *l = &win[n - 1];
    if (l->batches_total <= 0 || l->samples_total <= 0)
        return 0;
    double b = (double)l->samples_total / (double)l->batches_total;
    return b < 1e6 ? (int)lround(b) : 0;
}

/* The share a raise from s toward want goes to: want, at least a step
 * but never past the balance bal, at most max, and (batches of nb, when
 * known) at least one more of a batch's slots — the loader routes whole
 * slots (gpu/placement.h), so a share that moves none would be no
 * trial. */
static int raise_to(int s, double want, double bal, int max, int nb)
{
    const double unit = SL_KNOB_SHARE_UNIT;
    int to = (int)ceil(want * unit);
    int lo = s + SL_PLACE_STEP, cap = (int)ceil(bal * unit);
    if (lo > cap)
        lo = cap;
    if (to < lo)
        to = lo;
    int c = nb > 0 ? sl__gpu_route_count(nb, s) : 0;
    if (nb > 0 && c >= nb)
        return s; /* every slot is the GPU's already */
    if (nb > 0 && sl__gpu_route_count(nb, to) <= c) {
        /* the least share that routes c + 1 slots: round(nb x / 1000) */
        long long x = (1000LL * (2 * c + 1) + 2LL * nb - 1) / (2LL * nb);
        to = x < SL_KNOB_SHARE_UNIT ? (int)x : SL_KNOB_SHARE_UNIT;
    }
    return to > max ? max : to;
}

/* Why a trainer that waits gets no raise, first reason first. */
static void held(sl__place_t *p, int s, int max, int may_raise, int cpu_short,
                 double jpg, double kern, const sl__estimate_t *e)
{
    if (s >= max)
        snprintf(p->held, sizeof p->held, "the share is at its most (%d)", max);
    else if (!may_raise)
        snprintf(p->held, sizeof p->held,
                 "a raise that did not pay: the next in %d windows",
                 p->raise_hold + 1);
    else if (!cpu_short)
        snprintf(p->held, sizeof p->held,
                 "the CPU can give more (%.0f of %.0f/s): decoders first",
                 e->cpu_prep, e->cpu_prep_max);
    else if (jpg >= SL_PLACE_JPG_FULL)
        snprintf(p->held, sizeof p->held,
                 "NVML: the JPEG decoders busy %.0f %% of the time", 100 * jpg);
    else if (kern >= SL_PLACE_GPU_FULL)
        snprintf(p->held, sizeof p->held,
                 "NVML: the GPU ran kernels %.0f %% of the time", 100 * kern);
    else
        p->held[0] = '\0';
}

static int backoff(int *b)
{
    *b = *b < 2 ? 2 : *b * 2;
    if (*b > SL_PLACE_BACKOFF_MAX)
        *b = SL_PLACE_BACKOFF_MAX;
    return *b;
}

static int start_trial(sl__place_t *p, int dir, int from, const meas_t *m)
{
    p->trial = dir;
    p->from = from;
    p->before_rate = m->rate;
    p->before_stall = m->stall;
    p->before_work = m->work;
    return 1;
}

/* The trial's verdict: 1 with *share (undone) and a reason, else 0. */
static int judge(sl__place_t *p, const meas_t *m, const sl__knobs_t *cur,
                 int *share, char *reason, size_t len)
{
    int dir = p->trial;
    p->trial = 0;
    if (dir > 0) {
        p->interference = p->before_work > 0 && m->work > 0
                              ? m->work / p->before_work - 1
                              : 0;
        int paid = m->rate >= p->before_rate * (1 + SL_PLACE_GAIN) ||
                   (m->stall <= 0.7 * p->before_stall &&
                    m->rate >= 0.97 * p->before_rate);
        if (paid) {
            p->raise_backoff = 0;
            return 0;
        }
        p->raise_hold = backoff(&p->raise_backoff);
        p->undone++;
        *share = p->from;
        char step[32] = "";
        if (p->before_work > 0 && m->work > 0)
            snprintf(step, sizeof step, ", step %+.0f %%",
                     100 * p->interference);
        snprintf(reason, len,
                 "placement: raise did not pay (%.0f -> %.0f/s, stall %.0f -> "
                 "%.0f %%%s): gpu_share %d -> %d",
                 p->before_rate, m->rate, 100 * p->before_stall, 100 * m->stall,
                 step, cur->gpu_share, p->from);
        return 1;
    }
    double worse =
        p->before_stall + 0.01 > 0.02 ? p->before_stall + 0.01 : 0.02;
    if (m->stall <= worse && m->rate >= 0.97 * p->before_rate) {
        p->shed_backoff = 0;
        return 0;
    }
    p->shed_hold = backoff(&p->shed_backoff);
    p->undone++;
    *share = p->from;
    snprintf(reason, len,
             "placement: shed brought waits (%.0f -> %.0f/s, stall %.0f -> "
             "%.0f %%): gpu_share %d -> %d",
             p->before_rate, m->rate, 100 * p->before_stall, 100 * m->stall,
             cur->gpu_share, p->from);
    return 1;
}

int sl__place_step(sl__place_t *p, const sl_snapshot_t *win, int n,
                   const sl__limits_t *lim, const sl__knobs_t *cur, int *share,
                   char *reason, size_t len)
{
    *share = cur->gpu_share;
    p->held[0] = '\0';
    if (!lim->tune_gpu_share || lim->max_gpu_share <= 0 || n <= 0)
        return 0;
    meas_t m;
    measure(win, n, &m);
    if (!(m.t > 0))
        return 0;
    sl__estimate_t e;
    sl__estimate(win, n, lim, cur, &e);
    if (e.gpu_rate > 0)
        p->gpu_rate = e.gpu_rate; /* kept while the stage idles */
    if (e.gpu_cpu_k > 0)
        p->gpu_cpu_k = e.gpu_cpu_k; /* likewise */
    if (p->trial)
        return judge(p, &m, cur, share, reason, len);
    int may_raise = !p->raise_hold, may_shed = !p->shed_hold;
    p->raise_hold -= p->raise_hold > 0;
    p->shed_hold -= p->shed_hold > 0;
    p->calm = m.stall < 0.01 ? p->calm + 1 : 0;
    int s = cur->gpu_share, max = lim->max_gpu_share;
    double cpu = e.cpu_prep > 0 ? e.cpu_prep : 0; /* the CPU path's */
    double g = p->gpu_rate, k = p->gpu_cpu_k;
    const double unit = SL_KNOB_SHARE_UNIT;

    /* Raise: the trainer waits and the CPU cannot give more — unless
     * NVML says the GPU has no room: its JPEG decoders full, or kernels
     * running all the time (then the trainer's wait is not the GPU's idle
     * time — it queued work ahead, or another job fills it — and more
     * work there would slow the step). */
    int cpu_short = !(e.cpu_prep > 0) || !(e.cpu_prep_max > 1.10 * e.cpu_prep);
    double jpg, kern;
    int gpu_full = sl__place_gpu_full(win, n, &jpg, &kern);
    if (m.stall >= SL_PLACE_STALL) /* why not, unless a raise follows */
        held(p, s, max, may_raise, cpu_short, jpg, kern, &e);
    if (m.stall >= SL_PLACE_STALL && s < max && may_raise && cpu_short &&
        !gpu_full) {
        /* The balance, where both paths finish a batch together: the
         * GPU's part takes s / g seconds a batch sample, the CPU's (1 - s
         * + s k) / cpu; equal at s = g / (cpu + g (1 - k)). */
        double bal = g > 0 ? g / (cpu + g * (1 - k)) : 1;
        if (bal > 1)
            bal = 1;
        double want = e.demand > 0
                          ? share_for(e.demand * SL_EST_DECODE_HEADROOM, cpu, k)
                          : bal;
        const char *bound =
            e.demand > 0 ? "what the demand asks of the GPU"
                         : "the balance with the GPU's measured capacity";
        if (!(g > 0) && want > 0.5) {
            want = 0.5; /* its capacity unknown: at most half, then measure */
            bound = "at most half before the GPU's capacity is measured";
        }
        if (want > bal) {
            want = bal;
            bound = "the balance with the GPU's measured capacity";
        }
        int to = raise_to(s, want, bal, max, batch_size(win, n));
        /* Worth a trial: half a step or more where the model sees a gain
         * at all (none where a GPU sample costs about what a decode
         * does), or less where it says it buys a raise's gain (near the
         * balance a few per mille are many samples/s). */
        double d = e.demand > 0 ? e.demand : INFINITY;
        double now = fmin(d, model_rate(s / unit, cpu, k, g));
        double then = fmin(d, model_rate(to / unit, cpu, k, g));
        int gains = !(now > 0) || then >= now * (1 + SL_PLACE_MIN_GAIN);
        if (to > s && gains &&
            (want * unit > s + SL_PLACE_STEP / 2 ||
             (now > 0 && then >= now * (1 + SL_PLACE_GAIN)))) {
            *share = to;
            p->raises++;
            char gs[32] = "not measured";
            if (g > 0)
                snprintf(gs, sizeof gs, "%.0f/s", g);
            char ds[32] = "all it gets";
            if (e.demand > 0)
                snprintf(ds, sizeof ds, "%.0f/s", e.demand);
            snprintf(reason, len,
                     "placement: CPU short (%.0f of %.0f/s), waits %.0f %%, "
                     "demand %s, GPU %s: gpu_share %d -> %d",
                     cpu, e.cpu_prep_max, 100 * m.stall, ds, gs, s, to);
            p->held[0] = '\0';
            return start_trial(p, +1, s, &m);
        }
        if (to > s && !gains)
            snprintf(p->held, sizeof p->held,
                     "a GPU sample costs %.0f %% of a decode's CPU: the "
                     "model sees no gain",
                     100 * k);
        else
            snprintf(p->held, sizeof p->held, "the share is %s (%.0f)", bound,
                     want > 0 ? want * unit : 0.0);
    }

    /* Shed: calm, and the CPU could carry more of each batch. */
    if (s > 0 && p->calm >= SL_PLACE_CALM && may_shed && e.cpu_prep_max > 0) {
        double d = e.demand > 0 ? e.demand : m.rate;
        double keep = d > 0 ? share_for(d, 0.8 * e.cpu_prep_max, k) : 1;
        int to = keep > 0 ? (int)ceil(keep * unit) : 0;
        if (to < s / 2)
            to = s / 2;
        if (to <= s - SL_PLACE_STEP) {
            *share = to;
            p->sheds++;
            p->calm = 0;
            snprintf(reason, len,
                     "placement: calm, the CPU can make %.0f/s of %.0f/s: "
                     "gpu_share %d -> %d",
                     0.8 * e.cpu_prep_max, d, s, to);
            return start_trial(p, -1, s, &m);
        }
    }
    return 0;
}
