/* telemetry/promtext: a reader of the Prometheus text exposition format
 * (version 0.0.4), as `sluice top` scrapes it from a running job. It reads
 * outside bytes (any server's reply), so it is bounded and fuzzed
 * (fuzz/fuzz_top.c): lines are checked by the grammar below, the count of
 * samples is capped, and nothing is read past `len`.
 *
 *   line   := ws* ( "#" anything | "" | sample ) ws*
 *   sample := name ws* [ "{" [ label ( "," label )* [","] ] "}" ] ws+ value
 *             [ ws+ timestamp ]
 *   label  := lname ws* "=" ws* '"' ( char | '\\' | '\"' | '\n' )* '"'
 *
 * A name is [a-zA-Z_:][a-zA-Z0-9_:]*, a label name [a-zA-Z_][a-zA-Z0-9_]*;
 * a value is a decimal float, NaN, +Inf or -Inf. A sample whose name or a
 * label does not fit the fixed fields below is skipped (counted), not an
 * error: other exporters' long labels do not stop the reader. Depends on
 * base only. */
#ifndef SL_PROMTEXT_H
#define SL_PROMTEXT_H

#include <stddef.h>

#define SL__PROM_NAME 64      /* a metric or label name, with its NUL */
#define SL__PROM_VALUE 192    /* a label value, unescaped, with its NUL */
#define SL__PROM_LABELS 6     /* labels per sample */
#define SL__PROM_SAMPLES 4096 /* samples per text; more is an error */

typedef struct sl__prom_label {
    char name[SL__PROM_NAME];
    char value[SL__PROM_VALUE];
} sl__prom_label_t;

typedef struct sl__prom_sample {
    char name[SL__PROM_NAME];
    int nlabels;
    sl__prom_label_t label[SL__PROM_LABELS];
    double value;
} sl__prom_sample_t;

/* The samples of one text, in its order. Zero-initialise; free with
 * sl__prom_set_free (which leaves it empty and reusable). */
typedef struct sl__prom_set {
    sl__prom_sample_t *s;
    size_t n, cap;
    size_t skipped; /* samples that did not fit the fields */
} sl__prom_set_t;

/** Parses `len` bytes (need not be NUL-terminated) into *out, replacing
 *  what it held. @return 0; SL_ECORRUPT with "line N: cause" in err (out
 *  emptied) when a line breaks the grammar or there are more than
 *  SL__PROM_SAMPLES samples; SL_ENOMEM. */
int sl__promtext_parse(const char *text, size_t len, sl__prom_set_t *out,
                       char *err, size_t errlen);
void sl__prom_set_free(sl__prom_set_t *set);

/** The first sample named `name` whose label `label` has `value` (label
 *  NULL: the first sample of that name, whatever its labels), or NULL. */
const sl__prom_sample_t *sl__prom_find(const sl__prom_set_t *set,
                                       const char *name, const char *label,
                                       const char *value);
/** The value of sample i's label `label`, or NULL when it has none. */
const char *sl__prom_label(const sl__prom_sample_t *s, const char *label);
/** sl__prom_find's value, or `dflt` when there is no such sample. */
double sl__prom_get(const sl__prom_set_t *set, const char *name,
                    const char *label, const char *value, double dflt);

#endif
