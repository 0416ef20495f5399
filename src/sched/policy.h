/* sched/policy: one interface for every scheduling policy, and the
 * scheduler tick that the live loader and the simulator both call.
 *
 * A policy is {step, destroy} over its own state: static (never changes a
 * knob), heuristic (sched/heuristic.h) and rl (sched/rl.h). The tick runs
 * one decision: the policy's step over the window of snapshots, within the
 * limits, turned into the knob changes to apply, in an order that never
 * crosses a budget in between (decreases first: a thread moved from one
 * stage to the other is given back before it is taken), and the record a
 * snapshot reports (the first change and the reason, or a policy event
 * that changed no knob: knob "policy").
 *
 * Who calls it: the loader on its collector thread (exec/loader_sched.c)
 * applies the changes through sl_loader_set; the simulator (sim/run.h)
 * through sl__sim_set_knobs. Both decide first after SL_SCHED_FIRST
 * periods (a cold start is where the waits are), then every
 * SL_SCHED_PERIODS telemetry periods, over the last SL_SCHED_PERIODS
 * snapshots (fewer at the first). Depends on knobs,
 * heuristic, rl and the public snapshot type. */
#ifndef SL_POLICY_H
#define SL_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "sched/knobs.h"
#include "sched/place.h"
#include "sched/rl.h"
#include "sluice/sluice.h"

#define SL_SCHED_PERIODS 5 /* telemetry periods per decision */
#define SL_SCHED_FIRST 1   /* periods before the first decision */
#define SL_SCHED_REASON 160

typedef struct sl__policy sl__policy_t;

/* One decision over win[0..n) (oldest first): sets *next (within lim) and
 * a reason. @return a bit mask of the knobs changed, bit SL_KNOB_* (0:
 * none), or SL__POLICY_EVENT: no knob changed, but the reason is an event
 * the record must show (rl's guard handing over to the heuristic; the bit
 * is in sched/knobs.h, beside the knobs' bits). */
/* A step's parameters, written once for the type and each policy's
 * definition. */
#define SL__POLICY_STEP_ARGS                                                   \
    sl__policy_t *p, const sl_snapshot_t *win, int n, const sl__limits_t *lim, \
        const sl__knobs_t *cur, sl__knobs_t *next, char *reason, size_t len
typedef int sl__policy_step_fn(SL__POLICY_STEP_ARGS);

struct sl__policy {
    const char *name; /* "static", "heuristic", "rl" */
    int places;       /* 1: its step sets gpu_share (an rl policy with the
                         share head); else the placement rule does */
    sl__policy_step_fn *step;
    void (*destroy)(sl__policy_t *p); /* frees the object */
};

/* Constructors. NULL when out of memory. */
sl__policy_t *sl__policy_static(void);
sl__policy_t *sl__policy_heuristic(void);
/* Takes ownership of *pol (freed on failure too). learn: online PPO
 * fine-tuning under the guard (sched/rl.h). */
sl__policy_t *sl__policy_rl(sl__rl_policy_t *pol, int learn, uint64_t seed);
/* By public policy id (SL_POLICY_*): rl loads policy_file, or the built-in
 * default when NULL. @return 0, SL_EINVAL, SL_ENOMEM or the load error,
 * with the cause in err. */
int sl__policy_create(int policy, const char *policy_file, int learn,
                      uint64_t seed, sl__policy_t **out, char *err,
                      size_t errlen);
void sl__policy_destroy(sl__policy_t *p); /* NULL: nothing */
/* The scheduler's policy for options o under lim (sched/limits.h): NULL
 * in *out when lim leaves it no knob to tune (static, or every knob
 * given), else o->policy (policy_file, learn, seed). Errors as
 * sl__policy_create. */
int sl__policy_for(const sl_options_t *o, const sl__limits_t *lim,
                   sl__policy_t **out, char *err, size_t errlen);

/* ---------------------------------------------------------------- tick */

typedef struct sl__sched_change {
    int knob; /* SL_KNOB_* */
    int from, to;
} sl__sched_change_t;

/* One decision's outcome: changes in the order to apply them. */
typedef struct sl__sched_decision {
    int n;
    sl__sched_change_t ch[4];
    int read_depth; /* SL_KNOB_READ is the I/O depth (lim->read_depth) */
    int event;      /* n == 0 and the policy's reason is an event to record
                       (SL__POLICY_EVENT): reported as knob "policy" */
    char reason[SL_SCHED_REASON];
} sl__sched_decision_t;

typedef struct sl__sched {
    sl__policy_t *pol; /* owned */
    int64_t periods;   /* telemetry periods seen */
    sl__place_t place; /* the GPU share's rule (sched/place.h) */
} sl__sched_t;

/* Takes ownership of pol. */
void sl__sched_init(sl__sched_t *s, sl__policy_t *pol);
void sl__sched_free(sl__sched_t *s);

/* Counts one telemetry period. @return 1 when a decision is due (at the
 * SL_SCHED_FIRST-th period, then every SL_SCHED_PERIODS-th after it). */
int sl__sched_due(sl__sched_t *s);

/* One decision over win[0..n) with the knobs in force: fills *d (d->n = 0:
 * nothing to change; d->event: nothing to change, an event to record). Where
 * the scheduler places samples (lim->tune_gpu_share) and the policy does not
 * place itself (an rl policy with the share head does, pol->places), the
 * placement rule (sched/place.h) goes first; when it moves the share that is
 * the decision, and the policy steps next time (one change at a time, so each
 * is judged on its own window).
 * @return d->n + d->event: 0 when there is nothing to apply or report. */
int sl__sched_tick(sl__sched_t *s, const sl_snapshot_t *win, int n,
                   const sl__limits_t *lim, const sl__knobs_t *cur,
                   sl__sched_decision_t *d);

/* What a snapshot reports of a decision whose changes applied[i] != 0
 * went through: the first applied change (decreases go first) and the
 * reason; for an event (d->event), knob "policy", from = to = 0, and the
 * reason. @return the number applied, 1 for an event (0: nothing to
 * report); the caller adds it to decisions_total. */
int sl__sched_report(const sl__sched_decision_t *d, const int *applied,
                     char *knob, size_t knob_len, int *from, int *to,
                     char *reason, size_t reason_len);

#endif
