/* ops/synth: photo-like synthetic images, a pure function of (seed,
 * class, index), for test and benchmark datasets (`sluice make-dataset`):
 * ImageNet-like sizes (width 300..800, aspect 0.6..1.6), per class a colour
 * palette, per image a few sinusoidal gradients, filled shapes and
 * per-pixel noise, encoded as JPEG quality 90 (about 100 KB), so that
 * decode cost is realistic. Depends on base (rng) and ops (JPEG encoder). */
#ifndef SL_OPS_SYNTH_H
#define SL_OPS_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* The JPEG of image `idx` (of class `cls`) into *jpg. Same arguments, same
 * bytes. @return 0, or SL_ENOMEM / the encoder's error (message in err). */
int sl__synth_jpeg(uint64_t seed, int cls, int64_t idx, sl__bytes_t *jpg,
                   char *err, size_t errlen);

#endif
