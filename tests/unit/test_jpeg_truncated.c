/* ops/jpeg: a damaged JPEG fails the same way whatever the crop. The
 * decode stops where the crop does, so before the truncation check a file
 * cut short was delivered in the epochs whose crop ended above the cut and
 * failed in the others; a header claiming more MCUs than its data holds
 * was delivered flat. Here every crop (boxes over the whole image, RRC
 * draws, the eval centre crop, with and without DCT scaling, strict or
 * not), the size probe and the GPU stage's header walk must agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "ops/image.h"
#include "ops/ops_internal.h"
#include "testutil.h"

enum { OUT = 24 };

/* A W x H JPEG of a busy pattern (so its data is spread over the file):
 * baseline or progressive, luma sampled h_samp x h_samp. */
static sl__bytes_t enc(int w, int h, int progressive, int h_samp)
{
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                px[((size_t)y * w + x) * 3 + c] =
                    (uint8_t)(x * (c + 3) + y * (7 - c) +
                              ((x * 2654435761u + y * 40503u) >> 27));
    struct jpeg_compress_struct cj;
    struct jpeg_error_mgr e;
    cj.err = jpeg_std_error(&e);
    jpeg_create_compress(&cj);
    unsigned char *buf = NULL;
    unsigned long len = 0;
    jpeg_mem_dest(&cj, &buf, &len);
    cj.image_width = (JDIMENSION)w;
    cj.image_height = (JDIMENSION)h;
    cj.input_components = 3;
    cj.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cj);
    jpeg_set_quality(&cj, 85, TRUE);
    cj.comp_info[0].h_samp_factor = h_samp;
    cj.comp_info[0].v_samp_factor = h_samp;
    if (progressive)
        jpeg_simple_progression(&cj);
    jpeg_start_compress(&cj, TRUE);
    while (cj.next_scanline < cj.image_height) {
        JSAMPROW row = px + (size_t)cj.next_scanline * w * 3;
        jpeg_write_scanlines(&cj, &row, 1);
    }
    jpeg_finish_compress(&cj);
    jpeg_destroy_compress(&cj);
    free(px);
    return (sl__bytes_t){buf, len, len};
}

static sl__xform_t xf(int mode, int dct, int strict)
{
    sl__xform_t x;
    memset(&x, 0, sizeof x);
    x.mode = mode;
    x.out_w = x.out_h = OUT;
    x.dtype = SL_DTYPE_UINT8;
    x.layout = SL_LAYOUT_HWC;
    x.dct_scale = dct;
    x.strict = strict;
    x.scale[0] = 0.08;
    x.scale[1] = 1.0;
    x.ratio[0] = 0.75;
    x.ratio[1] = 4.0 / 3.0;
    x.flip = 1;
    x.resize_size = OUT + OUT / 7;
    const float m[3] = {0.485f, 0.456f, 0.406f},
                s[3] = {0.229f, 0.224f, 0.225f};
    memcpy(x.mean, m, sizeof m);
    memcpy(x.std, s, sizeof s);
    return x;
}

/* Each crop of p[0, n) (a W x H image) decoded by fn, which sees rc and
 * the output: 6 x 6 boxes tiling the image plus the whole image and a
 * corner; 24 RRC draws; the eval centre crop; each with and without DCT
 * scaling, strict and not. The number of decodes. */
typedef void (*crop_fn)(void *ctx, int rc, const uint8_t *out, const char *err,
                        const char *what);
static int each_crop(const uint8_t *p, size_t n, int W, int H, crop_fn fn,
                     void *ctx)
{
    static sl__scratch_t *s;
    if (!s)
        s = sl__scratch_create();
    uint8_t out[OUT * OUT * 3];
    char err[256], what[96];
    int count = 0;
    for (int v = 0; v < 4; v++) {
        int dct = v & 1, strict = v >> 1;
        sl__xform_t x = xf(SL_XF_BOX, dct, strict);
        for (int k = 0; k < 38; k++) {
            if (k < 36)
                x.box =
                    (sl__crop_t){k % 6 * W / 6, k / 6 * H / 6, W / 6, H / 6};
            else
                x.box = k == 36 ? (sl__crop_t){0, 0, W, H}
                                : (sl__crop_t){0, 0, 8, 8};
            snprintf(what, sizeof what, "box %d,%d %dx%d dct %d strict %d",
                     x.box.x, x.box.y, x.box.w, x.box.h, dct, strict);
            err[0] = 0;
            int rc = sl__image_process(p, n, &x, NULL, NULL, s, out, err,
                                       sizeof err);
            fn(ctx, rc, out, err, what);
            count++;
        }
        x = xf(SL_XF_RRC, dct, strict);
        for (uint64_t seed = 0; seed < 24; seed++) {
            sl__rng_t crop, flip;
            sl__rng_init(&crop, seed, seed % 3, 17, SL_RNG_CROP);
            sl__rng_init(&flip, seed, seed % 3, 17, SL_RNG_FLIP);
            snprintf(what, sizeof what, "RRC seed %d dct %d strict %d",
                     (int)seed, dct, strict);
            err[0] = 0;
            int rc = sl__image_process(p, n, &x, &crop, &flip, s, out, err,
                                       sizeof err);
            fn(ctx, rc, out, err, what);
            count++;
        }
        x = xf(SL_XF_CENTER, dct, strict);
        snprintf(what, sizeof what, "centre dct %d strict %d", dct, strict);
        err[0] = 0;
        int rc =
            sl__image_process(p, n, &x, NULL, NULL, s, out, err, sizeof err);
        fn(ctx, rc, out, err, what);
        count++;
    }
    return count;
}

typedef struct {
    int rc;          /* the error every crop must give */
    const char *msg; /* a part of its message */
    const char *file;
} want_t;

static void expect_rc(void *ctx, int rc, const uint8_t *out, const char *err,
                      const char *what)
{
    const want_t *w = ctx;
    (void)out;
    if (rc != w->rc || !strstr(err, w->msg))
        fail_msg("%s, %s: rc %d (%s), want %d (%s)", w->file, what, rc, err,
                 w->rc, w->msg);
}

/* p[0, n) is a truncated JPEG of a W x H image: every way of reading it
 * fails with SL_ECORRUPT naming the truncation. */
static void expect_truncated(const uint8_t *p, size_t n, int W, int H,
                             const char *file)
{
    const char *msg = "truncated JPEG";
    char err[256] = "";
    int w, h;
    assert_int_equal(sl__image_info(p, n, &w, &h, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, msg));
    /* the GPU stage's routing (sl__image_geometry) and its frame walk */
    sl__jpeg_frame_t f;
    assert_int_equal(sl__jpeg_frame(p, n, &f, err, sizeof err), SL_ECORRUPT);
    sl__xform_t x = xf(SL_XF_RRC, 1, 0);
    sl__rng_t crop, flip;
    sl__rng_init(&crop, 1, 0, 0, SL_RNG_CROP);
    sl__rng_init(&flip, 1, 0, 0, SL_RNG_FLIP);
    double box[4];
    int fl;
    assert_int_equal(
        sl__image_geometry(p, n, &x, &crop, &flip, box, &fl, err, sizeof err),
        SL_ECORRUPT);
    /* the decoded cache's full decode */
    sl__scratch_t *s = sl__scratch_create();
    sl__bytes_t full = {0};
    assert_int_equal(
        sl__image_decode_full(p, n, 0, s, &full, &w, &h, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, msg));
    sl__bytes_free(&full);
    sl__scratch_destroy(s);
    want_t want = {SL_ECORRUPT, msg, file};
    assert_true(each_crop(p, n, W, H, expect_rc, &want) > 200);
}

/* The cuts of b: at 50, 90 and 99 % and just before its EOI. */
static void expect_cuts_fail(const sl__bytes_t *b, int W, int H,
                             const char *name)
{
    assert_true(b->n > 100 && b->p[b->n - 2] == 0xFF && b->p[b->n - 1] == 0xD9);
    const int pct[] = {50, 90, 99};
    char file[128];
    for (int i = 0; i < 3; i++) {
        snprintf(file, sizeof file, "%s cut at %d%%", name, pct[i]);
        expect_truncated(b->p, b->n * pct[i] / 100, W, H, file);
    }
    snprintf(file, sizeof file, "%s without its EOI", name);
    expect_truncated(b->p, b->n - 2, W, H, file);
    snprintf(file, sizeof file, "%s without the D9 of its EOI", name);
    expect_truncated(b->p, b->n - 1, W, H, file);
}

static void test_truncated_fails_for_every_crop(void **state)
{
    (void)state;
    const struct {
        int w, h, prog, samp;
        const char *name;
    } k[] = {{320, 240, 0, 2, "baseline 4:2:0"},
             {200, 152, 0, 1, "baseline 4:4:4"},
             {256, 200, 1, 2, "progressive 4:2:0"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        sl__bytes_t b = enc(k[i].w, k[i].h, k[i].prog, k[i].samp);
        expect_cuts_fail(&b, k[i].w, k[i].h, k[i].name);
        free(b.p);
    }
}

static void photo_cuts(void *ctx, const tu_photo_t *p)
{
    (void)ctx;
    sl__bytes_t b = {(uint8_t *)p->bytes, p->n, p->n};
    expect_cuts_fail(&b, p->w, p->h, p->path);
}

/* The same on real photos (camera files, EXIF among them), when the
 * ImageNet sample is there. */
static void test_truncated_photos_fail(void **state)
{
    (void)state;
    int n = tu_photos(3, 1, photo_cuts, NULL);
    if (n < 0)
        printf("photo check skipped: no shared photos\n");
}

/* Collects each crop's output, then compares a second pass with it. */
typedef struct {
    uint8_t (*outs)[OUT * OUT * 3];
    int i, compare;
    const char *file;
} same_t;

static void record_or_compare(void *ctx, int rc, const uint8_t *out,
                              const char *err, const char *what)
{
    same_t *c = ctx;
    if (rc != 0)
        fail_msg("%s, %s: rc %d (%s)", c->file, what, rc, err);
    if (!c->compare)
        memcpy(c->outs[c->i], out, sizeof c->outs[0]);
    else if (memcmp(c->outs[c->i], out, sizeof c->outs[0]))
        fail_msg("%s, %s: pixels differ", c->file, what);
    c->i++;
}

/* b decodes, and so does a (with the same pixels for every crop). */
static void expect_same(const sl__bytes_t *b, const uint8_t *a, size_t an,
                        int W, int H, const char *file)
{
    enum { MAX = 512 };
    same_t c = {calloc(MAX, sizeof c.outs[0]), 0, 0, file};
    int count = each_crop(b->p, b->n, W, H, record_or_compare, &c);
    assert_true(count <= MAX);
    c.i = 0;
    c.compare = 1;
    each_crop(a, an, W, H, record_or_compare, &c);
    int w, h;
    char err[256];
    assert_int_equal(sl__image_info(a, an, &w, &h, err, sizeof err), 0);
    assert_int_equal(w, W);
    assert_int_equal(h, H);
    sl__jpeg_frame_t f;
    assert_int_equal(sl__jpeg_frame(a, an, &f, err, sizeof err), 0);
    assert_int_equal(f.scan_comps, 3);
    free(c.outs);
}

/* Bytes after the EOI (padding, a second image's start, junk) are not a
 * truncation: the file decodes as without them. */
static void test_bytes_after_eoi_decode_identically(void **state)
{
    (void)state;
    for (int prog = 0; prog < 2; prog++) {
        sl__bytes_t b = enc(240, 176, prog, 2);
        const uint8_t tails[][12] = {
            {0},
            {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0, 1},
            {0x12, 0xFF, 0x00, 0xFF, 0xFF, 0x34, 0xD9, 0xD9, 0xFF, 0x01, 7, 9}};
        for (size_t t = 0; t < 3; t++) {
            size_t an = b.n + sizeof tails[t] * (t + 1);
            uint8_t *a = malloc(an);
            memcpy(a, b.p, b.n);
            for (size_t k = b.n; k < an; k++)
                a[k] = tails[t][(k - b.n) % sizeof tails[t]];
            expect_same(&b, a, an, 240, 176,
                        prog ? "progressive with a tail"
                             : "baseline with a "
                               "tail");
            free(a);
        }
        free(b.p);
    }
}

/* A valid 16 x 16 JPEG whose SOF says side x side: its scan's data ends
 * (at the EOI) long before the MCUs the header promises. libjpeg warns
 * once (JWRN_HIT_MARKER) and fills zeros: it was delivered flat. */
static sl__bytes_t patched_size(int progressive, int side)
{
    sl__bytes_t b = enc(16, 16, progressive, 2);
    size_t i = 2;
    while (i + 9 < b.n &&
           !(b.p[i] == 0xFF && (b.p[i + 1] == 0xC0 || b.p[i + 1] == 0xC2)))
        i++;
    assert_true(i + 9 < b.n);
    b.p[i + 5] = b.p[i + 7] = (uint8_t)(side >> 8);
    b.p[i + 6] = b.p[i + 8] = (uint8_t)side;
    return b;
}

static void test_patched_size_fails(void **state)
{
    (void)state;
    sl__scratch_t *s = sl__scratch_create();
    for (int prog = 0; prog < 2; prog++) {
        sl__bytes_t b = patched_size(prog, 16000);
        int w, h;
        char err[256];
        /* the header is whole: the probe reads it */
        assert_int_equal(sl__image_info(b.p, b.n, &w, &h, err, sizeof err), 0);
        assert_int_equal(w, 16000);
        uint8_t out[OUT * OUT * 3];
        for (int v = 0; v < 6; v++) {
            int dct = v & 1, strict = v >> 2;
            sl__xform_t x = xf(v & 2 ? SL_XF_RRC : SL_XF_BOX, dct, strict);
            x.box = (sl__crop_t){v * 512, v * 256, 64 << v, 64 << v};
            sl__rng_t crop, flip;
            sl__rng_init(&crop, (uint64_t)v, 0, 0, SL_RNG_CROP);
            sl__rng_init(&flip, (uint64_t)v, 0, 0, SL_RNG_FLIP);
            err[0] = 0;
            int rc = sl__image_process(b.p, b.n, &x, &crop, &flip, s, out, err,
                                       sizeof err);
            if (rc != SL_ECORRUPT || !strstr(err, "premature end of data"))
                fail_msg("%s 16000x16000, case %d: rc %d (%s)",
                         prog ? "progressive" : "baseline", v, rc, err);
        }
        free(b.p);
        /* smaller, so its full decode is cheap: that fails too */
        b = patched_size(prog, 600);
        sl__bytes_t full = {0};
        assert_int_equal(
            sl__image_decode_full(b.p, b.n, 0, s, &full, &w, &h, err, 256),
            SL_ECORRUPT);
        want_t want = {SL_ECORRUPT, "premature end of data",
                       prog ? "progressive 600x600" : "baseline 600x600"};
        each_crop(b.p, b.n, 600, 600, expect_rc, &want);
        sl__bytes_free(&full);
        free(b.p);
    }
    sl__scratch_destroy(s);
}

/* b with an APP1 segment holding a whole small JPEG (an EXIF thumbnail,
 * with its own SOI ... EOI) right after its SOI, before its frame. */
static sl__bytes_t with_thumbnail(const sl__bytes_t *b)
{
    sl__bytes_t t = enc(24, 16, 0, 2);
    size_t seg = 2 + 6 + t.n; /* length field, "Exif\0\0", the JPEG */
    assert_true(seg < 65536);
    size_t n = b->n + 2 + seg;
    uint8_t *p = malloc(n), *o = p;
    memcpy(o, b->p, 2); /* SOI */
    o += 2;
    *o++ = 0xFF;
    *o++ = 0xE1;
    *o++ = (uint8_t)(seg >> 8);
    *o++ = (uint8_t)seg;
    memcpy(o, "Exif\0\0", 6);
    o += 6;
    memcpy(o, t.p, t.n);
    o += t.n;
    memcpy(o, b->p + 2, b->n - 2);
    free(t.p);
    return (sl__bytes_t){p, n, n};
}

/* The thumbnail's EOI comes before the first scan: it does not make a
 * truncated main image whole. */
static void test_exif_thumbnail_truncated_fails(void **state)
{
    (void)state;
    for (int prog = 0; prog < 2; prog++) {
        sl__bytes_t b = enc(256, 192, prog, 2);
        sl__bytes_t e = with_thumbnail(&b);
        const char *name =
            prog ? "progressive with a thumbnail" : "baseline with a thumbnail";
        /* whole, it decodes as the file without the thumbnail */
        expect_same(&b, e.p, e.n, 256, 192, name);
        expect_cuts_fail(&e, 256, 192, name);
        free(e.p);
        free(b.p);
    }
}

/* p[0, n) decodes with its warnings tolerated, and fails when strict
 * with a message holding `what`. */
static void expect_tolerated(const uint8_t *p, size_t n, const char *what)
{
    sl__scratch_t *s = sl__scratch_create();
    uint8_t out[OUT * OUT * 3];
    char err[256] = "";
    for (int dct = 0; dct < 2; dct++) {
        sl__xform_t x = xf(SL_XF_BOX, dct, 0);
        int rc =
            sl__image_process(p, n, &x, NULL, NULL, s, out, err, sizeof err);
        if (rc)
            fail_msg("%s, dct %d: rc %d (%s)", what, dct, rc, err);
        x.strict = 1;
        assert_int_equal(
            sl__image_process(p, n, &x, NULL, NULL, s, out, err, sizeof err),
            SL_ECORRUPT);
        assert_non_null(strstr(err, "(strict)"));
        assert_non_null(strstr(err, what));
    }
    sl__scratch_destroy(s);
}

/* Harmless corrupt-data warnings are still tolerated (strict refuses
 * them): junk bytes before the frame's marker (JWRN_EXTRANEOUS_DATA), and
 * a stray restart marker inside the scan, which ends a data segment early
 * (JWRN_HIT_MARKER at an RSTn, not at the scan's end). */
static void test_harmless_warnings_tolerated(void **state)
{
    (void)state;
    sl__bytes_t b = enc(96, 64, 0, 2);
    size_t i = 2;
    while (i + 1 < b.n && !(b.p[i] == 0xFF && b.p[i + 1] == 0xC0))
        i++;
    assert_true(i + 1 < b.n);
    size_t n = b.n + 5;
    uint8_t *p = malloc(n);
    memcpy(p, b.p, i);
    memcpy(p + i, "\x01\x02\x03\x04\x05", 5);
    memcpy(p + i + 5, b.p + i, b.n - i);
    expect_tolerated(p, n, "extraneous");
    free(p);
    /* 0xFF 0xD5 over a byte of the scan's data, 40 bytes in */
    for (i = 2; i + 1 < b.n && !(b.p[i] == 0xFF && b.p[i + 1] == 0xDA);)
        i++;
    size_t k = i + 2 + (size_t)(b.p[i + 2] << 8 | b.p[i + 3]) + 40;
    while (b.p[k] == 0xFF || b.p[k - 1] == 0xFF)
        k++;
    n = b.n + 1;
    p = malloc(n);
    memcpy(p, b.p, k);
    p[k] = 0xFF;
    p[k + 1] = 0xD5;
    memcpy(p + k + 2, b.p + k + 1, b.n - k - 1);
    expect_tolerated(p, n, "premature end of data segment");
    free(p);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_fails_for_every_crop),
        cmocka_unit_test(test_truncated_photos_fail),
        cmocka_unit_test(test_bytes_after_eoi_decode_identically),
        cmocka_unit_test(test_patched_size_fails),
        cmocka_unit_test(test_exif_thumbnail_truncated_fails),
        cmocka_unit_test(test_harmless_warnings_tolerated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
