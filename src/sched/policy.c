#include "sched/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sched/heuristic.h"

/* -------------------------------------------------------------- static */

static int static_step(SL__POLICY_STEP_ARGS)
{
    (void)p, (void)win, (void)n, (void)lim;
    *next = *cur;
    if (len)
        reason[0] = 0;
    return 0;
}

static void plain_destroy(sl__policy_t *p)
{
    free(p);
}

/* A zeroed policy object of `size` bytes, the interface first. */
static void *policy_new(size_t size, const char *name, sl__policy_step_fn *step,
                        void (*destroy)(sl__policy_t *))
{
    sl__policy_t *p = calloc(1, size);
    if (p) {
        p->name = name;
        p->step = step;
        p->destroy = destroy;
    }
    return p;
}

sl__policy_t *sl__policy_static(void)
{
    return policy_new(sizeof(sl__policy_t), "static", static_step,
                      plain_destroy);
}

/* ----------------------------------------------------------- heuristic */

typedef struct heur_policy {
    sl__policy_t base; /* first */
    sl__heur_t h;
} heur_policy_t;

static int heur_step(SL__POLICY_STEP_ARGS)
{
    heur_policy_t *hp = (heur_policy_t *)p;
    int k = sl__heur_step(&hp->h, win, n, lim, cur, next, reason, len);
    return k == SL_KNOB_NONE ? 0 : 1 << k;
}

sl__policy_t *sl__policy_heuristic(void)
{
    heur_policy_t *hp =
        policy_new(sizeof *hp, "heuristic", heur_step, plain_destroy);
    if (hp)
        sl__heur_init(&hp->h);
    return hp ? &hp->base : NULL;
}

/* ------------------------------------------------------------------ rl */

typedef struct rl_policy {
    sl__policy_t base; /* first */
    sl__rl_sched_t rs;
} rl_policy_t;

static int rl_step(SL__POLICY_STEP_ARGS)
{
    rl_policy_t *rp = (rl_policy_t *)p;
    int mask = sl__rl_sched_step(&rp->rs, win, n, lim, cur, next, reason, len);
    /* Once its guard hands the knobs to the heuristic, the rule places. */
    p->places = sl__rl_places(&rp->rs.pol) && !rp->rs.fallback;
    return mask;
}

static void rl_destroy(sl__policy_t *p)
{
    sl__rl_sched_free(&((rl_policy_t *)p)->rs);
    free(p);
}

sl__policy_t *sl__policy_rl(sl__rl_policy_t *pol, int learn, uint64_t seed)
{
    rl_policy_t *rp = policy_new(sizeof *rp, "rl", rl_step, rl_destroy);
    if (!rp) {
        sl__rl_policy_free(pol);
        return NULL;
    }
    /* sl__rl_sched_init owns *pol from here, and frees it on failure. */
    if (sl__rl_sched_init(&rp->rs, pol, learn, seed)) {
        free(rp);
        return NULL;
    }
    rp->base.places = sl__rl_places(&rp->rs.pol);
    return &rp->base;
}

int sl__policy_create(int policy, const char *policy_file, int learn,
                      uint64_t seed, sl__policy_t **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    if (policy == SL_POLICY_STATIC)
        *out = sl__policy_static();
    else if (policy == SL_POLICY_HEURISTIC)
        *out = sl__policy_heuristic();
    else if (policy == SL_POLICY_RL) {
        sl__rl_policy_t pol;
        int rc = policy_file
                     ? sl__rl_policy_load(policy_file, &pol, err, errlen)
                     : sl__rl_policy_default(&pol, err, errlen);
        if (rc)
            return rc;
        *out = sl__policy_rl(&pol, learn, seed);
    } else
        return sl__fail(err, errlen, SL_EINVAL, "unknown policy %d", policy);
    return *out ? 0 : sl__fail(err, errlen, SL_ENOMEM, "out of memory");
}

int sl__policy_for(const sl_options_t *o, const sl__limits_t *lim,
                   sl__policy_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!(lim->tune_read || lim->tune_decode || lim->tune_prefetch ||
          lim->tune_gpu_share))
        return 0; /* a static policy tunes nothing (sched/limits.h) */
    return sl__policy_create(o->policy, o->policy_file, o->learn, o->seed, out,
                             err, errlen);
}

void sl__policy_destroy(sl__policy_t *p)
{
    if (p)
        p->destroy(p);
}

/* ---------------------------------------------------------------- tick */

void sl__sched_init(sl__sched_t *s, sl__policy_t *pol)
{
    memset(s, 0, sizeof *s);
    s->pol = pol;
    sl__place_init(&s->place);
}

void sl__sched_free(sl__sched_t *s)
{
    sl__policy_destroy(s->pol);
    memset(s, 0, sizeof *s);
}

int sl__sched_due(sl__sched_t *s)
{
    int64_t p = ++s->periods - SL_SCHED_FIRST;
    return p >= 0 && p % SL_SCHED_PERIODS == 0;
}

int sl__sched_tick(sl__sched_t *s, const sl_snapshot_t *win, int n,
                   const sl__limits_t *lim, const sl__knobs_t *cur,
                   sl__sched_decision_t *d)
{
    /* Apply order within a pass: decode, read, prefetch, the share. */
    static const int order[4] = {SL_KNOB_DECODE, SL_KNOB_READ, SL_KNOB_PREFETCH,
                                 SL_KNOB_GPU_SHARE};
    memset(d, 0, sizeof *d);
    d->read_depth = lim->read_depth;
    int share;
    if (!s->pol->places && sl__place_step(&s->place, win, n, lim, cur, &share,
                                          d->reason, sizeof d->reason)) {
        d->ch[d->n++] =
            (sl__sched_change_t){SL_KNOB_GPU_SHARE, cur->gpu_share, share};
        return d->n;
    }
    d->reason[0] = '\0';
    sl__knobs_t next = *cur;
    int mask = s->pol->step(s->pol, win, n, lim, cur, &next, d->reason,
                            sizeof d->reason);
    for (int pass = 0; pass < 2 && mask; pass++)
        for (int i = 0; i < 4; i++) {
            int k = order[i];
            int from = sl__knob_get(cur, k), to = sl__knob_get(&next, k);
            if ((mask & 1 << k) && (pass == 0 ? to < from : to > from))
                d->ch[d->n++] = (sl__sched_change_t){k, from, to};
        }
    d->event = d->n == 0 && (mask & SL__POLICY_EVENT) && d->reason[0];
    return d->n + d->event;
}

int sl__sched_report(const sl__sched_decision_t *d, const int *applied,
                     char *knob, size_t knob_len, int *from, int *to,
                     char *reason, size_t reason_len)
{
    if (d->event) {
        /* shown as "policy: REASON" (telemetry/decision_text.h) */
        snprintf(knob, knob_len, "policy");
        *from = *to = 0;
        snprintf(reason, reason_len, "%s", d->reason);
        return 1;
    }
    int done = 0;
    for (int i = 0; i < d->n; i++) {
        if (!applied[i])
            continue;
        if (!done++) {
            snprintf(knob, knob_len, "%s",
                     sl__knob_label(d->ch[i].knob, d->read_depth));
            *from = d->ch[i].from;
            *to = d->ch[i].to;
            snprintf(reason, reason_len, "%s", d->reason);
        }
    }
    return done;
}
