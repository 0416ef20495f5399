/* 3-D U-Net ops (sluice/volops.h): torch's nearest rule on small cases,
 * linear resampling's corners and constants, edge padding, draws as a pure
 * function of (seed, epoch, sample), and refusals of bad arguments. The
 * comparison with the reference (torch, NumPy, SciPy) is
 * tests/python/test_volops.py. */
#include <stdlib.h>
#include <string.h>

#include "ops/vol3d.h"
#include "sluice/volops.h"
#include "testutil.h"

static void test_nearest_rule(void **state)
{
    (void)state;
    /* 1x1x5 -> 1x1x3: scale 5/3 in float, floor(o * scale) = 0, 1, 3. */
    const uint8_t in[5] = {10, 11, 12, 13, 14};
    uint8_t out[10];
    int64_t di[3] = {1, 1, 5}, d3[3] = {1, 1, 3}, d10[3] = {1, 1, 10};
    assert_int_equal(sl_vol_resample_nearest(in, di, out, d3), 0);
    assert_int_equal(out[0], 10);
    assert_int_equal(out[1], 11);
    assert_int_equal(out[2], 13);
    /* Exact doubling: o >> 1. */
    assert_int_equal(sl_vol_resample_nearest(in, di, out, d10), 0);
    for (int o = 0; o < 10; o++)
        assert_int_equal(out[o], in[o >> 1]);
}

static void test_linear_corners_and_constants(void **state)
{
    (void)state;
    int64_t di[3] = {3, 4, 5}, dout[3] = {7, 2, 9};
    float in[60], out[7 * 2 * 9];
    for (int i = 0; i < 60; i++)
        in[i] = (float)(i * 3 % 17);
    assert_int_equal(sl_vol_resample_linear(in, di, out, dout), 0);
    /* Aligned corners: the eight corners are copied. */
    assert_float_equal(out[0], in[0], 1e-6);
    assert_float_equal(out[7 * 2 * 9 - 1], in[59], 1e-6);
    assert_float_equal(out[8], in[4], 1e-6);  /* (0, 0, last) */
    assert_float_equal(out[9], in[15], 1e-6); /* (0, last, 0) */
    for (int i = 0; i < 60; i++)
        in[i] = 2.5f;
    assert_int_equal(sl_vol_resample_linear(in, di, out, dout), 0);
    for (int i = 0; i < 7 * 2 * 9; i++)
        assert_float_equal(out[i], 2.5f, 1e-6);
}

static void test_pad_edge(void **state)
{
    (void)state;
    const uint8_t in[2] = {1, 2}; /* 1x1x2 */
    int64_t d[3] = {1, 1, 2}, m[3] = {1, 3, 5}, od[3];
    uint8_t out[15];
    assert_int_equal(sl_vol_pad_edge(in, d, 1, m, NULL, od), 0);
    assert_int_equal(od[0], 1);
    assert_int_equal(od[1], 3);
    assert_int_equal(od[2], 5);
    assert_int_equal(sl_vol_pad_edge(in, d, 1, m, out, od), 0);
    /* z: 3 extra -> 1 before, 2 after. */
    const uint8_t row[5] = {1, 1, 2, 2, 2};
    for (int y = 0; y < 3; y++)
        assert_memory_equal(out + 5 * y, row, 5);
    assert_int_not_equal(sl_vol_pad_edge(in, d, 0, m, out, od), 0);
}

static void test_draw_is_a_pure_function(void **state)
{
    (void)state;
    int64_t d[3] = {20, 24, 16};
    size_t n = 20 * 24 * 16;
    uint8_t *label = calloc(n, 1);
    assert_non_null(label);
    for (size_t i = 0; i < n; i++)
        label[i] = (uint8_t)((i / 97) % 5 == 1 ? 1 + (i / 1000) % 2 : 0);
    sl_vol_aug_t a;
    sl_vol_aug_init(&a);
    a.patch[0] = 8;
    a.patch[1] = 8;
    a.patch[2] = 8;
    sl_vol_draw_t x, y;
    int differ = 0;
    for (uint64_t s = 0; s < 16; s++) {
        assert_int_equal(sl_vol_draw(label, d, &a, 1, 2, s, &x, NULL, 0), 0);
        assert_int_equal(sl_vol_draw(label, d, &a, 1, 2, s, &y, NULL, 0), 0);
        assert_memory_equal(&x, &y, sizeof x);
        assert_int_equal(sl_vol_draw(label, d, &a, 1, 3, s, &y, NULL, 0), 0);
        differ += memcmp(x.lo, y.lo, sizeof x.lo) != 0;
    }
    assert_true(differ > 8); /* another epoch, other crops */
    char err[200];
    a.patch[2] = 17;
    assert_int_equal(sl_vol_draw(label, d, &a, 1, 2, 0, &x, err, sizeof err),
                     SL_EINVAL);
    assert_non_null(strstr(err, "pad it first"));
    a.size = 0;
    assert_int_equal(sl_vol_draw(label, d, &a, 1, 2, 0, &x, NULL, 0),
                     SL_EINVAL);
    free(label);
}

static void test_bad_shapes(void **state)
{
    (void)state;
    int64_t bad[3] = {0, 4, 4}, huge[3] = {1 << 30, 1 << 30, 1 << 30},
            ok[3] = {4, 4, 4}, out[3];
    double sp[3] = {1, 1, 1};
    float f[64];
    assert_int_equal(sl_vol_resample_shape(bad, sp, sp, out), SL_EINVAL);
    assert_int_equal(sl_vol_resample_shape(huge, sp, sp, out), SL_EINVAL);
    assert_int_equal(sl_vol_resample_linear(f, ok, f, bad), SL_EINVAL);
    assert_int_equal(sl_vol_resample_linear(f, huge, f, ok), SL_EINVAL);
}

/* The slice-by-slice forms against the whole-volume ops, bit for bit,
 * on upsampling, downsampling, identity and one-slice shapes. */
typedef struct slices {
    const void *in;
    void *out;
    size_t in_slice, out_slice; /* bytes */
    int64_t next_pull, next_push;
    int bad;
} slices_t;

static int pull_slice(void *ctx, int64_t i, void *slice)
{
    slices_t *s = ctx;
    s->bad |= i != s->next_pull++;
    memcpy(slice, (const char *)s->in + (size_t)i * s->in_slice, s->in_slice);
    return 0;
}

static int push_slice(void *ctx, int64_t o, void *slice)
{
    slices_t *s = ctx;
    s->bad |= o != s->next_push++;
    memcpy((char *)s->out + (size_t)o * s->out_slice, slice, s->out_slice);
    memset(slice, 0xa5, s->out_slice); /* push may change its slice */
    return 0;
}

static void test_slices_equal_whole(void **state)
{
    (void)state;
    const int64_t cases[][2][3] = {
        {{7, 9, 11}, {13, 5, 22}}, {{12, 10, 8}, {5, 21, 8}},
        {{6, 6, 6}, {6, 6, 6}},    {{1, 4, 5}, {3, 4, 2}},
        {{9, 3, 4}, {1, 3, 4}},    {{5, 7, 3}, {10, 14, 6}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t *di = cases[c][0], *dout = cases[c][1];
        size_t ni = (size_t)(di[0] * di[1] * di[2]);
        size_t no = (size_t)(dout[0] * dout[1] * dout[2]);
        float *in = malloc(ni * 4), *a = malloc(no * 4), *b = malloc(no * 4);
        uint8_t *li = malloc(ni), *la = malloc(no), *lb = malloc(no);
        for (size_t i = 0; i < ni; i++) {
            in[i] = (float)((i * 7919) % 1013) * 0.37f - 90.0f;
            li[i] = (uint8_t)((i * 31) % 5);
        }
        assert_int_equal(sl_vol_resample_linear(in, di, a, dout), 0);
        slices_t s = {in,
                      b,
                      (size_t)(di[1] * di[2]) * 4,
                      (size_t)(dout[1] * dout[2]) * 4,
                      0,
                      0,
                      0};
        assert_int_equal(
            sl_vol_resample_linear_slices(di, dout, pull_slice, push_slice, &s),
            0);
        assert_int_equal(s.bad, 0);
        assert_int_equal(s.next_pull, di[0]); /* read through */
        assert_int_equal(s.next_push, dout[0]);
        assert_memory_equal(a, b, no * 4);
        assert_int_equal(sl_vol_resample_nearest(li, di, la, dout), 0);
        s = (slices_t){
            li, lb, (size_t)(di[1] * di[2]), (size_t)(dout[1] * dout[2]), 0,
            0,  0};
        assert_int_equal(sl_vol_resample_nearest_slices(di, dout, pull_slice,
                                                        push_slice, &s),
                         0);
        assert_int_equal(s.bad, 0);
        assert_int_equal(s.next_pull, di[0]);
        assert_int_equal(s.next_push, dout[0]);
        assert_memory_equal(la, lb, no);
        free(in), free(a), free(b), free(li), free(la), free(lb);
    }
}

static int pull_fail(void *ctx, int64_t i, void *slice)
{
    (void)ctx, (void)slice;
    return i == 2 ? SL_ECORRUPT : 0;
}

static int push_none(void *ctx, int64_t o, void *slice)
{
    (void)ctx, (void)o, (void)slice;
    return 0;
}

static void test_slices_stop_on_error(void **state)
{
    (void)state;
    int64_t di[3] = {5, 3, 3}, dout[3] = {9, 2, 2};
    assert_int_equal(
        sl_vol_resample_linear_slices(di, dout, pull_fail, push_none, NULL),
        SL_ECORRUPT);
    assert_int_equal(
        sl_vol_resample_nearest_slices(di, dout, pull_fail, push_none, NULL),
        SL_ECORRUPT);
}

/* bfloat16: round to nearest, ties to even; infinities kept; NaN quiet. */
static void test_bf16(void **state)
{
    (void)state;
    const uint32_t in[] = {0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f808001u,
                           0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u,
                           0x7f7fffffu, 0x00000001u, 0x80000000u};
    const uint16_t want[] = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0x7f80, 0xff80,
                             0x7fc0, 0x7fc0, 0x7f80, 0x0000, 0x8000};
    float f[11];
    uint16_t out[11];
    memcpy(f, in, sizeof f);
    sl_vol_to_bf16(f, out, 11);
    for (int i = 0; i < 11; i++)
        assert_int_equal(out[i], want[i]);
}

/* The flood fill's worst cases: a solid volume (one component as large as
 * the volume: an unbounded stack would grow to most of it), a 3-D
 * checkerboard (every voxel its own component), a serpentine (one
 * component a voxel thick, as long as it gets) and noise of two classes.
 * With the stack capped far below them the summary is the uncapped one's,
 * and the stack never passes its cap. */
static void test_foreground_bounded_stack(void **state)
{
    (void)state;
    const int64_t d[3] = {24, 30, 36};
    size_t n = (size_t)(d[0] * d[1] * d[2]);
    uint8_t *lb = malloc(n);
    assert_non_null(lb);
    uint32_t x = 7;
    for (int kind = 0; kind < 4; kind++) {
        for (size_t i = 0; i < n; i++) {
            size_t z = i / (size_t)(d[1] * d[2]),
                   y = i / (size_t)d[2] % (size_t)d[1], w = i % (size_t)d[2];
            x = x * 1103515245u + 12345u;
            lb[i] = kind == 0   ? 1
                    : kind == 1 ? (uint8_t)((z + y + w) % 2)
                    : kind == 2 /* rows joined at alternate ends */
                        ? (uint8_t)(y % 2 == 0 ||
                                    w == (y / 2 % 2 ? 0 : (size_t)d[2] - 1))
                        : (uint8_t)(x >> 16) % 3;
        }
        sl_vol_fg_t ref, fg;
        size_t deep, depth;
        char err[256];
        assert_int_equal(
            sl__vol_foreground_capped(lb, d, &ref, n, &deep, err, sizeof err),
            0);
        if (kind == 0) {
            assert_int_equal(ref.ncomp[0], 1);
            assert_true(deep > n / 4); /* what a bounded stack avoids */
        }
        if (kind == 1)
            assert_int_equal(ref.ncomp[0], (int64_t)(n / 2));
        const size_t caps[3] = {1, 5, 64};
        for (int c = 0; c < 3; c++) {
            assert_int_equal(sl__vol_foreground_capped(lb, d, &fg, caps[c],
                                                       &depth, err, sizeof err),
                             0);
            assert_true(depth <= caps[c]);
            assert_memory_equal(&fg, &ref, sizeof fg);
        }
        size_t keep = sl__vol_fill_cap; /* the public call, capped */
        sl__vol_fill_cap = 3;
        assert_int_equal(sl_vol_foreground(lb, d, &fg, err, sizeof err), 0);
        sl__vol_fill_cap = keep;
        assert_memory_equal(&fg, &ref, sizeof fg);
    }
    free(lb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_rule),
        cmocka_unit_test(test_linear_corners_and_constants),
        cmocka_unit_test(test_pad_edge),
        cmocka_unit_test(test_draw_is_a_pure_function),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_slices_equal_whole),
        cmocka_unit_test(test_slices_stop_on_error),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_foreground_bounded_stack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
