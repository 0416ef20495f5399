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

/* What windows say of the trainer beyond the estimate: the rate it got,
 * its stall and its time per sample outside next() (its step); and of the
 * loader: the samples both paths made per second (what a raise must lift
 * when the trainer does not wait yet) and the batches ready (mean). */
typedef struct meas {
    double t, rate, stall, work, made, ready;
    double q; /* one batch over the windows, samples/s: the trainer takes
                 whole batches, so its rate moves by q with no change */
} meas_t;

static void sums_add(sl__place_sums_t *a, const sl__place_sums_t *b)
{
    a->t += b->t, a->waited += b->waited, a->samples += b->samples;
    a->made += b->made, a->ours += b->ours, a->others += b->others;
}

/* The window's sums (made: samples, the CPU path's and the GPU's; the
 * threads wanting the cores: the decoders' busy ones, and the others —
 * the run queue but those and the GPU stage's own threads) and its mean
 * of batches ready. */
static sl__place_sums_t window_sums(const sl_snapshot_t *win, int n,
                                    double *ready)
{
    sl__consumer_t c = sl__estimate_consumer(win, n);
    sl__place_sums_t w = {c.t, c.waited, c.samples, 0, 0, 0};
    double r = 0;
    for (int i = 0; i < n; i++) {
        const sl_snapshot_t *s = &win[i];
        double dt = s->interval_s > 0 ? s->interval_s : 0;
        r += s->batches_ready * dt;
        w.made += (s->decode.items_per_s > 0 ? s->decode.items_per_s : 0) * dt;
        w.made += (s->gpu_samples_per_s > 0 ? s->gpu_samples_per_s : 0) * dt;
        double ours =
            s->decode.busy > 0 ? s->decode.busy * s->decode.workers : 0;
        double stage = s->gpu_cpu_busy - s->gpu_handoff_busy;
        w.ours += ours * dt;
        w.others += ((s->run_queue > 0 ? s->run_queue : 0) - ours -
                     (stage > 0 ? stage : 0)) *
                    dt;
    }
    *ready = c.t > 0 ? r / c.t : 0;
    return w;
}

/* The measures of sums w, batches of nb samples (0: not known). */
static void measure(const sl__place_sums_t *w, int nb, meas_t *m)
{
    memset(m, 0, sizeof *m);
    if (!(w->t > 0))
        return;
    sl__consumer_t c = {w->t, w->waited, w->samples};
    m->t = w->t;
    m->rate = w->samples / w->t;
    m->stall = w->waited / w->t;
    /* A consumer that (nearly) always waits has no step to measure. */
    m->work = sl__consumer_works(&c) ? (w->t - w->waited) / w->samples : 0;
    m->made = w->made / w->t;
    m->q = nb / w->t;
}

/* Enough of the trainer seen to call its rate: SL_PLACE_JUDGE_BATCHES
 * batches (any, where the batch size is not known), or
 * SL_PLACE_JUDGE_WINDOWS windows. */
static int enough(const sl__place_sums_t *w, int windows, int nb)
{
    return nb <= 0 || w->samples >= (double)SL_PLACE_JUDGE_BATCHES * nb ||
           windows >= SL_PLACE_JUDGE_WINDOWS;
}

/* The run of windows like the last (its kind: 1 asks for a raise, 2 is
 * calm with the cores uncontended, 3 calm with them contended, 0 none of
 * those) since the share last moved, newest last, at most
 * SL_PLACE_JUDGE_WINDOWS; a window of another kind starts a new run. */
static void run_push(sl__place_t *p, const sl__place_sums_t *w, int kind)
{
    if (kind != p->run_kind)
        p->nrun = 0, p->run_kind = kind;
    if (p->nrun == SL_PLACE_JUDGE_WINDOWS) {
        memmove(p->run, p->run + 1, (p->nrun - 1) * sizeof p->run[0]);
        p->nrun--;
    }
    p->run[p->nrun++] = *w;
}

/* The run's newest windows, enough of them where it has them (*ok), or
 * all of them (all: the trainer's pace, whose changes are a few per
 * cent; ok when they are enough): a trial's before. */
static sl__place_sums_t run_before(const sl__place_t *p, int nb, int all,
                                   int *ok)
{
    sl__place_sums_t b = {0, 0, 0, 0, 0, 0};
    *ok = 0;
    for (int i = p->nrun - 1; i >= 0 && (all || !*ok); i--) {
        sums_add(&b, &p->run[i]);
        *ok = enough(&b, p->nrun - i, nb);
    }
    return b;
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

/* The CPU part of a batch at share s (per mille): decodes' worth a
 * batch sample (sl__estimate_cpu_part). */
static double cpu_part(int s, double k)
{
    return sl__estimate_cpu_part(1 - s / (double)SL_KNOB_SHARE_UNIT, k);
}

/* The least share at which that CPU path keeps up with rate (0 when it
 * does with none): 1 - s + s k <= cpu / rate. */
static double share_for(double rate, double cpu, double k)
{
    double s = rate > 0 ? (1 - cpu / rate) / (1 - k) : 0;
    return s > 0 ? s : 0;
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
    if (nb > 0 && sl__gpu_route_count(nb, to) <= c)
        to = sl__gpu_route_share(nb, c + 1);
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

/* A trial of the share moved from `from`, judged against the run's
 * windows that asked for it (enough batches of nb). */
static int start_trial(sl__place_t *p, int dir, int from, int nb, int drain,
                       double starved)
{
    int ok;
    sl__place_sums_t b = run_before(p, nb, starved > 0, &ok);
    meas_t m;
    measure(&b, nb, &m);
    p->trial = dir;
    p->from = from;
    p->drain = drain;
    p->starved = starved;
    p->before_rate = m.rate;
    p->before_stall = m.stall;
    p->before_work = m.work;
    p->before_made = m.made;
    p->before_q = m.q;
    p->after = (sl__place_sums_t){0, 0, 0, 0, 0, 0};
    p->after_n = 0;
    p->nrun = 0;
    return 1;
}

/* Whether the trial paid (a shed: kept its rate without waits): 1 yes,
 * 0 no, -1 not sure yet. The trainer takes whole batches, so its rate
 * over the trial and over the before are each known within a batch (q):
 * a verdict sure of that either way is given at once (the stall, the
 * paths' output and a drain are not quantized); else, once final
 * (enough batches seen), a rate within that of the before is taken as no
 * less — the gain bars count no tolerance. drain: this window's buffer
 * drains. */
static int verdict(const sl__place_t *p, const meas_t *m, int final, int drain)
{
    double tol = m->q + p->before_q, b = p->before_rate;
    if (p->trial > 0 && p->drain) {
        /* Made for a draining buffer, whose trainer took more than the
         * loader made: paid when the paths make 5 % more, the trainer
         * getting no less than what they made before (it may wait now:
         * the buffer ran out). */
        double ok = fmin(b, p->before_made);
        if (m->rate + tol < 0.97 * ok)
            return 0;
        if (m->made >= p->before_made * (1 + SL_PLACE_GAIN))
            return m->rate - tol >= 0.97 * ok ? 1 : final ? 1 : -1;
        return final ? 0 : -1;
    }
    int maybe_less = m->rate - tol < 0.97 * b;
    int sure_less = m->rate + tol < 0.97 * b;
    if (p->trial > 0 && p->starved > 0) {
        /* Made for a starved trainer: paid when it got back a sixth of
         * the speed it lost (over the most windows, against its whole
         * contended run; in the simulator a third missed gains within a
         * batch's noise, and any gain at all kept raises that slowed the
         * step beside a stage that slows it: bench/RESULTS.md). */
        double bar = b * (1 + (p->starved - 1) / SL_PLACE_STARVED_BACK);
        if (m->rate - tol >= bar)
            return 1;
        if (sure_less)
            return 0;
        return final ? m->rate >= bar : -1;
    }
    if (p->trial > 0) {
        /* Paid: the trainer got more, or it waits less and got no less. */
        int helps = m->stall <= 0.7 * p->before_stall;
        if (m->rate - tol >= b * (1 + SL_PLACE_GAIN) || (helps && !maybe_less))
            return 1;
        if (sure_less)
            return 0;
        if (!final)
            return -1;
        return m->rate >= b * (1 + SL_PLACE_GAIN) || (helps && !sure_less);
    }
    double worse =
        p->before_stall + 0.01 > 0.02 ? p->before_stall + 0.01 : 0.02;
    if (m->stall > worse || sure_less || drain)
        return 0;
    if (!maybe_less)
        return 1;
    return final ? 1 : -1;
}

/* The trial's verdict v (verdict's, 0 or 1): 1 with *share (undone) and a
 * reason, else 0. */
static int judge(sl__place_t *p, const meas_t *m, int v, const sl__knobs_t *cur,
                 int *share, char *reason, size_t len)
{
    int dir = p->trial;
    p->trial = 0;
    if (dir > 0) {
        p->interference = p->before_work > 0 && m->work > 0
                              ? m->work / p->before_work - 1
                              : 0;
        if (v) {
            p->raise_backoff = 0;
            if (p->starved > 0 && p->after.others > 0) {
                /* kept until the others' threads would not fill the
                 * cores with the decoders back at the share before it:
                 * as busy as over its windows times the CPU part of a
                 * batch then over now (none where no others crowd
                 * them) */
                double c0 = cpu_part(p->from, p->gpu_cpu_k);
                double c1 = cpu_part(cur->gpu_share, p->gpu_cpu_k);
                p->starve_floor = cur->gpu_share;
                p->floor_ours = c1 > 0 ? p->after.ours / p->after.t * c0 / c1
                                       : p->after.ours / p->after.t;
                p->floor_free = 0;
            }
            return 0;
        }
        p->raise_hold = backoff(&p->raise_backoff);
        p->undone++;
        *share = p->from;
        if (p->starved > 0) /* not ours to win back: its pace, as slow as
                               it was at the share before or after */
            p->best_work = fmax(m->work, p->before_work);
        char step[32] = "";
        if (p->before_work > 0 && m->work > 0)
            snprintf(step, sizeof step, ", step %+.0f %%",
                     100 * p->interference);
        char made[48] = "";
        if (p->drain)
            snprintf(made, sizeof made, ", made %.0f -> %.0f/s", p->before_made,
                     m->made);
        snprintf(reason, len,
                 "placement: raise did not pay (%.0f -> %.0f/s, stall %.0f -> "
                 "%.0f %%%s%s): gpu_share %d -> %d",
                 p->before_rate, m->rate, 100 * p->before_stall, 100 * m->stall,
                 made, step, cur->gpu_share, p->from);
        return 1;
    }
    if (v) {
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
    double ready;
    sl__place_sums_t w = window_sums(win, n, &ready);
    int nb = batch_size(win, n);
    meas_t m;
    measure(&w, nb, &m);
    m.ready = ready;
    if (!(m.t > 0))
        return 0;
    sl__estimate_t e;
    sl__estimate(win, n, lim, cur, &e);
    if (e.gpu_rate > 0)
        p->gpu_rate = e.gpu_rate; /* kept while the stage idles */
    if (e.gpu_cpu_k > 0)
        p->gpu_cpu_k = e.gpu_cpu_k; /* likewise */
    int drain = m.stall < SL_PLACE_STALL &&
                sl__estimate_draining(&e, m.ready, cur->prefetch);
    if (p->trial) { /* judged once sure, or over enough of the trainer */
        /* A starved trainer's gain is small and comes as the cores free
         * up: the first SL_PLACE_SETTLE windows are not counted, then the
         * most. */
        int settle = p->starved > 0 ? SL_PLACE_SETTLE : 0;
        if (++p->after_n <= settle)
            return 0;
        sums_add(&p->after, &w);
        meas_t a;
        measure(&p->after, nb, &a);
        int fin = p->after_n - settle >= SL_PLACE_JUDGE_WINDOWS ||
                  (!settle && enough(&p->after, p->after_n, nb));
        int v = verdict(p, &a, fin, drain);
        return v < 0 ? 0 : judge(p, &a, v, cur, share, reason, len);
    }
    int may_raise = !p->raise_hold, may_shed = !p->shed_hold;
    p->raise_hold -= p->raise_hold > 0;
    p->shed_hold -= p->shed_hold > 0;
    /* More threads want the cores than there are (the estimate's rq >
     * ncpu): the decoders' busy threads (ours) then share them with the
     * trainer. */
    double rq = e.run_queue, ours = w.ours / m.t;
    int ncpu = win[n - 1].ncpu, contended = e.contended;
    /* A paid starved raise's floor answers the others' threads (not the
     * run queue: the decoders' part comes and goes with the buffer and
     * with the share itself): it lifts once, SL_PLACE_CALM windows in a
     * row, they would leave the cores uncontended with the decoders back
     * at the share before it. */
    if (p->starve_floor > 0) {
        double others = w.others / m.t;
        p->floor_free = others + p->floor_ours <= ncpu ? p->floor_free + 1 : 0;
        if (p->floor_free >= SL_PLACE_CALM)
            p->starve_floor = 0;
    }
    p->calm = m.stall < 0.01 && !drain ? p->calm + 1 : 0;
    int waits = m.stall >= SL_PLACE_STALL || drain;
    run_push(p, &w, waits ? 1 : !p->calm ? 0 : contended ? 3 : 2);
    int s = cur->gpu_share, max = lim->max_gpu_share;
    double cpu = e.cpu_prep > 0 ? e.cpu_prep : 0; /* the CPU path's */
    double g = p->gpu_rate, k = p->gpu_cpu_k;
    const double unit = SL_KNOB_SHARE_UNIT;
    /* The trainer's pace while calm, over its whole run of like windows
     * (enough of them): its best, and, while the cores are contended, how
     * much slower it runs now (f). */
    double f = 0;
    if (p->run_kind >= 2) {
        int ok;
        sl__place_sums_t rs = run_before(p, nb, 1, &ok);
        meas_t r;
        measure(&rs, nb, &r);
        if (ok && r.work > 0) {
            if (!(p->best_work > 0) || r.work < p->best_work)
                p->best_work = r.work;
            if (p->run_kind == 3)
                f = r.work / p->best_work;
        }
    }
    /* Starved: its step f times its best, as much as the contention can
     * explain (a thread's share of the cores falls at most rq / ncpu
     * times: a trainer that pauses, for an evaluation or a checkpoint,
     * takes few samples for other reasons), with the batch buffers
     * (nearly) full: the decoders then make only what the trainer takes,
     * so a share that cuts their work frees cores at once (they refill a
     * draining buffer at full speed whatever the share: that is the
     * raise above). */
    int starved = f >= 1 + SL_PLACE_GAIN && contended &&
                  f <= SL_PLACE_STARVED_MAX * rq / ncpu && ours > 0 &&
                  cur->prefetch >= 2 &&
                  m.ready >= SL_PLACE_FULL * (cur->prefetch - 1);

    /* Raise: the trainer waits, or will (the buffer drains: the model's
     * supply short of its demand, under half the batches ready), and the
     * CPU cannot give more — unless NVML says the GPU has no room: its
     * JPEG decoders full, or kernels running all the time (then the
     * trainer's wait is not the GPU's idle time — it queued work ahead,
     * or another job fills it — and more work there would slow the
     * step). */
    int cpu_short = !(e.cpu_prep > 0) || !(e.cpu_prep_max > 1.10 * e.cpu_prep);
    double jpg, kern;
    int gpu_full = sl__place_gpu_full(win, n, &jpg, &kern);
    if (waits) /* why not, unless a raise follows */
        held(p, s, max, may_raise, cpu_short, jpg, kern, &e);
    if (waits && s < max && may_raise && cpu_short && !gpu_full) {
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
        int to = raise_to(s, want, bal, max, nb);
        /* Worth a trial: half a step or more where the model sees a gain
         * at all (none where a GPU sample costs about what a decode
         * does), or less where it says it buys a raise's gain (near the
         * balance a few per mille are many samples/s). */
        double d = e.demand > 0 ? e.demand : INFINITY;
        /* now: the model's, and at least what the paths made (a model
         * below it would see gains where the GPU is the bound already);
         * without decodes measured there is no model to weigh by */
        double now = model_rate(s / unit, cpu, k, g);
        if (cpu > 0 && m.made > now)
            now = m.made;
        now = fmin(d, now);
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
            char ws[48];
            if (drain)
                snprintf(ws, sizeof ws, "buffer drains (%.1f of %d ready)",
                         m.ready, cur->prefetch);
            else
                snprintf(ws, sizeof ws, "waits %.0f %%", 100 * m.stall);
            snprintf(reason, len,
                     "placement: CPU short (%.0f of %.0f/s), %s, demand %s, "
                     "GPU %s: gpu_share %d -> %d",
                     cpu, e.cpu_prep_max, ws, ds, gs, s, to);
            p->held[0] = '\0';
            return start_trial(p, +1, s, nb, drain, 0);
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

    /* Starved: the trainer does not wait, but its step runs f times its
     * best while rq threads want ncpu cores. It needs f times the CPU
     * share it gets: rq / f threads wanting them. The share rises to
     * take rq (1 - 1 / f) of the CPU path's busy threads (ours) off the
     * cores — its part of a batch's CPU times 1 - that / ours — never
     * past the balance (beyond it the trainer would wait on the GPU),
     * at most half before the GPU's capacity is measured. */
    if (starved && s < max && may_raise && !gpu_full && cpu > 0) {
        double bal = g > 0 ? fmin(1, g / (cpu + g * (1 - k))) : 0.5;
        double c = cpu_part(s, k);
        double cut = rq * (1 - 1 / f);
        double ask = cut < ours ? c * (1 - cut / ours) : 0; /* the CPU */
        double c2 = fmax(k, ask); /* the least a share can leave */
        double want = c2 < 1 ? (1 - c2) / (1 - k) : 0;
        int to = raise_to(s, fmin(want, bal), bal, max, nb);
        /* worth a trial only where it takes half the CPU asked off the
         * cores (not where a GPU sample costs about a decode's) */
        double cto = cpu_part(to, k);
        if (to > s && cto <= c - 0.5 * (c - ask)) {
            *share = to;
            p->raises++;
            snprintf(reason, len,
                     "placement: the trainer's step %+.0f %% over its best "
                     "while %.0f threads want %d cores: gpu_share %d -> %d",
                     100 * (f - 1), rq, ncpu, s, to);
            return start_trial(p, +1, s, nb, 0, f);
        }
    }

    /* Shed: calm, and the CPU could carry more of each batch (not while
     * it starves the trainer). */
    if (s > 0 && p->calm >= SL_PLACE_CALM && may_shed && !starved &&
        e.cpu_prep_max > 0) {
        double d = e.demand > 0 ? e.demand : m.rate;
        double keep = d > 0 ? share_for(d, 0.8 * e.cpu_prep_max, k) : 1;
        int need = keep > 0 ? (int)ceil(keep * unit) : 0, to = need;
        /* At most halved, by a step at least: where half is less than a
         * step, a step; a share under one, all of it (else a few per mille
         * would stay on the GPU for good). */
        int least = s < SL_PLACE_STEP ? s : SL_PLACE_STEP;
        int lo = s / 2 < s - least ? s / 2 : s - least;
        if (to < lo)
            to = lo;
        if (to < p->starve_floor) /* what a starved trainer was given */
            to = p->starve_floor;
        /* The loader routes whole slots: a shed that moves none would be
         * no trial. It goes on to the share one slot fewer takes where
         * the CPU carries that and no floor stands in the way, else none;
         * a share that routes no slot goes whole. */
        int c = nb > 0 ? sl__gpu_route_count(nb, s) : -1;
        if (c >= 0 && sl__gpu_route_count(nb, to) >= c) {
            int fewer = c > 0 ? sl__gpu_route_share(nb, c) - 1 : 0;
            to = c == 0 || (fewer >= need && fewer >= p->starve_floor) ? fewer
                                                                       : s;
        }
        if (to <= s - least) {
            *share = to;
            p->sheds++;
            p->calm = 0;
            snprintf(reason, len,
                     "placement: calm, the CPU can make %.0f/s of %.0f/s: "
                     "gpu_share %d -> %d",
                     0.8 * e.cpu_prep_max, d, s, to);
            return start_trial(p, -1, s, nb, 0, 0);
        }
    }
    return 0;
}
