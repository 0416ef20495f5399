/* core/sched_glue: what a loader does with the scheduler, written once for
 * the image and the text loader. Every SL_SCHED_PERIODS telemetry periods
 * (on the collector thread) it takes the last window of snapshots and the
 * knobs in force, runs the tick (sched/policy.h) within the budgets
 * (sched/limits.h), applies each change through the loader's public set
 * call (the scheduler has no other way into a pipeline), and records the
 * decision for the next snapshot.
 *
 * The loader supplies: its lock, a view of its knobs (and whether it is
 * running), and its set call. Lock order: the loader's lock is taken only
 * to read the knobs and to write the record, never around set. */
#ifndef SL_SCHED_GLUE_H
#define SL_SCHED_GLUE_H

#include <pthread.h>
#include <stdint.h>

#include "sched/limits.h"
#include "sched/policy.h"
#include "telemetry/collector.h"

typedef struct sl__sched_glue {
    sl__sched_t sched; /* sched.pol NULL: nothing to tune */
    const sl__limits_t *lim;
    pthread_mutex_t *mu; /* the loader's lock */
    void *self;
    /* Under mu: the knobs in force; 0 when the pipeline is not running. */
    int (*knobs)(void *self, sl__knobs_t *cur);
    /* The loader's public set (SL_KNOB_* -> its param). 0: applied. */
    int (*set)(void *self, int knob, int value);
    /* The last decision (under mu), for the pipeline's snapshot. */
    int64_t decisions;
    char knob[24];
    int from, to;
    char reason[SL_SCHED_REASON];
    char place_held[96]; /* the last decision's (sched/place.h), under mu */
} sl__sched_glue_t;

/* The policy for options o under lim: none (inactive) when nothing is
 * tuned. The loader then hooks its collector's on_tick to a function that
 * calls sl__sched_glue_tick. @return 0 or the policy's load error. */
int sl__sched_glue_init(sl__sched_glue_t *g, const sl_options_t *o,
                        const sl__limits_t *lim, pthread_mutex_t *mu,
                        void *self, int (*knobs)(void *, sl__knobs_t *),
                        int (*set)(void *, int, int), char *err, size_t errlen);
/* 1 when a policy runs (the loader then hooks its collector). */
int sl__sched_glue_active(const sl__sched_glue_t *g);
void sl__sched_glue_free(sl__sched_glue_t *g);

/* The collector's on_tick: one period; a decision when due. */
void sl__sched_glue_tick(sl__sched_glue_t *g, struct sl__collector *c);

/* Under mu: copies the last decision into a pipeline sample. */
void sl__sched_glue_sample(const sl__sched_glue_t *g, sl__pipe_sample_t *o);

#endif
