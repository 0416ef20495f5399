/* One telemetry line back into a snapshot: the inverse of snapshot_json.c.
 * The line is outside bytes (a file cut by a crash, edited by hand, or not
 * telemetry at all): jansson checks the grammar, this file checks the types
 * and ranges, and the table of snapshot_schema.c maps member paths to
 * fields. */
#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/abi.h"
#include "base/base.h"
#include "sluice/telemetry.h"
#include "telemetry/collector.h"
#include "telemetry/snapshot_schema.h"

typedef struct {
    char *err;
    size_t errlen;
} ctx_t;

#define BAD(c, ...) sl__fail((c)->err, (c)->errlen, SL_ECORRUPT, __VA_ARGS__)

/* The value at path under root into *v: 1 when it is there and not null, 0
 * when it (or an object on the way) is absent or null, SL_ECORRUPT when a
 * step on the way is not an object. */
static int lookup(const ctx_t *c, json_t *root, const char *path, json_t **v)
{
    json_t *cur = root;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        char key[32]; /* the schema's keys are short */
        snprintf(key, sizeof key, "%.*s", dot ? (int)(dot - p) : (int)strlen(p),
                 p);
        if (!json_is_object(cur))
            return BAD(c, "%.*s: not an object", (int)(p - path - 1), path);
        cur = json_object_get(cur, key);
        if (!cur || json_is_null(cur))
            return 0;
        if (!dot)
            break;
        p = dot + 1;
    }
    *v = cur;
    return 1;
}

/* A number of the schema as a double: any negative value is -1 ("cannot be
 * read"), -0 is 0, so that writing it back gives text that reads back the
 * same. */
static int number(const ctx_t *c, const char *path, json_t *v, double *d)
{
    if (!json_is_number(v))
        return BAD(c, "%s: not a number", path);
    *d = json_number_value(v);
    if (*d < 0)
        *d = -1;
    else if (*d == 0)
        *d = 0;
    return 0;
}

/* A whole number in [0, max] (or -1): JSON integers exactly, reals only
 * when whole (sl_snapshot_json writes byte counts as %g). */
static int whole(const ctx_t *c, const char *path, json_t *v, double max,
                 int64_t *out)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0)
            i = -1;
        if ((double)i > max)
            return BAD(c, "%s: out of range", path);
        *out = (int64_t)i;
        return 0;
    }
    double d = -1;
    int rc = number(c, path, v, &d);
    if (rc)
        return rc;
    if (d != floor(d))
        return BAD(c, "%s: not a whole number", path);
    if (!(d < max + 1.0)) /* max + 1: a power of two, exact */
        return BAD(c, "%s: out of range", path);
    *out = (int64_t)d;
    return 0;
}

/* A number of the schema into its field. */
static int set_number(const ctx_t *c, json_t *v, const sl__schema_field_t *f,
                      void *at)
{
    double d = -1; /* set on success; GCC -O2 cannot see that */
    int64_t i = -1;
    int rc;
    switch (f->kind) {
    case SL__SK_INT:
        if ((rc = whole(c, f->path, v, INT_MAX, &i)) == 0)
            *(int *)at = (int)i;
        return rc;
    case SL__SK_I64:
    case SL__SK_NUM_I64:
        if ((rc = whole(c, f->path, v, (double)INT64_MAX, &i)) == 0)
            *(int64_t *)at = i;
        return rc;
    default: /* the doubles */
        if ((rc = number(c, f->path, v, &d)) == 0)
            *(double *)at = d;
        return rc;
    }
}

static int cpu_cores(const ctx_t *c, json_t *a, float *core)
{
    int rc;
    if (!json_is_array(a))
        return BAD(c, "cpu_core: not an array");
    size_t n = json_array_size(a);
    for (size_t i = 0; i < n && i < SL_SNAPSHOT_MAX_CORES; i++) {
        json_t *v = json_array_get(a, i);
        double d = -1;
        if (!json_is_null(v)) {
            char path[32];
            snprintf(path, sizeof path, "cpu_core[%zu]", i);
            if ((rc = number(c, path, v, &d)))
                return rc;
            if (d > FLT_MAX)
                return BAD(c, "%s: out of range", path);
        }
        core[i] = (float)d;
    }
    return 0;
}

static int text(const ctx_t *c, json_t *v, const char *path, char *dst,
                size_t cap)
{
    if (!json_is_string(v))
        return BAD(c, "%s: not a string", path);
    size_t n = json_string_length(v);
    /* Not cut short: a cut could split a UTF-8 sequence. jansson refuses
     * \u0000, so the value holds no NUL. */
    if (n >= cap)
        return BAD(c, "%s: longer than %zu bytes", path, cap - 1);
    memcpy(dst, json_string_value(v), n + 1);
    return 0;
}

/* One member of the schema, when present and not null. */
static int set_field(const ctx_t *c, json_t *root, const sl__schema_field_t *f,
                     sl_snapshot_t *s)
{
    json_t *v;
    int rc = lookup(c, root, f->path, &v);
    if (rc <= 0)
        return rc;
    void *at = (char *)s + f->off;
    switch (f->kind) {
    case SL__SK_STR:
        return text(c, v, f->path, at, f->cap);
    case SL__SK_CORES:
        return cpu_cores(c, v, at);
    case SL__SK_OBJ_IF: /* an object of the wrong type fails at a member */
        *(int *)at = 1;
        return 0;
    default:
        return set_number(c, v, f, at);
    }
}

static int parse_root(const ctx_t *c, json_t *root, sl_snapshot_t *s)
{
    if (!json_is_object(root))
        return BAD(c, "not a JSON object");
    json_t *t;
    int rc = lookup(c, root, "t", &t);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return BAD(c, "t: missing");
    if (!json_is_number(t) || json_number_value(t) < 0)
        return BAD(c, "t: not a number >= 0");
    size_t nf;
    const sl__schema_field_t *f = sl__snapshot_schema(&nf);
    for (size_t i = 0; i < nf; i++) /* f[0] is t, read by number() */
        if ((rc = set_field(c, root, &f[i], s)) < 0)
            return rc;
    return 0;
}

int sl_snapshot_parse(const char *json, size_t len, sl_snapshot_t *out,
                      char *err, size_t errlen)
{
    ctx_t c = {err, errlen};
    if (!json || !out)
        return sl__fail(err, errlen, SL_EINVAL, "NULL argument");
    if (sl__abi_size(out) < SL__SNAPSHOT_V1_SIZE)
        return sl__fail(err, errlen, SL_EINVAL,
                        "out->size is %zu: initialise it with "
                        "sl_snapshot_init()",
                        sl__abi_size(out));
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root)
        return BAD(&c, "not JSON: %s (column %d)", je.text, je.column);
    sl_snapshot_t s; /* out stays untouched on failure */
    sl__snapshot_unknown(&s);
    int rc = parse_root(&c, root, &s);
    if (rc == 0)
        sl__abi_out(out, &s, sizeof s, SL__SNAPSHOT_V1_SIZE);
    json_decref(root);
    return rc;
}
