/* ops/convert: the last step, one output row at a time, straight into the
 * caller's slot: horizontal flip, CHW or HWC, uint8 or float32
 * ((x / 255 - mean) / std through a per-channel 256-entry table, computed in
 * float32 exactly as ToTensor + Normalize do). */
#include <string.h>

#include "ops/ops_internal.h"

void sl__norm_lut(const float mean[3], const float std[3], float lut[3][256])
{
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            lut[c][v] = ((float)v / 255.0f - mean[c]) / std[c];
}

static void lut_prepare(sl__scratch_t *s, const sl__xform_t *x)
{
    if (s->lut_ok && !memcmp(s->lut_mean, x->mean, sizeof s->lut_mean) &&
        !memcmp(s->lut_std, x->std, sizeof s->lut_std))
        return;
    sl__norm_lut(x->mean, x->std, s->lut);
    memcpy(s->lut_mean, x->mean, sizeof s->lut_mean);
    memcpy(s->lut_std, x->std, sizeof s->lut_std);
    s->lut_ok = 1;
}

void sl__write_row(sl__scratch_t *s, const sl__xform_t *x, int flip, int y,
                   const uint8_t *rgb, void *out)
{
    int w = x->out_w;
    size_t plane = (size_t)w * x->out_h;
    /* Source pixel for output column j is rgb[src(j)]: j, or w-1-j flipped.
     * Written as two loops per case so the common ones stay simple. */
    if (x->dtype == SL_DTYPE_UINT8) {
        uint8_t *o = (uint8_t *)out;
        if (x->layout == SL_LAYOUT_HWC) {
            uint8_t *d = o + (size_t)y * w * 3;
            if (!flip) {
                memcpy(d, rgb, (size_t)w * 3);
            } else {
                for (int j = 0; j < w; j++) {
                    const uint8_t *p = rgb + 3 * (size_t)(w - 1 - j);
                    d[3 * j] = p[0];
                    d[3 * j + 1] = p[1];
                    d[3 * j + 2] = p[2];
                }
            }
        } else {
            uint8_t *d0 = o + (size_t)y * w, *d1 = d0 + plane, *d2 = d1 + plane;
            if (sl__have_avx2()) {
                sl__chw8_avx2(rgb, w, flip, d0, d1, d2);
            } else if (!flip) {
                for (int j = 0; j < w; j++) {
                    d0[j] = rgb[3 * j];
                    d1[j] = rgb[3 * j + 1];
                    d2[j] = rgb[3 * j + 2];
                }
            } else {
                for (int j = 0; j < w; j++) {
                    const uint8_t *p = rgb + 3 * (size_t)(w - 1 - j);
                    d0[j] = p[0];
                    d1[j] = p[1];
                    d2[j] = p[2];
                }
            }
        }
        return;
    }
    if (y == 0)
        lut_prepare(s, x);
    const float *l0 = s->lut[0], *l1 = s->lut[1], *l2 = s->lut[2];
    float *o = (float *)out;
    if (x->layout == SL_LAYOUT_HWC) {
        float *d = o + (size_t)y * w * 3;
        for (int j = 0; j < w; j++) {
            const uint8_t *p = rgb + 3 * (size_t)(flip ? w - 1 - j : j);
            d[3 * j] = l0[p[0]];
            d[3 * j + 1] = l1[p[1]];
            d[3 * j + 2] = l2[p[2]];
        }
    } else {
        float *d0 = o + (size_t)y * w, *d1 = d0 + plane, *d2 = d1 + plane;
        for (int j = 0; j < w; j++) {
            const uint8_t *p = rgb + 3 * (size_t)(flip ? w - 1 - j : j);
            d0[j] = l0[p[0]];
            d1[j] = l1[p[1]];
            d2[j] = l2[p[2]];
        }
    }
}
