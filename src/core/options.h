/* core/options: the option rules both loaders share: defaults and checks
 * of what they have in common (ranks, epochs, error policy, scheduler
 * policy, thread knobs), and each public struct's first versioned size.
 * Each loader resolves its own fields on top (exec/loader_opts.c,
 * exec/text_opts.c). */
#ifndef SL_OPTIONS_H
#define SL_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "sched/knobs.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"
#include "sluice/text.h"

/* The sizes of the first versioned layouts (SOVERSION 1): a caller's
 * struct may not be smaller. Growing a struct adds fields after these and
 * leaves these numbers alone. */
#define SL__OPTIONS_V1_SIZE (offsetof(sl_options_t, learn) + sizeof(int))
#define SL__STATS_V1_SIZE (offsetof(sl_stats_t, wait_ns) + sizeof(int64_t))
#define SL__TEXT_OPTIONS_V1_SIZE                                               \
    (offsetof(sl_text_options_t, buffer_ctx) + sizeof(void *))
#define SL__TEXT_STATS_V1_SIZE                                                 \
    (offsetof(sl_text_stats_t, wait_ns) + sizeof(int64_t))

/* The engine's limits on the knobs, whatever the budgets: the budget
 * rule's (sched/knobs.h). */
#define SL__THREADS_MAX SL_KNOB_MAX_THREADS
#define SL__PREFETCH_MAX SL_KNOB_MAX_PREFETCH

/* What every loader's options have: checked and defaulted in one place. */
typedef struct sl__common_opts {
    int *world_size, *rank;
    int64_t *epochs;
    int *on_error, *policy;
} sl__common_opts_t;

/* Defaults (world 1, epochs 1) and checks (0 <= rank < world, known
 * on_error and policy). Returns 0 or SL_EINVAL with a message. */
int sl__opts_common(const sl__common_opts_t *c, char *err, size_t errlen);

/* A thread knob's default: one per online core. */
int sl__default_threads(void);

#endif
