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
    const char *spec; /* as given (argv), for messages */
} sl__knob_set_t;

typedef struct sl__knob_sets {
    sl__knob_set_t v[SL__KNOB_SETS_MAX];
    int n;
} sl__knob_sets_t;

/* Parses "MS" (>= 0, <= 60000; fractions allowed) into microseconds.
 * @return 0, or -1. */
int sl__parse_latency_ms(const char *s, int64_t *us);
/* Adds one "K:KNOB=V" or "Ks:KNOB=V" (KNOB: threads | read-threads |
 * prefetch | io-depth | gpu-share | step-ms | read-latency-ms | read-bw);
 * the value's fixed bounds are checked here (gpu-share 0..1000, step-ms
 * 0..3600000, the storage's), the loader's in sl__knob_sets_check.
 * @return 0, or -1 (bad, or more than SL__KNOB_SETS_MAX); spec is kept. */
int sl__knob_sets_add(sl__knob_sets_t *ks, const char *spec);
/* Checks each set's value against what loader l accepts for its knob
 * (sl_loader_param_range), before the run, so a value that could never
 * apply fails at once (SL_AUTOTUNE, the knob's default, always applies):
 * "sluice CMD: --set SPEC: threads = 999 is outside
 * 1..256 on this loader" on stderr. gpu-share too: whether the loader has
 * a GPU stage is settled when it is created (sl_loader_create), so its
 * range (0..0 without one) is known here; the message adds why.
 * @return 0, or 2 (a usage error). */
int sl__knob_sets_check(const sl__knob_sets_t *ks, const sl_loader_t *l,
                        const char *cmd);
/* Applies the sets due before batch `done` (`elapsed` seconds into the
 * run) to loader l, or to *step_ms; a refused one is reported on stderr
 * as "sluice CMD: --set: ...". */
void sl__knob_sets_due(sl__knob_sets_t *ks, sl_loader_t *l, const char *cmd,
                       int64_t done, double elapsed, double *step_ms);
/* After the run (done batches): a warning on stderr for
 * each set that never came due ("sluice CMD: warning: --set SPEC never
 * applied: ..."), e.g. 100:threads=1 on a 16-batch run. @return how many. */
int sl__knob_sets_unfired(const sl__knob_sets_t *ks, const char *cmd,
                          int64_t done);

#endif
