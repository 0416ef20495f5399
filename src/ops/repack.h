/* ops/repack: FFCV-style lossy packing (`sluice pack --max-side N
 * --jpeg-quality Q`): an image decoded, shrunk so that its longer side is
 * at most N (PIL-exact bilinear, as the loader resizes), re-encoded as a
 * baseline JPEG at quality Q, and the PSNR that costs measured. Depends on
 * base and ops. */
#ifndef SL_OPS_REPACK_H
#define SL_OPS_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "ops/image.h"

/* The quality used when only --max-side is given. */
#define SL__REPACK_QUALITY 90
/* PSNR reported for an image stored without loss (MSE 0). */
#define SL__REPACK_PSNR_LOSSLESS 99.0

typedef struct sl__repack {
    int w, h;    /* of the stored image */
    int resized; /* 1: the source's longer side was over max_side */
    int kept;    /* 1: the source bytes were kept (already fit, and
                    re-encoding would not shrink them): no loss */
    double psnr; /* dB of the stored image against the resized source
                    pixels (the encoder's input); lossless: 99 */
} sl__repack_t;

/* Re-encodes the JPEG or PNG in bytes into out (max_side <= 0: no
 * resize; quality 0: SL__REPACK_QUALITY). The PSNR is over the three
 * channels of every pixel: 10 log10(255^2 / MSE) between the pixels given
 * to the encoder and the stored JPEG decoded; it measures the re-encode,
 * not the resize (a loader resizes anyway). Errors as the decoder's. */
int sl__image_repack(const uint8_t *bytes, size_t n, int max_side, int quality,
                     sl__scratch_t *s, sl__bytes_t *out, sl__repack_t *r,
                     char *err, size_t errlen);

#endif
