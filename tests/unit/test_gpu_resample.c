/* The GPU stage's resample (gpu/resample.h) run on the CPU, element by
 * element as the CUDA kernels run it, over the plan sl__image_plan makes:
 * it must write the bytes sl__image_process_rgb writes from the same
 * decoded pixels (the CPU path without DCT scaling), for random crops with
 * flips, eval's centre crop, both pass orders, uint8 and float32, CHW and
 * HWC. This is the GPU stage's contract minus the decoder, checked on any
 * machine; tests/gpu/gpu_check.c checks the same on a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "gpu/cuda_stage.h"
#include "gpu/resample.h"
#include "ops/image.h"
#include "ops/ops_internal.h"
#include "testutil.h"

_Static_assert(SL__GPU_RS_BITS == SL__RS_BITS, "one fixed point");

/* The GPU resample of rgb (w x h) into out for x, with the draws the CPU
 * path would make from (seed, sample); 0 or the plan's error. */
static int gpu_way(const uint8_t *rgb, int w, int h, const sl__xform_t *x,
                   uint64_t seed, uint64_t sample, sl__scratch_t *s,
                   float lut[3][256], void *out)
{
    sl__rng_t c, f;
    sl__rng_init(&c, seed, 0, sample, SL_RNG_CROP);
    sl__rng_init(&f, seed, 0, sample, SL_RNG_FLIP);
    /* The geometry sl__image_geometry gives the loader for the stage. */
    double box[4];
    int flip;
    char err[256];
    sl__geom_t g;
    int rc = sl__geom_resolve(x, w, h, &c, &f, &g, err, sizeof err);
    if (rc)
        return rc;
    box[0] = g.box.x0, box[1] = g.box.y0, box[2] = g.box.x1, box[3] = g.box.y1;
    flip = g.flip;
    sl__image_plan_t ip;
    rc = sl__image_plan(x, w, h, box, flip, s, &ip, err, sizeof err);
    if (rc)
        return rc;
    size_t tmpn = (size_t)(ip.vfirst ? ip.out_h * ip.hn : ip.vn * ip.out_w) * 3;
    uint8_t *tmp = malloc(tmpn);
    assert_non_null(tmp);
    sl__gpu_plan_t p = {.src = rgb,
                        .tmp = tmp,
                        .out = out,
                        .hb = ip.hb,
                        .hkk = ip.hkk,
                        .vb = ip.vb,
                        .vkk = ip.vkk,
                        .lut = &lut[0][0]};
    sl__gpu_plan_geometry(&p, &ip, x, w);
    for (int e = 0, n = sl__gpu_pass1_count(&p); e < n; e++)
        sl__gpu_pass1(&p, e);
    for (int e = 0, n = sl__gpu_pass2_count(&p); e < n; e++)
        sl__gpu_pass2(&p, e);
    free(tmp);
    return 0;
}

static int cpu_way(const uint8_t *rgb, int w, int h, const sl__xform_t *x,
                   uint64_t seed, uint64_t sample, sl__scratch_t *s, void *out)
{
    sl__rng_t c, f;
    sl__rng_init(&c, seed, 0, sample, SL_RNG_CROP);
    sl__rng_init(&f, seed, 0, sample, SL_RNG_FLIP);
    char err[256];
    return sl__image_process_rgb(rgb, w, h, x, &c, &f, s, out, err, sizeof err);
}

static sl__xform_t xform(int mode, int out_w, int out_h, int f32, int chw)
{
    sl__xform_t x = {0};
    x.mode = mode;
    x.scale[0] = 0.08, x.scale[1] = 1;
    x.ratio[0] = 3.0 / 4, x.ratio[1] = 4.0 / 3;
    x.resize_size = out_w * 256 / 224;
    x.flip = 1;
    x.out_w = out_w, x.out_h = out_h;
    x.dtype = f32 ? SL_DTYPE_FLOAT32 : SL_DTYPE_UINT8;
    x.layout = chw ? SL_LAYOUT_CHW : SL_LAYOUT_HWC;
    const float mean[3] = {0.485f, 0.456f, 0.406f},
                std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(x.mean, mean, sizeof mean);
    memcpy(x.std, std, sizeof std);
    return x;
}

/* Compares both ways on one image for every transform variant; counts the
 * vertical-first plans seen. */
static void both_ways(const uint8_t *rgb, int w, int h, uint64_t sample,
                      const char *what, int *vfirst_seen)
{
    sl__scratch_t *s = sl__scratch_create();
    static const int sizes[][2] = {{224, 224}, {64, 200}, {160, 96}};
    for (int mode = SL_XF_RRC; mode <= SL_XF_CENTER; mode++)
        for (int si = 0; si < 3; si++)
            for (int v = 0; v < 4; v++) {
                sl__xform_t x =
                    xform(mode, sizes[si][0], sizes[si][1], v & 1, v >> 1);
                float lut[3][256];
                sl__norm_lut(x.mean, x.std, lut);
                size_t ob = (size_t)x.out_w * x.out_h * 3 * (v & 1 ? 4 : 1);
                uint8_t *a = malloc(ob), *b = malloc(ob);
                assert_non_null(a);
                assert_non_null(b);
                for (uint64_t seed = 1; seed <= 3; seed++) {
                    memset(a, 0xA5, ob);
                    memset(b, 0x5A, ob);
                    assert_int_equal(cpu_way(rgb, w, h, &x, seed, sample, s, a),
                                     0);
                    assert_int_equal(
                        gpu_way(rgb, w, h, &x, seed, sample, s, lut, b), 0);
                    if (memcmp(a, b, ob))
                        fail_msg("%s (%dx%d) mode %d out %dx%d variant %d "
                                 "seed %d: the GPU resample differs from the "
                                 "CPU path",
                                 what, w, h, mode, x.out_w, x.out_h, v,
                                 (int)seed);
                    /* Which pass order ran (the same draws again). */
                    sl__rng_t c, f;
                    sl__rng_init(&c, seed, 0, sample, SL_RNG_CROP);
                    sl__rng_init(&f, seed, 0, sample, SL_RNG_FLIP);
                    sl__geom_t g;
                    char err[64];
                    assert_int_equal(
                        sl__geom_resolve(&x, w, h, &c, &f, &g, err, sizeof err),
                        0);
                    *vfirst_seen += sl__vertical_first(&g.box);
                }
                free(a);
                free(b);
            }
    sl__scratch_destroy(s);
}

/* Synthetic images (no data needed): smooth gradients plus noise, wide,
 * tall and tiny, so both pass orders and the edge clamps are hit. */
static void test_synthetic(void **state)
{
    (void)state;
    static const int dims[][2] = {{500, 375}, {120, 900}, {900, 120},
                                  {7, 5},     {224, 224}, {1, 1}};
    int vfirst = 0;
    for (int i = 0; i < 6; i++) {
        int w = dims[i][0], h = dims[i][1];
        uint8_t *rgb = malloc((size_t)w * h * 3 + SL__IMAGE_SLACK);
        assert_non_null(rgb);
        sl__rng_t r;
        sl__rng_init(&r, 9, 0, (uint64_t)i, SL_RNG_CROP);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 3; c++)
                    rgb[((size_t)y * w + x) * 3 + c] =
                        (uint8_t)((x * 7 + y * 3 + c * 50) +
                                  (int)sl__rng_below(&r, 40));
        memset(rgb + (size_t)w * h * 3, 0, SL__IMAGE_SLACK);
        char what[64];
        snprintf(what, sizeof what, "synthetic %d", i);
        both_ways(rgb, w, h, (uint64_t)i, what, &vfirst);
        free(rgb);
    }
    assert_true(vfirst > 0); /* the tall image ran the other pass order */
}

/* The ImageNet sample's photos, decoded by libjpeg-turbo at full size:
 * one of each of 12 classes (more variety). */
static void photo_both_ways(void *ctx, const tu_photo_t *p)
{
    both_ways(p->rgb, p->w, p->h, (uint64_t)p->i, p->path, ctx);
}

static void test_photos(void **state)
{
    (void)state;
    int vfirst = 0, files = tu_photos(12, 1, photo_both_ways, &vfirst);
    if (files < 0)
        skip();
    assert_true(files > 0);
}

/* Eval's centre box is fractional and planned from x; a train box that is
 * not whole pixels is refused with a message. */
static void test_plan_errors(void **state)
{
    (void)state;
    sl__scratch_t *s = sl__scratch_create();
    sl__xform_t x = xform(SL_XF_RRC, 224, 224, 0, 1);
    sl__image_plan_t p;
    char err[128] = "";
    double half[4] = {0.5, 0, 100, 100};
    assert_int_equal(
        sl__image_plan(&x, 200, 200, half, 0, s, &p, err, sizeof err),
        SL_EINVAL);
    assert_non_null(strstr(err, "whole pixels"));
    double empty[4] = {10, 10, 10, 50};
    assert_int_equal(
        sl__image_plan(&x, 200, 200, empty, 0, s, &p, err, sizeof err),
        SL_ERANGE);
    double whole[4] = {10, 20, 110, 220};
    assert_int_equal(
        sl__image_plan(&x, 200, 200, whole, 1, s, &p, err, sizeof err),
        SL_ERANGE); /* outside the 200 x 200 image */
    double fits[4] = {10, 20, 110, 200};
    assert_int_equal(
        sl__image_plan(&x, 200, 200, fits, 1, s, &p, err, sizeof err), 0);
    assert_int_equal(p.flip, 1);
    assert_int_equal(p.out_w, 224);
    sl__scratch_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_photos),
        cmocka_unit_test(test_plan_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
