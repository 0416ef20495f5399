/* ops/repack (lossy packing): the stored image has the longer side asked
 * for and the aspect kept, its PSNR is sane and falls with the quality,
 * an image that already fits and would not shrink is kept as it was, and
 * bad bytes are an error, not a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/image.h"
#include "ops/repack.h"
#include "testutil.h"

/* A smooth photo-like w x h image as a JPEG of quality q. */
static void make_jpeg(int w, int h, int q, sl__bytes_t *out)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    assert_non_null(rgb);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 255 / w);
            p[1] = (uint8_t)(y * 255 / h);
            p[2] = (uint8_t)((x * y / 7 + (x ^ y)) & 0xff);
        }
    char err[256];
    assert_int_equal(sl__jpeg_encode(rgb, w, h, q, out, err, sizeof err), 0);
    free(rgb);
}

static void test_repack_sides_psnr(void **state)
{
    (void)state;
    sl__scratch_t *s = sl__scratch_create();
    sl__bytes_t src = {0}, out = {0};
    char err[256];
    make_jpeg(300, 200, 95, &src);
    sl__repack_t r90, r30;
    assert_int_equal(
        sl__image_repack(src.p, src.n, 96, 90, s, &out, &r90, err, sizeof err),
        0);
    assert_int_equal(r90.w, 96);
    assert_int_equal(r90.h, 64);
    assert_true(r90.resized && !r90.kept);
    int w = 0, h = 0;
    assert_int_equal(sl__image_info(out.p, out.n, &w, &h, err, sizeof err), 0);
    assert_int_equal(w, 96);
    assert_int_equal(h, 64);
    assert_true(r90.psnr > 25 && r90.psnr < 60);
    assert_int_equal(
        sl__image_repack(src.p, src.n, 96, 30, s, &out, &r30, err, sizeof err),
        0);
    assert_true(r30.psnr < r90.psnr);
    assert_true(r30.psnr > 15);
    /* Portrait: the height is the longer side. */
    make_jpeg(50, 120, 90, &src);
    assert_int_equal(
        sl__image_repack(src.p, src.n, 60, 0, s, &out, &r90, err, sizeof err),
        0);
    assert_int_equal(r90.h, 60);
    assert_int_equal(r90.w, 25);
    sl__bytes_free(&src);
    sl__bytes_free(&out);
    sl__scratch_destroy(s);
}

static void test_repack_kept_and_bad(void **state)
{
    (void)state;
    sl__scratch_t *s = sl__scratch_create();
    sl__bytes_t src = {0}, out = {0};
    char err[256];
    /* Already small and at a low quality: re-encoding at 95 would grow
     * it, so it is kept, without loss. */
    make_jpeg(64, 48, 20, &src);
    sl__repack_t r;
    assert_int_equal(
        sl__image_repack(src.p, src.n, 100, 95, s, &out, &r, err, sizeof err),
        0);
    assert_true(r.kept && !r.resized);
    assert_int_equal(out.n, src.n);
    assert_memory_equal(out.p, src.p, src.n);
    assert_true(r.psnr == SL__REPACK_PSNR_LOSSLESS);
    /* Not an image; a truncated JPEG. */
    assert_int_not_equal(sl__image_repack((const uint8_t *)"hello", 5, 100, 90,
                                          s, &out, &r, err, sizeof err),
                         0);
    assert_true(err[0] != 0);
    assert_int_not_equal(
        sl__image_repack(src.p, 20, 100, 90, s, &out, &r, err, sizeof err), 0);
    sl__bytes_free(&src);
    sl__bytes_free(&out);
    sl__scratch_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repack_sides_psnr),
        cmocka_unit_test(test_repack_kept_and_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
