/* volume: NIfTI files built byte by byte (NIfTI-1 and -2, plain and gzip)
 * load with the right values, dims and affine; truncated files, lying and
 * overflowing dims, a vox_offset past the end, a gzip that cannot hold what
 * its header claims and a load over max_bytes fail with SL_ECORRUPT /
 * SL_ENOMEM and a message naming the file and the cause, before anything
 * large is allocated; the orientation math; datasets, and a pack of them
 * read by 4 threads at once (TSan: the concurrency label). The comparison with
 * nibabel is tests/python/test_volume.py. Skips (77) in a build without
 * NIfTI support. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/shard_out.h"
#include "sluice/volume.h"
#include "testutil.h"
#include "volume/orient.h"
#include "volume/vol_internal.h"
#include "volume/volrec.h"

static char *dir;

static void put16(uint8_t *p, int16_t v)
{
    memcpy(p, &v, 2);
}
static void put32(uint8_t *p, int32_t v)
{
    memcpy(p, &v, 4);
}
static void putf(uint8_t *p, float v)
{
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, int64_t v)
{
    memcpy(p, &v, 8);
}
static void putd(uint8_t *p, double v)
{
    memcpy(p, &v, 8);
}

/* A NIfTI-1 .nii: nx x ny x nz int16 values v = x + 10 y + 100 z, sform
 * diag(sx, 2, 3) + (5, 6, 7), 352-byte header. */
static uint8_t *nii1(int nx, int ny, int nz, float sx, size_t *n)
{
    size_t nb = (size_t)nx * ny * nz * 2;
    uint8_t *b = calloc(1, 352 + nb);
    put32(b, 348);
    put16(b + 40, 3), put16(b + 42, (int16_t)nx), put16(b + 44, (int16_t)ny);
    put16(b + 46, (int16_t)nz);
    put16(b + 70, 4), put16(b + 72, 16); /* DT_INT16 */
    putf(b + 76, 1), putf(b + 80, 1), putf(b + 84, 2), putf(b + 88, 3);
    putf(b + 108, 352);
    put16(b + 254, 2); /* sform_code */
    putf(b + 280, sx), putf(b + 292, 5);
    putf(b + 300, 2), putf(b + 308, 6);
    putf(b + 320, 3), putf(b + 324, 7);
    memcpy(b + 344, "n+1", 4);
    int16_t *v = (int16_t *)(b + 352);
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++)
                *v++ = (int16_t)(x + 10 * y + 100 * z);
    *n = 352 + nb;
    return b;
}

/* A NIfTI-2 .nii: 4 x 3 x 2 x 2 float32 values 0.5 * index, no xform. */
static uint8_t *nii2(size_t *n)
{
    size_t nb = 4 * 3 * 2 * 2 * 4;
    uint8_t *b = calloc(1, 544 + nb);
    put32(b, 540);
    memcpy(b + 4, "n+2\0\r\n\032\n", 8);
    put16(b + 12, 16), put16(b + 14, 32); /* DT_FLOAT32 */
    put64(b + 16, 4), put64(b + 24, 4), put64(b + 32, 3), put64(b + 40, 2);
    put64(b + 48, 2);
    for (int i = 0; i < 8; i++)
        putd(b + 104 + 8 * i, 1);
    put64(b + 168, 544);
    float *v = (float *)(b + 544);
    for (int i = 0; i < 48; i++)
        v[i] = 0.5f * (float)i;
    *n = 544 + nb;
    return b;
}

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

/* A gzip of p[0..n) in deflate stored blocks (no zlib needed here). */
static uint8_t *gzip_stored(const uint8_t *p, size_t n, size_t *out)
{
    size_t blocks = n / 65535 + 1;
    uint8_t *g = malloc(10 + n + 5 * blocks + 8), *q = g;
    static const uint8_t hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    memcpy(q, hdr, 10);
    q += 10;
    size_t off = 0;
    do {
        size_t len = n - off > 65535 ? 65535 : n - off;
        *q++ = off + len == n; /* BFINAL, stored */
        q[0] = (uint8_t)len, q[1] = (uint8_t)(len >> 8);
        q[2] = (uint8_t)~len, q[3] = (uint8_t)(~len >> 8);
        q += 4;
        memcpy(q, p + off, len);
        q += len, off += len;
    } while (off < n);
    uint32_t crc = crc32_of(p, n), isize = (uint32_t)n;
    memcpy(q, &crc, 4), memcpy(q + 4, &isize, 4);
    *out = (size_t)(q + 8 - g);
    return g;
}

static char *write_tmp(const char *name, const void *p, size_t n)
{
    char *path;
    assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
    assert_int_equal(tu_write_file(path, p, n), 0);
    return path;
}

/* Loads path expecting `code` and a message holding the file's name and
 * `want`. */
static void expect_fail(const char *path, const sl_volume_options_t *o,
                        int code, const char *want)
{
    sl_volume_t *v = (sl_volume_t *)1;
    char err[1024] = "";
    int rc = sl_volume_load(path, o, &v, err, sizeof err);
    if (rc != code || !strstr(err, path) || !strstr(err, want))
        fail_msg("%s: rc %d (want %d), message '%s' (want '%s')", path, rc,
                 code, err, want);
    assert_null(v);
}

static void test_load_nifti1(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = nii1(5, 4, 3, -1.5f, &n);
    char *p = write_tmp("a.nii", b, n);
    sl_volume_t *v = NULL;
    char err[512];
    assert_int_equal(sl_volume_load(p, NULL, &v, err, sizeof err), 0);
    assert_int_equal(v->ndim, 3);
    assert_int_equal(v->dim[0], 5), assert_int_equal(v->dim[2], 3);
    assert_int_equal(v->dim[3], 1);
    assert_int_equal(v->dtype, SL_VOLUME_FLOAT32);
    assert_int_equal(v->stored_dtype, SL_VOLUME_INT16);
    assert_int_equal(v->affine_source, SL_VOLUME_AFFINE_SFORM);
    assert_string_equal(v->axcodes, "LAS");
    assert_true(v->affine[0][0] == -1.5 && v->affine[0][3] == 5);
    const float *f = v->data;
    assert_true(f[0] == 0 && f[1] == 1 && f[5] == 10 && f[20] == 100);
    assert_true(f[59] == 4 + 30 + 200);
    sl_volume_free(v);

    /* RAS: x flipped, the affine's x column and origin with it */
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.orient = SL_VOLUME_RAS;
    assert_int_equal(sl_volume_load(p, &o, &v, err, sizeof err), 0);
    assert_string_equal(v->axcodes, "RAS");
    assert_true(v->reoriented);
    assert_true(v->affine[0][0] == 1.5 && v->affine[0][3] == 5 - 4 * 1.5);
    f = v->data;
    assert_true(f[0] == 4 && f[4] == 0 && f[5] == 14);
    sl_volume_free(v);

    /* native, scaled header: data unscaled, the scaling reported */
    putf(b + 112, 0.5f), putf(b + 116, -2);
    free(p);
    p = write_tmp("s.nii", b, n);
    o.orient = 0, o.native = 1;
    assert_int_equal(sl_volume_load(p, &o, &v, err, sizeof err), 0);
    assert_int_equal(v->dtype, SL_VOLUME_INT16);
    assert_true(v->scl_slope == 0.5 && v->scl_inter == -2);
    assert_int_equal(((int16_t *)v->data)[21], 101); /* x 1, y 0, z 1 */
    sl_volume_free(v);
    assert_int_equal(sl_volume_load(p, NULL, &v, err, sizeof err), 0);
    assert_true(((float *)v->data)[21] == 101 * 0.5f - 2);
    sl_volume_free(v);

    /* the same bytes gzipped */
    size_t gn;
    uint8_t *g = gzip_stored(b, n, &gn);
    free(p);
    p = write_tmp("s.nii.gz", g, gn);
    assert_int_equal(sl_volume_load(p, NULL, &v, err, sizeof err), 0);
    assert_true(((float *)v->data)[59] == 234 * 0.5f - 2);
    sl_volume_free(v);
    free(g), free(b), free(p);
}

static void test_load_nifti2_4d(void **state)
{
    (void)state;
    size_t n, gn;
    uint8_t *b = nii2(&n), *g = gzip_stored(b, n, &gn);
    char *p = write_tmp("b.nii.gz", g, gn);
    sl_volume_t *v = NULL;
    char err[512];
    assert_int_equal(sl_volume_load(p, NULL, &v, err, sizeof err), 0);
    assert_int_equal(v->nifti_version, 2);
    assert_int_equal(v->ndim, 4);
    assert_int_equal(v->dim[3], 2);
    assert_int_equal(v->affine_source, SL_VOLUME_AFFINE_PIXDIM);
    /* nibabel's fallback: x flipped, origin at the centre */
    assert_true(v->affine[0][0] == -1 && v->affine[0][3] == 1.5);
    assert_true(v->affine[1][3] == -1 && v->affine[2][3] == -0.5);
    assert_true(((float *)v->data)[47] == 23.5f);
    sl_volume_free(v);
    free(g), free(b), free(p);
}

static void test_truncated(void **state)
{
    (void)state;
    size_t n, gn;
    uint8_t *b = nii1(5, 4, 3, 1, &n);
    char *p = write_tmp("t.nii", b, n - 10);
    expect_fail(p, NULL, SL_ECORRUPT,
                "truncated, or a header that lies: its 5 x 4 x 3 x 1 int16 "
                "values need 120 bytes from offset 352, the file has 462");
    free(p);
    p = write_tmp("h.nii", b, 300);
    expect_fail(p, NULL, SL_ECORRUPT, "300 bytes, shorter than a header");
    free(p);
    /* gzip of the truncated bytes: found while reading */
    uint8_t *g = gzip_stored(b, n - 10, &gn);
    p = write_tmp("t.nii.gz", g, gn);
    expect_fail(p, NULL, SL_ECORRUPT, "truncated: the data ends after 110");
    free(p), free(g);
    /* a gzip stream cut short */
    g = gzip_stored(b, n, &gn);
    p = write_tmp("c.nii.gz", g, gn - 30);
    expect_fail(p, NULL, SL_ECORRUPT, "truncated gzip file");
    free(p);
    /* a damaged CRC: caught at the member's end */
    g[gn - 8] ^= 1;
    p = write_tmp("crc.nii.gz", g, gn);
    expect_fail(p, NULL, SL_ECORRUPT, "damaged gzip data");
    free(p), free(g), free(b);
}

static void test_lying_dims(void **state)
{
    (void)state;
    size_t n, gn;
    uint8_t *b = nii1(5, 4, 3, 1, &n);
    char *p;
    /* 32767^4 int16: more than the file, refused before allocating */
    put16(b + 40, 4);
    for (int i = 1; i <= 4; i++)
        put16(b + 40 + 2 * i, 32767);
    p = write_tmp("big.nii", b, n);
    expect_fail(p, NULL, SL_ECORRUPT, "a header that lies");
    free(p);
    /* the same gzipped: more than its bytes can inflate to */
    uint8_t *g = gzip_stored(b, n, &gn);
    p = write_tmp("big.nii.gz", g, gn);
    expect_fail(p, NULL, SL_ECORRUPT, "more than a gzip file of");
    free(p), free(g);
    /* negative, zero and too many dims */
    put16(b + 40, 3), put16(b + 42, 5), put16(b + 44, -4), put16(b + 46, 3);
    p = write_tmp("neg.nii", b, n);
    expect_fail(p, NULL, SL_ECORRUPT, "dim[2] = -4 (a size must be >= 1)");
    free(p);
    put16(b + 44, 4), put16(b + 40, 0);
    p = write_tmp("d0.nii", b, n);
    expect_fail(p, NULL, SL_ECORRUPT, "dim[0] = 0");
    free(p);
    put16(b + 40, 6);
    for (int i = 4; i <= 6; i++)
        put16(b + 40 + 2 * i, 1);
    p = write_tmp("d6.nii", b, n);
    expect_fail(p, NULL, SL_EUNSUPPORTED, "6 dimensions");
    free(p);
    /* vox_offset past the end, inside the header, not a number */
    put16(b + 40, 3);
    putf(b + 108, 1e6f);
    p = write_tmp("off.nii", b, n);
    expect_fail(p, NULL, SL_ECORRUPT, "from offset 1000000");
    free(p);
    putf(b + 108, 100);
    p = write_tmp("offlow.nii", b, n);
    expect_fail(p, NULL, SL_ECORRUPT, "vox_offset 100 lies inside the header");
    free(p);
    putf(b + 108, 352);
    put16(b + 70, 1024); /* int64: not supported */
    p = write_tmp("i64.nii", b, n);
    expect_fail(p, NULL, SL_EUNSUPPORTED, "datatype 1024 (INT64)");
    free(p), free(b);

    /* NIfTI-2 dims whose product overflows 64 bits */
    b = nii2(&n);
    for (int i = 1; i <= 4; i++)
        put64(b + 16 + 8 * i, INT64_C(1) << 40);
    p = write_tmp("ovf.nii", b, n);
    expect_fail(p, NULL, SL_ECORRUPT, "overflow");
    free(p);
    put64(b + 24, -7);
    p = write_tmp("neg2.nii", b, n);
    expect_fail(p, NULL, SL_ECORRUPT, "dim[1] = -7");
    free(p);
    /* 2^60 float64 voxels: the voxel count passes, the byte count (2^63)
     * would wrap negative and pass every size check after it */
    put16(b + 14, 64); /* DT_FLOAT64 */
    for (int i = 1; i <= 4; i++)
        put64(b + 16 + 8 * i, INT64_C(1) << 15);
    p = write_tmp("ovf8.nii", b, n);
    expect_fail(p, NULL, SL_ECORRUPT, "header declares");
    /* the pack path (sl__nifti_read_stored) refuses it as well */
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    sl__bytes_t out = {0};
    size_t hlen;
    int64_t dlen;
    char err[512] = "";
    assert_int_equal(sl__nifti_read_stored(fd, p, (int64_t)n, 0, &out, &hlen,
                                           &dlen, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "too large"));
    close(fd);
    /* and a buffer asked for more than can be doubled to says so */
    assert_int_equal(sl__bytes_reserve(&out, SIZE_MAX / 2 + 1), SL_ENOMEM);
    assert_int_equal(sl__bytes_reserve(&out, SIZE_MAX), SL_ENOMEM);
    sl__bytes_free(&out);
    free(p), free(b);
}

static void test_budget_and_files(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = nii1(50, 40, 30, 1, &n);
    char *p = write_tmp("m.nii", b, n);
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.max_bytes = 100000; /* the float32 output alone is 240000 */
    expect_fail(p, &o, SL_ENOMEM, "max_bytes allows 0.1 MB");
    o.max_bytes = 0, o.header_only = 1;
    sl_volume_t *v = NULL;
    char err[512];
    assert_int_equal(sl_volume_load(p, &o, &v, err, sizeof err), 0);
    assert_null(v->data);
    assert_int_equal(v->dim[0], 50);
    sl_volume_free(v);
    o.size = 0;
    assert_int_equal(sl_volume_load(p, &o, &v, err, sizeof err), SL_EINVAL);
    free(p);
    char *fifo;
    assert_true(asprintf(&fifo, "%s/fifo.nii", dir) > 0);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_fail(fifo, NULL, SL_EIO, "not a regular file");
    free(fifo);
    assert_true(asprintf(&p, "%s/none.nii", dir) > 0);
    expect_fail(p, NULL, SL_ENOTFOUND, "none.nii");
    free(p), free(b);
}

static void test_orientation(void **state)
{
    (void)state;
    /* voxel axes (i, j, k) -> world (z, -x, y): "IRP"... as nibabel:
     * i goes along +z (S), j along -x (L), k along +y (A) */
    double a[4][4] = {{0, -2, 0, 0}, {0, 0, 3, 0}, {1, 0, 0, 0}, {0, 0, 0, 1}};
    int axis[3], flip[3];
    char codes[4];
    sl__vol_io_orientation(a, axis, flip);
    assert_int_equal(axis[0], 2), assert_int_equal(flip[0], 1);
    assert_int_equal(axis[1], 0), assert_int_equal(flip[1], -1);
    assert_int_equal(axis[2], 1), assert_int_equal(flip[2], 1);
    sl__vol_axcodes(axis, flip, codes);
    assert_string_equal(codes, "SLA");
    /* a degenerate affine: the dropped axis is -1 */
    double d[4][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 1}};
    sl__vol_io_orientation(d, axis, flip);
    assert_int_equal(axis[2], -1);
    /* qform: identity quaternion, qfac -1 flips z */
    double bcd[3] = {0, 0, 0}, off[3] = {1, 2, 3}, pix[3] = {2, 3, 4}, q[4][4];
    assert_int_equal(sl__vol_qform(bcd, off, pix, -1, 1, q), 0);
    assert_true(q[0][0] == 2 && q[1][1] == 3 && q[2][2] == -4 && q[2][3] == 3);
    double big[3] = {0.9, 0.9, 0.9};
    assert_int_equal(sl__vol_qform(big, off, pix, 1, 1, q), -1);
}

/* A reader's whole volume, read `chunk` values at a time. */
static float *read_all(sl_volume_reader_t *r, int64_t chunk)
{
    const sl_volume_t *v = sl_volume_reader_volume(r);
    int64_t n = v->dim[0] * v->dim[1] * v->dim[2] * v->dim[3];
    float *f = malloc((size_t)n * sizeof *f);
    char err[512];
    for (int64_t at = 0; at < n; at += chunk) {
        int64_t k = n - at < chunk ? n - at : chunk;
        if (sl_volume_reader_read(r, f + at, k, err, sizeof err))
            fail_msg("read at %lld: %s", (long long)at, err);
    }
    assert_int_equal(sl_volume_reader_read(r, f, 1, err, sizeof err),
                     SL_EINVAL); /* nothing left */
    return f;
}

/* A reader gives sl_volume_load's values, plain and gzip, whatever the
 * piece size; a truncated file fails naming it; RAS is refused (it needs
 * the whole array). */
static void test_reader(void **state)
{
    (void)state;
    size_t n, gn;
    uint8_t *b = nii1(37, 29, 23, 1.5f, &n);
    putf(b + 112, 0.5f), putf(b + 116, -3.0f); /* scl_slope, scl_inter */
    uint8_t *g = gzip_stored(b, n, &gn);
    char *plain = write_tmp("rd.nii", b, n),
         *gz = write_tmp("rd.nii.gz", g, gn);
    char *cut = write_tmp("rd_cut.nii.gz", g, gn - 4000);
    char err[1024];
    const char *paths[2] = {plain, gz};
    for (int k = 0; k < 2; k++) {
        sl_volume_t *v = NULL;
        assert_int_equal(sl_volume_load(paths[k], NULL, &v, err, sizeof err),
                         0);
        const int64_t chunks[3] = {7, 37 * 29, 1 << 20};
        for (int c = 0; c < 3; c++) {
            sl_volume_reader_t *r = NULL;
            assert_int_equal(
                sl_volume_reader_open(paths[k], NULL, &r, err, sizeof err), 0);
            const sl_volume_t *h = sl_volume_reader_volume(r);
            assert_null(h->data);
            assert_int_equal(h->dim[0], 37);
            assert_int_equal(h->compressed, k);
            assert_memory_equal(h->affine, v->affine, sizeof v->affine);
            float *f = read_all(r, chunks[c]);
            assert_memory_equal(f, v->data, v->data_bytes);
            free(f);
            sl_volume_reader_close(r);
        }
        sl_volume_free(v);
    }
    /* Skipping: values passed over unconverted (a plain file seeks, a
     * gzip one inflates), then read, give the load's values at their
     * place, whatever mix of skips and reads; past the end is refused. */
    for (int k = 0; k < 2; k++) {
        sl_volume_t *v = NULL;
        assert_int_equal(sl_volume_load(paths[k], NULL, &v, err, sizeof err),
                         0);
        const float *want = v->data;
        const int64_t total = 37 * 29 * 23, steps[4] = {5, 37 * 29, 3000, 1};
        float *got = malloc((size_t)total * sizeof *got);
        sl_volume_reader_t *r = NULL;
        assert_int_equal(
            sl_volume_reader_open(paths[k], NULL, &r, err, sizeof err), 0);
        int64_t at = 0;
        for (int j = 0; at < total; j++) {
            int64_t c = steps[j % 4] < total - at ? steps[j % 4] : total - at;
            if (j % 2) {
                assert_int_equal(
                    sl_volume_reader_read(r, got, c, err, sizeof err), 0);
                assert_memory_equal(got, want + at, (size_t)c * sizeof *got);
            } else {
                assert_int_equal(sl_volume_reader_skip(r, c, err, sizeof err),
                                 0);
            }
            at += c;
        }
        assert_int_equal(sl_volume_reader_skip(r, 1, err, sizeof err),
                         SL_EINVAL);
        sl_volume_reader_close(r);
        /* all of it skipped: a gzip file's checksum is still checked */
        assert_int_equal(
            sl_volume_reader_open(paths[k], NULL, &r, err, sizeof err), 0);
        assert_int_equal(sl_volume_reader_skip(r, total, err, sizeof err), 0);
        sl_volume_reader_close(r);
        free(got);
        sl_volume_free(v);
    }
    {
        size_t bn = gn;
        uint8_t *bad = malloc(bn);
        memcpy(bad, g, bn);
        bad[bn - 6] ^= 0xff; /* the CRC-32 */
        char *badp = write_tmp("rd_crc.nii.gz", bad, bn);
        sl_volume_reader_t *r = NULL;
        /* zlib may see it when the header is read (a small file) */
        int rc = sl_volume_reader_open(badp, NULL, &r, err, sizeof err);
        if (!rc)
            rc = sl_volume_reader_skip(r, 37 * 29 * 23, err, sizeof err);
        assert_int_equal(rc, SL_ECORRUPT);
        assert_non_null(strstr(err, badp));
        sl_volume_reader_close(r);
        /* cut short: the skip or the read after it fails */
        r = NULL;
        float one;
        rc = sl_volume_reader_open(cut, NULL, &r, err, sizeof err);
        if (!rc)
            rc = sl_volume_reader_skip(r, 37 * 29 * 23 - 1, err, sizeof err);
        if (!rc)
            rc = sl_volume_reader_read(r, &one, 1, err, sizeof err);
        assert_int_equal(rc, SL_ECORRUPT);
        sl_volume_reader_close(r);
        free(bad), free(badp);
    }
    /* Cut short: zlib may see the end already when the header is read
     * (its input buffer is larger than this file), else a read does. */
    sl_volume_reader_t *r = NULL;
    float *f = malloc(37 * 29 * 23 * sizeof *f);
    int rc = sl_volume_reader_open(cut, NULL, &r, err, sizeof err);
    if (!rc)
        rc = sl_volume_reader_read(r, f, 37 * 29 * 23, err, sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(err, cut));
    free(f);
    sl_volume_reader_close(r);
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.orient = SL_VOLUME_RAS;
    r = (sl_volume_reader_t *)1;
    assert_int_equal(sl_volume_reader_open(plain, &o, &r, err, sizeof err),
                     SL_EINVAL);
    assert_null(r);
    sl_volume_reader_close(NULL);
    free(b), free(g), free(plain), free(gz), free(cut);
}

static void test_dataset(void **state)
{
    (void)state;
    char *root, *c0, *c1, *f;
    assert_true(asprintf(&root, "%s/kits", dir) > 0);
    assert_true(asprintf(&c0, "%s/case_00000", root) > 0);
    assert_true(asprintf(&c1, "%s/case_00001", root) > 0);
    mkdir(root, 0755), mkdir(c0, 0755), mkdir(c1, 0755);
    const char *names[] = {"case_00000/imaging.nii.gz",
                           "case_00000/segmentation.nii.gz",
                           "case_00001/imaging.nii"};
    for (int i = 0; i < 3; i++) {
        assert_true(asprintf(&f, "%s/%s", root, names[i]) > 0);
        assert_int_equal(tu_write_file(f, "x", 1), 0);
        free(f);
    }
    sl_volume_dataset_t *d = NULL;
    char err[1024];
    assert_int_equal(sl_volume_dataset_open(root, NULL, &d, err, sizeof err),
                     SL_ENOTFOUND);
    assert_non_null(strstr(err, "case_00001: no label volume"));
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.unlabeled = 1;
    assert_int_equal(sl_volume_dataset_open(root, &o, &d, err, sizeof err), 0);
    assert_int_equal(sl_volume_dataset_count(d), 2);
    assert_string_equal(sl_volume_dataset_name(d, 1), "case_00001");
    assert_null(sl_volume_dataset_label(d, 1));
    assert_non_null(strstr(sl_volume_dataset_label(d, 0), "segmentation"));
    assert_null(sl_volume_dataset_image(d, 2));
    sl_volume_dataset_destroy(d);
    /* A list file is read by base/file's rule for small files: one over
     * 64 MiB, or a FIFO, is refused at once, named. */
    assert_true(asprintf(&f, "%s/list.txt", dir) > 0);
    assert_int_equal(tu_write_file(f, "# list\n", 7), 0);
    assert_int_equal(truncate(f, (64 << 20) + 1), 0);
    assert_int_not_equal(sl_volume_dataset_open(f, &o, &d, err, sizeof err), 0);
    assert_null(d);
    assert_non_null(strstr(err, f));
    assert_non_null(strstr(err, "more than the 67108864 allowed"));
    unlink(f);
    assert_int_equal(mkfifo(f, 0600), 0);
    assert_int_equal(sl_volume_dataset_open(f, &o, &d, err, sizeof err),
                     SL_EIO);
    assert_non_null(strstr(err, f));
    assert_non_null(strstr(err, "not a regular file (FIFO)"));
    unlink(f);
    free(f);
    free(root), free(c0), free(c1);
}

/* 4 threads load every case of a packed dataset at once (both
 * orientations), each result equal to the same case from its files. */
#define NCASES 6
typedef struct loader_arg {
    const sl_volume_dataset_t *packed, *files;
    int tid, bad;
} loader_arg_t;

static void *load_all(void *p)
{
    loader_arg_t *a = p;
    char err[512];
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    for (int round = 0; round < 3; round++)
        for (int64_t i = 0; i < NCASES; i++) {
            int64_t c = (i + a->tid) % NCASES;
            o.orient = (int)((c + round) % 2);
            sl_volume_t *x = NULL, *xl = NULL, *y = NULL, *yl = NULL;
            if (sl_volume_dataset_load(a->packed, c, &o, &x, &xl, err,
                                       sizeof err) ||
                sl_volume_dataset_load(a->files, c, &o, &y, &yl, err,
                                       sizeof err) ||
                x->data_bytes != y->data_bytes ||
                memcmp(x->data, y->data, x->data_bytes) ||
                memcmp(x->affine, y->affine, sizeof x->affine) ||
                (xl == NULL) != (yl == NULL) ||
                (xl && memcmp(xl->data, yl->data, xl->data_bytes)))
                a->bad++;
            sl_volume_free(x), sl_volume_free(xl);
            sl_volume_free(y), sl_volume_free(yl);
        }
    return NULL;
}

static void test_pack_threads(void **state)
{
    (void)state;
    char *root, *out, *p;
    assert_true(asprintf(&root, "%s/pk", dir) > 0);
    assert_true(asprintf(&out, "%s/pk.pack", dir) > 0);
    mkdir(root, 0755);
    for (int c = 0; c < NCASES; c++) {
        size_t n;
        uint8_t *b = nii1(6 + c, 5, 4, c % 2 ? -1.0f : 1.5f, &n);
        assert_true(asprintf(&p, "%s/case_%05d", root, c) > 0);
        mkdir(p, 0755);
        free(p);
        const char *what[2] = {"imaging.nii", "segmentation.nii"};
        for (int k = 0; k < 1 + (c != 3); k++) { /* case 3: no label */
            assert_true(asprintf(&p, "%s/case_%05d/%s", root, c, what[k]) > 0);
            assert_int_equal(tu_write_file(p, b, n), 0);
            free(p);
        }
        free(b);
    }
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.unlabeled = 1;
    sl_volume_dataset_t *files = NULL, *packed = NULL;
    char err[1024];
    assert_int_equal(sl_volume_dataset_open(root, &o, &files, err, sizeof err),
                     0);
    sl__pack_out_t po = {.dir = out, .codec = 2, .shard_size = 1};
    assert_int_equal(sl__pack_out_begin(&po, err, sizeof err), 0);
    sl__bytes_t rec = {0};
    for (int64_t i = 0; i < NCASES; i++) {
        int fatal;
        assert_int_equal(sl__volrec_build(sl_volume_dataset_image(files, i),
                                          sl_volume_dataset_label(files, i), 0,
                                          &rec, err, sizeof err),
                         0);
        assert_int_equal(sl__pack_out_add(&po, rec.p, rec.n,
                                          sl_volume_dataset_has_label(files, i),
                                          sl_volume_dataset_name(files, i),
                                          &fatal, err, sizeof err),
                         0);
    }
    sl__bytes_free(&rec);
    assert_int_equal(sl__pack_out_commit(&po, err, sizeof err), 0);
    assert_int_equal(po.shards, NCASES); /* a shard per case */
    assert_int_equal(sl_volume_dataset_open(out, &o, &packed, err, sizeof err),
                     0);
    assert_int_equal(sl_volume_dataset_count(packed), NCASES);
    assert_int_equal(sl_volume_dataset_has_label(packed, 3), 0);
    pthread_t th[4];
    loader_arg_t args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (loader_arg_t){packed, files, t, 0};
        assert_int_equal(pthread_create(&th[t], NULL, load_all, &args[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(args[t].bad, 0);
    }
    /* Readers over a pack's record equal the files' loads; the record
     * outlives the image reader while the label reader reads. */
    for (int64_t c = 0; c < NCASES; c++) {
        sl_volume_reader_t *ri = NULL, *rl = NULL;
        sl_volume_t *y = NULL, *yl = NULL;
        assert_int_equal(sl_volume_dataset_readers(packed, c, NULL, &ri, &rl,
                                                   err, sizeof err),
                         0);
        assert_int_equal(
            sl_volume_dataset_load(files, c, NULL, &y, &yl, err, sizeof err),
            0);
        assert_int_equal(rl == NULL, c == 3);
        float *fi = read_all(ri, 11);
        sl_volume_reader_close(ri);
        assert_memory_equal(fi, y->data, y->data_bytes);
        if (rl) {
            float *fl = read_all(rl, 5);
            assert_memory_equal(fl, yl->data, yl->data_bytes);
            free(fl);
        }
        sl_volume_reader_close(rl);
        free(fi);
        sl_volume_free(y), sl_volume_free(yl);
    }
    sl_volume_dataset_destroy(packed);
    sl_volume_dataset_destroy(files);
    free(root), free(out);
}

/* A record's bytes read in order, counting what was read. */
typedef struct msrc {
    const uint8_t *p;
    size_t n, at;
} msrc_t;

static int ms_read(void *ctx, void *dst, size_t n, char *err, size_t errlen)
{
    msrc_t *m = ctx;
    if (n > m->n - m->at)
        return sl__fail(err, errlen, SL_ECORRUPT, "past the end");
    if (dst)
        memcpy(dst, m->p + m->at, n);
    m->at += n;
    return 0;
}

static int ms_finish(void *ctx, char *err, size_t errlen)
{
    msrc_t *m = ctx;
    return ms_read(m, NULL, m->n - m->at, err, errlen);
}

/* Version 2 records (the entries and headers first): the label's header is
 * read without the image's data, the data then passed over lazily; the
 * parse and the in-order read agree; a version-1 record (the image's data
 * before the label's header) is still read, to the same volumes. */
static void test_volrec_layout(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = nii1(9, 8, 7, 1.5f, &n);
    char *img, *lbl;
    assert_true(asprintf(&img, "%s/vr_img.nii", dir) > 0);
    assert_true(asprintf(&lbl, "%s/vr_lbl.nii", dir) > 0);
    assert_int_equal(tu_write_file(img, b, n), 0);
    assert_int_equal(tu_write_file(lbl, b, n), 0);
    free(b);
    sl__bytes_t rec = {0};
    char err[512];
    assert_int_equal(sl__volrec_build(img, lbl, 0, &rec, err, sizeof err), 0);
    assert_int_equal(sl__get_u16(rec.p + 8), 2);
    sl__volrec_t r;
    assert_int_equal(sl__volrec_parse(rec.p, rec.n, &r, err, sizeof err), 0);
    assert_int_equal(r.count, 2);
    assert_true(r.part[1].hdr < r.part[0].data); /* headers first */
    assert_true(r.part[0].data + r.part[0].dlen == r.part[1].data);
    for (unsigned k = 0; k < 2; k++) {
        msrc_t m = {rec.p, rec.n, 0};
        sl__vol_src_t src = {ms_read, ms_finish, NULL, &m};
        unsigned count;
        uint8_t hdr[SL__NIFTI2_HDR];
        size_t hlen;
        uint64_t dlen, skip;
        assert_int_equal(sl__volrec_seek(&src, rec.n, "t", k, &count, hdr,
                                         &hlen, &dlen, &skip, err, sizeof err),
                         0);
        /* the head, two entries, two headers: no data read */
        assert_int_equal(m.at, 16 + 2 * 16 + r.part[0].hlen + r.part[1].hlen);
        assert_int_equal(skip, k ? r.part[0].dlen : 0);
        assert_memory_equal(hdr, r.part[k].hdr, hlen);
        assert_int_equal(sl__volrec_skipping(&src, skip), 0);
        uint8_t *d = malloc((size_t)dlen);
        assert_int_equal(src.read(src.ctx, d, (size_t)dlen, err, sizeof err),
                         0);
        assert_memory_equal(d, r.part[k].data, (size_t)dlen);
        assert_int_equal(src.finish(src.ctx, err, sizeof err), 0);
        assert_int_equal(m.at, rec.n);
        if (src.close)
            src.close(src.ctx);
        free(d);
    }
    /* the same case as a version-1 record: [entry hdr data] per volume */
    sl__bytes_t v1 = {0};
    assert_int_equal(sl__bytes_reserve(&v1, rec.n), 0);
    memcpy(v1.p, rec.p, 16);
    sl__put_u16(v1.p + 8, 1);
    size_t at = 16;
    for (int k = 0; k < 2; k++) {
        memcpy(v1.p + at, rec.p + 16 + 16 * k, 16);
        memcpy(v1.p + at + 16, r.part[k].hdr, r.part[k].hlen);
        memcpy(v1.p + at + 16 + r.part[k].hlen, r.part[k].data,
               (size_t)r.part[k].dlen);
        at += 16 + r.part[k].hlen + (size_t)r.part[k].dlen;
    }
    v1.n = at;
    assert_int_equal(at, rec.n);
    sl__volrec_t r1;
    assert_int_equal(sl__volrec_parse(v1.p, v1.n, &r1, err, sizeof err), 0);
    for (int k = 0; k < 2; k++) {
        assert_memory_equal(r1.part[k].hdr, r.part[k].hdr, r.part[k].hlen);
        assert_memory_equal(r1.part[k].data, r.part[k].data,
                            (size_t)r.part[k].dlen);
    }
    msrc_t m = {v1.p, v1.n, 0};
    sl__vol_src_t src = {ms_read, ms_finish, NULL, &m};
    unsigned count;
    uint8_t hdr[SL__NIFTI2_HDR];
    size_t hlen;
    uint64_t dlen, skip;
    assert_int_equal(sl__volrec_seek(&src, v1.n, "t", 1, &count, hdr, &hlen,
                                     &dlen, &skip, err, sizeof err),
                     0);
    assert_int_equal(skip, 0); /* version 1: the image's data read past */
    assert_true(v1.p + m.at == r1.part[1].data);
    /* a version from the future is refused as such */
    sl__put_u16(v1.p + 8, 3);
    assert_int_equal(sl__volrec_parse(v1.p, v1.n, &r1, err, sizeof err),
                     SL_EUNSUPPORTED);
    assert_non_null(strstr(err, "version 3"));
    sl__bytes_free(&v1);
    sl__bytes_free(&rec);
    free(img), free(lbl);
}

int main(void)
{
    if (!SL_HAVE_NIFTI) {
        printf("SKIP: sluice built without NIfTI support (-DSL_NIFTI=OFF or "
               "no libnifti2-dev)\n");
        return 77;
    }
    dir = tu_tmpdir("volume");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_nifti1),
        cmocka_unit_test(test_load_nifti2_4d),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_lying_dims),
        cmocka_unit_test(test_budget_and_files),
        cmocka_unit_test(test_orientation),
        cmocka_unit_test(test_reader),
        cmocka_unit_test(test_dataset),
        cmocka_unit_test(test_pack_threads),
        cmocka_unit_test(test_volrec_layout),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmtree(dir);
    free(dir);
    return rc;
}
