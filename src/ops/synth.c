/* ops/synth: synthetic photo-like JPEGs (see synth.h). Everything is a
 * function of the seed: Philox streams per class and per image (the
 * purposes below), then a cheap xorshift per pixel. */
#include "synth.h"

#include <math.h>
#include <stdlib.h>

#include "base/rng.h"
#include "ops/image.h"

#define NWAVES 4
#define NSHAPES 6
#define SYNTH_MAX_W 800
#define SYNTH_MAX_H 1334 /* 800 / 0.6 */

/* Philox purposes of the streams (fixed: they define the images). */
enum { RNG_PALETTE = 100, RNG_IMAGE = 101, RNG_SIZE = 102 };

static inline uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static inline uint8_t clamp8(float v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
}

/* Fills rgb (w x h) for image `idx` of class `cls`. tx/ty: scratch of
 * NWAVES * w and NWAVES * h floats. */
static void synth(uint8_t *rgb, int w, int h, uint64_t seed, int cls,
                  int64_t idx, float *tx, float *ty)
{
    sl__rng_t pal, r;
    sl__rng_init(&pal, seed, 1, (uint64_t)cls, RNG_PALETTE);
    sl__rng_init(&r, seed, 2, (uint64_t)idx, RNG_IMAGE);
    float base[3][3];
    for (int i = 0; i < 3; i++)
        for (int c = 0; c < 3; c++)
            base[i][c] = (float)sl__rng_uniform(&pal, 20, 235);
    /* Waves: separable products sin(fx x + px) * cos(fy y + py). */
    float amp[NWAVES][3];
    for (int k = 0; k < NWAVES; k++) {
        double fx = sl__rng_uniform(&r, 0.002, 0.06);
        double fy = sl__rng_uniform(&r, 0.002, 0.06);
        double px = sl__rng_uniform(&r, 0, 6.283),
               py = sl__rng_uniform(&r, 0, 6.283);
        for (int x = 0; x < w; x++)
            tx[k * w + x] = (float)sin(fx * x + px);
        for (int y = 0; y < h; y++)
            ty[k * h + y] = (float)cos(fy * y + py);
        for (int c = 0; c < 3; c++)
            amp[k][c] = (float)sl__rng_uniform(&r, -45, 45);
    }
    int mix = (int)sl__rng_below(&r, 3);
    uint32_t xs = sl__rng_u32(&r) | 1;
    for (int y = 0; y < h; y++) {
        float fy = (float)y / h;
        uint8_t *row = rgb + (size_t)y * w * 3;
        for (int x = 0; x < w; x++) {
            float fx = (float)x / w;
            uint32_t n = xorshift(&xs);
            for (int c = 0; c < 3; c++) {
                float v = base[mix][c] * (1 - fx) + base[(mix + 1) % 3][c] * fx;
                v = v * (1 - fy) * 0.5f + v * 0.5f +
                    base[(mix + 2) % 3][c] * fy * 0.5f;
                for (int k = 0; k < NWAVES; k++)
                    v += amp[k][c] * tx[k * w + x] * ty[k * h + y];
                v += (float)((n >> (8 * c)) & 63) * 0.6f - 18.9f; /* noise */
                row[3 * x + c] = clamp8(v);
            }
        }
    }
    /* Shapes: filled discs and rectangles in palette colours. */
    for (int s = 0; s < NSHAPES; s++) {
        int kind = (int)sl__rng_below(&r, 2);
        int cx = (int)sl__rng_below(&r, (uint64_t)w);
        int cy = (int)sl__rng_below(&r, (uint64_t)h);
        int rad = 10 + (int)sl__rng_below(&r, (uint64_t)(w / 5 + 1));
        const float *col = base[sl__rng_below(&r, 3)];
        float shade = (float)sl__rng_uniform(&r, 0.6, 1.2);
        for (int y = cy - rad; y <= cy + rad; y++) {
            if (y < 0 || y >= h)
                continue;
            for (int x = cx - rad; x <= cx + rad; x++) {
                if (x < 0 || x >= w)
                    continue;
                int dx = x - cx, dy = y - cy;
                if (kind == 0 && dx * dx + dy * dy > rad * rad)
                    continue;
                uint8_t *p = rgb + ((size_t)y * w + x) * 3;
                uint32_t n = xorshift(&xs);
                for (int c = 0; c < 3; c++)
                    p[c] = clamp8(col[c] * shade + 0.35f * (p[c] - 128) +
                                  (float)((n >> (8 * c)) & 15) - 7.5f);
            }
        }
    }
}

int sl__synth_jpeg(uint64_t seed, int cls, int64_t idx, sl__bytes_t *jpg,
                   char *err, size_t errlen)
{
    sl__rng_t r;
    sl__rng_init(&r, seed, 0, (uint64_t)idx, RNG_SIZE);
    int w = 300 + (int)sl__rng_below(&r, 501);
    double aspect = sl__rng_uniform(&r, 0.6, 1.6);
    int h = (int)lround(w / aspect);
    uint8_t *rgb = malloc((size_t)SYNTH_MAX_W * SYNTH_MAX_H * 3);
    float *tx = malloc(sizeof(float) * NWAVES * SYNTH_MAX_W);
    float *ty = malloc(sizeof(float) * NWAVES * SYNTH_MAX_H);
    int rc = SL_ENOMEM;
    if (rgb && tx && ty) {
        synth(rgb, w, h, seed, cls, idx, tx, ty);
        rc = sl__jpeg_encode(rgb, w, h, 90, jpg, err, errlen);
    } else {
        sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    free(rgb);
    free(tx);
    free(ty);
    return rc;
}
