#include "core/sched_glue.h"

#include <stdio.h>
#include <string.h>

int sl__sched_glue_init(sl__sched_glue_t *g, const sl_options_t *o,
                        const sl__limits_t *lim, pthread_mutex_t *mu,
                        void *self, int (*knobs)(void *, sl__knobs_t *),
                        int (*set)(void *, int, int), char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->lim = lim;
    g->mu = mu;
    g->self = self;
    g->knobs = knobs;
    g->set = set;
    sl__policy_t *pol = NULL;
    int rc = sl__policy_for(o, lim, &pol, err, errlen);
    if (rc)
        return rc;
    sl__sched_init(&g->sched, pol); /* pol may be NULL: inactive */
    return 0;
}

int sl__sched_glue_active(const sl__sched_glue_t *g)
{
    return g->sched.pol != NULL;
}

void sl__sched_glue_free(sl__sched_glue_t *g)
{
    sl__sched_free(&g->sched);
}

void sl__sched_glue_tick(sl__sched_glue_t *g, struct sl__collector *c)
{
    if (!g->sched.pol || !sl__sched_due(&g->sched))
        return;
    sl_snapshot_t win[SL_SCHED_PERIODS];
    int n = sl__collector_recent(c, win, SL_SCHED_PERIODS);
    sl__knobs_t cur;
    pthread_mutex_lock(g->mu);
    int running = g->knobs(g->self, &cur);
    if (!running)
        g->place_held[0] = '\0'; /* no decision: no reason */
    pthread_mutex_unlock(g->mu);
    if (!running)
        return;
    sl__sched_decision_t d;
    int changes = sl__sched_tick(&g->sched, win, n, g->lim, &cur, &d);
    pthread_mutex_lock(g->mu);
    memcpy(g->place_held, g->sched.place.held, sizeof g->place_held);
    pthread_mutex_unlock(g->mu);
    if (!changes)
        return;
    int applied[sizeof d.ch / sizeof d.ch[0]] = {0};
    for (int i = 0; i < d.n; i++)
        applied[i] = g->set(g->self, d.ch[i].knob, d.ch[i].to) == 0;
    pthread_mutex_lock(g->mu);
    g->decisions +=
        sl__sched_report(&d, applied, g->knob, sizeof g->knob, &g->from, &g->to,
                         g->reason, sizeof g->reason);
    pthread_mutex_unlock(g->mu);
}

void sl__sched_glue_sample(const sl__sched_glue_t *g, sl__pipe_sample_t *o)
{
    o->decisions = g->decisions;
    memcpy(o->decision_knob, g->knob, sizeof o->decision_knob);
    o->decision_from = g->from;
    o->decision_to = g->to;
    memcpy(o->decision_reason, g->reason, sizeof o->decision_reason);
    memcpy(o->placement_held, g->place_held, sizeof o->placement_held);
}
