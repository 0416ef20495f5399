/* cli/knob_sets: parsing and applying `run --set` (see knob_sets.h). */
#include "knob_sets.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h" /* sl__parse_ll, sl__parse_size */

/* Emulated storage options in the CLI's units: latency in ms (fractions
 * allowed) to the API's microseconds; bandwidth as a size per second. */
int sl__parse_latency_ms(const char *s, int64_t *us)
{
    char *end;
    double ms = strtod(s, &end);
    if (!*s || *end || !(ms >= 0) || ms > 60000) /* API: <= 1 min */
        return -1;
    *us = (int64_t)llround(ms * 1000);
    return 0;
}

static int parse_set(const char *s, sl__knob_set_t *k)
{
    char name[32], val[32], *end;
    long long v;
    double at = strtod(s, &end);
    if (end == s || !(at >= 0) || at > 1e15)
        return -1;
    k->at_s = *end == 's' ? at : -1; /* "20s:..." is a time */
    end += *end == 's';
    if ((k->at_s < 0 && at != floor(at)) ||
        sscanf(end, ":%31[a-z-]=%31s", name, val) != 2)
        return -1;
    k->at = (int64_t)at;
    if (!strcmp(name, "read-latency-ms")) {
        k->storage = SL_TESTING_READ_LATENCY_US;
        return sl__parse_latency_ms(val, &k->value);
    }
    if (!strcmp(name, "read-bw")) {
        k->storage = SL_TESTING_READ_BYTES_PER_S;
        k->value = sl__parse_size(val);
        return k->value < 0 ? -1 : 0;
    }
    int gpu = !strcmp(name, "gpu-share"), step = !strcmp(name, "step-ms");
    if (sl__parse_ll(val, gpu || step ? 0 : INT64_MIN,
                     gpu    ? 1000
                     : step ? 3600000
                            : INT64_MAX,
                     &v))
        return -1;
    k->value = v;
    if (!strcmp(name, "threads"))
        k->param = SL_PARAM_DECODE_THREADS;
    else if (!strcmp(name, "read-threads"))
        k->param = SL_PARAM_READ_THREADS;
    else if (!strcmp(name, "prefetch"))
        k->param = SL_PARAM_PREFETCH;
    else if (!strcmp(name, "io-depth"))
        k->param = SL_PARAM_IO_DEPTH;
    else if (!strcmp(name, "gpu-share"))
        k->param = SL_PARAM_GPU_SHARE;
    else if (!strcmp(name, "step-ms"))
        k->param = 0;
    else
        return -1;
    return 0;
}

int sl__knob_sets_add(sl__knob_sets_t *ks, const char *spec)
{
    if (ks->n == SL__KNOB_SETS_MAX)
        return -1;
    sl__knob_set_t *k = &ks->v[ks->n];
    memset(k, 0, sizeof *k);
    if (parse_set(spec, k))
        return -1;
    k->spec = spec;
    ks->n++;
    return 0;
}

int sl__knob_sets_check(const sl__knob_sets_t *ks, const sl_loader_t *l,
                        const char *cmd)
{
    static const char *const names[] = {[SL_PARAM_READ_THREADS] =
                                            "read-threads",
                                        [SL_PARAM_DECODE_THREADS] = "threads",
                                        [SL_PARAM_PREFETCH] = "prefetch",
                                        [SL_PARAM_IO_DEPTH] = "io-depth",
                                        [SL_PARAM_GPU_SHARE] = "gpu-share"};
    for (int i = 0; i < ks->n; i++) {
        const sl__knob_set_t *k = &ks->v[i];
        int64_t lo, hi;
        if (!k->param || k->value == SL_AUTOTUNE ||
            sl_loader_param_range(l, k->param, &lo, &hi) ||
            (k->value >= lo && k->value <= hi))
            continue;
        /* gpu-share's range is 0..0 without the GPU stage, which the
         * loader settles when it is created: the reason goes with it. */
        const char *why = "";
        int stage =
            k->param == SL_PARAM_GPU_SHARE && !sl__testing_placement(l, &why);
        fprintf(
            stderr,
            "sluice %s: --set %s: %s = %lld is outside %lld..%lld on "
            "this loader%s%s%s\n",
            cmd, k->spec, names[k->param], (long long)k->value, (long long)lo,
            (long long)hi, stage ? " (the GPU stage is not in use: " : "",
            stage ? (why[0] ? why : "placement cpu") : "", stage ? ")" : "");
        return 2;
    }
    return 0;
}

int sl__knob_sets_unfired(const sl__knob_sets_t *ks, const char *cmd,
                          int64_t done)
{
    int n = 0;
    for (int i = 0; i < ks->n; i++) {
        const sl__knob_set_t *k = &ks->v[i];
        if (k->fired)
            continue;
        fprintf(stderr,
                "sluice %s: warning: --set %s never applied: the run ended "
                "after %lld batches\n",
                cmd, k->spec, (long long)done);
        n++;
    }
    return n;
}

void sl__knob_sets_due(sl__knob_sets_t *ks, sl_loader_t *l, const char *cmd,
                       int64_t done, double elapsed, double *step_ms)
{
    for (int i = 0; i < ks->n; i++) {
        sl__knob_set_t *k = &ks->v[i];
        int now = k->at_s < 0 ? k->at == done : !k->fired && elapsed >= k->at_s;
        if (!now)
            continue;
        k->fired = 1;
        if (k->storage) {
            if (sl__testing_storage_set(l, k->storage, k->value))
                fprintf(stderr, "sluice %s: --set: value out of range\n", cmd);
        } else if (k->param == 0)
            *step_ms = (double)k->value;
        else if (sl_loader_set(l, k->param, k->value))
            fprintf(stderr, "sluice %s: --set: %s\n", cmd,
                    sl_loader_last_error(l));
    }
}
