/* ops/repack: see repack.h. */
#include "ops/repack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

/* The size an image of w x h gets with its longer side at most max_side
 * (aspect kept, rounded, at least 1 pixel). */
static void fit(int w, int h, int max_side, int *ow, int *oh)
{
    *ow = w;
    *oh = h;
    if (max_side <= 0 || (w <= max_side && h <= max_side))
        return;
    double k = (double)max_side / (double)(w > h ? w : h);
    *ow = w >= h ? max_side : (int)lround(w * k);
    *oh = h >= w ? max_side : (int)lround(h * k);
    if (*ow < 1)
        *ow = 1;
    if (*oh < 1)
        *oh = 1;
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        se += d * d;
    }
    if (se == 0 || n == 0)
        return SL__REPACK_PSNR_LOSSLESS;
    double v = 10.0 * log10(255.0 * 255.0 / (se / (double)n));
    return v < SL__REPACK_PSNR_LOSSLESS ? v : SL__REPACK_PSNR_LOSSLESS;
}

int sl__image_repack(const uint8_t *bytes, size_t n, int max_side, int quality,
                     sl__scratch_t *s, sl__bytes_t *out, sl__repack_t *r,
                     char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (quality <= 0)
        quality = SL__REPACK_QUALITY;
    sl__bytes_t full = {0}, small = {0}, back = {0};
    int W = 0, H = 0, w, h;
    int rc = sl__image_decode_full(bytes, n, 0, s, &full, &W, &H, err, errlen);
    if (rc)
        goto done;
    fit(W, H, max_side, &w, &h);
    const uint8_t *px = full.p;
    if (w != W || h != H) {
        r->resized = 1;
        sl__xform_t x;
        memset(&x, 0, sizeof x);
        x.mode = SL_XF_BOX; /* the whole image, PIL's bilinear */
        x.out_w = w;
        x.out_h = h;
        x.dtype = SL_DTYPE_UINT8;
        x.layout = SL_LAYOUT_HWC;
        for (int c = 0; c < 3; c++)
            x.mean[c] = x.std[c] = 1; /* unused for uint8 */
        if (sl__bytes_reserve(&small, (size_t)w * (size_t)h * 3 + 1)) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            goto done;
        }
        rc = sl__image_process_rgb(full.p, W, H, &x, NULL, NULL, s, small.p,
                                   err, errlen);
        if (rc)
            goto done;
        px = small.p;
    }
    if ((rc = sl__jpeg_encode(px, w, h, quality, out, err, errlen)))
        goto done;
    r->w = w;
    r->h = h;
    if (!r->resized && out->n >= n) {
        /* It already fits and the re-encode would not even shrink it:
         * keep the source, without loss. */
        if (sl__bytes_reserve(out, n + 1)) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            goto done;
        }
        memcpy(out->p, bytes, n);
        out->n = n;
        r->kept = 1;
        r->psnr = SL__REPACK_PSNR_LOSSLESS;
        goto done;
    }
    int bw = 0, bh = 0;
    rc = sl__image_decode_full(out->p, out->n, 0, s, &back, &bw, &bh, err,
                               errlen);
    if (!rc && (bw != w || bh != h))
        rc = sl__fail(err, errlen, SL_EIO,
                      "re-encoded image is %dx%d, not "
                      "%dx%d",
                      bw, bh, w, h);
    if (!rc)
        r->psnr = psnr(px, back.p, (size_t)w * (size_t)h * 3);
done:
    sl__bytes_free(&full);
    sl__bytes_free(&small);
    sl__bytes_free(&back);
    return rc;
}
