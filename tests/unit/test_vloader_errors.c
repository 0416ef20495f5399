/* Volume loader (sluice/vloader.h) and bad input: a gzip case whose damage
 * shows only at its end is an error of its batch at any thread count,
 * never a hang (an idle thread's look-ahead used to take the failed case
 * back for ever while its task waited for it); a 2-D or 4-D volume is
 * named with its real dimensions (ASan: the header was read after its
 * free), a 4-D one whose 4th dimension is 1 reads as 3-D; a label value
 * that is not a class index (0..255, whole) is an error naming the file
 * and the value; under SL_ON_ERROR_SKIP a bad case is left out of its
 * batch (or of every epoch, bad at create), counted and listed, the
 * stream the same at any thread count. Runs under TSan with the
 * concurrency tests. */
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

/* A stream's batches: (epoch, index, n, cases, patches) digest each, or
 * the error's code. */
typedef struct got {
    int rc;
    int64_t epoch, index;
    int n;
    int64_t cases[2];
    uint64_t h;
} got_t;

static sl_vloader_t *open_ds(const char *ds, int threads, int on_error)
{
    sl_vloader_options_t o;
    opts(&o, threads);
    o.on_error = on_error;
    o.aug.noise_prob = 0.5;
    sl_vloader_t *l;
    char err[512];
    if (sl_vloader_create(ds, &o, &l, err, sizeof err))
        fail_msg("create: %s", err);
    return l;
}

static void take(sl_vloader_t *l, got_t *g, int n)
{
    char err[512];
    for (int i = 0; i < n; i++) {
        sl_vbatch_t *b;
        memset(&g[i], 0, sizeof g[i]);
        g[i].rc = sl_vloader_next(l, &b, err, sizeof err);
        if (g[i].rc)
            continue;
        g[i].epoch = b->epoch;
        g[i].index = b->index;
        g[i].n = b->n;
        uint64_t h = 1469598103934665603ull;
        size_t pv = (size_t)(b->dims[0] * b->dims[1] * b->dims[2]);
        for (int s = 0; s < b->n; s++) {
            g[i].cases[s] = b->cases[s];
            const uint8_t *p = (const uint8_t *)(b->image + (size_t)s * pv);
            for (size_t j = 0; j < pv * 4; j++)
                h = (h ^ p[j]) * 1099511628211ull;
            for (size_t j = 0; j < pv; j++)
                h = (h ^ b->label[(size_t)s * pv + j]) * 1099511628211ull;
        }
        g[i].h = h;
        sl_vloader_release(l, b);
    }
}

/* SL_ON_ERROR_SKIP: a case bad at create (2-D) is left out of every
 * epoch, one that fails its offline stage (a damaged gzip) out of its
 * batch, which comes with the rest; the stream is the same at 1 to 4
 * threads, every batch without the bad case is the fail-mode stream's,
 * and each skip is counted and listed as its batch is handed out. */
static void test_skip(void **state)
{
    (void)state;
    char *bi = vol_of("big.nii", 96, 96, 40, 3, 1, 4, NOVAL);
    char *bl = vol_of("bigl.nii", 96, 96, 40, 3, 1, 2, NOVAL);
    char *bad = gz(bi, "crc.nii.gz", 1);
    char *i2 = vol("img2d.nii", 2, 1, 4, NOVAL);
    char *im[5] = {img, bad, img, i2, img}, *lb[5] = {lbl, bl, lbl, lbl, lbl};
    char *ds = list("skip.txt", 5, im, lb);
    enum { N = 6 }; /* 3 epochs of 2 batches (4 cases used) */
    got_t ref[N], g[N];
    for (int threads = 1; threads <= 4; threads++) {
        sl_vloader_t *l = open_ds(ds, threads, SL_ON_ERROR_SKIP);
        assert_int_equal(sl_vloader_cases(l), 4);
        assert_int_equal(sl_vloader_batches_per_epoch(l), 2);
        take(l, threads == 1 ? ref : g, N);
        got_t *x = threads == 1 ? ref : g;
        int short_batches = 0;
        for (int i = 0; i < N; i++) {
            assert_int_equal(x[i].rc, 0);
            assert_int_equal(x[i].epoch, i / 2); /* none passed over */
            assert_int_equal(x[i].index, i % 2);
            for (int s = 0; s < x[i].n; s++)
                assert_true(x[i].cases[s] != 1 && x[i].cases[s] != 3);
            short_batches += x[i].n == 1;
            if (threads > 1)
                assert_memory_equal(&x[i], &ref[i], sizeof x[i]);
        }
        assert_int_equal(short_batches, 3); /* case 1's, once an epoch */
        sl_vloader_stats_t st = {.size = sizeof st};
        assert_int_equal(sl_vloader_stats(l, &st), 0);
        assert_int_equal(st.skipped, 1 + 3);
        assert_int_equal(sl_vloader_skipped_count(l), 4);
        const char *m0 = sl_vloader_skipped_message(l, 0);
        const char *m1 = sl_vloader_skipped_message(l, 1);
        assert_non_null(m0);
        assert_non_null(m1);
        if (strncmp(m0, "create: ", 8) || !strstr(m0, "img2d.nii"))
            fail_msg("skip 0: %s", m0);
        if (strncmp(m1, "epoch 0: case ", 14) || !strstr(m1, "crc.nii.gz"))
            fail_msg("skip 1: %s", m1);
        assert_null(sl_vloader_skipped_message(l, 4));
        sl_vloader_stats_reset(l);
        assert_int_equal(sl_vloader_skipped_count(l), 4); /* not reset */
        sl_vloader_destroy(l);
    }
    /* Fail mode: the same batches, but case 1's are errors (a list
     * without the 2-D case, which fails create there) */
    char *im2[4] = {img, bad, img, img}, *lb2[4] = {lbl, bl, lbl, lbl};
    char *ds2 = list("fail.txt", 4, im2, lb2);
    sl_vloader_t *l = open_ds(ds2, 3, SL_ON_ERROR_SKIP);
    take(l, ref, N);
    sl_vloader_destroy(l);
    l = open_ds(ds2, 2, SL_ON_ERROR_FAIL);
    take(l, g, N);
    sl_vloader_destroy(l);
    for (int i = 0; i < N; i++) {
        if (ref[i].n == 1)
            assert_int_equal(g[i].rc, SL_ECORRUPT);
        else
            assert_memory_equal(&g[i], &ref[i], sizeof g[i]);
    }
    free(ds2);
    /* every case bad: create, or next() after two epochs' worth of
     * batches passed over, is an error (not a hang) */
    char *im3[2] = {i2, i2}, *im4[2] = {bad, bad}, *lb3[2] = {lbl, bl};
    char *ds3 = list("allbad.txt", 2, im3, lb3);
    sl_vloader_options_t o;
    opts(&o, 2);
    o.on_error = SL_ON_ERROR_SKIP;
    char err[512];
    assert_int_equal(sl_vloader_create(ds3, &o, &l, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "no case could be read"));
    free(ds3);
    lb3[0] = bl;
    ds3 = list("allbad.txt", 2, im4, lb3);
    l = open_ds(ds3, 2, SL_ON_ERROR_SKIP);
    sl_vbatch_t *b;
    assert_int_equal(sl_vloader_next(l, &b, err, sizeof err), SL_ECORRUPT);
    assert_non_null(strstr(err, "every case was skipped"));
    sl_vloader_destroy(l);
    free(ds3);
    free(ds), free(bad), free(bi), free(bl), free(i2);
}

/* Options from the first published layout (through image_bf16) are
 * accepted, the fields after it at their defaults; smaller is refused. */
static void test_old_options(void **state)
{
    (void)state;
    char *im[2] = {img, img}, *lb[2] = {lbl, lbl};
    char *ds = list("old.txt", 2, im, lb);
    sl_vloader_options_t o;
    opts(&o, 1);
    /* An old caller's struct: fields through image_bf16, its sizeof
     * rounded up to the alignment, the padding holding anything. */
    size_t end = offsetof(sl_vloader_options_t, image_bf16) + sizeof(int);
    size_t al = _Alignof(sl_vloader_options_t);
    memset((char *)&o + end, 0x7f, sizeof o - end);
    o.size = (end + al - 1) / al * al;
    sl_vloader_t *l;
    char err[512];
    if (sl_vloader_create(ds, &o, &l, err, sizeof err))
        fail_msg("old options: %s", err);
    sl_vloader_destroy(l); /* (on_error 0x7f7f7f7f would be refused) */
    o.size = end;          /* the fields alone: taken too */
    if (sl_vloader_create(ds, &o, &l, err, sizeof err))
        fail_msg("old options, no padding: %s", err);
    sl_vloader_destroy(l);
    o.size = end - sizeof(int);
    assert_int_equal(sl_vloader_create(ds, &o, &l, err, sizeof err), SL_EINVAL);
    opts(&o, 1);
    o.on_error = 77; /* the current size: read, and out of range */
    assert_int_equal(sl_vloader_create(ds, &o, &l, err, sizeof err), SL_EINVAL);
    free(ds);
}

/* A bad aug.size or a batch over the most a batch holds: refused, the
 * message naming which value and why (it said "bad patch or batch size"
 * for both). */
static void test_bad_sizes_named(void **state)
{
    (void)state;
    char *im[2] = {img, img}, *lb[2] = {lbl, lbl};
    char *ds = list("sizes.txt", 2, im, lb);
    sl_vloader_options_t o;
    sl_vloader_t *l = NULL;
    char err[512] = "";
    opts(&o, 1);
    o.aug.size = 0; /* settings filled by hand, not sl_vol_aug_init */
    assert_int_equal(sl_vloader_create(ds, &o, &l, err, sizeof err), SL_EINVAL);
    assert_non_null(strstr(err, "aug.size 0, less than sl_vol_aug_t's"));
    assert_non_null(strstr(err, "sl_vol_aug_init"));
    opts(&o, 1);
    o.batch_size = 5000;
    assert_int_equal(sl_vloader_create(ds, &o, &l, err, sizeof err), SL_EINVAL);
    assert_non_null(strstr(err, "batch_size 5000: at most 4096 patches"));
    opts(&o, 1);
    o.batch_size = 4096; /* the most: taken */
    if (sl_vloader_create(ds, &o, &l, err, sizeof err))
        fail_msg("batch_size 4096: %s", err);
    sl_vloader_destroy(l);
    free(ds);
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
        cmocka_unit_test(test_skip),
        cmocka_unit_test(test_old_options),
        cmocka_unit_test(test_bad_sizes_named),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(img);
    free(lbl);
    tu_rmtree(root);
    free(root);
    return rc;
}
