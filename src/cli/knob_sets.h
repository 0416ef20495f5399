/* cli/knob_sets: `run --set K:KNOB=V` (cmd_run.c): knob changes due
 * after K batches (or, as "Ks:", K seconds) of a run, applied through
 * sl_loader_set (or, for step-ms, to the consumer's step time); and the
 * CLI's unit of emulated read latency (ms, fractions allowed). */
#ifndef SL_CLI_KNOB_SETS_H
#define SL_CLI_KNOB_SETS_H

#include <stdint.h>

#include "sluice/sluice.h"
#include "sluice/testing.h"

#define SL__KNOB_SETS_MAX 16

typedef struct sl__knob_set {
    int64_t at;       /* after this many batches of this run */
    double at_s;      /* >= 0: instead, once this many seconds have passed
                         (checked before each batch) */
    int fired;        /* a timed set was applied */
    sl_param_t param; /* 0: the consumer's step time (step-ms), or */
    int storage;      /* sl_testing_storage_t: emulated storage */
    int64_t value;
} sl__knob_set_t;

typedef struct sl__knob_sets {
    sl__knob_set_t v[SL__KNOB_SETS_MAX];
    int n;
} sl__knob_sets_t;

/* Parses "MS" (>= 0, <= 60000; fractions allowed) into microseconds.
 * @return 0, or -1. */
int sl__parse_latency_ms(const char *s, int64_t *us);
/* Adds one "K:KNOB=V" or "Ks:KNOB=V" (KNOB: threads | read-threads |
 * prefetch | step-ms | read-latency-ms | read-bw). @return 0, or -1 (bad,
 * or more than SL__KNOB_SETS_MAX). */
int sl__knob_sets_add(sl__knob_sets_t *ks, const char *spec);
/* Applies the sets due before batch `done` (`elapsed` seconds into the
 * run) to loader l, or to *step_ms; a refused one is reported on stderr
 * as "sluice CMD: --set: ...". */
void sl__knob_sets_due(sl__knob_sets_t *ks, sl_loader_t *l, const char *cmd,
                       int64_t done, double elapsed, double *step_ms);

#endif
