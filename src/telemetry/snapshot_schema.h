/* telemetry/snapshot_schema: the JSON Lines schema of a snapshot
 * (docs/TELEMETRY.md) as one table, in the order the members are written.
 * sl_snapshot_json writes by it and sl_snapshot_parse reads by it, so a
 * member is added in one place. */
#ifndef SL_TELEMETRY_SNAPSHOT_SCHEMA_H
#define SL_TELEMETRY_SNAPSHOT_SCHEMA_H

#include <stddef.h>

/* The longest snapshot line a reader of snapshot files (plot, calibrate)
 * keeps; a longer one is counted as malformed without being held in
 * memory. Real lines are 2-4 KB (more with many cores in cpu_core). */
#define SL__SNAPSHOT_MAX_LINE (1u << 20)

/* How a field is stored and written; the double kinds come first (up to
 * SL__SK_NUM). */
typedef enum {
    SL__SK_F2,      /* double, %.2f */
    SL__SK_F3,      /* double, %.3f */
    SL__SK_F4,      /* double, %.4f */
    SL__SK_NUM,     /* double, %.6g; null when < 0 (cannot be read) */
    SL__SK_NUM_I64, /* int64_t, written as SL__SK_NUM */
    SL__SK_INT,     /* int, %d */
    SL__SK_I64,     /* int64_t, %lld */
    SL__SK_STR,     /* char[cap], a JSON string */
    SL__SK_CORES,   /* float cpu_core[], ncpu of them, %.3f each */
    SL__SK_OBJ_IF,  /* int flag: 0 writes the object at path as null and
                       skips the members under it */
} sl__schema_kind_t;

typedef struct sl__schema_field {
    const char *path; /* member path, '.' between object levels */
    sl__schema_kind_t kind;
    size_t off; /* in sl_snapshot_t */
    size_t cap; /* SL__SK_STR: the array's size */
} sl__schema_field_t;

/* The table; *n receives its length. The first entry is "t". A field
 * written under several paths is listed under each (the parser takes the
 * last one present). */
const sl__schema_field_t *sl__snapshot_schema(size_t *n);

struct sl_snapshot;
/* Every field of *s "cannot be read" (size set to the whole layout):
 * numbers -1, flags 0, strings "" — what the parser starts from, and what
 * sl_snapshot_json writes for the fields past a caller's smaller layout. */
void sl__snapshot_unknown(struct sl_snapshot *s);

#endif
