#include "heuristic.h"

#include <stdio.h>
#include <string.h>

#define STALL_HI 0.05 /* the consumer waits: act */
#define STALL_LO 0.01 /* no stall */
#define BUSY_HI 0.80  /* a stage's threads are (nearly) always working */
#define BUSY_LO 0.60
#define GAIN 0.03      /* a step up must buy this much throughput */
#define CALM_WINDOWS 4 /* windows without stall before shedding */

void sl__heur_init(sl__heur_t *h)
{
    memset(h, 0, sizeof *h);
    for (int k = 0; k < 4; k++)
        h->backoff[k] = 2;
}

typedef struct window {
    double stall, rate, dbusy, rbusy, ready, cpu_other;
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
        w.cpu_other += s[i].cpu_other * dt;
        t += dt;
    }
    if (t > 0) {
        w.stall /= t, w.rate /= t, w.dbusy /= t, w.rbusy /= t;
        w.ready /= t, w.cpu_other /= t;
    }
    return w;
}

static int *knob(sl__knobs_t *k, int which)
{
    return which == SL_KNOB_READ     ? &k->read_threads
           : which == SL_KNOB_DECODE ? &k->decode_threads
                                     : &k->prefetch;
}

static const char *knob_name(int which)
{
    return which == SL_KNOB_READ     ? "read_threads"
           : which == SL_KNOB_DECODE ? "decode_threads"
                                     : "prefetch";
}

/* Can `which` go up one step within the limits? */
static int can_raise(const sl__heur_t *h, const sl__limits_t *lim,
                     const sl__knobs_t *k, int which)
{
    if (h->hold[which] > 0)
        return 0;
    int threads = k->read_threads + k->decode_threads;
    switch (which) {
    case SL_KNOB_DECODE:
        return lim->tune_decode && k->decode_threads < lim->max_decode &&
               threads < lim->max_threads;
    case SL_KNOB_READ:
        return lim->tune_read && k->read_threads < lim->max_read &&
               threads < lim->max_threads;
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
            int paid = w.rate > h->before_rate * (1 + GAIN) ||
                       w.stall < h->before_stall - STALL_HI;
            if (!paid && *knob(next, which) > 1) {
                (*knob(next, which))--;
                /* +1: holds count down at the start of each step */
                h->hold[which] = h->backoff[which] + 1;
                if (h->backoff[which] < 32)
                    h->backoff[which] *= 2;
                h->cooldown = 1;
                snprintf(reason, len,
                         "undo: %s +1 bought nothing (%.0f -> %.0f samples/s,"
                         " stall %.0f%% -> %.0f%%); next try in %d windows",
                         knob_name(which), h->before_rate, w.rate,
                         100 * h->before_stall, 100 * w.stall,
                         h->hold[which] - 1);
                return which;
            }
            if (paid)
                h->backoff[which] = 2;
        } else if (w.stall > h->before_stall + STALL_HI) {
            /* Shedding hurt: give it back and stay calm for a while. */
            (*knob(next, which))++;
            /* Each failed shed waits twice as long before the next. */
            h->calm = -h->backoff[0] * CALM_WINDOWS;
            if (h->backoff[0] < 32)
                h->backoff[0] *= 2;
            h->cooldown = 1;
            snprintf(reason, len,
                     "undo: %s -1 made the consumer wait (stall %.0f%% -> "
                     "%.0f%%)",
                     knob_name(which), 100 * h->before_stall, 100 * w.stall);
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
        if (w.dbusy > BUSY_HI && can_raise(h, lim, cur, SL_KNOB_DECODE))
            which = SL_KNOB_DECODE;
        else if (w.rbusy > BUSY_HI && can_raise(h, lim, cur, SL_KNOB_READ))
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
                     100 * w.cpu_other, knob_name(which));
        }
    } else if (w.stall < STALL_LO) {
        h->calm++;
        /* What n-1 decoders could deliver, if each keeps its rate per
         * busy second: shed only with a 25 % margin over today's rate. */
        int n = cur->decode_threads;
        double after =
            n > 1 ? w.rate / (w.dbusy > 0.05 ? w.dbusy : 0.05) * (n - 1) / n
                  : 0;
        if (h->calm >= CALM_WINDOWS && lim->tune_decode && n > 1 &&
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
        h->calm = 0;
    }
    if (which == SL_KNOB_NONE)
        return SL_KNOB_NONE;
    *knob(next, which) += dir;
    h->last_knob = which;
    h->last_dir = dir;
    h->before_rate = w.rate;
    h->before_stall = w.stall;
    return which;
}
