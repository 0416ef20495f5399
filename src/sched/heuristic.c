#include "heuristic.h"

#include <stdio.h>
#include <string.h>

#define STALL_HI 0.05 /* the consumer waits: act */
#define STALL_LO 0.01 /* no stall */
#define BUSY_HI 0.80  /* a stage's threads are (nearly) always working */
#define BUSY_LO 0.60
#define GAIN 0.03      /* a step up must buy this much throughput */
#define CALM_WINDOWS 4 /* windows without stall before shedding */
/* Below this share of the machine for the process, busy readers wait on
 * storage, not for a core. */
#define IO_CPU 0.60

void sl__heur_init(sl__heur_t *h)
{
    memset(h, 0, sizeof *h);
    for (int k = 0; k < 4; k++)
        h->backoff[k] = 2;
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
        w.cpu_self += s[i].cpu_self * dt;
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
    case SL_KNOB_READ: /* I/O depth: its own budget */
        return lim->tune_read && k->read_threads < lim->max_read;
    default:
        return lim->tune_prefetch && k->prefetch < lim->max_prefetch;
    }
}

int sl__heur_step(sl__heur_t *h, const sl_snapshot_t *snaps, int n,
                  const sl__limits_t *lim, const sl__knobs_t *cur,
                  sl__knobs_t *next, char *reason, size_t len)
{
    *next = *cur;
    if (n < 1)
        return SL_KNOB_NONE;
    window_t w = average(snaps, n);
    for (int k = 1; k < 4; k++)
        if (h->hold[k] > 0)
            h->hold[k]--;

    /* Judge the step under trial first. */
    if (h->last_knob != SL_KNOB_NONE) {
        int which = h->last_knob;
        h->last_knob = SL_KNOB_NONE;
        if (h->last_dir > 0) {
            /* A buffer for bursts pays when it halves mild waits. */
            int paid =
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
                (*sl__knob_ref(next, which))--;
                /* +1: holds count down at the start of each step */
                h->hold[which] = h->backoff[which] + 1;
                if (h->backoff[which] < 32)
                    h->backoff[which] *= 2;
                h->cooldown = 1;
                snprintf(reason, len,
                         "undo: %s +1 bought nothing (%.0f -> %.0f samples/s,"
                         " stall %.0f%% -> %.0f%%); next try in %d windows",
                         sl__knob_name(which), h->before_rate, w.rate,
                         100 * h->before_stall, 100 * w.stall,
                         h->hold[which] - 1);
                return which;
            }
            if (paid)
                h->backoff[which] = 2;
        } else if (w.stall > h->before_stall + STALL_HI) {
            /* Shedding hurt: give it back and stay calm for a while. */
            (*sl__knob_ref(next, which))++;
            /* Each failed shed waits twice as long before the next. */
            h->calm = -h->backoff[0] * CALM_WINDOWS;
            if (h->backoff[0] < 32)
                h->backoff[0] *= 2;
            h->cooldown = 1;
            snprintf(reason, len,
                     "undo: %s -1 made the consumer wait (stall %.0f%% -> "
                     "%.0f%%)",
                     sl__knob_name(which), 100 * h->before_stall,
                     100 * w.stall);
            return which;
        }
    }
    if (h->cooldown > 0) {
        h->cooldown--;
        return SL_KNOB_NONE;
    }

    int which = SL_KNOB_NONE, dir = 0;
    if (w.stall > STALL_HI) {
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
                 can_raise(h, lim, cur, SL_KNOB_PREFETCH))
            /* Stages have slack yet the consumer waits: bursts. Deeper
             * prefetch absorbs them; it cannot help a saturated stage. */
            which = SL_KNOB_PREFETCH;
        if (which != SL_KNOB_NONE) {
            dir = +1;
            snprintf(reason, len,
                     "consumer waits %.0f%% of the time; decode busy %.0f%%, "
                     "read busy %.0f%%, others use %.0f%% CPU: %s +1",
                     100 * w.stall, 100 * w.dbusy, 100 * w.rbusy,
                     100 * w.cpu_other, sl__knob_name(which));
        }
    } else if (w.stall < STALL_LO) {
        h->calm++;
        /* What n-1 decoders could deliver, if each keeps its rate per
         * busy second: shed only with a 25 % margin over today's rate. */
        int n = cur->decode_threads;
        int floor = lim->min_decode > 1 ? lim->min_decode : 1;
        double after =
            n > 1 ? w.rate / (w.dbusy > 0.05 ? w.dbusy : 0.05) * (n - 1) / n
                  : 0;
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
    *sl__knob_ref(next, which) += dir;
    h->last_knob = which;
    h->last_dir = dir;
    h->before_rate = w.rate;
    h->before_stall = w.stall;
    return which;
}
