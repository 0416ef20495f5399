/* The stall model: pure functions of measured rates (see analysis.h). */
#include <math.h>

#include "analysis.h"

int sl__stall_read_slots(const sl_snapshot_t *s)
{
    return s->io_async == 1 && s->io_depth > 0 ? s->io_depth : s->read.workers;
}

int sl__snapshot_cpus(const sl_snapshot_t *s)
{
    return s->ncpu_usable > 0 && (s->ncpu <= 0 || s->ncpu_usable < s->ncpu)
               ? s->ncpu_usable
               : s->ncpu;
}

const char *sl__bound_name(sl__bound_t b)
{
    static const char *const names[] = {
        [SL__BOUND_CONSUMER] = "consumer",
        [SL__BOUND_PREP] = "prep",
        [SL__BOUND_FETCH] = "fetch",
    };
    return (unsigned)b < sizeof names / sizeof *names ? names[b] : "?";
}

sl__stall_model_t sl__stall_predict(double demand, double prep, double cold,
                                    double warm, int fits)
{
    sl__stall_model_t m;
    m.demand = demand;
    m.prep = prep;
    m.fetch_cold = cold;
    m.fetch_warm = warm;
    /* A dataset that fits stays resident after one pass: warm from then on */
    m.fetch_used = fits ? warm : cold;
    m.supply = prep < m.fetch_used ? prep : m.fetch_used;
    m.predicted = demand > 0 && m.supply < demand ? 1 - m.supply / demand : 0;
    if (demand <= m.supply)
        m.bound = SL__BOUND_CONSUMER;
    else
        m.bound = prep <= m.fetch_used ? SL__BOUND_PREP : SL__BOUND_FETCH;
    return m;
}

int64_t sl__threads_needed(const double *rate, int n, double demand)
{
    for (int i = 0; i < n; i++)
        if (rate[i] >= demand)
            return i + 1;
    double slope = n > 1 ? (rate[n - 1] - rate[0]) / (n - 1) : rate[0];
    if (!(slope > 0))
        return -1;
    double k = n + ceil((demand - rate[n - 1]) / slope);
    return k > 1e15 ? (int64_t)1e15 : (int64_t)k;
}

sl__cure_t sl__stall_cure(sl__bound_t bound, int64_t threads_needed, int cores)
{
    switch (bound) {
    case SL__BOUND_CONSUMER:
        return SL__CURE_NONE;
    case SL__BOUND_PREP:
        if (threads_needed < 0)
            return SL__CURE_CHEAPER_PREP;
        return threads_needed > cores ? SL__CURE_CORES : SL__CURE_THREADS;
    case SL__BOUND_FETCH:
        break;
    }
    return SL__CURE_STORAGE;
}
