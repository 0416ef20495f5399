/* Fuzz target: any bytes as a telemetry file through what calibration does
 * of its own (sl__calibrate_stream: lines read by sl_snapshot_parse, which
 * fuzz_snapshot_parse fuzzes alone, made into periods by
 * sl__calib_period_of, then the fit and the profile). The first accepted
 * line is also repeated as eight periods so that the fit runs on it. Nothing
 * may crash, leak or read past the input; an accepted period has the
 * figures the fit needs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/calibrate.h"

static void fit_copies(const sl__calib_period_t *first,
                       const sl_calibrate_options_t *o)
{
    sl__calib_period_t p[8];
    if (!isfinite(first->t) || !(first->interval_s > 0) || first->ncpu < 1 ||
        first->decode_workers < 0 || first->read_slots < 0 ||
        first->samples_total < 0 || first->batches_total < 0)
        abort();
    for (int i = 0; i < 8; i++) {
        p[i] = *first;
        p[i].t = first->t + i * first->interval_s;
        p[i].samples_total = first->samples_total / 8 * i;
        p[i].batches_total = first->batches_total / 8 * i;
    }
    sl__calibration_t c;
    sl__calibrate_periods(p, 8, o, "fuzz", &c, NULL, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    o.skip_s = -1;
    /* A copy of exactly `size` bytes, so a read past the end is seen. */
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data, size);
    FILE *f = fmemopen(text, size, "r");
    if (f) {
        sl__calibration_t c;
        sl__calibrate_stream(f, "fuzz", &o, &c, NULL, 0);
        fclose(f);
    }
    /* The first line alone. */
    const char *nl = memchr(text, '\n', size);
    size_t len = nl ? (size_t)(nl - text) : size;
    sl_snapshot_t s;
    sl_snapshot_init(&s);
    sl__calib_period_t p;
    if (sl_snapshot_parse(text, len, &s, NULL, 0) == 0 &&
        sl__calib_period_of(&s, &p) == 0)
        fit_copies(&p, &o);
    free(text);
    return 0;
}
