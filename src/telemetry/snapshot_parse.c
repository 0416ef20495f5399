/* One telemetry line back into a snapshot: the inverse of snapshot_json.c.
 * The line is outside bytes (a file cut by a crash, edited by hand, or not
 * telemetry at all): jansson checks the grammar, this file checks the types
 * and ranges, and one table maps member paths to fields. */
#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "sluice/telemetry_parse.h"

typedef enum { F_DOUBLE, F_INT, F_I64 } kind_t;

typedef struct {
    const char *path; /* member path, '.' between object levels */
    kind_t kind;
    size_t off; /* in sl_snapshot_t */
} field_t;

#define D(p, m)                                                                \
    {                                                                          \
        p, F_DOUBLE, offsetof(sl_snapshot_t, m)                                \
    }
#define I(p, m)                                                                \
    {                                                                          \
        p, F_INT, offsetof(sl_snapshot_t, m)                                   \
    }
#define L(p, m)                                                                \
    {                                                                          \
        p, F_I64, offsetof(sl_snapshot_t, m)                                   \
    }

/* Every number of the schema but t and cpu_core. A field written under
 * several paths is listed under each; the last one present wins. */
static const field_t fields[] = {
    D("interval_s", interval_s),
    I("ncpu", ncpu),
    D("cpu_total", cpu_total),
    D("cpu_self", cpu_self),
    D("cpu_other", cpu_other),
    I("run_queue", run_queue),
    D("psi_cpu_some", psi_cpu_some),
    D("psi_io_some", psi_io_some),
    D("psi_io_full", psi_io_full),
    D("psi_mem_some", psi_mem_some),
    D("psi_mem_full", psi_mem_full),
    L("mem_total_bytes", mem_total_bytes),
    L("mem_available_bytes", mem_available_bytes),
    L("rss_bytes", rss_bytes),
    D("read_bytes_per_s", read_bytes_per_s),
    D("disk_read_bytes_per_s", disk_read_bytes_per_s),
    D("disk_busy", disk_busy),
    D("self_read_bytes_per_s", self_read_bytes_per_s),
    D("net_rx_bytes_per_s", net_rx_bytes_per_s),
    D("net_tx_bytes_per_s", net_tx_bytes_per_s),
    I("gpu.count", gpu_count),
    D("gpu.util", gpu_util),
    L("gpu.mem_used_bytes", gpu_mem_used_bytes),
    L("gpu.mem_total_bytes", gpu_mem_total_bytes),
    D("gpu.power_w", gpu_power_w),
    D("gpu.pcie_rx_bytes_per_s", gpu_pcie_rx_bytes_per_s),
    D("gpu.pcie_tx_bytes_per_s", gpu_pcie_tx_bytes_per_s),
    D("energy_j", energy_j),
    D("samples_per_s", samples_per_s),
    D("stall_fraction", stall_fraction),
    D("batch_latency_ms", batch_latency_ms),
    D("consumer_wait_ms", consumer_wait_ms),
    L("samples_total", samples_total),
    L("batches_total", batches_total),
    L("errors_skipped", errors_skipped),
    L("bytes_read_total", bytes_read_total),
    I("queue_depth.read", read.queue_depth),
    I("queue_depth.decode", decode.queue_depth),
    I("queue_depth.batches", batches_ready),
    I("workers.read", read.workers),
    I("workers.decode", decode.workers),
    L("decisions_total", decisions_total),
    I("decision.from", decision_from),
    I("decision.to", decision_to),
    I("stages.read.workers", read.workers),
    D("stages.read.busy", read.busy),
    D("stages.read.items_per_s", read.items_per_s),
    L("stages.read.items_total", read.items_total),
    I("stages.read.queue_depth", read.queue_depth),
    I("stages.read.queue_capacity", read.queue_capacity),
    I("stages.decode.workers", decode.workers),
    D("stages.decode.busy", decode.busy),
    D("stages.decode.items_per_s", decode.items_per_s),
    L("stages.decode.items_total", decode.items_total),
    I("stages.decode.queue_depth", decode.queue_depth),
    I("stages.decode.queue_capacity", decode.queue_capacity),
    I("knobs.read_threads", read.workers),
    I("knobs.decode_threads", decode.workers),
    I("knobs.prefetch", prefetch),
    I("batches_filling", batches_filling),
};

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
    double d;
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

static int set_field(const ctx_t *c, json_t *root, const field_t *f,
                     sl_snapshot_t *s)
{
    json_t *v;
    int rc = lookup(c, root, f->path, &v);
    if (rc <= 0)
        return rc;
    char *at = (char *)s + f->off;
    double d;
    int64_t i;
    switch (f->kind) {
    case F_DOUBLE:
        if ((rc = number(c, f->path, v, &d)) == 0)
            memcpy(at, &d, sizeof d);
        break;
    case F_INT:
        if ((rc = whole(c, f->path, v, INT_MAX, &i)) == 0) {
            int n = (int)i;
            memcpy(at, &n, sizeof n);
        }
        break;
    case F_I64:
        if ((rc = whole(c, f->path, v, (double)INT64_MAX, &i)) == 0)
            memcpy(at, &i, sizeof i);
        break;
    }
    return rc;
}

static int cpu_cores(const ctx_t *c, json_t *root, sl_snapshot_t *s)
{
    json_t *a;
    int rc = lookup(c, root, "cpu_core", &a);
    if (rc <= 0)
        return rc;
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
        s->cpu_core[i] = (float)d;
    }
    return 0;
}

/* A string member of "decision"; absent or null is "". */
static int text(const ctx_t *c, json_t *root, const char *path, char *dst,
                size_t cap)
{
    json_t *v;
    int rc = lookup(c, root, path, &v);
    if (rc <= 0)
        return rc;
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

static void unreadable(sl_snapshot_t *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        char *at = (char *)s + fields[i].off;
        double d = -1;
        int n = -1;
        int64_t l = -1;
        if (fields[i].kind == F_DOUBLE)
            memcpy(at, &d, sizeof d);
        else if (fields[i].kind == F_INT)
            memcpy(at, &n, sizeof n);
        else
            memcpy(at, &l, sizeof l);
    }
    for (int i = 0; i < SL_SNAPSHOT_MAX_CORES; i++)
        s->cpu_core[i] = -1;
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
    s->t = json_number_value(t) + 0.0; /* -0 -> 0 */
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if ((rc = set_field(c, root, &fields[i], s)) < 0)
            return rc;
    if ((rc = cpu_cores(c, root, s)) < 0)
        return rc;
    json_t *v;
    if ((rc = lookup(c, root, "gpu", &v)) < 0)
        return rc;
    s->gpu_present = rc;
    if ((rc = lookup(c, root, "decision", &v)) < 0)
        return rc;
    s->decision_new = rc;
    if ((rc = text(c, root, "decision.knob", s->decision_knob,
                   sizeof s->decision_knob)) < 0)
        return rc;
    return text(c, root, "decision.reason", s->decision_reason,
                sizeof s->decision_reason);
}

int sl_snapshot_parse(const char *json, size_t len, sl_snapshot_t *out,
                      char *err, size_t errlen)
{
    ctx_t c = {err, errlen};
    if (!json || !out)
        return sl__fail(err, errlen, SL_EINVAL, "NULL argument");
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root)
        return BAD(&c, "not JSON: %s (column %d)", je.text, je.column);
    sl_snapshot_t s; /* out stays untouched on failure */
    unreadable(&s);
    int rc = parse_root(&c, root, &s);
    if (rc == 0)
        *out = s;
    json_decref(root);
    return rc;
}
