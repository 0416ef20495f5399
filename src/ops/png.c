/* ops/png: libpng's simplified API from memory, then the shared resample.
 *
 * PNG has no region decode, so the whole image is decoded once into scratch
 * (admitted first from the header's size; the caller trims scratch after
 * an unusually large one). Alpha is dropped, not
 * composited: PIL's convert('RGB') drops it too, and libpng's 8-bit RGBA
 * output is non-premultiplied, so the colour channels are the stored ones.
 * 16-bit files without colour-space chunks are taken as sRGB (as PIL does,
 * which just keeps the high byte) instead of libpng's default linear. */
#include <png.h>
#include <string.h>

#include "ops/ops_internal.h"

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

int sl__png_info(const uint8_t *p, size_t n, int *w, int *h, char *err,
                 size_t errlen)
{
    if (n < 8 || memcmp(p, png_sig, 8))
        return sl__fail(err, errlen, SL_EDECODE, "not a PNG");
    if (n < 24 || memcmp(p + 12, "IHDR", 4))
        return sl__fail(err, errlen, SL_ECORRUPT, "truncated PNG header");
    uint32_t pw = (uint32_t)p[16] << 24 | (uint32_t)p[17] << 16 |
                  (uint32_t)p[18] << 8 | p[19];
    uint32_t ph = (uint32_t)p[20] << 24 | (uint32_t)p[21] << 16 |
                  (uint32_t)p[22] << 8 | p[23];
    if (pw == 0 || ph == 0 || pw > SL__IMG_MAX_SIDE || ph > SL__IMG_MAX_SIDE)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "PNG of %ux%u pixels not supported", pw, ph);
    *w = (int)pw;
    *h = (int)ph;
    return sl__check_dims(*w, *h, err, errlen);
}

/* The header checked (sl__png_info) and libpng's reader opened on it, set
 * to 8-bit RGB, or RGBA where the file has alpha (*ps bytes a pixel), with
 * 16-bit samples taken as sRGB. On success the caller frees img. */
static int png_open(const uint8_t *p, size_t n, png_image *img, int *W, int *H,
                    int *ps, char *err, size_t errlen)
{
    int rc = sl__png_info(p, n, W, H, err, errlen);
    if (rc)
        return rc;
    memset(img, 0, sizeof *img);
    img->version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(img, p, n)) {
        rc = sl__fail(err, errlen, SL_EDECODE, "libpng: %s", img->message);
        png_image_free(img);
        return rc;
    }
    *ps = (img->format & PNG_FORMAT_FLAG_ALPHA) ? 4 : 3;
    img->format = *ps == 4 ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
    img->flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
    return 0;
}

/* The whole image into dst (rows of stride bytes, plus SL__SLACK), its
 * bytes and `more` admitted first. */
static int png_read_all(png_image *img, size_t stride, size_t more,
                        sl__scratch_t *s, sl__bytes_t *dst, char *err,
                        size_t errlen)
{
    size_t bytes = stride * img->height + SL__SLACK;
    int rc = sl__scratch_admit(s, bytes + more, err, errlen);
    if (rc)
        return rc;
    if (sl__bytes_reserve(dst, bytes))
        return sl__fail(err, errlen, SL_ENOMEM, "no memory for %ux%u PNG",
                        img->width, img->height);
    if (!png_image_finish_read(img, NULL, dst->p, (png_int_32)stride, NULL))
        return sl__fail(err, errlen, SL_EDECODE, "libpng: %s", img->message);
    return 0;
}

int sl__png_process(const uint8_t *p, size_t n, const sl__xform_t *x,
                    sl__rng_t *crop_rng, sl__rng_t *flip_rng, sl__scratch_t *s,
                    void *out, char *err, size_t errlen)
{
    int W = 0, H = 0, ps = 3; /* set by png_open (GCC -O2 cannot tell) */
    png_image img;
    int rc = png_open(p, n, &img, &W, &H, &ps, err, errlen);
    if (rc)
        return rc;
    size_t stride = (size_t)img.width * ps;

    /* The geometry needs only the header, so the whole sample's memory is
     * known (and admitted) before the image is decoded. */
    sl__geom_t g;
    sl__rs_t rs;
    int cx0, cy0, vfirst;
    rc = sl__plan_full(x, W, H, crop_rng, flip_rng, s, &g, &rs, &cx0, &cy0,
                       &vfirst, err, errlen);
    if (rc)
        goto out;
    rc = png_read_all(&img, stride, sl__rs_need(&rs.h, &rs.v, vfirst), s,
                      &s->full, err, errlen);
    if (rc)
        goto out;
    if (sl__rs_begin(s, &rs, vfirst)) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "no memory for resample");
        goto out;
    }
    for (int y = rs.v.lo; y < rs.v.hi; y++)
        sl__rs_row(&rs, y - rs.v.lo,
                   s->full.p + (size_t)(cy0 + y) * stride +
                       (size_t)(cx0 + rs.h.lo) * ps,
                   ps);
    if (sl__rs_finish(s, &rs, x, g.flip, out))
        rc = sl__fail(err, errlen, SL_ENOMEM, "no memory for resample");
out:
    png_image_free(&img);
    return rc;
}

/* The whole image into out (W x H x 3 RGB, plus SL__SLACK bytes): alpha
 * dropped as sl__png_process drops it (ops/decoded.c). */
int sl__png_decode_full(const uint8_t *p, size_t n, sl__scratch_t *s,
                        sl__bytes_t *out, int *w, int *h, char *err,
                        size_t errlen)
{
    int W = 0, H = 0, ps = 3; /* set by png_open (GCC -O2 cannot tell) */
    png_image img;
    int rc = png_open(p, n, &img, &W, &H, &ps, err, errlen);
    if (rc)
        return rc;
    rc = png_read_all(&img, (size_t)img.width * ps, 0, s, out, err, errlen);
    png_image_free(&img);
    if (rc)
        return rc;
    if (ps == 4) /* front to back: a pixel's 3 bytes land at or before it */
        for (size_t i = 0; i < (size_t)W * H; i++)
            memmove(out->p + 3 * i, out->p + 4 * i, 3);
    out->n = (size_t)W * H * 3 + SL__SLACK;
    memset(out->p + (size_t)W * H * 3, 0, SL__SLACK);
    *w = W;
    *h = H;
    return 0;
}
