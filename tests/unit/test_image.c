/* ops/image: crop geometry, decode + transform of images we encode here
 * (JPEG grey/RGB/CMYK, PNG RGB/RGBA/grey/palette), flip and float
 * exactness, bad inputs, and DCT-scaled vs full-scale decode on a photo. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "ops/image.h"
#include "ops/ops_internal.h"
#include "testutil.h"

/* ------------------------------------------------------------ encoders */

/* JPEG from `comps`-channel pixels in colour space cs. */
static sl__bytes_t enc_jpeg(const uint8_t *px, int w, int h, int comps,
                            J_COLOR_SPACE cs, int quality, int progressive,
                            int h_samp)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long len = 0;
    jpeg_mem_dest(&c, &buf, &len);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = cs;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    if (comps == 3 && h_samp) {
        c.comp_info[0].h_samp_factor = h_samp;
        c.comp_info[0].v_samp_factor = h_samp;
    }
    if (progressive)
        jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * w * comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    sl__bytes_t b = {buf, len, len};
    return b;
}

static sl__bytes_t enc_png(const uint8_t *px, int w, int h, uint32_t format,
                           const uint8_t *cmap, int ncolors)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = format;
    img.colormap_entries = (png_uint_32)ncolors;
    png_alloc_size_t n = 0;
    assert_true(png_image_write_get_memory_size(img, n, 0, px, 0, cmap));
    uint8_t *buf = malloc(n);
    assert_true(png_image_write_to_memory(&img, buf, &n, 0, px, 0, cmap));
    sl__bytes_t b = {buf, n, n};
    return b;
}

static uint8_t *flat(int w, int h, int comps, const uint8_t *v)
{
    uint8_t *p = malloc((size_t)w * h * comps);
    for (int i = 0; i < w * h; i++)
        memcpy(p + (size_t)i * comps, v, (size_t)comps);
    return p;
}

/* ------------------------------------------------------------- helpers */

static sl__xform_t box_xf(int out_w, int out_h)
{
    sl__xform_t x;
    memset(&x, 0, sizeof x);
    x.mode = SL_XF_BOX;
    x.out_w = out_w;
    x.out_h = out_h;
    x.dtype = SL_DTYPE_UINT8;
    x.layout = SL_LAYOUT_HWC;
    const float m[3] = {0.485f, 0.456f, 0.406f},
                s[3] = {0.229f, 0.224f, 0.225f};
    memcpy(x.mean, m, sizeof m);
    memcpy(x.std, s, sizeof s);
    return x;
}

static int process(const sl__bytes_t *b, const sl__xform_t *x, void *out,
                   char *err)
{
    static sl__scratch_t *s;
    if (!s)
        s = sl__scratch_create();
    return sl__image_process(b->p, b->n, x, NULL, NULL, s, out, err, 256);
}

static void expect_flat(const uint8_t *o, int n, const uint8_t *rgb, int tol)
{
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) {
            int d = abs((int)o[3 * i + c] - rgb[c]);
            if (d > tol) {
                fail_msg("pixel %d channel %d: %d, want %d (+-%d)", i, c,
                         o[3 * i + c], rgb[c], tol);
            }
        }
}

/* ------------------------------------------------------------ geometry */

static void test_rrc_properties(void **state)
{
    (void)state;
    const double scale[2] = {0.08, 1.0}, ratio[2] = {3.0 / 4, 4.0 / 3};
    const int sizes[][2] = {{500, 375}, {375, 500}, {224, 224}, {1, 1},
                            {3000, 40}, {17, 900},  {640, 480}};
    int fallbacks = 0, draws = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int W = sizes[s][0], H = sizes[s][1];
        for (int i = 0; i < 3000; i++, draws++) {
            sl__rng_t r;
            sl__rng_init(&r, 7, s, (uint64_t)i, SL_RNG_CROP);
            sl__crop_t c = sl__rrc_sample(&r, W, H, scale, ratio);
            assert_true(c.w >= 1 && c.h >= 1 && c.x >= 0 && c.y >= 0);
            assert_true(c.x + c.w <= W && c.y + c.h <= H);
            double area = (double)c.w * c.h / ((double)W * H);
            /* Rounding w and h moves area and aspect a little. */
            double tol_a = (c.w + c.h + 1.0) / ((double)W * H);
            double ar_lo = (c.w - 0.5) / (c.h + 0.5);
            double ar_hi = (c.w + 0.5) / (c.h - 0.5 > 0 ? c.h - 0.5 : 0.5);
            int ok = area >= 0.08 - tol_a && area <= 1.0 + tol_a &&
                     ar_hi >= 0.75 && ar_lo <= 4.0 / 3;
            if (!ok || (c.x == (W - c.w) / 2 && c.y == (H - c.h) / 2 &&
                        (c.w == W || c.h == H))) {
                /* Must be the central fallback. */
                double in = (double)W / H;
                int fw = W, fh = H;
                if (in < 0.75)
                    fh = (int)rint(W / 0.75);
                else if (in > 4.0 / 3)
                    fw = (int)rint(H * 4.0 / 3);
                if (!ok) {
                    assert_int_equal(c.w, fw);
                    assert_int_equal(c.h, fh);
                    fallbacks++;
                }
                assert_int_equal(c.x, (W - c.w) / 2);
                assert_int_equal(c.y, (H - c.h) / 2);
            }
        }
    }
    /* 3000x40 and 17x900 can never fit: all their draws fall back. */
    assert_true(fallbacks >= 6000);
    (void)draws;
    /* Extreme aspect: exactly torchvision's central crop. */
    sl__rng_t r;
    sl__rng_init(&r, 1, 0, 0, SL_RNG_CROP);
    sl__crop_t c = sl__rrc_sample(&r, 1000, 10, scale, ratio);
    assert_int_equal(c.h, 10);
    assert_int_equal(c.w, 13);
    assert_int_equal(c.x, 493);
    assert_int_equal(c.y, 0);
}

static void test_rrc_distribution(void **state)
{
    (void)state;
    /* On a big square image torchvision's get_params gives a mean area
     * fraction of 0.478 (5000 draws; below the 0.54 of U(0.08, 1) because
     * large areas with extreme aspects do not fit and are redrawn) and a
     * centred log-aspect. */
    const double scale[2] = {0.08, 1.0}, ratio[2] = {3.0 / 4, 4.0 / 3};
    double sa = 0, sl = 0;
    int n = 20000;
    for (int i = 0; i < n; i++) {
        sl__rng_t r;
        sl__rng_init(&r, 3, 0, (uint64_t)i, SL_RNG_CROP);
        sl__crop_t c = sl__rrc_sample(&r, 2000, 2000, scale, ratio);
        sa += c.w * (double)c.h / 4e6;
        sl += log((double)c.w / c.h);
    }
    printf("mean area %.4f, mean log aspect %.4f\n", sa / n, sl / n);
    assert_true(fabs(sa / n - 0.478) < 0.015);
    assert_true(fabs(sl / n) < 0.01);
}

static void test_center_box(void **state)
{
    (void)state;
    /* Resize(256) of 500x375 -> 341x256; CenterCrop(224): left
     * round(58.5) = 58 (half to even), top 16; back in source pixels. */
    sl__crop_t c = sl__center_box(500, 375, 256, 224);
    assert_int_equal(c.x, 85);
    assert_int_equal(c.y, 23);
    assert_int_equal(c.w, 328);
    assert_int_equal(c.h, 329);
    c = sl__center_box(256, 256, 256, 224);
    assert_int_equal(c.x, 16);
    assert_int_equal(c.w, 224);
}

/* -------------------------------------------------------------- decode */

static void test_flat_png_exact_and_jpeg_close(void **state)
{
    (void)state;
    const uint8_t col[3] = {200, 100, 50};
    uint8_t *px = flat(97, 61, 3, col);
    sl__bytes_t png = enc_png(px, 97, 61, PNG_FORMAT_RGB, NULL, 0);
    sl__bytes_t jpg = enc_jpeg(px, 97, 61, 3, JCS_RGB, 95, 0, 0);
    uint8_t out[40 * 30 * 3];
    char err[256];
    sl__xform_t x = box_xf(40, 30);
    assert_int_equal(process(&png, &x, out, err), 0);
    expect_flat(out, 40 * 30, col, 0);
    x.box = (sl__crop_t){5, 7, 50, 40};
    x.out_w = 30; /* upscale one axis, downscale the other */
    assert_int_equal(process(&png, &x, out, err), 0);
    expect_flat(out, 30 * 30, col, 0);
    for (int dct = 0; dct < 2; dct++) {
        x = box_xf(12, 8);
        x.dct_scale = dct;
        assert_int_equal(process(&jpg, &x, out, err), 0);
        expect_flat(out, 12 * 8, col, 2);
    }
    free(px);
    free(png.p);
    free(jpg.p);
}

static void test_gradient(void **state)
{
    (void)state;
    int w = 256, h = 32;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)x;
            p[1] = (uint8_t)(255 - x);
            p[2] = (uint8_t)(y * 8);
        }
    sl__bytes_t png = enc_png(px, w, h, PNG_FORMAT_RGB, NULL, 0);
    uint8_t out[64 * 16 * 3];
    char err[256];
    sl__xform_t x = box_xf(64, 16);
    assert_int_equal(process(&png, &x, out, err), 0);
    for (int y = 0; y < 16; y++)
        for (int i = 0; i < 64; i++) {
            const uint8_t *p = out + ((size_t)y * 64 + i) * 3;
            /* centre of output pixel i is source x = 4i + 1.5 */
            assert_true(fabs(p[0] - (4 * i + 1.5)) <= 1);
            assert_true(fabs(p[1] - (255 - 4 * i - 1.5)) <= 1);
            if (i)
                assert_true(p[0] >= p[-3]);
        }
    /* A crop keeps only its columns: the left edge starts at 128. */
    x.box = (sl__crop_t){128, 0, 128, 32};
    assert_int_equal(process(&png, &x, out, err), 0);
    assert_true(abs(out[0] - 129) <= 1);
    free(px);
    free(png.p);
}

static void test_flip_and_float(void **state)
{
    (void)state;
    int w = 120, h = 90;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++)
        px[i] = (uint8_t)((i * 2654435761u) >> 24);
    sl__bytes_t jpg = enc_jpeg(px, w, h, 3, JCS_RGB, 90, 0, 0);
    enum { OW = 33, OH = 21, N = OW * OH * 3 };
    uint8_t a[N], b[N], chw[N];
    float f[N], fchw[N];
    char err[256];
    sl__xform_t x = box_xf(OW, OH);
    x.box = (sl__crop_t){10, 5, 77, 60};
    assert_int_equal(process(&jpg, &x, a, err), 0);
    x.flip = 1;
    assert_int_equal(process(&jpg, &x, b, err), 0);
    for (int y = 0; y < OH; y++)
        for (int i = 0; i < OW; i++)
            for (int c = 0; c < 3; c++)
                assert_int_equal(a[(y * OW + i) * 3 + c],
                                 b[(y * OW + OW - 1 - i) * 3 + c]);
    x.layout = SL_LAYOUT_CHW;
    assert_int_equal(process(&jpg, &x, chw, err), 0);
    x.dtype = SL_DTYPE_FLOAT32;
    assert_int_equal(process(&jpg, &x, fchw, err), 0);
    x.layout = SL_LAYOUT_HWC;
    assert_int_equal(process(&jpg, &x, f, err), 0);
    for (int y = 0; y < OH; y++)
        for (int i = 0; i < OW; i++)
            for (int c = 0; c < 3; c++) {
                uint8_t v = b[(y * OW + i) * 3 + c];
                float want = ((float)v / 255.0f - x.mean[c]) / x.std[c];
                assert_int_equal(chw[(c * OH + y) * OW + i], v);
                assert_true(f[(y * OW + i) * 3 + c] == want);
                assert_true(fchw[(c * OH + y) * OW + i] == want);
            }
    free(px);
    free(jpg.p);
}

static void test_grey_and_cmyk_jpeg(void **state)
{
    (void)state;
    int w = 64, h = 48;
    uint8_t *g = malloc((size_t)w * h);
    for (int i = 0; i < w * h; i++)
        g[i] = (uint8_t)(i * 7);
    sl__bytes_t gj = enc_jpeg(g, w, h, 1, JCS_GRAYSCALE, 90, 0, 0);
    uint8_t out[32 * 24 * 3];
    char err[256];
    sl__xform_t x = box_xf(32, 24);
    assert_int_equal(process(&gj, &x, out, err), 0);
    for (int i = 0; i < 32 * 24; i++) {
        assert_int_equal(out[3 * i], out[3 * i + 1]);
        assert_int_equal(out[3 * i], out[3 * i + 2]);
    }
    /* libjpeg writes an Adobe marker for CMYK, so values are read as
     * inverted (Photoshop): C=255,M=0,Y=0,K=255 stored is pure red. */
    const uint8_t cmyk[4] = {255, 0, 0, 255}, red[3] = {255, 0, 0};
    uint8_t *c = flat(w, h, 4, cmyk);
    sl__bytes_t cj = enc_jpeg(c, w, h, 4, JCS_CMYK, 95, 0, 0);
    for (int dct = 0; dct < 2; dct++) {
        x.dct_scale = dct;
        assert_int_equal(process(&cj, &x, out, err), 0);
        expect_flat(out, 32 * 24, red, 3);
    }
    int iw, ih;
    assert_int_equal(sl__image_info(cj.p, cj.n, &iw, &ih, err, 256), 0);
    assert_int_equal(iw, w);
    assert_int_equal(ih, h);
    free(g);
    free(c);
    free(gj.p);
    free(cj.p);
}

static void test_png_formats(void **state)
{
    (void)state;
    int w = 37, h = 23;
    char err[256];
    uint8_t out[16 * 16 * 3];
    sl__xform_t x = box_xf(16, 16);
    const uint8_t rgba[4] = {10, 200, 30, 0}; /* fully transparent */
    uint8_t *p = flat(w, h, 4, rgba);
    sl__bytes_t b = enc_png(p, w, h, PNG_FORMAT_RGBA, NULL, 0);
    assert_int_equal(process(&b, &x, out, err), 0);
    expect_flat(out, 256, rgba, 0); /* alpha dropped, colour kept */
    free(p);
    free(b.p);
    const uint8_t grey[1] = {77}, grey3[3] = {77, 77, 77};
    p = flat(w, h, 1, grey);
    b = enc_png(p, w, h, PNG_FORMAT_GRAY, NULL, 0);
    assert_int_equal(process(&b, &x, out, err), 0);
    expect_flat(out, 256, grey3, 0);
    free(b.p);
    /* Palette: index 0 everywhere. */
    const uint8_t cmap[6] = {1, 2, 3, 250, 240, 230}, want[3] = {1, 2, 3};
    memset(p, 0, (size_t)w * h);
    b = enc_png(p, w, h, PNG_FORMAT_RGB_COLORMAP, cmap, 2);
    assert_int_equal(process(&b, &x, out, err), 0);
    expect_flat(out, 256, want, 0);
    int iw, ih;
    assert_int_equal(sl_image_info(b.p, b.n, &iw, &ih), 0);
    assert_int_equal(iw, w);
    assert_int_equal(ih, h);
    free(p);
    free(b.p);
}

static void expect_error(const uint8_t *p, size_t n)
{
    static sl__scratch_t *s;
    if (!s)
        s = sl__scratch_create();
    uint8_t out[8 * 8 * 3];
    char err[256] = "";
    sl__xform_t x = box_xf(8, 8);
    for (int dct = 0; dct < 2; dct++) {
        x.dct_scale = dct;
        err[0] = 0;
        int rc = sl__image_process(p, n, &x, NULL, NULL, s, out, err, 256);
        assert_true(rc < 0);
        assert_true(strlen(err) > 0);
    }
}

static void test_bad_inputs(void **state)
{
    (void)state;
    int w = 64, h = 64;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++)
        px[i] = (uint8_t)(i * 13);
    sl__bytes_t jpg = enc_jpeg(px, w, h, 3, JCS_RGB, 90, 0, 0);
    sl__bytes_t pj = enc_jpeg(px, w, h, 3, JCS_RGB, 90, 1, 0);
    sl__bytes_t png = enc_png(px, w, h, PNG_FORMAT_RGB, NULL, 0);
    expect_error((const uint8_t *)"", 0);
    expect_error(jpg.p, 2);
    expect_error(jpg.p, jpg.n / 2);
    expect_error(pj.p, pj.n / 2);
    expect_error(png.p, png.n / 2);
    expect_error(png.p, 30);
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)((i * 2654435761u) >> 13);
    expect_error(junk, sizeof junk);
    junk[0] = 0xFF;
    junk[1] = 0xD8;
    expect_error(junk, sizeof junk);
    memcpy(junk, png.p, 8);
    expect_error(junk, sizeof junk);
    /* Giant dimensions are refused before any allocation. */
    uint8_t *big = malloc(png.n);
    memcpy(big, png.p, png.n);
    big[18] = 0x4E; /* width 0x4E40 = 20032 */
    expect_error(big, png.n);
    int iw, ih;
    assert_int_equal(sl__image_info(big, png.n, &iw, &ih, NULL, 0),
                     SL_EUNSUPPORTED);
    /* A box outside the image is SL_ERANGE. */
    sl__xform_t x = box_xf(8, 8);
    x.box = (sl__crop_t){60, 0, 10, 10};
    uint8_t out[8 * 8 * 3];
    char err[256];
    assert_int_equal(process(&jpg, &x, out, err), SL_ERANGE);
    /* Still fine afterwards (scratch survives errors). */
    x = box_xf(8, 8);
    assert_int_equal(process(&jpg, &x, out, err), 0);
    free(big);
    free(px);
    free(jpg.p);
    free(pj.p);
    free(png.p);
}

static void test_rrc_mode_deterministic(void **state)
{
    (void)state;
    int w = 200, h = 150;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++)
        px[i] = (uint8_t)(i * 31 + i / 600);
    sl__bytes_t jpg = enc_jpeg(px, w, h, 3, JCS_RGB, 85, 0, 1);
    sl__scratch_t *s = sl__scratch_create();
    sl__xform_t x = box_xf(24, 24);
    x.mode = SL_XF_RRC;
    x.scale[0] = 0.08;
    x.scale[1] = 1;
    x.ratio[0] = 0.75;
    x.ratio[1] = 4.0 / 3;
    x.flip = 1;
    x.dct_scale = 1;
    uint8_t a[24 * 24 * 3], b[24 * 24 * 3];
    char err[256];
    for (int i = 0; i < 50; i++) {
        sl__rng_t c1, f1, c2, f2;
        sl__rng_init(&c1, 9, 0, (uint64_t)i, SL_RNG_CROP);
        sl__rng_init(&f1, 9, 0, (uint64_t)i, SL_RNG_FLIP);
        c2 = c1;
        f2 = f1;
        assert_int_equal(
            sl__image_process(jpg.p, jpg.n, &x, &c1, &f1, s, a, err, 256), 0);
        assert_int_equal(
            sl__image_process(jpg.p, jpg.n, &x, &c2, &f2, s, b, err, 256), 0);
        assert_memory_equal(a, b, sizeof a);
    }
    x.mode = SL_XF_CENTER;
    x.resize_size = 27;
    assert_int_equal(
        sl__image_process(jpg.p, jpg.n, &x, NULL, NULL, s, a, err, 256), 0);
    sl__scratch_destroy(s);
    free(px);
    free(jpg.p);
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++)
        se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    if (se == 0)
        return 99;
    return 10 * log10(255.0 * 255.0 / (se / n));
}

static void test_dct_scale_psnr_on_photos(void **state)
{
    (void)state;
    char *dir = tu_shared_data("imagenet-sample");
    if (!dir) {
        printf("DCT PSNR check skipped: no shared photos\n");
        return;
    }
    const char *files[] = {"n01440764/n01440764_tench.JPEG",
                           "n01622779/n01622779_great_grey_owl.JPEG",
                           "n01667778/n01667778_terrapin.JPEG"};
    sl__scratch_t *s = sl__scratch_create();
    int checked = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        size_t n;
        uint8_t *p = tu_read_file(path, &n);
        if (!p) {
            printf("skipping %s: cannot read\n", path);
            continue;
        }
        int W, H;
        char err[256];
        assert_int_equal(sl__image_info(p, n, &W, &H, err, 256), 0);
        enum { O = 64 };
        uint8_t a[O * O * 3], b[O * O * 3];
        const sl__crop_t boxes[] = {{0, 0, 0, 0},
                                    {W / 7, H / 5, W / 2 + 3, H / 2 + 1},
                                    {W / 3, 1, W / 2 - 1, H - 3}};
        for (size_t k = 0; k < 3; k++) {
            sl__xform_t x = box_xf(O, O);
            x.box = boxes[k];
            x.dct_scale = 0;
            assert_int_equal(
                sl__image_process(p, n, &x, NULL, NULL, s, a, err, 256), 0);
            x.dct_scale = 1;
            assert_int_equal(
                sl__image_process(p, n, &x, NULL, NULL, s, b, err, 256), 0);
            double q = psnr(a, b, sizeof a);
            printf("%s box %zu: DCT-scaled vs full PSNR %.1f dB\n", files[f], k,
                   q);
            assert_true(q >= 30);
            checked++;
        }
        free(p);
    }
    sl__scratch_destroy(s);
    free(dir);
    assert_true(checked > 0);
}

static void test_public_transform(void **state)
{
    (void)state;
    const uint8_t col[3] = {0, 128, 255};
    uint8_t *px = flat(50, 40, 3, col);
    sl__bytes_t png = enc_png(px, 50, 40, PNG_FORMAT_RGB, NULL, 0);
    sl_transform_t t;
    sl_transform_init(&t);
    t.out_w = 10;
    t.out_h = 10;
    t.dtype = SL_DTYPE_FLOAT32;
    float out[300];
    char err[128];
    assert_int_equal(sl_image_transform(png.p, png.n, &t, out, err, 128), 0);
    /* all-zero mean/std: ImageNet's */
    assert_true(out[0] == (0.0f / 255.0f - 0.485f) / 0.229f);
    assert_true(out[100] == (128.0f / 255.0f - 0.456f) / 0.224f);
    assert_true(out[200] == (255.0f / 255.0f - 0.406f) / 0.225f);
    t.crop_x = 45;
    t.crop_w = 10;
    t.crop_h = 10;
    assert_int_equal(sl_image_transform(png.p, png.n, &t, out, err, 128),
                     SL_ERANGE);
    assert_true(strlen(err) > 0);
    free(px);
    free(png.p);
}

/* ------------------------------------------------------------ kernels */

static uint32_t kr_next(uint64_t *st)
{
    *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*st >> 33);
}

/* The AVX2 horizontal pass (pmaddwd on split weights, fixed group counts)
 * and CHW writer against plain scalar references, on random rows, widths,
 * boxes and scales. */
static void test_avx2_kernels_match_scalar(void **state)
{
    (void)state;
    if (!sl__have_avx2())
        skip();
    sl__scratch_t *s = sl__scratch_create();
    assert_non_null(s);
    uint64_t st = 12345;
    for (int it = 0; it < 3000; it++) {
        int W = 1 + (int)(kr_next(&st) % (it < 2000 ? 700 : 3000));
        int out = 1 + (int)(kr_next(&st) % 400);
        double x0 = (kr_next(&st) % 1000) / 1000.0 * (W - 0.5);
        double x1 = x0 + 0.5 + (kr_next(&st) % 1000) / 1000.0 * (W - x0 - 0.5);
        if (x1 > W)
            x1 = W;
        sl__fbox_t b = {x0, 0, x1, 4, (int)(kr_next(&st) & 1), W, 4, out, 2};
        sl__axis_t h, v;
        int cx0, cy0;
        if (sl__plan_axes(s, &b, 1, W, 4, out, 2, &h, &v, &cx0, &cy0))
            continue;
        /* kx lives in scratch: expand after planning, as sl__rs_begin does */
        sl__axis_expand(&h);
        int in = h.hi - h.lo;
        size_t n3 = (size_t)in * 3;
        uint8_t *src = malloc(n3 + SL__SLACK);
        uint8_t *want = malloc((size_t)out * 3 + SL__SLACK);
        uint8_t *got = malloc((size_t)out * 3 + SL__SLACK);
        assert_non_null(src);
        assert_non_null(want);
        assert_non_null(got);
        int flat = (int)(kr_next(&st) % 4); /* 0: random, else extremes */
        for (size_t i = 0; i < n3 + SL__SLACK; i++)
            src[i] = flat == 1   ? 255
                     : flat == 2 ? (uint8_t)(i % 2 ? 255 : 0)
                                 : (uint8_t)kr_next(&st);
        for (int xx = 0; xx < out; xx++) {
            const int32_t *k = h.kk + (size_t)xx * h.ksize;
            const uint8_t *p = src + (size_t)h.bounds[2 * xx] * 3;
            for (int c = 0; c < 3; c++) {
                int32_t acc = 1 << (SL__RS_BITS - 1);
                for (int i = 0; i < h.bounds[2 * xx + 1]; i++)
                    acc += p[3 * i + c] * k[i];
                acc >>= SL__RS_BITS;
                want[3 * xx + c] = (uint8_t)(acc < 0     ? 0
                                             : acc > 255 ? 255
                                                         : acc);
            }
        }
        memset(got, 0xAB, (size_t)out * 3 + SL__SLACK);
        sl__hpass3_avx2(src, &h, got);
        if (memcmp(want, got, (size_t)out * 3))
            fail_msg("hpass case %d: W %d out %d box %.3f..%.3f", it, W, out,
                     x0, x1);
        /* nothing written past the row */
        for (int i = 0; i < SL__SLACK; i++)
            assert_int_equal(got[(size_t)out * 3 + i], 0xAB);

        /* CHW writer: the row as input, both flips */
        for (int flip = 0; flip < 2; flip++) {
            uint8_t *pl = malloc((size_t)out * 6);
            assert_non_null(pl);
            sl__chw8_avx2(want, out, flip, pl, pl + out, pl + 2 * out);
            for (int j = 0; j < out; j++) {
                int sj = flip ? out - 1 - j : j;
                for (int c = 0; c < 3; c++)
                    if (pl[c * out + j] != want[3 * sj + c])
                        fail_msg("chw case %d flip %d col %d ch %d", it, flip,
                                 j, c);
            }
            free(pl);
        }
        free(src);
        free(want);
        free(got);
    }
    sl__scratch_destroy(s);
}

/* ------------------------------------------- memory admission (issue 14) */

typedef struct admit_rec {
    int64_t limit, asked;
    int calls;
} admit_rec_t;

static int admit_upto(void *ctx, int64_t bytes, char *err, size_t errlen)
{
    admit_rec_t *a = ctx;
    a->calls++;
    a->asked = bytes;
    return bytes > a->limit ? sl__fail(err, errlen, SL_ENOMEM, "over %lld",
                                       (long long)a->limit)
                            : 0;
}

static size_t scratch_held(const sl__scratch_t *s)
{
    return s->rows.cap + s->tmp.cap + s->coef.cap + s->dbl.cap + s->line.cap +
           s->full.cap;
}

/* A sample's large buffers are asked for once, from the header, before any
 * is allocated: a refused PNG or progressive JPEG leaves scratch small.
 * Before: the whole image was decoded first, with nothing to ask. */
static void test_admission_before_allocation(void **state)
{
    (void)state;
    int w = 1500, h = 1200;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        px[i] = (uint8_t)(i * 7);
    sl__bytes_t png = enc_png(px, w, h, PNG_FORMAT_RGB, NULL, 0);
    sl__bytes_t jpg = enc_jpeg(px, w, h, 3, JCS_RGB, 90, 1, 2);
    sl__xform_t x = box_xf(64, 64);
    uint8_t out[64 * 64 * 3];
    char err[256];
    sl__bytes_t *img[2] = {&png, &jpg};
    for (int k = 0; k < 2; k++) {
        sl__scratch_t *s = sl__scratch_create();
        admit_rec_t a = {1 << 20, 0, 0};
        sl__admit_t adm = {admit_upto, &a};
        sl__scratch_set_admit(s, &adm);
        assert_int_equal(sl__image_process(img[k]->p, img[k]->n, &x, NULL, NULL,
                                           s, out, err, sizeof err),
                         SL_ENOMEM);
        assert_int_equal(a.calls, 1);
        /* PNG: the decoded image (5.4 MB); JPEG: libjpeg's coefficients */
        assert_true(a.asked > (int64_t)w * h * 2);
        assert_non_null(strstr(err, "over"));
        assert_true(scratch_held(s) < ((size_t)1 << 20));
        /* Room enough: it decodes, having asked once. */
        a.limit = INT64_MAX;
        a.calls = 0;
        assert_int_equal(sl__image_process(img[k]->p, img[k]->n, &x, NULL, NULL,
                                           s, out, err, sizeof err),
                         0);
        assert_int_equal(a.calls, 1);
        sl__scratch_destroy(s);
    }
    free(png.p);
    free(jpg.p);
    free(px);
}

/* Scratch gives back what an outlier took: after a 4000 x 3000 PNG (36 MB
 * decoded) a decoder keeps at most SL__SCRATCH_KEEP. Before: up to 64 MB
 * of PNG and every resample buffer stayed for the thread's life. */
static void test_scratch_shrinks_after_outlier(void **state)
{
    (void)state;
    int w = 4000, h = 3000;
    uint8_t *px = calloc((size_t)w * h, 3);
    sl__bytes_t png = enc_png(px, w, h, PNG_FORMAT_RGB, NULL, 0);
    free(px);
    sl__xform_t x = box_xf(224, 224);
    uint8_t out[224 * 224 * 3];
    char err[256];
    sl__scratch_t *s = sl__scratch_create();
    assert_int_equal(sl__image_process(png.p, png.n, &x, NULL, NULL, s, out,
                                       err, sizeof err),
                     0);
    assert_true(scratch_held(s) <= SL__SCRATCH_KEEP);
    sl__scratch_destroy(s);
    free(png.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rrc_properties),
        cmocka_unit_test(test_rrc_distribution),
        cmocka_unit_test(test_center_box),
        cmocka_unit_test(test_flat_png_exact_and_jpeg_close),
        cmocka_unit_test(test_gradient),
        cmocka_unit_test(test_flip_and_float),
        cmocka_unit_test(test_grey_and_cmyk_jpeg),
        cmocka_unit_test(test_png_formats),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_rrc_mode_deterministic),
        cmocka_unit_test(test_dct_scale_psnr_on_photos),
        cmocka_unit_test(test_public_transform),
        cmocka_unit_test(test_avx2_kernels_match_scalar),
        cmocka_unit_test(test_admission_before_allocation),
        cmocka_unit_test(test_scratch_shrinks_after_outlier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
