/* Plans: a start that prepares given batches (a list or a strided range)
 * in a given order, for preparers that are handed work (sluice.ray) and
 * re-handed it after a failure. The pipeline is unchanged: its run
 * positions 0..n-1 are mapped to batch numbers when a reader claims a
 * batch (loader_work.c), and a batch is a pure function of (seed, epoch,
 * index), so a planned batch is the sequential stream's, byte for byte. */
#include <stdlib.h>

#include "base/abi.h"
#include "base/lasterr.h"
#include "loader_internal.h"

/* The first layout of sl_plan_t (base/abi.h). */
#define SL__PLAN_V1_SIZE (offsetof(sl_plan_t, step) + sizeof(int64_t))

SL__ABI_INIT_PAIR(sl_plan_init, sl_plan_t)

int64_t sl__loader_planned(const sl_loader_t *l, int64_t k)
{
    const sl__plan_t *p = &l->plan;
    if (!p->n)
        return k;
    if (k >= p->n) /* after the last: the batch that follows it */
        return sl__loader_planned(l, p->n - 1) + 1;
    return p->list ? p->list[k] : p->first + k * p->step;
}

/* The global batch number of (epoch, batch), or -1 (message set) when it
 * is outside epoch >= 0, batch 0..nb-1, or past INT64_MAX - 1 (the batch
 * after the last one planned must have a number too). */
static int64_t global(sl_loader_t *l, sl_position_t p, const char *what,
                      int64_t i)
{
    int64_t nb = l->smp.nbatches;
    if (p.epoch < 0 || p.batch < 0 || p.batch >= nb ||
        p.epoch > (INT64_MAX - 1 - p.batch) / nb) {
        sl__lasterr_set(l, SL_ERANGE,
                        "plan %s %lld: (epoch %lld, batch %lld) is outside "
                        "epoch >= 0, batch 0..%lld",
                        what, (long long)i, (long long)p.epoch,
                        (long long)p.batch, (long long)(nb - 1));
        return -1;
    }
    return p.epoch * nb + p.batch;
}

int sl_loader_start_plan(sl_loader_t *l, const sl_plan_t *plan)
{
    if (!l)
        return SL_EINVAL;
    sl_plan_t p;
    char err[256];
    if (sl__abi_in(&p, sizeof p, plan, SL__PLAN_V1_SIZE, "sl_plan", err,
                   sizeof err))
        return sl__lasterr_set(l, SL_EINVAL, "%s", err);
    if (p.count < 1)
        return sl__lasterr_set(l, SL_EINVAL,
                               "plan of %lld batches: a plan needs at least "
                               "one batch",
                               (long long)p.count);
    sl__plan_t m = {NULL, p.count, 0, p.step ? p.step : 1};
    if (p.batches) {
        if ((uint64_t)p.count > SIZE_MAX / sizeof(int64_t) ||
            !(m.list = malloc((size_t)p.count * sizeof(int64_t))))
            return sl__lasterr_set(l, SL_ENOMEM,
                                   "plan of %lld batches: out of memory",
                                   (long long)p.count);
        for (int64_t i = 0; i < p.count; i++)
            if ((m.list[i] = global(l, p.batches[i], "entry", i)) < 0) {
                free(m.list);
                return SL_ERANGE;
            }
    } else {
        if (m.step < 1)
            return sl__lasterr_set(l, SL_ERANGE,
                                   "plan range: step %lld is not >= 1",
                                   (long long)m.step);
        if ((m.first = global(l, p.first, "range first", 0)) < 0)
            return SL_ERANGE;
        if ((p.count - 1) > (INT64_MAX - 1 - m.first) / m.step)
            return sl__lasterr_set(
                l, SL_ERANGE,
                "plan range: %lld batches of step %lld from (epoch %lld, "
                "batch %lld) overflow the batch numbers",
                (long long)p.count, (long long)m.step, (long long)p.first.epoch,
                (long long)p.first.batch);
    }
    return sl__loader_begin(l, 0, p.count, &m);
}
