/* telemetry/decision_text: a recorded scheduler decision in words, the one
 * rule `sluice top` (top_render.c) and `sluice plot` (plot_script.c) print
 * it by. */
#ifndef SL_DECISION_TEXT_H
#define SL_DECISION_TEXT_H

#include <stddef.h>

/* The knob a policy event is recorded under: an event of the policy that
 * changed no knob (the rl guard's trip), from = to = 0 (sched/policy.c,
 * sl__sched_report, writes it; telemetry does not include sched). */
#define SL__DECISION_EVENT_KNOB "policy"

/* Writes "KNOB FROM -> TO: REASON" into out (n bytes, cut and terminated),
 * the values as from_s / to_s when either is non-empty (a codec's name)
 * and as numbers otherwise, an empty knob as "?"; a policy event as
 * "policy: REASON", for it changed nothing (never "policy 0 -> 0").
 * @return snprintf's count (the length uncut). */
int sl__decision_text(char *out, size_t n, const char *knob, int from, int to,
                      const char *from_s, const char *to_s, const char *reason);

#endif
