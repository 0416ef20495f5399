#include "heuristic.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/analysis.h"

#define STALL_HI 0.05 /* the consumer waits: act */
#define STALL_LO 0.01 /* no stall */
#define BUSY_HI 0.80  /* a stage's threads are (nearly) always working */
#define BUSY_LO 0.60
#define GAIN 0.03      /* a step up must buy this much throughput */
#define CALM_WINDOWS 4 /* windows without stall before shedding */
/* Below this share of the machine for the process, busy readers wait on
 * storage, not for a core. */
#define IO_CPU 0.60
/* A consumer-bound pipeline keeps this many seconds of the consumer's
 * demand ready, at most COVER_MAX batches: a change (others take the
 * CPU, reads slow down) is absorbed while the policy sees it, jumps and
 * judges the jump (~3 windows), instead of reaching the trainer. */
#define COVER_S 2.0
#define COVER_MAX 8

void sl__heur_init(sl__heur_t *h)
{
    memset(h, 0, sizeof *h);
    for (int k = 0; k < 4; k++)
        h->backoff[k] = 2;
    h->ref_other = -1;
}

typedef struct window {
    double stall, rate, dbusy, rbusy, ready, cpu_self, cpu_other;
    int calm_snaps; /* snapshots without any wait */
} window_t;

static window_t average(const sl_snapshot_t *s, int n)
{
    window_t w;
    memset(&w, 0, sizeof w);
    double t = 0;
    for (int i = 0; i < n; i++) {
        double dt = s[i].interval_s > 0 ? s[i].interval_s : 0;
        w.stall += s[i].stall_fraction * dt;
        w.rate += s[i].samples_per_s * dt;
        w.dbusy += s[i].decode.busy * dt;
        w.rbusy += s[i].read.busy * dt;
        w.ready += s[i].batches_ready * dt;
        /* Of the CPUs it may use (a quota or a mask leaves fewer than
         * the machine's, which cpu_self is a share of). */
        int u = sl__snapshot_cpus(&s[i]);
        double self = u > 0 && s[i].ncpu > u ? s[i].cpu_self * s[i].ncpu / u
                                             : s[i].cpu_self;
        w.cpu_self += (self < 1 ? self : 1) * dt;
        w.cpu_other += s[i].cpu_other * dt;
        w.calm_snaps += s[i].stall_fraction <= 0;
        t += dt;
    }
    if (t > 0) {
        w.stall /= t, w.rate /= t, w.dbusy /= t, w.rbusy /= t;
        w.ready /= t, w.cpu_self /= t, w.cpu_other /= t;
    }
    return w;
}

/* A knob's name in reasons: the read knob may be the I/O depth. */
static const char *knob_label(const sl__heur_t *h, int knob)
{
    return sl__knob_label(knob, h->read_depth);
}

/* Can `which` go up one step within the limits? */
static int can_raise(const sl__heur_t *h, const sl__limits_t *lim,
                     const sl__knobs_t *k, int which)
{
    if (h->hold[which] > 0)
        return 0;
    switch (which) {
    case SL_KNOB_DECODE: /* CPU threads: decode + the read stage's one */
        return lim->tune_decode && k->decode_threads < lim->max_decode &&
               k->decode_threads + 1 < lim->max_threads;
    case SL_KNOB_READ: /* I/O depth: its own budget; not at a known cap */
        return lim->tune_read && k->read_threads < lim->max_read && !h->at_cap;
    default:
        return lim->tune_prefetch && k->prefetch < lim->max_prefetch;
    }
}

/* a / b outside [1 / f, f]: moved by more than a factor f. */
static int moved(double a, double b, double f)
{
    return a > 0 && b > 0 && (a > b * f || b > a * f);
}

/* Between steps: a world that moved (read time, demand, CPU taken by
 * others) clears every hold, so the model may jump again at once. */
static void regime(sl__heur_t *h, const sl__estimate_t *e, double other,
                   int readers)
{
    int changed =
        (readers == h->ref_read && moved(e->read_s, h->ref_read_s, 1.5)) ||
        moved(e->demand, h->ref_demand, 2.0) ||
        (h->ref_other >= 0 && other - h->ref_other > 0.25) ||
        (h->ref_other >= 0 && h->ref_other - other > 0.25);
    if (changed) {
        for (int k = 1; k < 4; k++)
            h->hold[k] = 0, h->backoff[k] = 2;
        h->read_cap = 0;
        h->read_floor_s = 0;
    }
    if (e->read_s > 0) {
        h->ref_read_s = e->read_s;
        h->ref_read = readers;
    }
    if (e->demand > 0)
        h->ref_demand = h->ref_demand > 0 && !changed
                            ? 0.7 * h->ref_demand + 0.3 * e->demand
                            : e->demand;
    h->ref_other = other;
}

/* Batches that hold COVER_S of the demand when the consumer is the bound
 * (0: not consumer-bound or unknown), within max_prefetch. */
static int cover(const sl_snapshot_t *snaps, int n, const sl__estimate_t *e,
                 const sl__limits_t *lim)
{
    const sl_snapshot_t *last = &snaps[n - 1];
    if (!lim->tune_prefetch || !(e->demand > 0) ||
        strcmp(e->bound, "consumer") || last->batches_total < 1 ||
        last->samples_total < 1)
        return 0;
    double batch = (double)last->samples_total / (double)last->batches_total;
    int want = (int)ceil(e->demand / batch * COVER_S);
    if (want > COVER_MAX)
        want = COVER_MAX;
    return want < lim->max_prefetch ? want : lim->max_prefetch;
}

/* The stage a knob feeds, and its capacity in e (0: unknown). */
static double capacity(const sl__estimate_t *e, int which)
{
    return which == SL_KNOB_READ     ? e->fetch
           : which == SL_KNOB_DECODE ? e->prep
                                     : 0;
}

static int is_bound(const sl__estimate_t *e, int which)
{
    return (which == SL_KNOB_READ && !strcmp(e->bound, "fetch")) ||
           (which == SL_KNOB_DECODE && !strcmp(e->bound, "prep"));
}

/* Records a change of `which` from cur to next for the next judge. */
static void trial(sl__heur_t *h, int which, int dir, int from,
                  const window_t *w, const sl__estimate_t *e, double promised)
{
    h->last_knob = which;
    h->last_dir = dir;
    h->from = from;
    h->before_rate = w->rate;
    h->before_stall = w->stall;
    h->before_cap = dir > 0 && is_bound(e, which) ? capacity(e, which) : 0;
    h->promised_cap = promised;
    if (h->last_move[which] && h->last_move[which] != dir)
        h->reversals++;
    h->last_move[which] = dir;
}

/* Backs a knob off after a trial that did not pay: it holds for
 * `backoff` windows (doubling: 2..32). */
static void hold_off(sl__heur_t *h, int which)
{
    /* +1: holds count down at the start of each step */
    h->hold[which] = h->backoff[which] + 1;
    if (h->backoff[which] < 32)
        h->backoff[which] *= 2;
    h->cooldown = 1;
}

/* A model jump: the knob straight to what the model asks for, when that
 * is clearly more than runs now. SL_KNOB_NONE when none is due. */
static int jump(sl__heur_t *h, const window_t *w, const sl__estimate_t *e,
                const sl__limits_t *lim, const sl__knobs_t *cur,
                sl__knobs_t *next, char *reason, size_t len)
{
    static const int order[2] = {SL_KNOB_DECODE, SL_KNOB_READ};
    for (int i = 0; i < 2; i++) {
        int k = order[i], now = sl__knob_get(cur, k);
        int want = k == SL_KNOB_READ ? e->need_read : e->need_decode;
        int tune = k == SL_KNOB_READ ? lim->tune_read : lim->tune_decode;
        if (!tune || h->hold[k] > 0 || !is_bound(e, k) || want < now + 2 ||
            want <= now * 1.25)
            continue;
        if (k == SL_KNOB_READ && h->at_cap)
            continue; /* at the link's cap already */
        double unit = k == SL_KNOB_READ ? e->read_s : e->decode_s;
        trial(h, k, +1, now, w, e, want / unit);
        *sl__knob_ref(next, k) = want;
        h->jumps++;
        char demand[32];
        if (e->demand > 0)
            snprintf(demand, sizeof demand, "%.0f/s", e->demand);
        else
            snprintf(demand, sizeof demand, "all it gets");
        snprintf(reason, len,
                 "model: %s-bound (fetch %.0f/s, prep %.0f/s, demand %s); "
                 "%.1f ms per %s, target %.0f/s: %s %d -> %d",
                 e->bound, e->fetch, e->prep, demand, 1e3 * unit,
                 k == SL_KNOB_READ ? "read" : "sample", e->target,
                 knob_label(h, k), now, want);
        return k;
    }
    return SL_KNOB_NONE;
}

/* Judges a jump by the stage's capacity: paid (stays), capped (stays, the
 * cap remembered), or bought nothing (undone). Returns the knob when it
 * changed it. */
static int judge_jump(sl__heur_t *h, int which, const sl__estimate_t *e,
                      const sl__knobs_t *cur, sl__knobs_t *next, char *reason,
                      size_t len)
{
    double got = capacity(e, which), before = h->before_cap;
    double promised = h->promised_cap;
    int now = sl__knob_get(cur, which);
    if (!(got > 0) || got >= before + 0.5 * (promised - before)) {
        h->backoff[which] = 2;
        return SL_KNOB_NONE;
    }
    /* A cap the model cannot see (a link's bandwidth, CPU taken). A jump
     * that still bought something stays: outstanding reads queued on a
     * link cost no CPU, and a settle judged from the window of the jump,
     * while the new readers ramp up, cut too deep. The cap is remembered
     * so the next window does not jump again. One that bought nothing is
     * undone. */
    hold_off(h, which);
    if (which == SL_KNOB_READ) {
        h->read_cap = got;
        h->read_cap_age = 0;
    }
    if (got > before * 1.1)
        return SL_KNOB_NONE;
    *sl__knob_ref(next, which) = h->from;
    h->reversals++;
    h->last_move[which] = -1;
    snprintf(reason, len,
             "undo: %s %d -> %d promised %.0f/s, got %.0f/s (was %.0f): a "
             "cap the model cannot see; next jump in %d windows",
             knob_label(h, which), h->from, now, promised, got, before,
             h->hold[which] - 1);
    return which;
}

/* What every decision starts with: no change yet, the window, the
 * model's estimate, holds counted down, and a regime change looked for
 * between steps. 0 when there is no window. */
static int begin(sl__heur_t *h, const sl_snapshot_t *snaps, int n,
                 const sl__limits_t *lim, const sl__knobs_t *cur,
                 sl__knobs_t *next, window_t *w, sl__estimate_t *e)
{
    *next = *cur;
    h->read_depth = lim->read_depth;
    if (n < 1)
        return 0;
    *w = average(snaps, n);
    sl__estimate(snaps, n, lim, cur, e);
    for (int k = 1; k < 4; k++)
        if (h->hold[k] > 0)
            h->hold[k]--;
    if (h->last_knob == SL_KNOB_NONE)
        regime(h, e, w->cpu_other, cur->read_threads);
    if (e->read_s > 0 &&
        (!(h->read_floor_s > 0) || e->read_s < h->read_floor_s))
        h->read_floor_s = e->read_s;
    sl__estimate_read_floor(e, h->read_floor_s, lim);
    if (h->read_cap > 0 && ++h->read_cap_age > SL_HEUR_CAP_KEEP)
        h->read_cap = 0;
    h->at_cap = h->read_cap > 0 && e->fetch >= 0.8 * h->read_cap;
    return 1;
}

/* A jump under trial is judged first (judge_jump): 1 and *k when it was. */
static int judged_jump(sl__heur_t *h, const sl__estimate_t *e,
                       const sl__knobs_t *cur, sl__knobs_t *next, char *reason,
                       size_t len, int *k)
{
    if (h->last_knob == SL_KNOB_NONE || h->last_dir < 0 ||
        !(h->promised_cap > 0 && h->before_cap > 0))
        return 0;
    int which = h->last_knob;
    h->last_knob = SL_KNOB_NONE;
    *k = judge_jump(h, which, e, cur, next, reason, len);
    return 1;
}

int sl__heur_model_step(sl__heur_t *h, const sl_snapshot_t *snaps, int n,
                        const sl__limits_t *lim, const sl__knobs_t *cur,
                        sl__knobs_t *next, char *reason, size_t len)
{
    window_t w;
    sl__estimate_t e;
    int k;
    if (!begin(h, snaps, n, lim, cur, next, &w, &e))
        return SL_KNOB_NONE;
    if (judged_jump(h, &e, cur, next, reason, len, &k))
        return k;
    h->last_knob = SL_KNOB_NONE; /* only jumps are tried here */
    return w.stall > STALL_LO ? jump(h, &w, &e, lim, cur, next, reason, len)
                              : SL_KNOB_NONE;
}

int sl__heur_step(sl__heur_t *h, const sl_snapshot_t *snaps, int n,
                  const sl__limits_t *lim, const sl__knobs_t *cur,
                  sl__knobs_t *next, char *reason, size_t len)
{
    window_t w;
    sl__estimate_t e;
    int k;
    if (!begin(h, snaps, n, lim, cur, next, &w, &e))
        return SL_KNOB_NONE;

    /* Judge the step under trial first. */
    if (judged_jump(h, &e, cur, next, reason, len, &k))
        return k;
    if (h->last_knob != SL_KNOB_NONE) {
        int which = h->last_knob;
        h->last_knob = SL_KNOB_NONE;
        if (h->last_dir > 0) {
            /* A step on the bound stage pays when that stage's capacity
             * rose: the consumer's rate follows a batch later. A buffer
             * for bursts pays when it halves mild waits. */
            double cap = capacity(&e, which);
            int paid =
                (h->before_cap > 0 && cap > h->before_cap * (1 + GAIN)) ||
                w.rate > h->before_rate * (1 + GAIN) ||
                w.stall < h->before_stall - STALL_HI ||
                (which == SL_KNOB_PREFETCH && h->before_stall > STALL_LO &&
                 w.stall < 0.5 * h->before_stall);
            /* Waits that grew by more than a step explains: the world
             * changed (demand rose, others took CPU) and the step is
             * still needed; undoing it would only deepen the stall. The
             * step stays untried: neither paid nor undone. */
            int worse = w.stall > h->before_stall + STALL_HI;
            if (!paid && !worse && *sl__knob_ref(next, which) > 1) {
                *sl__knob_ref(next, which) = h->from;
                hold_off(h, which);
                h->reversals++;
                h->last_move[which] = -1;
                snprintf(reason, len,
                         "undo: %s +1 bought nothing (%.0f -> %.0f samples/s,"
                         " stall %.0f%% -> %.0f%%); next try in %d windows",
                         knob_label(h, which), h->before_rate, w.rate,
                         100 * h->before_stall, 100 * w.stall,
                         h->hold[which] - 1);
                return which;
            }
            if (paid)
                h->backoff[which] = 2;
        } else if (w.stall > h->before_stall + STALL_HI) {
            /* Shedding hurt: give it back and stay calm for a while. */
            *sl__knob_ref(next, which) = h->from;
            h->reversals++;
            h->last_move[which] = +1;
            /* Each failed shed waits twice as long before the next. */
            h->calm = -h->backoff[0] * CALM_WINDOWS;
            if (h->backoff[0] < 32)
                h->backoff[0] *= 2;
            h->cooldown = 1;
            snprintf(reason, len,
                     "undo: %s %d -> %d made the consumer wait (stall %.0f%% "
                     "-> %.0f%%)",
                     knob_label(h, which), h->from, sl__knob_get(cur, which),
                     100 * h->before_stall, 100 * w.stall);
            return which;
        }
    }
    if (h->cooldown > 0) {
        h->cooldown--;
        return SL_KNOB_NONE;
    }

    int drain = w.stall <= STALL_HI &&
                sl__estimate_draining(&e, w.ready, cur->prefetch);
    if (w.stall > STALL_LO || drain) {
        k = jump(h, &w, &e, lim, cur, next, reason, len);
        if (k != SL_KNOB_NONE)
            return k;
    }
    int which = SL_KNOB_NONE, dir = 0;
    if (w.stall > STALL_HI || drain) {
        h->calm = 0;
        /* Readers busy while decoders idle, or while the process uses
         * little CPU, wait on storage: one more outstanding read. */
        int io_bound =
            w.rbusy > BUSY_HI && (w.dbusy < BUSY_HI || w.cpu_self < IO_CPU);
        if (io_bound && w.rbusy >= w.dbusy &&
            can_raise(h, lim, cur, SL_KNOB_READ))
            which = SL_KNOB_READ;
        else if (w.dbusy > BUSY_HI && can_raise(h, lim, cur, SL_KNOB_DECODE))
            which = SL_KNOB_DECODE;
        else if (io_bound && can_raise(h, lim, cur, SL_KNOB_READ))
            which = SL_KNOB_READ;
        else if (w.dbusy < BUSY_HI && w.rbusy < BUSY_HI && w.ready < 0.5 &&
                 !sl__estimate_deficit(&e) &&
                 can_raise(h, lim, cur, SL_KNOB_PREFETCH))
            /* Stages have slack yet the consumer waits: bursts. Deeper
             * prefetch absorbs them; it cannot help a saturated stage. */
            which = SL_KNOB_PREFETCH;
        if (which != SL_KNOB_NONE) {
            dir = +1;
            char why[64];
            if (drain)
                snprintf(why, sizeof why,
                         "buffer drains (%.1f of %d ready, demand %.0f/s)",
                         w.ready, cur->prefetch, e.demand);
            else
                snprintf(why, sizeof why, "consumer waits %.0f%% of the time",
                         100 * w.stall);
            snprintf(reason, len,
                     "%s; decode busy %.0f%%, read busy %.0f%%, others use "
                     "%.0f%% CPU: %s +1",
                     why, 100 * w.dbusy, 100 * w.rbusy, 100 * w.cpu_other,
                     knob_label(h, which));
        }
    } else if (w.stall < STALL_LO) {
        h->calm++;
        /* Consumer-bound: buffers that cost no CPU (the same batches,
         * made earlier) cover the next change. Not a trial: the rate
         * cannot rise, the consumer sets it. */
        int deep = cover(snaps, n, &e, lim);
        if (deep > cur->prefetch && h->hold[SL_KNOB_PREFETCH] == 0) {
            *sl__knob_ref(next, SL_KNOB_PREFETCH) = deep;
            snprintf(reason, len,
                     "consumer-bound (demand %.0f/s, supply %.0f/s): "
                     "prefetch %d -> %d holds %.0f s of it for the next "
                     "change",
                     e.demand, e.fetch < e.prep ? e.fetch : e.prep,
                     cur->prefetch, deep, COVER_S);
            return SL_KNOB_PREFETCH;
        }
        /* What n-1 decoders could deliver, if each keeps its rate per
         * busy second: shed only with a 25 % margin over today's rate. */
        int n = cur->decode_threads;
        int floor = lim->min_decode > 1 ? lim->min_decode : 1;
        double after =
            n > 1 ? w.rate / (w.dbusy > 0.05 ? w.dbusy : 0.05) * (n - 1) / n
                  : 0;
        int r = cur->read_threads, rwant = e.need_read;
        if (h->calm >= CALM_WINDOWS && lim->tune_read && rwant > 0 &&
            2 * rwant < r && h->hold[SL_KNOB_READ] == 0) {
            int to = (r + 1) / 2 > rwant ? (r + 1) / 2 : rwant;
            trial(h, SL_KNOB_READ, -1, r, &w, &e, 0);
            *sl__knob_ref(next, SL_KNOB_READ) = to;
            h->calm = 0;
            snprintf(reason, len,
                     "no stall for %d windows; the model needs %d "
                     "outstanding reads (%.1f ms each, target %.0f/s): "
                     "%s %d -> %d",
                     CALM_WINDOWS, rwant, 1e3 * e.read_s, e.target,
                     knob_label(h, SL_KNOB_READ), r, to);
            return SL_KNOB_READ;
        }
        if (h->calm >= CALM_WINDOWS && lim->tune_decode && n > floor &&
            w.dbusy < BUSY_LO && after >= 1.25 * w.rate &&
            w.ready >= 0.5 * cur->prefetch) {
            which = SL_KNOB_DECODE;
            dir = -1;
            h->calm = 0;
            snprintf(reason, len,
                     "no stall for %d windows, %.1f batches ready, decoders "
                     "busy %.0f%%: decode_threads -1 frees CPU",
                     CALM_WINDOWS, w.ready, 100 * w.dbusy);
        }
    } else {
        /* Mild waits: when they come in bursts (some snapshots without
         * any wait) while both stages have slack, a deeper buffer
         * absorbs the next burst; memory stays within max_prefetch. */
        h->calm = 0;
        if (w.calm_snaps > 0 && w.dbusy < BUSY_HI && w.rbusy < BUSY_HI &&
            can_raise(h, lim, cur, SL_KNOB_PREFETCH)) {
            which = SL_KNOB_PREFETCH;
            dir = +1;
            snprintf(reason, len,
                     "consumer waits in bursts (%.1f%% of the time, %d of "
                     "%d periods without a wait); decode busy %.0f%%, "
                     "read busy %.0f%%: prefetch +1",
                     100 * w.stall, w.calm_snaps, n, 100 * w.dbusy,
                     100 * w.rbusy);
        }
    }
    if (which == SL_KNOB_NONE)
        return SL_KNOB_NONE;
    trial(h, which, dir, sl__knob_get(cur, which), &w, &e, 0);
    *sl__knob_ref(next, which) += dir;
    return which;
}
