/* volume/gzindex: bytes read through an index at random offsets are a
 * plain gunzip's (zlib's gzread), over multi-member files with block
 * boundaries at odd bits; a truncated or damaged stream fails naming the
 * file; an index of a file since changed is not used. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sluice/version.h"
#include "testutil.h"
#include "volume/gzindex.h"

#if SL_HAVE_NIFTI
#include <zlib.h>

static char *dir;

/* Data that compresses some (runs and noise), n bytes. */
static uint8_t *make_data(size_t n, uint32_t seed)
{
    uint8_t *d = malloc(n);
    assert_non_null(d);
    uint32_t x = seed * 2654435761u + 7;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        d[i] = (i / 300) % 3 ? (uint8_t)(x >> 24) : (uint8_t)(i / 300);
    }
    return d;
}

/* d[0..n) gzip'd into `members` members, a block ended every `blk`
 * bytes with Z_BLOCK (boundaries not on byte edges), then `tail` bytes
 * that are not a member. @return the file's bytes (*len). */
static uint8_t *gzip_members(const uint8_t *d, size_t n, int members,
                             size_t blk, const char *tail, size_t *len)
{
    size_t cap = n + n / 2 + 4096 * (size_t)members + 64;
    uint8_t *o = malloc(cap);
    assert_non_null(o);
    size_t at = 0;
    for (int m = 0; m < members; m++) {
        size_t a = n * (size_t)m / (size_t)members,
               b = n * (size_t)(m + 1) / (size_t)members;
        z_stream z;
        memset(&z, 0, sizeof z);
        assert_int_equal(
            deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
        z.next_out = o + at;
        z.avail_out = (unsigned)(cap - at);
        for (size_t p = a; p < b; p += blk) {
            z.next_in = (uint8_t *)d + p;
            z.avail_in = (unsigned)(b - p < blk ? b - p : blk);
            assert_int_equal(deflate(&z, Z_BLOCK), Z_OK);
        }
        assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
        at = cap - z.avail_out;
        deflateEnd(&z);
    }
    size_t tl = tail ? strlen(tail) : 0;
    memcpy(o + at, tail ? tail : "", tl);
    *len = at + tl;
    return o;
}

/* The file at path gunzipped by zlib's gzread (*n bytes). */
static uint8_t *gunzip(const char *path, size_t *n)
{
    gzFile g = gzopen(path, "rb");
    assert_non_null(g);
    size_t cap = 1 << 16, at = 0;
    uint8_t *o = malloc(cap);
    int r;
    while ((r = gzread(g, o + at, (unsigned)(cap - at))) > 0)
        if ((at += (size_t)r) == cap)
            assert_non_null(o = realloc(o, cap *= 2));
    assert_true(r == 0);
    gzclose(g);
    *n = at;
    return o;
}

/* The whole file through a gzr building ix (fails: the code). */
static int read_all(const char *path, sl__gzindex_t *ix, uint8_t **out,
                    size_t *n, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    sl__gzr_t *r;
    int code = sl__gzr_open(fd, path, NULL, ix, &r, err, errlen);
    close(fd);
    if (code)
        return code;
    size_t cap = 1 << 16, at = 0;
    uint8_t *o = malloc(cap);
    int64_t k;
    while ((k = sl__gzr_read(r, o + at, cap - at, &code, err, errlen)) > 0)
        if ((at += (size_t)k) == cap)
            assert_non_null(o = realloc(o, cap *= 2));
    sl__gzr_close(r);
    if (k < 0) {
        free(o);
        return code;
    }
    *out = o;
    *n = at;
    return 0;
}

static char *write_tmp(const char *name, const uint8_t *p, size_t n)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    assert_int_equal(tu_write_file(path, p, n), 0);
    return path;
}

/* Random (skip, read) pairs through the index equal the reference. */
static void check_random(const char *path, const sl__gzindex_t *ix,
                         const uint8_t *ref, size_t n, unsigned seed)
{
    char err[512];
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    uint8_t *buf = malloc(n + 1);
    for (int t = 0; t < 60; t++) {
        sl__gzr_t *r;
        assert_int_equal(sl__gzr_open(fd, path, ix, NULL, &r, err, sizeof err),
                         0);
        size_t at = 0;
        for (int hop = 0; hop < 3 && at < n; hop++) {
            seed = seed * 1103515245u + 12345u;
            size_t skip = (seed >> 8) % (n - at + 1) / (size_t)(3 - hop);
            int code = 0;
            for (size_t p = 0; p < skip; p += 997) /* as slices are */
                assert_int_equal(sl__gzr_read(r, NULL,
                                              skip - p < 997 ? skip - p : 997,
                                              &code, err, sizeof err),
                                 (int64_t)(skip - p < 997 ? skip - p : 997));
            at += skip;
            size_t want = (seed >> 4) % 5000 + 1;
            if (want > n - at)
                want = n - at;
            assert_int_equal(sl__gzr_read(r, buf, want, &code, err, sizeof err),
                             (int64_t)want);
            assert_memory_equal(buf, ref + at, want);
            at += want;
            /* what was inflated: from the last point before each read
             * (points are at most span plus a block apart), never all
             * the bytes passed over */
            if (sl__gzindex_points(ix) > 10 && sl__gzindex_current(ix, path))
                assert_true(sl__gzr_inflated(r) <=
                            (int64_t)(hop + 1) * (2 * 20000 + 5000 + 5000));
        }
        sl__gzr_close(r);
    }
    /* the last byte, and past the end */
    sl__gzr_t *r;
    int code = 0;
    assert_int_equal(sl__gzr_open(fd, path, ix, NULL, &r, err, sizeof err), 0);
    assert_int_equal(sl__gzr_read(r, NULL, n - 1, &code, err, sizeof err),
                     (int64_t)(n - 1));
    assert_int_equal(sl__gzr_read(r, buf, 10, &code, err, sizeof err), 1);
    assert_int_equal(buf[0], ref[n - 1]);
    sl__gzr_close(r);
    free(buf);
    close(fd);
}

static void test_random_offsets(void **state)
{
    (void)state;
    const size_t n = 600000;
    uint8_t *d = make_data(n, 3);
    struct {
        int members;
        size_t blk;
        const char *tail;
    } cases[] = {{1, 1 << 20, NULL},
                 {1, 777, NULL},
                 {3, 1001, NULL},
                 {4, 5000, "trailing junk"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t len, rn, gn;
        uint8_t *gz = gzip_members(d, n, cases[c].members, cases[c].blk,
                                   cases[c].tail, &len);
        char *path = write_tmp("a.gz", gz, len);
        uint8_t *ref = gunzip(path, &rn), *got;
        assert_int_equal(rn, n);
        assert_memory_equal(ref, d, n);
        sl__gzindex_t *ix = sl__gzindex_new(20000);
        char err[512];
        assert_int_equal(read_all(path, ix, &got, &gn, err, sizeof err), 0);
        assert_int_equal(gn, n);
        assert_memory_equal(got, ref, n);
        /* a point every span bytes or so (more with small blocks) */
        assert_true(sl__gzindex_points(ix) >= (cases[c].blk < n ? 10 : 1));
        assert_true(sl__gzindex_bytes(ix) > 0);
        check_random(path, ix, ref, n, (unsigned)c + 1);
        /* the file changed since (its mtime): the index is not used, the
         * bytes still right */
        struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 0}};
        assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
        check_random(path, ix, ref, n, 99);
        sl__gzindex_free(ix);
        free(got);
        free(ref);
        free(gz);
        unlink(path);
        free(path);
    }
    free(d);
}

/* Cut short or damaged: every read fails naming the file, at the first
 * byte it cannot give, with or without an index; nothing crashes. */
static void test_truncated_and_damaged(void **state)
{
    (void)state;
    const size_t n = 300000;
    uint8_t *d = make_data(n, 5);
    size_t len, gn;
    uint8_t *gz = gzip_members(d, n, 2, 3000, NULL, &len);
    char *full = write_tmp("full.gz", gz, len);
    sl__gzindex_t *ix = sl__gzindex_new(10000);
    uint8_t *got;
    char err[512];
    assert_int_equal(read_all(full, ix, &got, &gn, err, sizeof err), 0);
    free(got);
    for (size_t cut = 5; cut < len; cut += len / 7) {
        char *p = write_tmp("cut.gz", gz, cut);
        err[0] = 0;
        assert_int_equal(read_all(p, NULL, &got, &gn, err, sizeof err),
                         SL_ECORRUPT);
        assert_non_null(strstr(err, p));
        assert_non_null(strstr(err, "truncated"));
        /* through the full file's index: not this file's, not used */
        int fd = open(p, O_RDONLY);
        sl__gzr_t *r;
        assert_int_equal(sl__gzr_open(fd, p, ix, NULL, &r, err, sizeof err), 0);
        int code = 0;
        /* (passing over is lazy: the read after it fails; past the
         * data, as a cut in the last trailer shows there) */
        uint8_t one;
        assert_int_equal(sl__gzr_read(r, NULL, n, &code, err, sizeof err),
                         (int64_t)n);
        assert_int_equal(sl__gzr_read(r, &one, 1, &code, err, sizeof err), -1);
        assert_int_equal(code, SL_ECORRUPT);
        assert_non_null(strstr(err, p));
        sl__gzr_close(r);
        close(fd);
        unlink(p);
        free(p);
    }
    /* damaged bytes in the middle: the whole read fails (a bad code, a
     * distance too far, or the CRC-32) */
    for (size_t at = 20; at < len - 8; at += len / 5) {
        uint8_t *bad = malloc(len);
        memcpy(bad, gz, len);
        for (int k = 0; k < 16 && at + (size_t)k < len - 8; k++)
            bad[at + (size_t)k] ^= 0x5a;
        char *p = write_tmp("bad.gz", bad, len);
        err[0] = 0;
        int rc = read_all(p, NULL, &got, &gn, err, sizeof err);
        if (!rc) /* the damage fell in the second member's header? */
            free(got);
        else {
            assert_int_equal(rc, SL_ECORRUPT);
            assert_non_null(strstr(err, p));
        }
        unlink(p);
        free(p);
        free(bad);
    }
    sl__gzindex_free(ix);
    unlink(full);
    free(full);
    free(gz);
    free(d);
}

int main(void)
{
    dir = tu_tmpdir("gzindex");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_offsets),
        cmocka_unit_test(test_truncated_and_damaged),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmtree(dir);
    free(dir);
    return rc;
}
#else
int main(void)
{
    return 77; /* built without NIfTI (zlib) support */
}
#endif
