/* sim/profile: the simulator's profiles: defaults, domain randomisation,
 * and JSON (jansson). The JSON loader parses outside bytes (a file a user
 * hands to `sluice simulate`), so it checks every key's type and range and
 * names the key it rejects; fuzz/fuzz_profile.c feeds it arbitrary bytes. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/rng.h"
#include "sim/sim.h"

/* Fitted on this project's 2-core machine (AMD EPYC VM, ImageNet sample:
 * 1000 JPEGs, batch 64 of 224x224 uint8, page cache warm) by
 * `sluice calibrate` of `sluice run --policy static --threads 1
 * --prefetch 2 --epochs 10 --telemetry T` (bench/sim_validate.sh,
 * 2026-11-26; docs/SIMULATOR.md). A consumer that only takes batches. */
void sl__sim_profile_default(sl__sim_profile_t *p)
{
    memset(p, 0, sizeof *p);
    p->ncpu = 2;
    p->batch_size = 64;
    p->read_ms = 0.058;
    p->read_cv = 1.5;
    p->decode_ms = 1.37;
    p->decode_cv = 1.0;
    p->item_bytes = 109.6e3;
    p->storage_bw = 0;
    p->storage_latency_ms = 0;
    p->step_ms = 0;
    p->consumer_cpu = 0;
    p->batch_bytes = 64.0 * 224 * 224 * 3;
    p->base_rss = 27.6e6;
    p->mem_total = 25.3e9;
    p->read_ahead = 0; /* the engine's rule (sl__read_ahead_items) */
    p->interfere = 0;
    p->gpu_ms = p->gpu_slow = p->gpu_cpu_ms = 0; /* no GPU stage */
    sl__sim_remote_default(&p->remote);
    p->n_events = 0;
}

/* ------------------------------------------------------ randomisation */

#define SIM_RNG_PROFILE 0x50u /* 'P': Philox purpose of profile draws */

static int cmp_event(const void *a, const void *b)
{
    const sl__sim_event_t *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

void sl__sim_profile_random(uint64_t seed, const sl__sim_profile_t *base,
                            double duration_s, sl__sim_profile_t *out)
{
    sl__sim_profile_t def;
    if (!base) {
        sl__sim_profile_default(&def);
        base = &def;
    }
    sl__sim_profile_t p = *base;
    sl__rng_t r;
    sl__rng_init(&r, seed, 0, 0, SIM_RNG_PROFILE);
    /* Cores 2..64, log-uniform (as many 2..8 as 8..64). */
    p.ncpu = (int)floor(sl__rng_log_uniform(&r, 2, 65));
    if (p.ncpu > 64)
        p.ncpu = 64;
    double dm = base->decode_ms > 0 ? base->decode_ms : 1.37;
    p.decode_ms = dm * sl__rng_log_uniform(&r, 1.0 / 3, 3);
    p.decode_cv = sl__rng_uniform(&r, 0.1, 1.0);
    double rm = base->read_ms > 0 ? base->read_ms : 0.058;
    p.read_ms = rm * sl__rng_log_uniform(&r, 0.3, 30);
    p.read_cv = sl__rng_uniform(&r, 0.1, 1.5);
    double ib = base->item_bytes > 0 ? base->item_bytes : 110e3;
    p.item_bytes = ib * sl__rng_log_uniform(&r, 0.5, 2);
    /* Items per second the decoders could make with every core. */
    double cap = p.ncpu * 1000.0 / p.decode_ms;
    if (sl__rng_double(&r) < 0.5) {
        p.storage_bw = 0; /* page cache */
        p.storage_latency_ms = 0;
    } else {
        p.storage_bw = p.item_bytes * cap * sl__rng_log_uniform(&r, 0.3, 3);
        /* Local disks to object stores: 50 us to 50 ms a read. */
        p.storage_latency_ms = sl__rng_log_uniform(&r, 0.05, 50);
    }
    /* Consumer demand from 40 % to 150 % of that capacity. */
    double demand = cap * sl__rng_log_uniform(&r, 0.4, 1.5);
    p.step_ms = 1000.0 * p.batch_size / demand;
    p.consumer_cpu =
        sl__rng_double(&r) < 0.5 ? 0 : sl__rng_uniform(&r, 0.2, 1.0);
    p.interfere =
        sl__rng_double(&r) < 0.3 ? sl__rng_uniform(&r, 0, p.ncpu * 0.5) : 0;
    double mem = sl__rng_log_uniform(&r, 4e9, 512e9);
    p.mem_total = mem;
    /* A schedule of up to 6 changes over the run. */
    int n = duration_s > 0 ? (int)sl__rng_below(&r, 7) : 0;
    p.n_events = 0;
    for (int i = 0; i < n && i < SL_SIM_MAX_EVENTS; i++) {
        sl__sim_event_t *e = &p.events[p.n_events++];
        e->t = sl__rng_uniform(&r, 0, duration_s);
        e->kind = SL_SIM_EV_INTERFERE + (int)sl__rng_below(&r, 5);
        switch (e->kind) {
        case SL_SIM_EV_INTERFERE:
            e->value = sl__rng_double(&r) < 0.3
                           ? 0
                           : sl__rng_uniform(&r, 0, p.ncpu * 0.75);
            break;
        case SL_SIM_EV_STORAGE_BW:
            e->value =
                sl__rng_double(&r) < 0.3
                    ? 0
                    : p.item_bytes * cap * sl__rng_log_uniform(&r, 0.1, 2);
            break;
        case SL_SIM_EV_STEP_MS:
            e->value = p.step_ms * sl__rng_log_uniform(&r, 0.5, 2);
            break;
        case SL_SIM_EV_STORAGE_LATENCY_MS:
            e->value = sl__rng_double(&r) < 0.3
                           ? 0
                           : sl__rng_log_uniform(&r, 0.05, 50);
            break;
        default:
            e->value = sl__rng_double(&r) < 0.4 ? 0 : sl__rng_double(&r);
            break;
        }
    }
    qsort(p.events, (size_t)p.n_events, sizeof p.events[0], cmp_event);
    *out = p;
}

/* ---------------------------------------------------------------- JSON */

static const char *const kind_names[] = {NULL,
                                         "interfere",
                                         "storage_bw",
                                         "step_ms",
                                         "consumer_cpu",
                                         "storage_latency_ms",
                                         "remote_preparers",
                                         "link_bw",
                                         "link_latency_ms"};

int sl__sim_event_kind(const char *name)
{
    for (int j = 1; j <= SL_SIM_EV_LAST; j++)
        if (!strcmp(name, kind_names[j]))
            return j;
    return 0;
}

const char *sl__sim_event_name(int kind)
{
    return kind >= 1 && kind <= SL_SIM_EV_LAST ? kind_names[kind] : "unknown";
}

typedef struct field {
    const char *key;
    int is_int;
    size_t off;
    double lo, hi;
} field_t;

#define F_D(name, lo, hi)                                                      \
    {                                                                          \
#name, 0, offsetof(sl__sim_profile_t, name), lo, hi                    \
    }
#define F_I(name, lo, hi)                                                      \
    {                                                                          \
#name, 1, offsetof(sl__sim_profile_t, name), lo, hi                    \
    }

#define F_R(key, is_int, name, lo, hi)                                         \
    {                                                                          \
        key, is_int, offsetof(sl__sim_profile_t, remote.name), lo, hi          \
    }

static const field_t fields[] = {
    F_I(ncpu, 1, SL_SNAPSHOT_MAX_CORES),
    F_I(batch_size, 1, 1 << 20),
    F_D(read_ms, 0, 1e6),
    F_D(read_cv, 0, 10),
    F_D(decode_ms, 1e-3, 1e6),
    F_D(decode_cv, 0, 10),
    F_D(item_bytes, 0, 1e12),
    F_D(storage_bw, 0, 1e15),
    F_D(storage_latency_ms, 0, 1e6),
    F_D(step_ms, 0, 1e7),
    F_D(consumer_cpu, 0, 1),
    F_D(batch_bytes, 0, 1e15),
    F_D(base_rss, 0, 1e15),
    F_D(mem_total, 0, 1e18),
    F_I(read_ahead, 0, 4096),
    F_D(interfere, 0, 4096),
    F_D(gpu_ms, 0, 1e6),
    F_D(gpu_slow, 0, 100),
    F_D(gpu_cpu_ms, 0, 1e6),
    /* remote preparers (sim/remote.h) */
    F_R("remote_preparers", 1, preparers, 0, 4096),
    F_R("remote_threads", 1, threads, 1, 256),
    F_R("remote_local", 1, local, 0, 4096),
    F_R("remote_per_node", 1, per_node, 1, 4096),
    F_R("remote_node_cores", 1, node_cores, 1, SL_SNAPSHOT_MAX_CORES),
    F_R("remote_chunk", 1, chunk, 1, 1024),
    F_R("remote_depth", 1, depth, 1, 1024),
    F_R("serialize_ms", 0, serialize_ms, 0, 1e6),
    F_R("store_ms", 0, store_ms, 0, 1e6),
    F_R("receive_ms", 0, receive_ms, 0, 1e6),
    F_R("link_bw", 0, link_bw, 0, 1e15),
    F_R("link_latency_ms", 0, link_latency_ms, 0, 1e6),
    F_R("object_store_bytes", 0, store_bytes, 0, 1e15),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

int sl__sim_profile_check(const sl__sim_profile_t *p, char *err, size_t len)
{
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *src = (const char *)p + fields[i].off;
        double x = fields[i].is_int ? *(const int *)(const void *)src
                                    : *(const double *)(const void *)src;
        if (!(x >= fields[i].lo && x <= fields[i].hi))
            return sl__fail(err, len, SL_ERANGE, "%s = %g is out of [%g, %g]",
                            fields[i].key, x, fields[i].lo, fields[i].hi);
    }
    return 0;
}

int sl__sim_event_check(const sl__sim_event_t *e)
{
    if (!(e->t >= 0 && e->t <= 1e9) || e->kind < 1 || e->kind > SL_SIM_EV_LAST)
        return -1;
    /* each kind sets the profile key of the same name: same range */
    for (size_t j = 0; j < NFIELDS; j++)
        if (!strcmp(fields[j].key, kind_names[e->kind])) {
            int ok = e->value >= fields[j].lo && e->value <= fields[j].hi;
            return ok ? 0 : -1;
        }
    return -1;
}

static int parse_events(json_t *arr, sl__sim_profile_t *p, char *err,
                        size_t len)
{
    if (!json_is_array(arr))
        return sl__fail(err, len, SL_EINVAL,
                        "profile key 'events': expected an array");
    if (json_array_size(arr) > SL_SIM_MAX_EVENTS)
        return sl__fail(err, len, SL_EINVAL,
                        "profile key 'events': more than %d events",
                        SL_SIM_MAX_EVENTS);
    p->n_events = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(arr, i, ev)
    {
        if (!json_is_object(ev))
            return sl__fail(err, len, SL_EINVAL,
                            "profile key 'events[%zu]': expected an object", i);
        sl__sim_event_t e = {-1, 0, NAN};
        const char *k;
        json_t *v;
        json_object_foreach(ev, k, v)
        {
            if (!strcmp(k, "t") || !strcmp(k, "value")) {
                if (!json_is_number(v))
                    return sl__fail(err, len, SL_EINVAL,
                                    "profile key 'events[%zu].%s': expected "
                                    "a number",
                                    i, k);
                double x = json_number_value(v);
                if (!strcmp(k, "t"))
                    e.t = x;
                else
                    e.value = x;
            } else if (!strcmp(k, "kind")) {
                const char *s = json_string_value(v);
                if (!s)
                    return sl__fail(err, len, SL_EINVAL,
                                    "profile key 'events[%zu].kind': expected "
                                    "a string",
                                    i);
                e.kind = sl__sim_event_kind(s);
                if (!e.kind)
                    return sl__fail(err, len, SL_EINVAL,
                                    "profile key 'events[%zu].kind': unknown "
                                    "kind '%.40s' (interfere, storage_bw, "
                                    "step_ms, consumer_cpu, "
                                    "storage_latency_ms, remote_preparers, "
                                    "link_bw, link_latency_ms)",
                                    i, s);
            } else {
                return sl__fail(err, len, SL_EINVAL,
                                "profile key 'events[%zu].%.40s': unknown "
                                "key",
                                i, k);
            }
        }
        if (sl__sim_event_check(&e))
            return sl__fail(err, len, SL_EINVAL,
                            "profile key 'events[%zu]': needs t in 0..1e9, a "
                            "kind and a value within the range of the profile "
                            "key of that name (interfere 0..4096, storage_bw "
                            "0..1e15, step_ms 0..1e7, consumer_cpu 0..1, "
                            "storage_latency_ms 0..1e6, remote_preparers "
                            "0..4096, link_bw 0..1e15, link_latency_ms "
                            "0..1e6)",
                            i);
        p->events[p->n_events++] = e;
    }
    qsort(p->events, (size_t)p->n_events, sizeof p->events[0], cmp_event);
    return 0;
}

int sl__sim_profile_parse(const char *text, size_t n, sl__sim_profile_t *out,
                          char *err, size_t len)
{
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return sl__fail(err, len, SL_EINVAL, "profile: line %d: %s", je.line,
                        je.text);
    sl__sim_profile_t p;
    sl__sim_profile_default(&p);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = sl__fail(err, len, SL_EINVAL, "profile: expected a JSON object");
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (!strcmp(k, "events")) {
            if ((rc = parse_events(v, &p, err, len)))
                goto done;
            continue;
        }
        if (!strcmp(k, "note")) { /* provenance, for people */
            if (!json_is_string(v)) {
                rc = sl__fail(err, len, SL_EINVAL,
                              "profile key 'note': expected a string");
                goto done;
            }
            continue;
        }
        const field_t *f = NULL;
        for (size_t i = 0; i < NFIELDS && !f; i++)
            if (!strcmp(k, fields[i].key))
                f = &fields[i];
        if (!f) {
            rc = sl__fail(err, len, SL_EINVAL, "profile: unknown key '%.60s'",
                          k);
            goto done;
        }
        if (f->is_int ? !json_is_integer(v) : !json_is_number(v)) {
            rc = sl__fail(err, len, SL_EINVAL, "profile key '%s': expected %s",
                          f->key, f->is_int ? "an integer" : "a number");
            goto done;
        }
        double x = json_number_value(v);
        if (!(x >= f->lo && x <= f->hi)) {
            rc = sl__fail(err, len, SL_ERANGE,
                          "profile key '%s': %g is out of [%g, %g]", f->key, x,
                          f->lo, f->hi);
            goto done;
        }
        char *dst = (char *)&p + f->off;
        if (f->is_int)
            *(int *)dst = (int)x;
        else
            *(double *)dst = x;
    }
    *out = p;
done:
    json_decref(root);
    return rc;
}

int sl__sim_profile_load(const char *path, sl__sim_profile_t *p, char *err,
                         size_t len)
{
    char *buf = NULL;
    size_t n = 0;
    int rc = sl__read_small_file(path, 64u << 20, &buf, &n, err, len);
    if (rc)
        return rc;
    rc = sl__sim_profile_parse(buf, n, p, err, len);
    if (rc && err && len) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s: %s", path, err);
        snprintf(err, len, "%s", tmp);
    }
    free(buf);
    return rc;
}

static json_t *profile_json(const sl__sim_profile_t *p, const char *note)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (note)
        json_object_set_new(o, "note", json_string(note));
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *src = (const char *)p + fields[i].off;
        json_object_set_new(o, fields[i].key,
                            fields[i].is_int ? json_integer(*(const int *)src)
                                             : json_real(*(const double *)src));
    }
    json_t *ev = json_array();
    for (int i = 0; i < p->n_events && i < SL_SIM_MAX_EVENTS; i++) {
        const sl__sim_event_t *e = &p->events[i];
        int k = e->kind >= 1 && e->kind <= SL_SIM_EV_LAST ? e->kind : 1;
        json_array_append_new(ev,
                              json_pack("{s:f, s:s, s:f}", "t", e->t, "kind",
                                        kind_names[k], "value", e->value));
    }
    json_object_set_new(o, "events", ev);
    return o;
}

int sl__sim_profile_save_note(const char *path, const sl__sim_profile_t *p,
                              const char *note, char *err, size_t len)
{
    json_t *o = profile_json(p, note);
    if (!o)
        return sl__fail(err, len, SL_ENOMEM, "out of memory");
    int rc = json_dump_file(o, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (rc)
        return sl__fail(err, len, SL_EIO, "cannot write %s", path);
    return 0;
}

int sl__sim_profile_save(const char *path, const sl__sim_profile_t *p,
                         char *err, size_t len)
{
    return sl__sim_profile_save_note(path, p, NULL, err, len);
}
