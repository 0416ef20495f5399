/* ops/resize: PIL's antialiased bilinear resample (Pillow
 * src/libImaging/Resample.c: precompute_coeffs, normalize_coeffs_8bpc,
 * ImagingResampleHorizontal/Vertical_8bpc), split so that the horizontal
 * pass can run on each decoded row as it arrives.
 *
 * Matching PIL bit for bit needs: double weights of the triangle filter with
 * support scaled by the downscale factor, normalised per output pixel, then
 * rounded to 22-bit fixed point; an accumulator starting at 1 << 21; the
 * horizontal pass first, clipped to uint8; then the vertical pass. */
#if defined(__GNUC__) && !defined(__clang__)
/* The vertical pass is a long multiply-add over contiguous bytes: let GCC
 * vectorise it at -O2 builds too. */
#pragma GCC optimize("O3")
#endif

#include <limits.h>
#include <math.h>
#include <string.h>

#include "ops/ops_internal.h"

static inline double triangle(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static int axis_ksize(double b0, double b1, int out)
{
    double fs = (b1 - b0) / out;
    if (fs < 1.0)
        fs = 1.0;
    return (int)ceil(fs) * 2 + 1;
}

/* Fills a (storage already set) for the local input range [0, in). */
static void axis_fill(sl__axis_t *a, int in, double b0, double b1, double *w)
{
    int out = a->out, ksize = a->ksize;
    double scale = (b1 - b0) / out, fs = scale < 1.0 ? 1.0 : scale;
    double support = fs, ss = 1.0 / fs;
    int lo = INT_MAX, hi = 0;
    for (int xx = 0; xx < out; xx++) {
        double center = b0 + (xx + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        if (xmin > in)
            xmin = in;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in)
            xmax = in;
        xmax -= xmin;
        if (xmax < 0)
            xmax = 0;
        if (xmax > ksize)
            xmax = ksize;
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            w[x] = triangle((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        int32_t *k = a->kk + (size_t)xx * ksize;
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            v *= (1 << SL__RS_BITS);
            k[x] = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
        }
        for (int x = xmax; x < ksize; x++)
            k[x] = 0;
        a->bounds[2 * xx] = xmin;
        a->bounds[2 * xx + 1] = xmax;
        if (xmax > 0) {
            if (xmin < lo)
                lo = xmin;
            if (xmin + xmax > hi)
                hi = xmin + xmax;
        }
    }
    if (hi == 0)
        lo = 0;
    for (int xx = 0; xx < out; xx++)
        a->bounds[2 * xx] -= lo;
    a->lo = lo;
    a->hi = hi;
}

/* Local clip range of one axis: [c0, c1) in decoded pixels and the box in
 * local coordinates. */
static void axis_range(double x0, double x1, int clip_box, int denom, int dn,
                       int *c0, int *c1, double *b0, double *b1)
{
    double s0 = x0 / denom, s1 = x1 / denom;
    if (clip_box) {
        *c0 = (int)floor(s0);
        *c1 = (int)ceil(s1);
        if (*c1 > dn)
            *c1 = dn;
        if (*c0 > *c1 - 1)
            *c0 = *c1 - 1;
        if (*c0 < 0)
            *c0 = 0;
    } else {
        *c0 = 0;
        *c1 = dn;
    }
    *b0 = s0 - *c0;
    *b1 = s1 - *c0;
}

int sl__plan_axes(sl__scratch_t *s, const sl__fbox_t *b, int denom, int dw,
                  int dh, int out_w, int out_h, sl__axis_t *h, sl__axis_t *v,
                  int *cx0, int *cy0)
{
    int cx1, cy1;
    double hb0, hb1, vb0, vb1;
    axis_range(b->x0, b->x1, b->clip_box, denom, dw, cx0, &cx1, &hb0, &hb1);
    axis_range(b->y0, b->y1, b->clip_box, denom, dh, cy0, &cy1, &vb0, &vb1);
    h->out = out_w;
    v->out = out_h;
    h->ksize = axis_ksize(hb0, hb1, out_w);
    v->ksize = axis_ksize(vb0, vb1, out_h);
    size_t nh = (size_t)out_w * (2 + h->ksize),
           nv = (size_t)out_h * (2 + v->ksize);
    size_t kmax = h->ksize > v->ksize ? h->ksize : v->ksize;
    h->kgroups = (h->ksize + SL__KX_GROUP - 1) / SL__KX_GROUP;
    v->kgroups = 0;
    /* int32 words, rounded up to 8 so that kx is 32-byte aligned from an
     * aligned base (plus 8 words to align the base). */
    size_t n32 = (nh + nv + 7) & ~(size_t)7;
    size_t nx = (size_t)out_w * h->kgroups * SL__KX_WORDS;
    if (sl__bytes_reserve(&s->coef,
                          (n32 + 8) * sizeof(int32_t) + nx * sizeof(int16_t)) ||
        sl__bytes_reserve(&s->dbl, kmax * sizeof(double)))
        return SL_ENOMEM;
    int32_t *c = (int32_t *)s->coef.p;
    h->bounds = c;
    h->kk = c + 2 * (size_t)out_w;
    v->bounds = c + nh;
    v->kk = c + nh + 2 * (size_t)out_h;
    uintptr_t xa = (uintptr_t)(c + n32);
    xa = (xa + 31) & ~(uintptr_t)31;
    h->kx = (int16_t *)xa;
    v->kx = NULL;
    axis_fill(h, cx1 - *cx0, hb0, hb1, (double *)s->dbl.p);
    axis_fill(v, cy1 - *cy0, vb0, vb1, (double *)s->dbl.p);
    if (h->hi <= h->lo || v->hi <= v->lo)
        return SL_ERANGE;
    return 0;
}

int sl__vertical_first(const sl__fbox_t *b)
{
    return b->pil_oh < b->pil_h &&
           b->pil_h - b->pil_oh > 2 * (b->pil_w - b->pil_ow);
}

/* Vertical-first outputs per batch: the horizontal pass runs over this
 * many rows at once (it reads each output's weights once per batch). */
#define SL__VF_BATCH 8

static size_t tmp_bytes(const sl__axis_t *h, const sl__axis_t *v, int vfirst)
{
    size_t stride = (size_t)3 * (vfirst ? h->hi - h->lo : h->out);
    return stride * (size_t)(v->hi - v->lo) + SL__SLACK;
}

static size_t line_bytes(size_t w3, int out_w, int vfirst, int avx2)
{
    size_t o3 = (size_t)out_w * 3, ms = w3 + SL__SLACK, os = o3 + SL__SLACK;
    int nb = vfirst && avx2 ? SL__VF_BATCH : 1;
    return w3 * sizeof(int32_t) + (size_t)nb * (ms + os) + SL__SLACK;
}

size_t sl__rs_need(const sl__axis_t *h, const sl__axis_t *v, int vfirst)
{
    size_t w3 = (size_t)3 * (vfirst ? h->hi - h->lo : h->out);
    return tmp_bytes(h, v, vfirst) + line_bytes(w3, h->out, vfirst, 1);
}

int sl__plan_full(const sl__xform_t *x, int W, int H, sl__rng_t *crop_rng,
                  sl__rng_t *flip_rng, sl__scratch_t *s, sl__geom_t *g,
                  sl__rs_t *rs, int *cx0, int *cy0, int *vfirst, char *err,
                  size_t errlen)
{
    int rc = sl__check_dims(W, H, err, errlen);
    if (rc)
        return rc;
    rc = sl__geom_resolve(x, W, H, crop_rng, flip_rng, g, err, errlen);
    if (rc)
        return rc;
    rc = sl__plan_axes(s, &g->box, 1, W, H, x->out_w, x->out_h, &rs->h, &rs->v,
                       cx0, cy0);
    if (rc)
        return sl__fail(err, errlen, rc, "cannot plan the resample");
    *vfirst = sl__vertical_first(&g->box);
    return 0;
}

int sl__rs_begin(sl__scratch_t *s, sl__rs_t *rs, int vfirst)
{
    rs->vfirst = vfirst;
    rs->stride = (size_t)3 * (vfirst ? rs->h.hi - rs->h.lo : rs->h.out);
    if (sl__bytes_reserve(&s->tmp, tmp_bytes(&rs->h, &rs->v, vfirst)))
        return SL_ENOMEM;
    rs->buf = s->tmp.p;
    rs->avx2 = sl__have_avx2();
    if (rs->avx2)
        sl__axis_expand(&rs->h);
    return 0;
}

static inline uint8_t clip8(int32_t acc)
{
    int32_t v = acc >> SL__RS_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

#define HPASS_BODY(PS)                                                         \
    for (int xx = 0; xx < h->out; xx++) {                                      \
        const int32_t *k = h->kk + (size_t)xx * h->ksize;                      \
        const uint8_t *p = src + (size_t)h->bounds[2 * xx] * (PS);             \
        int n = h->bounds[2 * xx + 1];                                         \
        int32_t s0 = 1 << (SL__RS_BITS - 1), s1 = s0, s2 = s0;                 \
        for (int i = 0; i < n; i++) {                                          \
            s0 += p[(PS)*i] * k[i];                                            \
            s1 += p[(PS)*i + 1] * k[i];                                        \
            s2 += p[(PS)*i + 2] * k[i];                                        \
        }                                                                      \
        dst[3 * xx] = clip8(s0);                                               \
        dst[3 * xx + 1] = clip8(s1);                                           \
        dst[3 * xx + 2] = clip8(s2);                                           \
    }

static void hpass_row(const uint8_t *src, int ps, const sl__axis_t *h,
                      uint8_t *dst)
{
    if (ps == 4) {
        HPASS_BODY(4)
    } else {
        HPASS_BODY(3)
    }
}

void sl__rs_row(sl__rs_t *rs, int r, const uint8_t *src, int ps)
{
    uint8_t *dst = rs->buf + (size_t)r * rs->stride;
    if (!rs->vfirst) {
        if (ps == 3 && rs->avx2)
            sl__hpass3_avx2(src, &rs->h, dst);
        else
            hpass_row(src, ps, &rs->h, dst);
    } else if (ps == 3) {
        memcpy(dst, src, rs->stride);
    } else {
        int n = rs->h.hi - rs->h.lo;
        for (int i = 0; i < n; i++) {
            dst[3 * i] = src[4 * i];
            dst[3 * i + 1] = src[4 * i + 1];
            dst[3 * i + 2] = src[4 * i + 2];
        }
    }
}

void sl__rs_rows(sl__rs_t *rs, int r, const uint8_t *src, size_t sstride,
                 int nrows, int ps)
{
    if (!rs->vfirst && ps == 3 && rs->avx2) {
        sl__hpass3_rows_avx2(src, sstride, nrows, &rs->h,
                             rs->buf + (size_t)r * rs->stride, rs->stride);
        return;
    }
    for (int i = 0; i < nrows; i++)
        sl__rs_row(rs, r + i, src + i * sstride, ps);
}

/* One output row of the vertical pass over w3 bytes per buf row. */
static void vpass_row(const sl__rs_t *rs, int yy, size_t w3, int32_t *acc,
                      uint8_t *dst)
{
    const int32_t *k = rs->v.kk + (size_t)yy * rs->v.ksize;
    int first = rs->v.bounds[2 * yy], n = rs->v.bounds[2 * yy + 1];
    if (rs->avx2) {
        sl__vpass_avx2(rs->buf, rs->stride, k, first, n, w3, dst);
        return;
    }
    for (size_t j = 0; j < w3; j++)
        acc[j] = 1 << (SL__RS_BITS - 1);
    for (int i = 0; i < n; i++) {
        const uint8_t *r = rs->buf + (size_t)(first + i) * rs->stride;
        int32_t ki = k[i];
        for (size_t j = 0; j < w3; j++)
            acc[j] += r[j] * ki;
    }
    for (size_t j = 0; j < w3; j++)
        dst[j] = clip8(acc[j]);
}

int sl__rs_finish(sl__scratch_t *s, sl__rs_t *rs, const sl__xform_t *x,
                  int flip, void *out)
{
    size_t w3 = rs->stride, o3 = (size_t)rs->h.out * 3;
    size_t ms = w3 + SL__SLACK, os = o3 + SL__SLACK;
    int nb = rs->vfirst && rs->avx2 ? SL__VF_BATCH : 1;
    if (sl__bytes_reserve(&s->line,
                          line_bytes(w3, rs->h.out, rs->vfirst, rs->avx2)))
        return SL_ENOMEM;
    int32_t *acc = (int32_t *)s->line.p;
    uint8_t *mid = s->line.p + w3 * sizeof(int32_t);
    uint8_t *row = mid + (size_t)nb * ms;
    for (int y0 = 0; y0 < rs->v.out; y0 += nb) {
        int n = rs->v.out - y0 < nb ? rs->v.out - y0 : nb;
        for (int i = 0; i < n; i++)
            vpass_row(rs, y0 + i, w3, acc, mid + (size_t)i * ms);
        if (!rs->vfirst) {
            sl__write_row(s, x, flip, y0, mid, out); /* n == 1 */
            continue;
        }
        if (rs->avx2)
            sl__hpass3_rows_avx2(mid, ms, n, &rs->h, row, os);
        else
            hpass_row(mid, 3, &rs->h, row); /* n == 1 */
        for (int i = 0; i < n; i++)
            sl__write_row(s, x, flip, y0 + i, row + (size_t)i * os, out);
    }
    return 0;
}
