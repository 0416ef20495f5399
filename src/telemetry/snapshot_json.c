/* One snapshot as a JSON object: the JSON Lines schema of docs/TELEMETRY.md,
 * written by the table of snapshot_schema.c. Values that could not be read
 * are null, never invented. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/abi.h"
#include "base/base.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"
#include "telemetry/collector.h"
#include "telemetry/snapshot_schema.h"

typedef sl__sbuf_t jw_t;
#define put sl__sbuf_printf

/* Negative means "cannot be read" (sl_snapshot_parse reads any negative
 * as -1), and so does a value that is not finite: -1, so that the text
 * is JSON and parse gives back what was written. */
static double readable(double v)
{
    return isfinite(v) && v >= 0 ? v : -1;
}

/* A number, or null when it cannot be read. */
static void num(jw_t *w, double v)
{
    if (readable(v) < 0)
        put(w, "null");
    else
        put(w, "%.6g", v);
}

static void value(jw_t *w, const sl__schema_field_t *f, const sl_snapshot_t *s)
{
    const void *at = (const char *)s + f->off;
    switch (f->kind) {
    case SL__SK_F2:
        put(w, "%.2f", readable(*(const double *)at));
        break;
    case SL__SK_F3:
        put(w, "%.3f", readable(*(const double *)at));
        break;
    case SL__SK_F4:
        put(w, "%.4f", readable(*(const double *)at));
        break;
    case SL__SK_NUM:
        num(w, *(const double *)at);
        break;
    case SL__SK_NUM_I64:
        num(w, (double)*(const int64_t *)at);
        break;
    case SL__SK_INT:
        put(w, "%d", *(const int *)at < 0 ? -1 : *(const int *)at);
        break;
    case SL__SK_I64:
        put(w, "%lld",
            *(const int64_t *)at < 0 ? -1LL : (long long)*(const int64_t *)at);
        break;
    case SL__SK_STR:
        put(w, "\"");
        sl__json_escape(w, (const char *)at);
        put(w, "\"");
        break;
    case SL__SK_CORES:
        put(w, "[");
        for (int i = 0; i < s->ncpu && i < SL_SNAPSHOT_MAX_CORES; i++)
            put(w, "%s%.3f", i ? ", " : "", readable(((const float *)at)[i]));
        put(w, "]");
        break;
    case SL__SK_OBJ_IF: /* only reached when absent */
        put(w, "null");
        break;
    }
}

/* The object nesting while writing: the path of the innermost open object
 * ("" at the top, "stages.read") and whether it has a member yet. */
typedef struct {
    char open[64];
    int any;
} nest_t;

/* Length of path's parent ("stages.read" for "stages.read.busy"). */
static size_t parent_len(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? (size_t)(dot - path) : 0;
}

/* Closes objects until the open one holds path's parent, then opens the
 * missing levels. */
static void enter(jw_t *w, nest_t *n, const char *path)
{
    size_t want = parent_len(path);
    for (;;) {
        size_t have = strlen(n->open);
        if (have == 0 || (have <= want && !strncmp(n->open, path, have) &&
                          (have == want || path[have] == '.')))
            break;
        put(w, "}");
        n->open[parent_len(n->open)] = 0;
        n->any = 1;
    }
    while (strlen(n->open) < want) {
        size_t have = strlen(n->open);
        size_t from = have ? have + 1 : 0;
        const char *end = strchr(path + from, '.');
        size_t to = (size_t)(end - path);
        put(w, "%s\"%.*s\": {", n->any ? ", " : "", (int)(to - from),
            path + from);
        memcpy(n->open, path, to);
        n->open[to] = 0;
        n->any = 0;
    }
}

int sl_snapshot_json(const sl_snapshot_t *s, char *buf, size_t len)
{
    if (!s || s->size < SL__SNAPSHOT_V1_SIZE)
        return SL_EINVAL;
    sl_snapshot_t whole; /* a smaller layout: the rest unknown */
    if (s->size < sizeof whole) {
        sl__snapshot_unknown(&whole);
        memcpy(&whole, s, s->size);
        s = &whole;
    }
    jw_t w = {buf, len, 0, 0};
    if (buf && len)
        buf[0] = 0;
    size_t nf;
    const sl__schema_field_t *f = sl__snapshot_schema(&nf);
    nest_t n = {"", 0};
    const char *skip = NULL; /* members of an object written as null */
    size_t skip_len = 0;
    put(&w, "{");
    for (size_t i = 0; i < nf; i++) {
        if (skip && !strncmp(f[i].path, skip, skip_len) &&
            f[i].path[skip_len] == '.')
            continue;
        skip = NULL;
        if (f[i].kind == SL__SK_OBJ_IF &&
            *(const int *)(const void *)((const char *)s + f[i].off)) {
            continue; /* its members open it */
        }
        enter(&w, &n, f[i].path);
        const char *key = f[i].path + parent_len(f[i].path);
        put(&w, "%s\"%s\": ", n.any ? ", " : "", *key == '.' ? key + 1 : key);
        n.any = 1;
        value(&w, &f[i], s);
        if (f[i].kind == SL__SK_OBJ_IF) {
            skip = f[i].path;
            skip_len = strlen(skip);
        }
    }
    enter(&w, &n, "t"); /* close all */
    put(&w, "}");
    return w.need;
}
