/* data/shard: write and read back with each codec, random access, atomic
 * writes, and corruption of every part detected with a message that names
 * the shard, the record and the cause. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "codec/codec.h"
#include "data/shard.h"
#include "data/shard_format.h"
#include "testutil.h"

#define NREC 40

static const int codecs[] = {SL_CODEC_NONE, SL_CODEC_LZ4, SL_CODEC_ZSTD};

/* Record i: size varies, record 3 is empty; half text, half noise. */
static size_t rec_size(int i)
{
    return i == 3 ? 0 : (size_t)(i * 997 % 6000) + 1;
}

static void rec_fill(int i, uint8_t *p, size_t n)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ULL + 11;
    for (size_t k = 0; k < n; k++) {
        if (k < n / 2) {
            p[k] = (uint8_t)("abcabcabd"[k % 9] + i);
        } else {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p[k] = (uint8_t)x;
        }
    }
}

static void rec_name(int i, char *buf, size_t n)
{
    snprintf(buf, n, "n%08d/img_%d.JPEG", i % 3, i);
}

static int64_t rec_label(int i)
{
    return i % 3 == 2 ? (int64_t)1 << 40 : i % 3;
}

/* Writes NREC records to dir/name with codec; returns the path. */
static char *write_shard(const char *dir, const char *name, int codec)
{
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
    sl__shard_writer_t *w = NULL;
    char err[512];
    assert_int_equal(sl__shard_writer_open(path, codec, &w, err, sizeof err),
                     0);
    uint8_t buf[6001];
    for (int i = 0; i < NREC; i++) {
        char nm[64];
        rec_name(i, nm, sizeof nm);
        size_t n = rec_size(i);
        rec_fill(i, buf, n);
        assert_int_equal(
            sl__shard_writer_add(w, buf, n, rec_label(i), nm, err, sizeof err),
            0);
    }
    assert_int_equal(sl__shard_writer_count(w), NREC);
    assert_true(sl__shard_writer_bytes(w) > SL_SHARD_HEADER_SIZE);
    assert_int_equal(sl__shard_writer_finish(w, err, sizeof err), 0);
    return path;
}

static void check_record(const sl__shard_t *s, int i, sl__bytes_t *out,
                         sl__bytes_t *scratch)
{
    char err[512], nm[64];
    uint8_t want[6001];
    size_t n = rec_size(i);
    rec_fill(i, want, n);
    rec_name(i, nm, sizeof nm);
    uint64_t stored = 99;
    int rc =
        sl__shard_read(s, (uint64_t)i, out, scratch, &stored, err, sizeof err);
    if (rc)
        fail_msg("record %d: %s", i, err);
    assert_int_equal(out->n, n);
    if (n)
        assert_memory_equal(out->p, want, n);
    const sl__shard_entry_t *e = sl__shard_entry(s, (uint64_t)i);
    assert_non_null(e);
    assert_string_equal(e->name, nm);
    assert_true(e->label == rec_label(i));
    assert_int_equal(e->raw_size, n);
    assert_int_equal(stored, e->stored_size);
}

static void test_round_trip(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-rt");
    for (int c = 0; c < 3; c++) {
        char name[32];
        snprintf(name, sizeof name, "rt-%d.sls", c);
        char *path = write_shard(dir, name, codecs[c]);
        sl__shard_t *s = NULL;
        char err[512];
        if (sl__shard_open(path, &s, err, sizeof err))
            fail_msg("%s", err);
        assert_int_equal(sl__shard_count(s), NREC);
        assert_string_equal(sl__shard_path(s), path);
        int major, minor;
        sl__shard_version(s, &major, &minor);
        assert_int_equal(major, SL_SHARD_VERSION_MAJOR);
        assert_null(sl__shard_entry(s, NREC));
        sl__bytes_t out = {0}, scratch = {0};
        for (int i = 0; i < NREC; i++) {
            check_record(s, i, &out, &scratch);
            /* Records that do not shrink are kept raw. */
            const sl__shard_entry_t *e = sl__shard_entry(s, (uint64_t)i);
            if (e->raw_size < 64)
                assert_int_equal(e->codec, SL_CODEC_NONE);
            else
                assert_int_equal(e->codec, codecs[c]);
        }
        /* Random access: any order, each read independent. */
        for (int k = 0; k < 3 * NREC; k++)
            check_record(s, (k * 17 + 5) % NREC, &out, &scratch);
        assert_int_equal(
            sl__shard_read(s, NREC, &out, &scratch, NULL, err, sizeof err),
            SL_ERANGE);
        sl__shard_close(s);

        /* The same bytes through memory give the same records. */
        size_t n;
        uint8_t *bytes = tu_read_file(path, &n);
        assert_int_equal(sl__shard_open_mem(bytes, n, &s, err, sizeof err), 0);
        for (int i = NREC - 1; i >= 0; i--)
            check_record(s, i, &out, &scratch);
        sl__shard_close(s);
        free(bytes);
        sl__bytes_free(&out);
        sl__bytes_free(&scratch);
        free(path);
    }
    tu_rmtree(dir);
    free(dir);
}

static void test_empty_shard(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-empty");
    char *path = NULL;
    assert_true(asprintf(&path, "%s/empty.sls", dir) > 0);
    sl__shard_writer_t *w = NULL;
    assert_int_equal(sl__shard_writer_open(path, SL_CODEC_ZSTD, &w, NULL, 0),
                     0);
    assert_int_equal(sl__shard_writer_finish(w, NULL, 0), 0);
    sl__shard_t *s = NULL;
    assert_int_equal(sl__shard_open(path, &s, NULL, 0), 0);
    assert_int_equal(sl__shard_count(s), 0);
    sl__shard_close(s);
    sl__shard_close(NULL);
    sl__shard_writer_abort(NULL);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void test_atomic(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-atomic");
    char *path = NULL;
    assert_true(asprintf(&path, "%s/a.sls", dir) > 0);
    sl__shard_writer_t *w = NULL;
    assert_int_equal(sl__shard_writer_open(path, SL_CODEC_LZ4, &w, NULL, 0), 0);
    assert_int_equal(sl__shard_writer_add(w, "hello", 5, 0, "x", NULL, 0), 0);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(count_entries(dir), 1); /* the temp file */
    sl__shard_writer_abort(w);
    assert_int_equal(count_entries(dir), 0);

    /* An old shard stays whole until the new one replaces it. */
    free(write_shard(dir, "a.sls", SL_CODEC_NONE));
    assert_int_equal(sl__shard_writer_open(path, SL_CODEC_NONE, &w, NULL, 0),
                     0);
    assert_int_equal(sl__shard_writer_add(w, "hello", 5, 7, "y", NULL, 0), 0);
    sl__shard_t *s = NULL;
    assert_int_equal(sl__shard_open(path, &s, NULL, 0), 0);
    assert_int_equal(sl__shard_count(s), NREC);
    sl__shard_close(s);
    assert_int_equal(sl__shard_writer_finish(w, NULL, 0), 0);
    assert_int_equal(count_entries(dir), 1);
    assert_int_equal(sl__shard_open(path, &s, NULL, 0), 0);
    assert_int_equal(sl__shard_count(s), 1);
    assert_string_equal(sl__shard_entry(s, 0)->name, "y");
    sl__shard_close(s);

    /* A folder that does not exist: open fails, names the path. */
    char err[512];
    char *bad = NULL;
    assert_true(asprintf(&bad, "%s/no/such/x.sls", dir) > 0);
    assert_int_equal(
        sl__shard_writer_open(bad, SL_CODEC_NONE, &w, err, sizeof err), SL_EIO);
    assert_non_null(strstr(err, bad));
    assert_null(w);
    free(bad);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static void test_bad_names(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-names");
    char *path = NULL;
    assert_true(asprintf(&path, "%s/n.sls", dir) > 0);
    sl__shard_writer_t *w = NULL;
    char err[512];
    assert_int_equal(sl__shard_writer_open(path, SL_CODEC_NONE, &w, NULL, 0),
                     0);
    assert_int_equal(
        sl__shard_writer_add(w, "a", 1, 0, "bad\nname", err, sizeof err),
        SL_EINVAL);
    char *longname = malloc(70000);
    memset(longname, 'a', 69999);
    longname[69999] = 0;
    assert_int_equal(
        sl__shard_writer_add(w, "a", 1, 0, longname, err, sizeof err),
        SL_ERANGE);
    free(longname);
    /* The writer is still usable after a rejected record. */
    assert_int_equal(sl__shard_writer_add(w, "a", 1, 0, "", err, sizeof err),
                     0);
    assert_int_equal(sl__shard_writer_finish(w, err, sizeof err), 0);
    sl__shard_t *s = NULL;
    assert_int_equal(sl__shard_open(path, &s, NULL, 0), 0);
    assert_int_equal(sl__shard_count(s), 1);
    assert_string_equal(sl__shard_entry(s, 0)->name, "");
    sl__shard_close(s);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

/* ---- corruption */

typedef struct shard_file {
    char *path;
    uint8_t *p;
    size_t n;
} shard_file_t;

static shard_file_t load(const char *dir, const char *name, int codec)
{
    shard_file_t f;
    f.path = write_shard(dir, name, codec);
    f.p = tu_read_file(f.path, &f.n);
    assert_non_null(f.p);
    return f;
}

static void put_back(const shard_file_t *f, size_t n)
{
    assert_int_equal(tu_write_file(f->path, f->p, n), 0);
}

/* Makes checksums right again after an edit, so that deeper checks run. */
static void reseal(shard_file_t *f)
{
    uint64_t at = sl__get_u64(f->p + SL_SHARD_H_INDEX_OFF);
    uint64_t sz = sl__get_u64(f->p + SL_SHARD_H_INDEX_SIZE);
    sl__put_u64(f->p + SL_SHARD_H_INDEX_SUM, XXH3_64bits(f->p + at, sz));
    sl__put_u64(f->p + SL_SHARD_HEADER_SIZE - 8,
                XXH3_64bits(f->p, SL_SHARD_HEADER_SIZE - 8));
}

static uint8_t *entry_at(shard_file_t *f, int i)
{
    uint64_t at = sl__get_u64(f->p + SL_SHARD_H_INDEX_OFF);
    return f->p + at + (size_t)i * SL_SHARD_ENTRY_SIZE;
}

static void expect_open_fails(const shard_file_t *f, int code,
                              const char *cause)
{
    sl__shard_t *s = NULL;
    char err[512] = "";
    int rc = sl__shard_open(f->path, &s, err, sizeof err);
    if (rc != code)
        fail_msg("open: want %d got %d (%s)", code, rc, err);
    assert_null(s);
    assert_non_null(strstr(err, f->path));
    if (!strstr(err, cause))
        fail_msg("'%s' lacks '%s'", err, cause);
    /* Memory gives the same verdict. */
    size_t n;
    uint8_t *bytes = tu_read_file(f->path, &n);
    assert_int_equal(sl__shard_open_mem(bytes, n, &s, err, sizeof err), code);
    assert_non_null(strstr(err, "<memory>"));
    free(bytes);
}

/* The damaged shard opens, but reading record i fails with code, naming
 * the file and cause; record i + 1 reads right. */
static void expect_read_fails(const shard_file_t *f, int i, int code,
                              const char *cause)
{
    sl__shard_t *s = NULL;
    char err[512];
    assert_int_equal(sl__shard_open(f->path, &s, err, sizeof err), 0);
    sl__bytes_t out = {0}, scratch = {0};
    assert_int_equal(
        sl__shard_read(s, i, &out, &scratch, NULL, err, sizeof err), code);
    assert_non_null(strstr(err, f->path));
    if (!strstr(err, cause))
        fail_msg("'%s' lacks '%s'", err, cause);
    check_record(s, i + 1, &out, &scratch);
    sl__shard_close(s);
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
}

/* Frees f and removes its directory. */
static void shard_file_remove(shard_file_t *f, char *dir)
{
    free(f->p);
    free(f->path);
    tu_rmtree(dir);
    free(dir);
}

static void test_damaged_record(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-dmg");
    for (int c = 0; c < 3; c++) {
        shard_file_t f = load(dir, "d.sls", codecs[c]);
        int victim = 17;
        uint64_t off = sl__get_u64(entry_at(&f, victim) + SL_SHARD_E_OFFSET);
        uint32_t sz = sl__get_u32(entry_at(&f, victim) + SL_SHARD_E_STORED);
        f.p[off + sz / 2] ^= 0x01;
        put_back(&f, f.n);
        sl__shard_t *s = NULL;
        char err[512];
        assert_int_equal(sl__shard_open(f.path, &s, err, sizeof err), 0);
        sl__bytes_t out = {0}, scratch = {0};
        int rc = sl__shard_read(s, (uint64_t)victim, &out, &scratch, NULL, err,
                                sizeof err);
        if (codecs[c] == SL_CODEC_NONE)
            assert_int_equal(rc, SL_ECHECKSUM);
        else
            assert_true(rc == SL_ECHECKSUM || rc == SL_ECORRUPT);
        char want[256];
        snprintf(want, sizeof want,
                 "%s: record 17 (n00000002/img_17.JPEG): ", f.path);
        if (strstr(err, want) != err)
            fail_msg("'%s' does not start with '%s'", err, want);
        if (rc == SL_ECHECKSUM)
            assert_non_null(strstr(err, "checksum mismatch"));
        /* The neighbours are untouched. */
        check_record(s, victim - 1, &out, &scratch);
        check_record(s, victim + 1, &out, &scratch);
        sl__shard_close(s);
        sl__bytes_free(&out);
        sl__bytes_free(&scratch);
        free(f.p);
        free(f.path);
    }
    tu_rmtree(dir);
    free(dir);
}

static void test_truncated(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-trunc");
    shard_file_t f = load(dir, "t.sls", SL_CODEC_ZSTD);
    size_t cuts[] = {0, 1, 8, 40, 63, 64, 100, f.n / 2, f.n - 41, f.n - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        put_back(&f, cuts[k]);
        expect_open_fails(&f, SL_ECORRUPT, "truncated");
    }
    /* Bytes appended after the index. */
    uint8_t *more = malloc(f.n + 3);
    memcpy(more, f.p, f.n);
    memset(more + f.n, 0, 3);
    assert_int_equal(tu_write_file(f.path, more, f.n + 3), 0);
    expect_open_fails(&f, SL_ECORRUPT, "trailing bytes");
    free(more);
    shard_file_remove(&f, dir);
}

static void test_bad_header(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-hdr");
    shard_file_t f = load(dir, "h.sls", SL_CODEC_LZ4);

    f.p[0] = 'X';
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "bad magic");
    f.p[0] = 0x89;

    f.p[SL_SHARD_H_COUNT] ^= 1; /* header checksum catches it */
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "corrupt header: checksum mismatch");
    f.p[SL_SHARD_H_COUNT] ^= 1;

    sl__put_u16(f.p + SL_SHARD_H_MAJOR, 2);
    reseal(&f);
    put_back(&f, f.n);
    expect_open_fails(&f, SL_EUNSUPPORTED, "version 2.0");
    sl__put_u16(f.p + SL_SHARD_H_MAJOR, 1);

    /* A newer minor version with a larger header would move the data; a
     * header size that is not a multiple of 8 is simply wrong. */
    sl__put_u32(f.p + SL_SHARD_H_HEADER_SIZE, 60);
    reseal(&f);
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "header size");
    sl__put_u32(f.p + SL_SHARD_H_HEADER_SIZE, SL_SHARD_HEADER_SIZE);

    uint64_t count = sl__get_u64(f.p + SL_SHARD_H_COUNT);
    sl__put_u64(f.p + SL_SHARD_H_COUNT, UINT64_MAX / 2);
    reseal(&f);
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "do not fit");
    sl__put_u64(f.p + SL_SHARD_H_COUNT, count);

    /* Index offsets out of the file: only the header sum is redone (reseal
     * would read the index from there). */
    uint64_t idx = sl__get_u64(f.p + SL_SHARD_H_INDEX_OFF);
    uint64_t bad_idx[] = {UINT64_MAX - 10, 0, 63, f.n + 1};
    for (size_t k = 0; k < sizeof bad_idx / sizeof bad_idx[0]; k++) {
        sl__put_u64(f.p + SL_SHARD_H_INDEX_OFF, bad_idx[k]);
        sl__put_u64(f.p + SL_SHARD_HEADER_SIZE - 8,
                    XXH3_64bits(f.p, SL_SHARD_HEADER_SIZE - 8));
        put_back(&f, f.n);
        expect_open_fails(&f, SL_ECORRUPT, "index offset");
    }
    sl__put_u64(f.p + SL_SHARD_H_INDEX_OFF, idx);
    reseal(&f);

    put_back(&f, f.n); /* whole again */
    sl__shard_t *s = NULL;
    assert_int_equal(sl__shard_open(f.path, &s, NULL, 0), 0);
    sl__shard_close(s);
    shard_file_remove(&f, dir);
}

static void test_bad_index(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-idx");
    shard_file_t f = load(dir, "i.sls", SL_CODEC_NONE);
    uint8_t *e = entry_at(&f, 5);

    e[SL_SHARD_E_LABEL] ^= 4; /* index checksum catches it */
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "corrupt index: checksum mismatch");
    e[SL_SHARD_E_LABEL] ^= 4;

    /* With checksums made right, the bounds checks must hold by
     * themselves. */
    uint64_t off = sl__get_u64(e + SL_SHARD_E_OFFSET);
    uint64_t idx = sl__get_u64(f.p + SL_SHARD_H_INDEX_OFF);
    uint64_t bad_offsets[] = {0,       10,         idx,
                              idx - 1, UINT64_MAX, UINT64_MAX - 100};
    for (size_t k = 0; k < sizeof bad_offsets / sizeof bad_offsets[0]; k++) {
        sl__put_u64(e + SL_SHARD_E_OFFSET, bad_offsets[k]);
        reseal(&f);
        put_back(&f, f.n);
        expect_open_fails(&f, SL_ECORRUPT, "record 5: bytes [");
    }
    sl__put_u64(e + SL_SHARD_E_OFFSET, off);

    uint32_t raw = sl__get_u32(e + SL_SHARD_E_RAW);
    sl__put_u32(e + SL_SHARD_E_RAW, raw + 1);
    reseal(&f);
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "record 5: uncompressed");
    sl__put_u32(e + SL_SHARD_E_RAW, raw);

    uint32_t name_off = sl__get_u32(e + SL_SHARD_E_NAME_OFF);
    uint32_t bad_names[] = {UINT32_MAX, UINT32_MAX - 3, 1u << 31,
                            (uint32_t)(f.n)};
    for (size_t k = 0; k < sizeof bad_names / sizeof bad_names[0]; k++) {
        sl__put_u32(e + SL_SHARD_E_NAME_OFF, bad_names[k]);
        reseal(&f);
        put_back(&f, f.n);
        expect_open_fails(&f, SL_ECORRUPT, "record 5: name outside");
    }
    sl__put_u32(e + SL_SHARD_E_NAME_OFF, name_off + 1); /* NUL moves */
    reseal(&f);
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "record 5: name outside");
    sl__put_u32(e + SL_SHARD_E_NAME_OFF, name_off);
    uint16_t name_len = sl__get_u16(e + SL_SHARD_E_NAME_LEN);
    sl__put_u16(e + SL_SHARD_E_NAME_LEN, 65535);
    reseal(&f);
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "record 5: name outside");
    sl__put_u16(e + SL_SHARD_E_NAME_LEN, name_len);

    /* A control byte in a name. */
    uint64_t names_at = idx + (uint64_t)NREC * SL_SHARD_ENTRY_SIZE;
    f.p[names_at + name_off] = '\x1b';
    reseal(&f);
    put_back(&f, f.n);
    expect_open_fails(&f, SL_ECORRUPT, "control byte");
    f.p[names_at + name_off] = 'n';

    /* An unknown codec is found when the record is read. */
    e[SL_SHARD_E_CODEC] = 9;
    reseal(&f);
    put_back(&f, f.n);
    expect_read_fails(&f, 5, SL_EUNSUPPORTED,
                      "record 5 (n00000002/img_5.JPEG)");
    shard_file_remove(&f, dir);
}

/* A zstd record whose index says a different raw size: corrupt, named. */
static void test_raw_size_lie(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-lie");
    shard_file_t f = load(dir, "l.sls", SL_CODEC_ZSTD);
    uint8_t *e = entry_at(&f, 9);
    sl__put_u32(e + SL_SHARD_E_RAW, sl__get_u32(e + SL_SHARD_E_RAW) + 100);
    reseal(&f);
    put_back(&f, f.n);
    expect_read_fails(&f, 9, SL_ECORRUPT, "record 9 (n00000000/img_9.JPEG)");
    shard_file_remove(&f, dir);
}

/* A compressed record whose index says 4 GiB - 1 raw bytes: refused from
 * what its stored bytes say (a zstd frame's declared size, lz4's ratio)
 * before the raw buffer is reserved; the index alone reserved 4 GiB per
 * read ("out of memory" under a limit). */
static void test_raw_size_huge(void **state)
{
    (void)state;
    static const struct {
        int codec;
        const char *cause;
    } c[] = {{SL_CODEC_ZSTD, "zstd frame declares"},
             {SL_CODEC_LZ4, "cannot give 4294967295 (255:1 at most)"}};
    for (int k = 0; k < 2; k++) {
        char *dir = tu_tmpdir("shard-huge");
        shard_file_t f = load(dir, "h.sls", c[k].codec);
        sl__put_u32(entry_at(&f, 9) + SL_SHARD_E_RAW, UINT32_MAX);
        reseal(&f);
        put_back(&f, f.n);
        sl__shard_t *s = NULL;
        char err[512];
        assert_int_equal(sl__shard_open(f.path, &s, err, sizeof err), 0);
        sl__bytes_t out = {0}, scratch = {0};
        assert_int_equal(
            sl__shard_read(s, 9, &out, &scratch, NULL, err, sizeof err),
            SL_ECORRUPT);
        if (!strstr(err, "record 9") || !strstr(err, c[k].cause))
            fail_msg("'%s' lacks '%s'", err, c[k].cause);
        assert_true(out.cap < ((size_t)1 << 24)); /* nothing of 4 GiB */
        check_record(s, 10, &out, &scratch);
        sl__shard_close(s);
        sl__bytes_free(&out), sl__bytes_free(&scratch);
        shard_file_remove(&f, dir);
    }
}

/* Readers share one shard: each thread its own buffers. */
static void *reader_main(void *arg)
{
    const sl__shard_t *s = arg;
    sl__bytes_t out = {0}, scratch = {0};
    for (int k = 0; k < 20 * NREC; k++)
        check_record(s, (k * 7 + 3) % NREC, &out, &scratch);
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("shard-thr");
    char *path = write_shard(dir, "t.sls", SL_CODEC_LZ4);
    sl__shard_t *s = NULL;
    assert_int_equal(sl__shard_open(path, &s, NULL, 0), 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, reader_main, s), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    sl__shard_close(s);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static void test_open_missing(void **state)
{
    (void)state;
    sl__shard_t *s = NULL;
    char err[512];
    assert_int_equal(sl__shard_open("/nonexistent/x.sls", &s, err, sizeof err),
                     SL_ENOTFOUND);
    assert_non_null(strstr(err, "/nonexistent/x.sls"));
    assert_int_equal(sl__shard_open("/", &s, err, sizeof err), SL_EIO);
    /* A FIFO is refused at once, not waited on. */
    char *dir = tu_tmpdir("shard-fifo");
    char *fifo = NULL;
    assert_true(asprintf(&fifo, "%s/f.sls", dir) > 0);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(sl__shard_open(fifo, &s, err, sizeof err), SL_EIO);
    assert_non_null(strstr(err, "not a regular file"));
    free(fifo);
    tu_rmtree(dir);
    free(dir);
    assert_int_equal(sl__shard_open_mem(NULL, 0, &s, err, sizeof err),
                     SL_ECORRUPT);
}

/* With SL_GEN_CORPUS=DIR set, writes the fuzz seed corpus into DIR (see
 * fuzz/corpus/fuzz_shard/): small valid shards of each codec, and damaged
 * copies. Does nothing otherwise. */
static void test_gen_corpus(void **state)
{
    (void)state;
    const char *out = getenv("SL_GEN_CORPUS");
    if (!out || !*out)
        return;
    char *dir = tu_tmpdir("shard-corpus");
    for (int c = 0; c < 3; c++) {
        char *path = NULL;
        assert_true(asprintf(&path, "%s/seed.sls", dir) > 0);
        sl__shard_writer_t *w = NULL;
        assert_int_equal(sl__shard_writer_open(path, codecs[c], &w, NULL, 0),
                         0);
        uint8_t buf[300];
        for (int i = 0; i < 5; i++) {
            size_t n = i == 2 ? 0 : (size_t)(40 + 60 * i);
            rec_fill(i, buf, n);
            char nm[16];
            snprintf(nm, sizeof nm, "c%d/%d.jpg", i % 2, i);
            assert_int_equal(
                sl__shard_writer_add(w, buf, n, i % 2, nm, NULL, 0), 0);
        }
        assert_int_equal(sl__shard_writer_finish(w, NULL, 0), 0);
        size_t n;
        uint8_t *p = tu_read_file(path, &n);
        const char *cn = sl__codec_name(codecs[c]);
        char name[64];
        snprintf(name, sizeof name, "valid-%s.sls", cn);
        tu_write_at(out, name, p, n);
        /* One damaged copy per codec: a flipped data byte. */
        p[SL_SHARD_HEADER_SIZE + 50] ^= 0x20;
        snprintf(name, sizeof name, "data-flip-%s.sls", cn);
        tu_write_at(out, name, p, n);
        p[SL_SHARD_HEADER_SIZE + 50] ^= 0x20;
        if (codecs[c] == SL_CODEC_NONE) {
            /* Labels that are no class index (issue 14 item 7): record 1
             * relabelled, the index checksums made to match. */
            const int64_t labels[] = {-1, (int64_t)1 << 40,
                                      SL__SHARD_CLASSES_MAX};
            const char *names[] = {"label-negative.sls", "label-huge.sls",
                                   "label-past-bound.sls"};
            uint64_t at = sl__get_u64(p + SL_SHARD_H_INDEX_OFF);
            uint64_t len = sl__get_u64(p + SL_SHARD_H_INDEX_SIZE);
            for (int k = 0; k < 3; k++) {
                uint8_t *q = malloc(n);
                memcpy(q, p, n);
                sl__put_u64(q + at + SL_SHARD_ENTRY_SIZE + SL_SHARD_E_LABEL,
                            (uint64_t)labels[k]);
                sl__put_u64(q + SL_SHARD_H_INDEX_SUM, XXH3_64bits(q + at, len));
                sl__put_u64(q + SL_SHARD_HEADER_SIZE - 8,
                            XXH3_64bits(q, SL_SHARD_HEADER_SIZE - 8));
                sl__shard_t *s = NULL;
                assert_int_equal(sl__shard_open_mem(q, n, &s, NULL, 0), 0);
                assert_int_equal(sl__shard_entry(s, 1)->label, labels[k]);
                char err[256];
                assert_int_equal(
                    sl__shard_label_check(s, 1, -1, err, sizeof err),
                    SL_ECORRUPT);
                sl__shard_close(s);
                tu_write_at(out, names[k], q, n);
                free(q);
            }
        }
        if (codecs[c] == SL_CODEC_ZSTD) {
            tu_write_at(out, "trunc-header.sls", p, 40);
            tu_write_at(out, "trunc-index.sls", p, n - 30);
            p[3] = 'X';
            tu_write_at(out, "bad-magic.sls", p, n);
        }
        free(p);
        free(path);
    }
    char *path = NULL;
    assert_true(asprintf(&path, "%s/empty.sls", dir) > 0);
    sl__shard_writer_t *w = NULL;
    assert_int_equal(sl__shard_writer_open(path, SL_CODEC_NONE, &w, NULL, 0),
                     0);
    assert_int_equal(sl__shard_writer_finish(w, NULL, 0), 0);
    size_t n;
    uint8_t *p = tu_read_file(path, &n);
    tu_write_at(out, "empty.sls", p, n);
    free(p);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_empty_shard),
        cmocka_unit_test(test_atomic),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_damaged_record),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_bad_index),
        cmocka_unit_test(test_raw_size_lie),
        cmocka_unit_test(test_raw_size_huge),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_open_missing),
        cmocka_unit_test(test_gen_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
