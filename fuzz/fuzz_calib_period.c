/* Fuzz target: any bytes through the telemetry line parser of the
 * calibration (sl__calib_period_parse, what `sluice calibrate` and
 * sl_calibrate read), then the fit on a few copies of what it accepted.
 * Nothing may crash, leak or read past the input; an accepted period has
 * the figures the fit needs. At merge this parser may give way to
 * sl_snapshot_parse. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/calibrate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so a read past the end is seen. */
    char *line = malloc(size ? size : 1);
    if (!line)
        return 0;
    memcpy(line, data, size);
    sl__calib_period_t p[8];
    int rc = sl__calib_period_parse(line, size, &p[0]);
    free(line);
    if (rc)
        return 0;
    if (!isfinite(p[0].t) || !(p[0].interval_s > 0) || p[0].ncpu < 1 ||
        p[0].decode_workers < 0 || p[0].read_workers < 0 ||
        p[0].samples_total < 0 || p[0].batches_total < 0)
        abort();
    for (int i = 1; i < 8; i++) {
        p[i] = p[0];
        p[i].t = p[0].t + i * p[0].interval_s;
        p[i].samples_total = p[0].samples_total / 8 * i;
        p[i].batches_total = p[0].batches_total / 8 * i;
    }
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    o.skip_s = -1;
    sl__calibration_t c;
    sl__calibrate_periods(p, 8, &o, "fuzz", &c, NULL, 0);
    return 0;
}
