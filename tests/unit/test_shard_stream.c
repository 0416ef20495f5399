/* data/shard_stream: a record read in order, a piece at a time, gives the
 * bytes sl__shard_read gives (every codec, any piece sizes, bytes passed
 * over), holds a working set and not the record (what it asks its admit
 * hook for, against the whole read's), and a damaged, lying or truncated
 * record is an error naming the shard, the record and the cause. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "codec/codec.h"
#include "data/shard.h"
#include "data/shard_format.h"
#include "testutil.h"

#define BIG ((size_t)40 << 20) /* record 3: more than twice a zstd window */

static const size_t sizes[] = {5, (3 << 20) + 17, 0, BIG, 70000};
#define NREC ((int)(sizeof sizes / sizeof sizes[0]))

/* Record i: text-like runs, then noise in its second half (record 3: all
 * runs, as a CT volume's zeros and slow gradients compress). */
static void rec_fill(int i, uint8_t *p, size_t n)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ULL + 11;
    for (size_t k = 0; k < n; k++) {
        if (i == 3 || k < n / 2) {
            p[k] = (uint8_t)("the quick brown fox "[k % 20] + (k >> 16));
        } else {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p[k] = (uint8_t)x;
        }
    }
}

/* A dictionary trained on short lines (the codec needs one for
 * zstd-dict). */
static void train(sl__bytes_t *dict)
{
    static const char *const w[] = {"the",    "quick", "brown", "fox",
                                    "jumps",  "over",  "lazy",  "dog",
                                    "sluice", "shard"};
    char all[64 * 200];
    size_t sz[64], n = 0;
    uint32_t x = 7;
    for (int i = 0; i < 64; i++) {
        size_t at = n;
        for (int k = 0; k < 12 + i % 9; k++) {
            x = x * 1103515245u + 12345u;
            n += (size_t)snprintf(all + n, sizeof all - n, " %s",
                                  w[(x >> 16) % 10]);
        }
        sz[i] = n - at;
    }
    char err[256];
    assert_int_equal(
        sl__codec_dict_train(all, sz, 64, 4096, dict, err, sizeof err), 0);
}

static char *write_shard(const char *dir, int codec)
{
    char *path = NULL;
    assert_true(asprintf(&path, "%s/s%d.sls", dir, codec) > 0);
    sl__bytes_t dict = {0};
    if (codec == SL_CODEC_ZSTD_DICT)
        train(&dict);
    sl__shard_codec_t sc = {codec, 0, dict.p, dict.n};
    sl__shard_writer_t *w = NULL;
    char err[512];
    assert_int_equal(sl__shard_writer_open_ex(path, &sc, &w, err, sizeof err),
                     0);
    uint8_t *buf = malloc(BIG);
    assert_non_null(buf);
    for (int i = 0; i < NREC; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "case_%05d", i);
        rec_fill(i, buf, sizes[i]);
        assert_int_equal(
            sl__shard_writer_add(w, buf, sizes[i], 1, nm, err, sizeof err), 0);
    }
    free(buf);
    sl__bytes_free(&dict);
    assert_int_equal(sl__shard_writer_finish(w, err, sizeof err), 0);
    return path;
}

/* Counts what a stream asks for. */
static int64_t asked;
static int admit_count(void *ctx, int64_t bytes, char *err, size_t errlen)
{
    (void)ctx, (void)err, (void)errlen;
    asked += bytes;
    return 0;
}

/* Record i streamed in pieces of `step` bytes (every third passed over)
 * equals its whole read. */
static void stream_equals_read(const sl__shard_t *s, int i, size_t step,
                               int want_streaming)
{
    char err[512];
    sl__bytes_t out = {0}, scratch = {0};
    assert_int_equal(
        sl__shard_read(s, (uint64_t)i, &out, &scratch, NULL, err, sizeof err),
        0);
    sl__shard_stream_t *st = NULL;
    assert_int_equal(
        sl__shard_stream_open(s, (uint64_t)i, NULL, &st, err, sizeof err), 0);
    uint8_t *got = malloc(step);
    size_t at = 0;
    for (int k = 0; at < out.n; k++) {
        size_t n = out.n - at < step ? out.n - at : step;
        int pass = k % 3 == 2;
        int rc =
            sl__shard_stream_read(st, pass ? NULL : got, n, err, sizeof err);
        if (rc)
            fail_msg("record %d at %zu: %s", i, at, err);
        if (!pass)
            assert_memory_equal(got, out.p + at, n);
        at += n;
    }
    assert_int_equal(sl__shard_stream_left(st), 0);
    if (sizes[i] > 0)
        assert_int_equal(sl__shard_stream_streaming(st), want_streaming);
    /* Nothing more to read. */
    assert_int_equal(sl__shard_stream_read(st, got, 1, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "bytes asked"));
    sl__shard_stream_close(st);
    free(got);
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
}

static void test_stream_equals_read(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-stream");
    const int codecs[] = {SL_CODEC_NONE, SL_CODEC_LZ4, SL_CODEC_ZSTD,
                          SL_CODEC_ZSTD_DICT};
    for (int c = 0; c < 4; c++) {
        char *path = write_shard(dir, codecs[c]);
        sl__shard_t *s = NULL;
        char err[512];
        assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
        const size_t steps[] = {1 << 20, 4093, 3 << 20};
        for (int i = 0; i < NREC; i++)
            for (int k = 0; k < 3; k++) {
                if (k == 1 && sizes[i] > (1 << 22))
                    continue; /* small steps over 40 MiB: slow, no news */
                /* zstd-dict may keep a record raw (none): it streams. */
                stream_equals_read(s, i, steps[k],
                                   sl__shard_entry(s, (uint64_t)i)->codec !=
                                       SL_CODEC_LZ4);
            }
        /* A shard in memory streams the same bytes. */
        size_t n;
        uint8_t *bytes = tu_read_file(path, &n);
        sl__shard_t *m = NULL;
        assert_int_equal(sl__shard_open_mem(bytes, n, &m, err, sizeof err), 0);
        stream_equals_read(m, 1, 65536, codecs[c] != SL_CODEC_LZ4);
        sl__shard_close(m);
        free(bytes);
        sl__shard_close(s);
        unlink(path);
        free(path);
    }
    tu_rmtree(dir);
    free(dir);
}

/* The working set: a stream of the 40 MiB record asks for at most
 * SL__SHARD_STREAM_BYTES (zstd: a 16 MiB window at most, and pieces),
 * where reading it whole asks for the raw and stored bytes; an LZ4 record
 * cannot stream and asks for the whole read's. */
static void test_stream_working_set(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-stream-ws");
    const int codecs[] = {SL_CODEC_NONE, SL_CODEC_ZSTD, SL_CODEC_LZ4};
    for (int c = 0; c < 3; c++) {
        char *path = write_shard(dir, codecs[c]);
        sl__shard_t *s = NULL;
        char err[512];
        assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
        sl__admit_t admit = {admit_count, NULL};
        sl__shard_stream_t *st = NULL;
        asked = 0;
        assert_int_equal(
            sl__shard_stream_open(s, 3, &admit, &st, err, sizeof err), 0);
        int64_t streamed = asked;
        sl__shard_stream_close(st);
        sl__bytes_t out = {0}, scratch = {0};
        asked = 0;
        assert_int_equal(sl__shard_read_admit(s, 3, &out, &scratch, &admit,
                                              NULL, err, sizeof err),
                         0);
        int64_t whole = asked;
        sl__bytes_free(&out);
        sl__bytes_free(&scratch);
        assert_true(whole > (int64_t)BIG);
        if (codecs[c] == SL_CODEC_LZ4) {
            assert_int_equal(streamed, whole);
        } else {
            assert_true(streamed <= SL__SHARD_STREAM_BYTES);
            assert_true(streamed < whole / 2);
        }
        /* A small record asks for about its size, not a full window. */
        asked = 0;
        assert_int_equal(
            sl__shard_stream_open(s, 0, &admit, &st, err, sizeof err), 0);
        sl__shard_stream_close(st);
        assert_true(asked < (1 << 20));
        sl__shard_close(s);
        free(path);
    }
    tu_rmtree(dir);
    free(dir);
}

/* Streams record i to its end: the first failing read's code, err set. */
static int stream_all(const sl__shard_t *s, int i, char *err, size_t errlen,
                      size_t *failed_at)
{
    sl__shard_stream_t *st = NULL;
    int rc = sl__shard_stream_open(s, (uint64_t)i, NULL, &st, err, errlen);
    if (rc)
        return rc;
    uint8_t *buf = malloc(1 << 20);
    size_t at = 0;
    while (!rc && sl__shard_stream_left(st)) {
        size_t n = sl__shard_stream_left(st) < (1 << 20)
                       ? (size_t)sl__shard_stream_left(st)
                       : (size_t)1 << 20;
        rc = sl__shard_stream_read(st, buf, n, err, errlen);
        if (!rc)
            at += n;
    }
    *failed_at = at;
    free(buf);
    sl__shard_stream_close(st);
    return rc;
}

static void expect_named(const char *err, const char *path, int i,
                         const char *cause)
{
    char want[512];
    snprintf(want, sizeof want, "%s: record %d (case_%05d): ", path, i, i);
    if (strstr(err, want) != err)
        fail_msg("'%s' does not start with '%s'", err, want);
    if (!strstr(err, cause))
        fail_msg("'%s' lacks '%s'", err, cause);
}

static uint8_t *entry_at(uint8_t *p, int i)
{
    return p + sl__get_u64(p + SL_SHARD_H_INDEX_OFF) +
           (size_t)i * SL_SHARD_ENTRY_SIZE;
}

static void reseal(uint8_t *p)
{
    uint64_t at = sl__get_u64(p + SL_SHARD_H_INDEX_OFF);
    uint64_t sz = sl__get_u64(p + SL_SHARD_H_INDEX_SIZE);
    sl__put_u64(p + SL_SHARD_H_INDEX_SUM, XXH3_64bits(p + at, sz));
    sl__put_u64(p + SL_SHARD_HEADER_SIZE - 8,
                XXH3_64bits(p, SL_SHARD_HEADER_SIZE - 8));
}

/* A flipped byte: uncompressed, every byte is given and the last read
 * fails the checksum; zstd fails where its data breaks, or at the end. */
static void test_stream_damaged(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-stream-dmg");
    const int codecs[] = {SL_CODEC_NONE, SL_CODEC_ZSTD};
    for (int c = 0; c < 2; c++) {
        char *path = write_shard(dir, codecs[c]);
        size_t n;
        uint8_t *p = tu_read_file(path, &n);
        uint8_t *e = entry_at(p, 1);
        p[sl__get_u64(e + SL_SHARD_E_OFFSET) +
          sl__get_u32(e + SL_SHARD_E_STORED) / 3] ^= 0x10;
        assert_int_equal(tu_write_file(path, p, n), 0);
        sl__shard_t *s = NULL;
        char err[512];
        assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
        size_t at;
        int rc = stream_all(s, 1, err, sizeof err, &at);
        if (codecs[c] == SL_CODEC_NONE) {
            assert_int_equal(rc, SL_ECHECKSUM);
            assert_int_equal(at, sizes[1] - (sizes[1] % (1 << 20)));
            expect_named(err, path, 1, "checksum mismatch");
        } else {
            assert_true(rc == SL_ECHECKSUM || rc == SL_ECORRUPT);
            expect_named(err, path, 1, rc == SL_ECORRUPT ? "zstd" : "checksum");
        }
        /* Its neighbours stream. */
        assert_int_equal(stream_all(s, 3, err, sizeof err, &at), 0);
        sl__shard_close(s);
        free(p);
        free(path);
    }
    tu_rmtree(dir);
    free(dir);
}

/* An index that says more or fewer raw bytes than the zstd data holds,
 * and a file cut short while open: errors naming the record. */
static void test_stream_lies_and_truncation(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-stream-lie");
    char *path = write_shard(dir, SL_CODEC_ZSTD);
    size_t n;
    uint8_t *orig = tu_read_file(path, &n);
    const int delta[] = {100, -100};
    const char *cause[] = {"truncated zstd data", "more bytes than its index"};
    for (int k = 0; k < 2; k++) {
        uint8_t *p = malloc(n);
        memcpy(p, orig, n);
        uint8_t *e = entry_at(p, 4);
        sl__put_u32(
            e + SL_SHARD_E_RAW,
            (uint32_t)((int64_t)sl__get_u32(e + SL_SHARD_E_RAW) + delta[k]));
        reseal(p);
        assert_int_equal(tu_write_file(path, p, n), 0);
        sl__shard_t *s = NULL;
        char err[512];
        assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
        size_t at;
        assert_int_equal(stream_all(s, 4, err, sizeof err, &at), SL_ECORRUPT);
        expect_named(err, path, 4, cause[k]);
        sl__shard_close(s);
        free(p);
    }
    /* The file cut inside record 3 after the shard was opened. */
    assert_int_equal(tu_write_file(path, orig, n), 0);
    sl__shard_t *s = NULL;
    char err[512];
    assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
    uint8_t *e = entry_at(orig, 3);
    assert_int_equal(
        truncate(path, (off_t)(sl__get_u64(e + SL_SHARD_E_OFFSET) +
                               sl__get_u32(e + SL_SHARD_E_STORED) / 2)),
        0);
    size_t at;
    assert_int_equal(stream_all(s, 3, err, sizeof err, &at), SL_ECORRUPT);
    if (!strstr(err, path) || !strstr(err, "record 3") ||
        !strstr(err, "ended early"))
        fail_msg("'%s'", err);
    assert_true(at < BIG);
    sl__shard_close(s);
    free(orig);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_equals_read),
        cmocka_unit_test(test_stream_working_set),
        cmocka_unit_test(test_stream_damaged),
        cmocka_unit_test(test_stream_lies_and_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
