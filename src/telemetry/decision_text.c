#include "telemetry/decision_text.h"

#include <stdio.h>
#include <string.h>

int sl__decision_text(char *out, size_t n, const char *knob, int from, int to,
                      const char *from_s, const char *to_s, const char *reason)
{
    if (!strcmp(knob, SL__DECISION_EVENT_KNOB))
        return snprintf(out, n, "%s: %s", knob, reason);
    if ((from_s && from_s[0]) || (to_s && to_s[0]))
        return snprintf(out, n, "%s %s -> %s: %s", knob[0] ? knob : "?",
                        from_s ? from_s : "", to_s ? to_s : "", reason);
    return snprintf(out, n, "%s %d -> %d: %s", knob[0] ? knob : "?", from, to,
                    reason);
}
