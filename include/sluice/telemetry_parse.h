/*
 * sluice telemetry, read back: the inverse of sl_snapshot_json().
 * (To be merged into sluice/telemetry.h.)
 */
#ifndef SLUICE_TELEMETRY_PARSE_H
#define SLUICE_TELEMETRY_PARSE_H

#include <stddef.h>

#include "sluice/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Parses one JSON object, one line of a --telemetry file (the schema of
 *  docs/TELEMETRY.md, as sl_snapshot_json writes it), into *out.
 *
 *  "t" is required (a number >= 0). Every other member may be absent or
 *  null: its field is then the "cannot be read" value, -1 (gpu_present and
 *  decision_new 0, strings ""). Any negative number reads as -1, since
 *  negative means "cannot be read". Unknown members are ignored, so newer
 *  files still read. Where one field is written under several names
 *  (workers.read, stages.read.workers, knobs.read_threads), the last one
 *  present wins, in that order.
 *
 *  For any snapshot s, sl_snapshot_json(parse(sl_snapshot_json(s))) is the
 *  same text as sl_snapshot_json(s).
 *
 *  @param json  the bytes (need not be NUL-terminated); surrounding white
 *               space is allowed, anything else after the object is not.
 *  @param err   receives a message naming the member and the cause on
 *               failure ("stages.read.busy: not a number"); may be NULL.
 *  @return 0 and *out; SL_ECORRUPT (out untouched) when the bytes are not
 *          such an object; SL_EINVAL when json or out is NULL.
 *          Thread-safe (no shared state). */
SL_API int sl_snapshot_parse(const char *json, size_t len, sl_snapshot_t *out,
                             char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
