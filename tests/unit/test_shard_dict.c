/* codec zstd-dict and the per-shard choice (codec/choose): a dictionary
 * trained on records round-trips them, in a shard (format 1.1) as in
 * memory; a corrupt or missing dictionary is an error naming the shard;
 * auto picks a compressing codec on text and none on noise; a shard
 * written before format 1.1 (tests/fixtures/shard-1.0) still reads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "codec/choose.h"
#include "codec/codec.h"
#include "data/shard.h"
#include "data/shard_format.h"
#include "testutil.h"

#define NREC 400

/* Record i: a short English-like line with varying words (what a
 * dictionary is for: many small records sharing vocabulary). */
static size_t rec_text(int i, char *p, size_t cap)
{
    static const char *const w[] = {
        "the",   "quick", "brown",  "fox",   "jumps", "over",  "lazy",
        "dog",   "while", "sluice", "packs", "every", "shard", "record",
        "under", "a",     "bright", "moon",  "and",   "river"};
    uint32_t x = (uint32_t)i * 2654435761u + 7;
    size_t n = (size_t)snprintf(p, cap, "%d:", i);
    int words = 12 + i % 20;
    for (int k = 0; k < words && n + 16 < cap; k++) {
        x = x * 1103515245u + 12345u;
        n += (size_t)snprintf(p + n, cap - n, " %s", w[(x >> 16) % 20]);
    }
    return n;
}

/* Record i of noise (incompressible, like a JPEG's entropy-coded data). */
static void rec_noise(int i, uint8_t *p, size_t n)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t k = 0; k < n; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[k] = (uint8_t)x;
    }
}

/* All NREC text records end to end, with their sizes. */
static uint8_t *text_records(size_t *sizes, size_t *total)
{
    uint8_t *all = malloc(NREC * 256);
    assert_non_null(all);
    *total = 0;
    for (int i = 0; i < NREC; i++) {
        sizes[i] = rec_text(i, (char *)all + *total, 256);
        *total += sizes[i];
    }
    return all;
}

static void test_codec_dict_roundtrip(void **state)
{
    (void)state;
    size_t sizes[NREC], total;
    uint8_t *all = text_records(sizes, &total);
    sl__bytes_t dict = {0}, z = {0};
    char err[256];
    assert_int_equal(
        sl__codec_dict_train(all, sizes, NREC, 4096, &dict, err, sizeof err),
        0);
    assert_true(dict.n > 0 && dict.n <= 4096);
    sl__codec_dict_t *d = NULL;
    assert_int_equal(
        sl__codec_dict_load(dict.p, dict.n, 3, &d, err, sizeof err), 0);
    assert_true(sl__codec_dict_id(d) != 0);
    size_t plain = 0, with = 0;
    char back[256];
    const uint8_t *p = all;
    for (int i = 0; i < NREC; i++) {
        assert_int_equal(sl__codec_compress_dict(SL_CODEC_ZSTD_DICT, 3, d, p,
                                                 sizes[i], &z, err, sizeof err),
                         0);
        with += z.n;
        assert_int_equal(sl__codec_decompress_dict(SL_CODEC_ZSTD_DICT, d, z.p,
                                                   z.n, back, sizes[i], err,
                                                   sizeof err),
                         0);
        assert_memory_equal(back, p, sizes[i]);
        /* Without the dictionary: a clear error, not garbage. */
        assert_int_equal(sl__codec_decompress(SL_CODEC_ZSTD_DICT, z.p, z.n,
                                              back, sizes[i], err, sizeof err),
                         SL_ECORRUPT);
        assert_non_null(strstr(err, "no dictionary"));
        assert_int_equal(sl__codec_compress_level(SL_CODEC_ZSTD, 3, p, sizes[i],
                                                  &z, NULL, 0),
                         0);
        plain += z.n;
        p += sizes[i];
    }
    /* The point of it: small records shrink much more with it. */
    assert_true(with * 10 < plain * 8);
    assert_string_equal(sl__codec_name(SL_CODEC_ZSTD_DICT), "zstd-dict");
    assert_int_equal(sl__codec_from_name("zstd-dict"), SL_CODEC_ZSTD_DICT);

    /* Another dictionary (other records): zstd refuses the frame. */
    sl__bytes_t dict2 = {0};
    for (size_t k = 0; k < total; k++)
        all[k] = (uint8_t)(all[k] ^ 0x20);
    assert_int_equal(
        sl__codec_dict_train(all, sizes, NREC, 4096, &dict2, err, sizeof err),
        0);
    sl__codec_dict_t *d2 = NULL;
    assert_int_equal(
        sl__codec_dict_load(dict2.p, dict2.n, 0, &d2, err, sizeof err), 0);
    if (sl__codec_dict_id(d2) != sl__codec_dict_id(d)) {
        assert_int_equal(sl__codec_compress_dict(SL_CODEC_ZSTD_DICT, 3, d,
                                                 "hello world", 11, &z, NULL,
                                                 0),
                         0);
        assert_int_equal(sl__codec_decompress_dict(SL_CODEC_ZSTD_DICT, d2, z.p,
                                                   z.n, back, 11, err,
                                                   sizeof err),
                         SL_ECORRUPT);
    }
    /* Not a dictionary at all: refused at load. */
    uint8_t junk[512];
    rec_noise(1, junk, sizeof junk);
    sl__codec_dict_t *bad = NULL;
    assert_int_equal(
        sl__codec_dict_load(junk, sizeof junk, 0, &bad, err, sizeof err),
        SL_ECORRUPT);
    assert_null(bad);
    /* Too few samples to train: a clear error. */
    assert_int_equal(
        sl__codec_dict_train(all, sizes, 2, 4096, &dict2, err, sizeof err),
        SL_EINVAL);
    sl__codec_dict_free(d);
    sl__codec_dict_free(d2);
    sl__bytes_free(&dict);
    sl__bytes_free(&dict2);
    sl__bytes_free(&z);
    free(all);
}

/* Writes the text records to dir/name as zstd-dict; returns the path. */
static char *write_dict_shard(const char *dir, const char *name)
{
    size_t sizes[NREC], total;
    uint8_t *all = text_records(sizes, &total);
    sl__choice_t c;
    char err[256];
    assert_int_equal(
        sl__codec_choose(all, sizes, NREC, total, 0, 0, &c, err, sizeof err),
        0);
    assert_int_equal(c.codec, SL_CODEC_ZSTD_DICT);
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
    sl__shard_writer_t *w = NULL;
    sl__shard_codec_t sc = {c.codec, c.level, c.dict.p, c.dict.n};
    assert_int_equal(sl__shard_writer_open_ex(path, &sc, &w, err, sizeof err),
                     0);
    const uint8_t *p = all;
    for (int i = 0; i < NREC; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "doc-%d", i);
        assert_int_equal(
            sl__shard_writer_add(w, p, sizes[i], i % 5, nm, err, sizeof err),
            0);
        p += sizes[i];
    }
    assert_int_equal(sl__shard_writer_finish(w, err, sizeof err), 0);
    sl__bytes_free(&c.dict);
    free(all);
    return path;
}

static void test_shard_dict_roundtrip(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard_dict");
    char *path = write_dict_shard(dir, "d.sls");
    sl__shard_t *s = NULL;
    char err[512];
    assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
    int major, minor;
    sl__shard_version(s, &major, &minor);
    assert_int_equal(major, 1);
    assert_int_equal(minor, SL_SHARD_VERSION_MINOR_DICT);
    assert_true(sl__shard_dict_size(s) > 0);
    size_t sizes[NREC], total;
    uint8_t *all = text_records(sizes, &total);
    sl__bytes_t out = {0}, scratch = {0};
    const uint8_t *p = all;
    int dict_records = 0;
    for (int i = 0; i < NREC; i++) {
        assert_int_equal(sl__shard_read(s, (uint64_t)i, &out, &scratch, NULL,
                                        err, sizeof err),
                         0);
        assert_int_equal(out.n, sizes[i]);
        assert_memory_equal(out.p, p, sizes[i]);
        dict_records +=
            sl__shard_entry(s, (uint64_t)i)->codec == SL_CODEC_ZSTD_DICT;
        p += sizes[i];
    }
    assert_true(dict_records > NREC / 2);
    sl__shard_close(s);
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    free(all);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

/* Threads reading one open zstd-dict shard at once: the dictionary is
 * shared read-only, each thread has its own zstd context (TSan stage). */
typedef struct reader_arg {
    const sl__shard_t *s;
    const uint8_t *all;
    const size_t *sizes;
    int seed, bad;
} reader_arg_t;

static void *reader(void *p)
{
    reader_arg_t *a = p;
    sl__bytes_t out = {0}, scratch = {0};
    char err[512];
    size_t offs[NREC], at = 0;
    for (int i = 0; i < NREC; i++) {
        offs[i] = at;
        at += a->sizes[i];
    }
    for (int k = 0; k < 3 * NREC; k++) {
        int i = (k * 7 + a->seed * 13) % NREC;
        if (sl__shard_read(a->s, (uint64_t)i, &out, &scratch, NULL, err,
                           sizeof err) ||
            out.n != a->sizes[i] || memcmp(out.p, a->all + offs[i], out.n))
            a->bad++;
    }
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    return NULL;
}

static void test_shard_dict_threads(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard_dict_mt");
    char *path = write_dict_shard(dir, "d.sls");
    sl__shard_t *s = NULL;
    char err[512];
    assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
    size_t sizes[NREC], total;
    uint8_t *all = text_records(sizes, &total);
    pthread_t th[4];
    reader_arg_t args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (reader_arg_t){s, all, sizes, t, 0};
        assert_int_equal(pthread_create(&th[t], NULL, reader, &args[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(args[t].bad, 0);
    }
    sl__shard_close(s);
    free(all);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

/* Rewrites the header checksum after an edit of the header. */
static void reseal(uint8_t *f)
{
    uint32_t hs = sl__get_u32(f + SL_SHARD_H_HEADER_SIZE);
    sl__put_u64(f + hs - 8, XXH3_64bits(f, hs - 8));
}

static void expect_open_error(const uint8_t *f, size_t n, const char *want)
{
    sl__shard_t *s = NULL;
    char err[512];
    int rc = sl__shard_open_mem(f, n, &s, err, sizeof err);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_null(s);
    if (!strstr(err, want) || !strstr(err, "<memory>"))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

static void test_shard_dict_corrupt(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard_dict_bad");
    char *path = write_dict_shard(dir, "d.sls");
    size_t n = 0;
    uint8_t *f = tu_read_file(path, &n);
    assert_non_null(f);
    uint8_t *g = malloc(n);
    uint64_t off = sl__get_u64(f + SL_SHARD_H_DICT_OFF);
    uint32_t dn = sl__get_u32(f + SL_SHARD_H_DICT_SIZE);
    assert_int_equal(off, SL_SHARD_HEADER_SIZE_DICT);
    assert_true(dn > 0);

    /* SL_GEN_CORPUS=DIR: seeds for fuzz/fuzz_shard (the valid shard, and
     * the damaged ones below as the fuzzer's reseal would see them). */
    const char *gen = getenv("SL_GEN_CORPUS");
    char seed[4096];
    if (gen) {
        snprintf(seed, sizeof seed, "%s/dict-ok.sls", gen);
        assert_int_equal(tu_write_file(seed, f, n), 0);
    }

    /* A byte of the dictionary flipped: its checksum. */
    memcpy(g, f, n);
    g[off + dn / 2] ^= 0x10;
    expect_open_error(g, n, "corrupt dictionary: checksum mismatch");
    if (gen) {
        snprintf(seed, sizeof seed, "%s/dict-flip.sls", gen);
        assert_int_equal(tu_write_file(seed, g, n), 0);
    }
    /* ... and with the checksum made to match: zstd's own check. */
    memcpy(g, f, n);
    memset(g + off, 0xAB, 4); /* the dictionary magic */
    sl__put_u64(g + SL_SHARD_H_DICT_SUM, XXH3_64bits(g + off, dn));
    reseal(g);
    expect_open_error(g, n, "corrupt dictionary: not a zstd dictionary");
    /* Outside the data region. */
    memcpy(g, f, n);
    sl__put_u64(g + SL_SHARD_H_DICT_OFF, n);
    reseal(g);
    expect_open_error(g, n, "outside the data region");
    /* The ID in the header disagrees. */
    memcpy(g, f, n);
    sl__put_u32(g + SL_SHARD_H_DICT_ID,
                sl__get_u32(f + SL_SHARD_H_DICT_ID) + 1);
    reseal(g);
    expect_open_error(g, n, "corrupt dictionary: ID");
    /* Missing: the header says none, the records need it. */
    memcpy(g, f, n);
    sl__put_u32(g + SL_SHARD_H_DICT_SIZE, 0);
    reseal(g);
    expect_open_error(g, n, "holds no dictionary");
    if (gen) {
        snprintf(seed, sizeof seed, "%s/dict-missing.sls", gen);
        assert_int_equal(tu_write_file(seed, g, n), 0);
    }

    /* The same through a file: the message names it. */
    memcpy(g, f, n);
    g[off + 1] ^= 1;
    assert_int_equal(tu_write_file(path, g, n), 0);
    sl__shard_t *s = NULL;
    char err[512];
    assert_int_equal(sl__shard_open(path, &s, err, sizeof err), SL_ECORRUPT);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "dictionary"));
    free(g);
    free(f);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static void test_choose(void **state)
{
    (void)state;
    size_t sizes[NREC], total;
    uint8_t *all = text_records(sizes, &total);
    sl__choice_t c;
    char err[256];
    /* A generous bound: the shared test machine's timing must not decide. */
    assert_int_equal(
        sl__codec_choose(all, sizes, NREC, total, 1, 1e6, &c, err, sizeof err),
        0);
    if (c.codec != SL_CODEC_ZSTD && c.codec != SL_CODEC_ZSTD_DICT)
        fail_msg("auto chose %s on text", c.name);
    assert_int_equal(c.nrows, SL__CHOOSE_N);
    assert_true(c.codec != SL_CODEC_ZSTD_DICT || c.dict.n > 0);
    sl__bytes_free(&c.dict);

    /* Noise: nothing shrinks it; none. */
    for (int i = 0; i < NREC; i++)
        sizes[i] = 2000;
    uint8_t *noise = malloc(NREC * 2000);
    for (int i = 0; i < NREC; i++)
        rec_noise(i, noise + (size_t)i * 2000, 2000);
    assert_int_equal(sl__codec_choose(noise, sizes, NREC, NREC * 2000, 1, 1e6,
                                      &c, err, sizeof err),
                     0);
    assert_int_equal(c.codec, SL_CODEC_NONE);
    assert_null(c.dict.p);
    /* A decode bound nothing but none meets: none, on text too. */
    size_t tsizes[NREC];
    free(all);
    all = text_records(tsizes, &total);
    assert_int_equal(sl__codec_choose(all, tsizes, NREC, total, 1, 1e-9, &c,
                                      err, sizeof err),
                     0);
    assert_int_equal(c.codec, SL_CODEC_NONE);
    sl__bytes_free(&c.dict);
    /* Too few records for a dictionary: zstd-dict falls back, saying why. */
    assert_int_equal(
        sl__codec_choose(all, tsizes, 3, total, 0, 0, &c, err, sizeof err), 0);
    assert_int_equal(c.codec, SL_CODEC_ZSTD);
    assert_true(c.note[0] != 0);
    sl__bytes_free(&c.dict);
    free(noise);
    free(all);
}

/* tests/fixtures, from this file's path (CMake passes it absolute). */
static void fixture(char *buf, size_t n, const char *rel)
{
    const char *env = getenv("SL_FIXTURES");
    if (env && *env) {
        snprintf(buf, n, "%s/%s", env, rel);
        return;
    }
    snprintf(buf, n, "%s", __FILE__);
    char *u = strstr(buf, "/unit/test_shard_dict.c");
    if (u)
        snprintf(u, n - (size_t)(u - buf), "/fixtures/%s", rel);
    else
        snprintf(buf, n, "tests/fixtures/%s", rel);
}

/* A shard `sluice pack --text --doc-per-file --codec zstd` wrote before
 * format 1.1 (three documents of 40 lines "doc X line I: the quick brown
 * fox jumps over the lazy dog"). */
static void test_old_shard_reads(void **state)
{
    (void)state;
    char path[4096];
    fixture(path, sizeof path, "shard-1.0/zstd-text.sls");
    sl__shard_t *s = NULL;
    char err[512];
    assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
    int major, minor;
    sl__shard_version(s, &major, &minor);
    assert_int_equal(major * 10 + minor, 10);
    assert_int_equal(sl__shard_count(s), 3);
    assert_int_equal(sl__shard_dict_size(s), 0);
    sl__bytes_t out = {0}, scratch = {0};
    const char *docs = "abc";
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl__shard_entry(s, (uint64_t)i)->codec, SL_CODEC_ZSTD);
        assert_int_equal(sl__shard_read(s, (uint64_t)i, &out, &scratch, NULL,
                                        err, sizeof err),
                         0);
        char want[4096];
        size_t at = 0;
        for (int l = 1; l <= 40; l++)
            at += (size_t)snprintf(want + at, sizeof want - at,
                                   "doc %c line %d: the quick brown fox jumps "
                                   "over the lazy dog\n",
                                   docs[i], l);
        assert_int_equal(out.n, at);
        assert_memory_equal(out.p, want, at);
    }
    sl__shard_close(s);
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_dict_roundtrip),
        cmocka_unit_test(test_shard_dict_roundtrip),
        cmocka_unit_test(test_shard_dict_threads),
        cmocka_unit_test(test_shard_dict_corrupt),
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_old_shard_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
