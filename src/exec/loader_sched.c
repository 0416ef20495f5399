/* The loader's side of the scheduler: its budgets at create, and the hook
 * the collector calls every telemetry period. The rules themselves live in
 * sched/: the budget rule in limits.h, the policies and the tick in
 * policy.h. Here only: take the window, call the tick, apply each change
 * through the same sl_loader_set any user has, record the decision for
 * the next snapshot. */
#include <stdio.h>
#include <string.h>

#include "loader_internal.h"

_Static_assert(SL_WORKERS_MAX == SL_KNOB_MAX_THREADS,
               "the budget rule's worker limit is the engine's");

int sl__loader_budgets(sl_loader_t *l, const sl_options_t *given, char *err,
                       size_t errlen)
{
    sl__knobs_t k;
    int rc = sl__limits_make(given, sl__ncpu(), l->batch_bytes, &l->lim, &k,
                             err, errlen);
    if (rc)
        return rc;
    l->opt.read_threads = k.read_threads;
    l->opt.decode_threads = k.decode_threads;
    l->opt.prefetch = k.prefetch;
    return 0;
}

static sl_param_t knob_param(int knob)
{
    return knob == SL_KNOB_READ     ? SL_PARAM_READ_THREADS
           : knob == SL_KNOB_DECODE ? SL_PARAM_DECODE_THREADS
                                    : SL_PARAM_PREFETCH;
}

/* On the collector thread: every SL_SCHED_PERIODS periods, one tick over
 * the last window of snapshots. */
static void schedule(void *arg, struct sl__collector *c)
{
    sl_loader_t *l = arg;
    if (!sl__sched_due(&l->sched))
        return;
    sl_snapshot_t win[SL_SCHED_PERIODS];
    int n = sl__collector_recent(c, win, SL_SCHED_PERIODS);
    pthread_mutex_lock(&l->mu);
    int running = l->running && !l->stopping;
    sl__knobs_t cur = {l->read_threads, l->decode_threads, l->prefetch};
    pthread_mutex_unlock(&l->mu);
    if (!running)
        return;
    sl__sched_decision_t d;
    if (!sl__sched_tick(&l->sched, win, n, &l->lim, &cur, &d))
        return;
    int applied[3] = {0};
    for (int i = 0; i < d.n; i++)
        applied[i] =
            sl_loader_set(l, knob_param(d.ch[i].knob), d.ch[i].to) == 0;
    pthread_mutex_lock(&l->mu);
    l->decisions +=
        sl__sched_report(&d, applied, l->decision_knob, sizeof l->decision_knob,
                         &l->decision_from, &l->decision_to, l->decision_reason,
                         sizeof l->decision_reason);
    pthread_mutex_unlock(&l->mu);
}

int sl__loader_sched_init(sl_loader_t *l, struct sl__collector_opts *co,
                          char *err, size_t errlen)
{
    sl__policy_t *pol;
    int rc = sl__policy_for(&l->opt, &l->lim, &pol, err, errlen);
    if (rc || !pol)
        return rc;
    sl__sched_init(&l->sched, pol);
    co->on_tick = schedule;
    return 0;
}

void sl__loader_sched_free(sl_loader_t *l)
{
    sl__sched_free(&l->sched);
}
