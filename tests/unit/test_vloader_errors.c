/* Volume loader (sluice/vloader.h) and bad input: a gzip case whose damage
 * shows only at its end is an error of its batch at any thread count,
 * never a hang (an idle thread's look-ahead used to take the failed case
 * back for ever while its task waited for it); a 2-D or 4-D volume is
 * named with its real dimensions (ASan: the header was read after its
 * free), a 4-D one whose 4th dimension is 1 reads as 3-D; a label value
 * that is not a class index (0..255, whole) is an error naming the file
 * and the value. Runs under TSan with the concurrency tests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "sluice/version.h"
#include "sluice/vloader.h"
#include "testutil.h"

static char *root;

#define NOVAL (-1e30) /* write_nii's value: none */

/* A NIfTI-1 .nii of dims d[0..3] (x, y, z, t; ndim of them used), NIfTI
 * datatype dt (2: uint8, 4: int16, 16: float32, 512: uint16), voxel size
 * 1.5 x 1.3 x 2 mm. Values: an int16 image's a hash of the index; a
 * label's (the others) a box of class 1, and `value` at voxel 0 (but
 * NOVAL). */
static void write_nii(const char *path, int ndim, const int d[4], int dt,
                      double value, uint32_t seed)
{
    int es = dt == 2 ? 1 : dt == 16 ? 4 : 2;
    size_t n = (size_t)d[0] * (size_t)d[1] * (size_t)d[2] * (size_t)d[3];
    uint8_t *b = calloc(1, 352 + n * (size_t)es);
    assert_non_null(b);
    int32_t i32 = 348;
    memcpy(b, &i32, 4);
    int16_t h[8] = {(int16_t)ndim,
                    (int16_t)d[0],
                    (int16_t)d[1],
                    (int16_t)d[2],
                    (int16_t)d[3],
                    1,
                    1,
                    1};
    memcpy(b + 40, h, sizeof h);
    int16_t t[2] = {(int16_t)dt, (int16_t)(8 * es)};
    memcpy(b + 70, t, sizeof t);
    float pix[5] = {1, 1.5f, 1.3f, 2.0f, 1};
    memcpy(b + 76, pix, sizeof pix);
    float off = 352;
    memcpy(b + 108, &off, 4);
    memcpy(b + 344, "n+1", 4);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        size_t xx = i % (size_t)d[0], y = i / (size_t)d[0] % (size_t)d[1];
        double v = dt == 4 ? (double)((x >> 16) % 400) - 100
                           : (xx > 3 && xx < 9 && y > 2 && y < 7);
        if (dt != 4 && i == 0 && value != NOVAL)
            v = value;
        uint8_t *p = b + 352 + i * (size_t)es;
        if (dt == 2) {
            *p = (uint8_t)v;
        } else if (dt == 4) {
            int16_t s = (int16_t)v;
            memcpy(p, &s, 2);
        } else if (dt == 512) {
            uint16_t s = (uint16_t)v;
            memcpy(p, &s, 2);
        } else {
            float f = (float)v;
            memcpy(p, &f, 4);
        }
    }
    assert_int_equal(tu_write_file(path, b, 352 + n * (size_t)es), 0);
    free(b);
}

/* root/NAME, of nx x ny x nz (x t; image: int16; else a label). */
static char *vol_of(const char *name, int nx, int ny, int nz, int ndim, int t,
                    int dt, double value)
{
    char *p = malloc(strlen(root) + strlen(name) + 2);
    assert_non_null(p);
    sprintf(p, "%s/%s", root, name);
    const int d[4] = {nx, ny, ndim == 2 ? 1 : nz, t};
    write_nii(p, ndim, d, dt, value, 7);
    return p;
}

/* root/NAME, of 16 x 12 x 10. */
static char *vol(const char *name, int ndim, int t, int dt, double value)
{
    return vol_of(name, 16, 12, 10, ndim, t, dt, value);
}

/* root/NAME.gz: src gzip'd, with the gzip trailer's CRC-32 flipped when
 * `damage` (every byte inflates; only the end of the stream tells). */
static char *gz(const char *src, const char *name, int damage)
{
    size_t n;
    uint8_t *d = tu_read_file(src, &n);
    assert_non_null(d);
    uLongf cap = compressBound((uLong)n) + 64;
    uint8_t *o = malloc(cap);
    assert_non_null(o);
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY),
                     Z_OK);
    z.next_in = d;
    z.avail_in = (uInt)n;
    z.next_out = o;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    if (damage) {
        o[len - 8] ^= 0xff; /* the CRC-32's first bytes */
        o[len - 7] ^= 0x55;
    }
    char *p = malloc(strlen(root) + strlen(name) + 2);
    assert_non_null(p);
    sprintf(p, "%s/%s", root, name);
    assert_int_equal(tu_write_file(p, o, len), 0);
    free(o);
    free(d);
    return p;
}

/* A list file of `n` IMAGE LABEL lines; returns its path. */
static char *list(const char *name, int n, char *const *img, char *const *lbl)
{
    char *p = malloc(strlen(root) + strlen(name) + 2);
    assert_non_null(p);
    sprintf(p, "%s/%s", root, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s %s\n", img[i], lbl[i]);
    fclose(f);
    return p;
}

static void opts(sl_vloader_options_t *o, int threads)
{
    sl_vloader_options_init(o);
    o->batch_size = 2;
    o->seed = 3;
    o->threads = threads;
    o->aug.patch[0] = 8;
    o->aug.patch[1] = 8;
    o->aug.patch[2] = 6;
}

static char *img, *lbl; /* a good case's files */

/* A case whose .nii.gz inflates to the end and fails only its CRC check
 * (its header reads fine at create): each batch holding it is an error
 * naming it, the others come, at 1 to 4 threads — balanced, with idle
 * threads looking ahead — never a hang (the watchdog). */
static void test_damaged_gzip_never_hangs(void **state)
{
    (void)state;
    /* large enough that reading its header (at create) does not inflate
     * it to its end */
    char *bi = vol_of("big.nii", 96, 96, 40, 3, 1, 4, NOVAL);
    char *bl = vol_of("bigl.nii", 96, 96, 40, 3, 1, 2, NOVAL);
    char *bad = gz(bi, "crc.nii.gz", 1);
    char *im[4] = {img, bad, img, img}, *lb[4] = {lbl, bl, lbl, lbl};
    char *ds = list("crc.txt", 4, im, lb);
    tu_watchdog(60, 0, "a damaged gzip case: next() hangs");
    for (int threads = 1; threads <= 4; threads++) {
        sl_vloader_options_t o;
        opts(&o, threads);
        sl_vloader_t *l;
        char err[512];
        if (sl_vloader_create(ds, &o, &l, err, sizeof err))
            fail_msg("create: %s", err);
        int bad_batches = 0, good = 0;
        for (int i = 0; i < 8; i++) { /* 4 epochs of 2 batches */
            sl_vbatch_t *b;
            int rc = sl_vloader_next(l, &b, err, sizeof err);
            if (rc) {
                assert_int_equal(rc, SL_ECORRUPT);
                assert_non_null(strstr(err, "crc.nii.gz"));
                bad_batches++;
                continue;
            }
            for (int s = 0; s < b->n; s++)
                assert_int_not_equal(b->cases[s], 1);
            good++;
            sl_vloader_release(l, b);
        }
        assert_int_equal(bad_batches, 4); /* case 1: once an epoch */
        assert_int_equal(good, 4);
        sl_vloader_destroy(l);
    }
    tu_watchdog(240, 0, "volume loader errors");
    free(ds);
    free(bad);
    free(bi);
    free(bl);
}

static int create_fails(char *const *im, char *const *lb, const char *want,
                        const char *want2)
{
    char *ds = list("dims.txt", 2, im, lb);
    sl_vloader_options_t o;
    opts(&o, 2);
    sl_vloader_t *l = NULL;
    char err[512];
    int rc = sl_vloader_create(ds, &o, &l, err, sizeof err);
    if (!rc)
        fail_msg("create of %s: no error", want);
    if (!strstr(err, want) || !strstr(err, want2))
        fail_msg("'%s' or '%s' not in: %s", want, want2, err);
    assert_null(l);
    free(ds);
    return rc;
}

/* A volume that is not 3-D is refused at create naming the file and its
 * real dimensions (was: the count read from the freed header); a 4-D one
 * whose 4th dimension is 1 (ITK's and MONAI's exports) reads as the 3-D
 * volume it holds, patch for patch. */
static void test_dimensions(void **state)
{
    (void)state;
    char *i2 = vol("img2d.nii", 2, 1, 4, NOVAL),
         *l2 = vol("lab2d.nii", 2, 1, 2, NOVAL);
    char *i4 = vol("img4d.nii", 4, 2, 4, NOVAL),
         *i41 = vol("img41.nii", 4, 1, 4, NOVAL);
    char *l41 = vol("lab41.nii", 4, 1, 2, NOVAL);
    char *a[2] = {img, i2}, *b[2] = {lbl, lbl};
    assert_int_equal(create_fails(a, b, "img2d.nii", ": 2 dimensions"),
                     SL_EUNSUPPORTED);
    char *c[2] = {img, img}, *d[2] = {lbl, l2};
    assert_int_equal(create_fails(c, d, "lab2d.nii", ": 2 dimensions"),
                     SL_EUNSUPPORTED);
    char *e[2] = {img, i4};
    assert_int_equal(create_fails(e, b, "img4d.nii", "16 x 12 x 10 x 2"),
                     SL_EUNSUPPORTED);
    /* 4-D of one volume, image and label: the same stream as 3-D */
    uint64_t h[2];
    for (int k = 0; k < 2; k++) {
        char *im[2] = {img, k ? i41 : img}, *lb[2] = {lbl, k ? l41 : lbl};
        char *ds = list("dims.txt", 2, im, lb);
        sl_vloader_options_t o;
        opts(&o, 2);
        o.aug.noise_prob = 0.5;
        sl_vloader_t *l;
        char err[512];
        int rc = sl_vloader_create(ds, &o, &l, err, sizeof err);
        if (rc)
            fail_msg("create: %s", err);
        h[k] = 1469598103934665603ull;
        for (int i = 0; i < 3; i++) {
            sl_vbatch_t *bt;
            rc = sl_vloader_next(l, &bt, err, sizeof err);
            if (rc)
                fail_msg("next: %s", err);
            size_t pv = (size_t)(bt->dims[0] * bt->dims[1] * bt->dims[2]);
            const uint8_t *p = (const uint8_t *)bt->image;
            for (size_t j = 0; j < pv * 4 * (size_t)bt->n; j++)
                h[k] = (h[k] ^ p[j]) * 1099511628211ull;
            for (size_t j = 0; j < pv * (size_t)bt->n; j++)
                h[k] = (h[k] ^ bt->label[j]) * 1099511628211ull;
            sl_vloader_release(l, bt);
        }
        sl_vloader_destroy(l);
        free(ds);
    }
    assert_int_equal(h[0], h[1]);
    free(i2), free(l2), free(i4), free(i41), free(l41);
}

/* The first batch's error for a dataset of a good case and one with
 * label `lab`. */
static int label_error(char *lab, char *err, size_t errlen)
{
    char *im[2] = {img, img}, *lb[2] = {lbl, lab};
    char *ds = list("labels.txt", 2, im, lb);
    sl_vloader_options_t o;
    opts(&o, 2);
    o.batch_size = 2;
    sl_vloader_t *l;
    int rc = sl_vloader_create(ds, &o, &l, err, errlen);
    if (rc)
        fail_msg("create: %s", err);
    sl_vbatch_t *b;
    rc = sl_vloader_next(l, &b, err, errlen);
    if (!rc)
        sl_vloader_release(l, b);
    sl_vloader_destroy(l);
    free(ds);
    return rc;
}

/* A label value that is not a class index — 300 (was: 255), 0.5 (was: 1),
 * -1, NaN — is an error naming the file and the value; whole floats in
 * 0..255 are labels. */
static void test_label_values(void **state)
{
    (void)state;
    char err[512];
    static const struct {
        int dt;
        double v;
        const char *want;
    } bad[] = {{512, 300, "value 300"},
               {16, 0.5, "value 0.5"},
               {16, -1, "value -1"},
               {16, NAN, "value nan"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *p = vol("badlab.nii", 3, 1, bad[i].dt, bad[i].v);
        int rc = label_error(p, err, sizeof err);
        if (rc != SL_ECORRUPT)
            fail_msg("label value %g: %d, %s", bad[i].v, rc, rc ? err : "");
        if (!strstr(err, "badlab.nii") || !strstr(err, bad[i].want))
            fail_msg("'%s' not in: %s", bad[i].want, err);
        free(p);
    }
    char *p = vol("oklab.nii", 3, 1, 16, 2); /* float 2.0: class 2 */
    if (label_error(p, err, sizeof err))
        fail_msg("a float label of whole values: %s", err);
    free(p);
}

int main(void)
{
    if (!SL_HAVE_NIFTI) {
        printf("SKIP: sluice built without NIfTI support\n");
        return 77;
    }
    tu_watchdog(240, 0, "volume loader errors");
    root = tu_tmpdir("vloader_err");
    img = vol("img.nii", 3, 1, 4, NOVAL);
    lbl = vol("lab.nii", 3, 1, 2, NOVAL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_damaged_gzip_never_hangs),
        cmocka_unit_test(test_dimensions),
        cmocka_unit_test(test_label_values),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(img);
    free(lbl);
    tu_rmtree(root);
    free(root);
    return rc;
}
