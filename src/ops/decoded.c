/* ops/decoded: a sample in two halves, for a cache of decoded images
 * (exec/loader_cache.c): the whole image decoded once at full size, then,
 * each epoch, the crop, resize, flip and convert from those pixels.
 *
 * The contract: sl__image_process_rgb(decode_full(bytes)) writes the same
 * bytes as sl__image_process(bytes) with dct_scale 0. The crop path
 * decodes the box's columns (jpeg_crop_scanline, with a margin where chroma
 * is subsampled horizontally, so fancy upsampling sees the neighbours a
 * full decode sees) and rows (jpeg_skip_scanlines) at scale 1; those are
 * the full decode's pixels, and the resample is the same code over the
 * same pixels. tests/unit/test_cache.c checks it on every ImageNet sample
 * image (4:4:4, 4:2:0, 4:2:2, grayscale), and the loader's streams
 * through the cache against no_dct_scale runs. */
#include <string.h>

#include "ops/ops_internal.h"

int sl__image_decode_full(const uint8_t *bytes, size_t n, int strict,
                          sl__scratch_t *s, sl__bytes_t *out, int *w, int *h,
                          char *err, size_t errlen)
{
    if (!bytes || !s || !out || !w || !h)
        return sl__fail(err, errlen, SL_EINVAL, "NULL argument");
    if (n >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8)
        return sl__jpeg_decode_full(bytes, n, strict, s, out, w, h, err,
                                    errlen);
    if (n >= 8 && bytes[0] == 0x89 && !memcmp(bytes + 1, "PNG", 3))
        return sl__png_decode_full(bytes, n, s, out, w, h, err, errlen);
    if (n == 0)
        return sl__fail(err, errlen, SL_EDECODE, "empty input");
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "not a JPEG or PNG");
}

int sl__image_process_rgb(const uint8_t *rgb, int W, int H,
                          const sl__xform_t *x, sl__rng_t *crop_rng,
                          sl__rng_t *flip_rng, sl__scratch_t *s, void *out,
                          char *err, size_t errlen)
{
    if (!rgb || !x || !s || !out)
        return sl__fail(err, errlen, SL_EINVAL, "NULL argument");
    sl__geom_t g;
    sl__rs_t rs;
    int cx0, cy0, vfirst;
    int rc = sl__plan_full(x, W, H, crop_rng, flip_rng, s, &g, &rs, &cx0, &cy0,
                           &vfirst, err, errlen);
    if (rc)
        return rc;
    rc = sl__scratch_admit(s, sl__rs_need(&rs.h, &rs.v, vfirst), err, errlen);
    if (rc)
        return rc;
    if (sl__rs_begin(s, &rs, vfirst))
        return sl__fail(err, errlen, SL_ENOMEM, "no memory for resample");
    size_t stride = (size_t)W * 3;
    /* The rows resampled in batches, as the JPEG path feeds them. */
    for (int y = rs.v.lo; y < rs.v.hi; y += 8) {
        int k = rs.v.hi - y < 8 ? rs.v.hi - y : 8;
        sl__rs_rows(&rs, y - rs.v.lo,
                    rgb + (size_t)(cy0 + y) * stride +
                        (size_t)(cx0 + rs.h.lo) * 3,
                    stride, k, 3);
    }
    if (sl__rs_finish(s, &rs, x, g.flip, out))
        return sl__fail(err, errlen, SL_ENOMEM, "no memory for resample");
    sl__scratch_trim(s, SL__SCRATCH_KEEP);
    return 0;
}

int sl__image_plan(const sl__xform_t *x, int W, int H, const double box[4],
                   int flip, sl__scratch_t *s, sl__image_plan_t *p, char *err,
                   size_t errlen)
{
    if (!x || !box || !s || !p)
        return sl__fail(err, errlen, SL_EINVAL, "NULL argument");
    sl__xform_t xb = *x;
    if (x->mode != SL_XF_CENTER) {
        /* The drawn box, replayed: box mode crops exactly it. */
        for (int i = 0; i < 4; i++)
            if (box[i] != (double)(int)box[i])
                return sl__fail(err, errlen, SL_EINVAL,
                                "crop box not in whole pixels");
        xb.mode = SL_XF_BOX;
        xb.box =
            (sl__crop_t){(int)box[0], (int)box[1], (int)box[2] - (int)box[0],
                         (int)box[3] - (int)box[1]};
        xb.flip = flip;
        if (xb.box.w <= 0 || xb.box.h <= 0)
            return sl__fail(err, errlen, SL_ERANGE, "empty crop box");
    }
    sl__geom_t g;
    sl__rs_t rs;
    int cx0, cy0, vfirst;
    int rc = sl__plan_full(&xb, W, H, NULL, NULL, s, &g, &rs, &cx0, &cy0,
                           &vfirst, err, errlen);
    if (rc)
        return rc;
    *p = (sl__image_plan_t){.ox = cx0 + rs.h.lo,
                            .oy = cy0 + rs.v.lo,
                            .out_w = rs.h.out,
                            .out_h = rs.v.out,
                            .hk = rs.h.ksize,
                            .vk = rs.v.ksize,
                            .hn = rs.h.hi - rs.h.lo,
                            .vn = rs.v.hi - rs.v.lo,
                            .vfirst = vfirst,
                            .flip = g.flip,
                            .hb = rs.h.bounds,
                            .hkk = rs.h.kk,
                            .vb = rs.v.bounds,
                            .vkk = rs.v.kk};
    return 0;
}
