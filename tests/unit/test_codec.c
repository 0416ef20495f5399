/* codec: round trips on compressible and random data, and malformed or
 * mis-sized input rejected with SL_ECORRUPT. */
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "testutil.h"

static const int codecs[] = {SL_CODEC_NONE, SL_CODEC_LZ4, SL_CODEC_ZSTD};
#define NCODECS 3

static void fill_text(uint8_t *p, size_t n)
{
    static const char words[] = "the quick brown fox jumps over the lazy dog ";
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)words[i % (sizeof words - 1)];
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static void round_trip(int codec, const uint8_t *src, size_t n)
{
    sl__bytes_t c = {0};
    char err[256];
    assert_int_equal(sl__codec_compress(codec, src, n, &c, err, sizeof err), 0);
    assert_true(c.n <= sl__codec_bound(codec, n));
    uint8_t *back = malloc(n + 1);
    assert_non_null(back);
    assert_int_equal(
        sl__codec_decompress(codec, c.p, c.n, back, n, err, sizeof err), 0);
    if (n)
        assert_memory_equal(back, src, n);
    free(back);
    sl__bytes_free(&c);
}

static void test_names(void **state)
{
    (void)state;
    for (int i = 0; i < NCODECS; i++)
        assert_int_equal(sl__codec_from_name(sl__codec_name(codecs[i])),
                         codecs[i]);
    assert_int_equal(sl__codec_from_name("gzip"), -1);
    assert_int_equal(sl__codec_from_name(NULL), -1);
    assert_string_equal(sl__codec_name(99), "unknown");
}

static void test_round_trip(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 7, 4096, 100000, 1 << 20};
    size_t max = 1 << 20;
    uint8_t *text = malloc(max), *rnd = malloc(max);
    fill_text(text, max);
    fill_random(rnd, max, 42);
    for (int c = 0; c < NCODECS; c++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            round_trip(codecs[c], text, sizes[k]);
            round_trip(codecs[c], rnd, sizes[k]);
        }
    free(text);
    free(rnd);
}

static void test_compresses(void **state)
{
    (void)state;
    size_t n = 100000;
    uint8_t *text = malloc(n);
    fill_text(text, n);
    sl__bytes_t c = {0};
    for (int k = 1; k < NCODECS; k++) {
        assert_int_equal(sl__codec_compress(codecs[k], text, n, &c, NULL, 0),
                         0);
        assert_true(c.n < n / 10);
    }
    sl__bytes_free(&c);
    free(text);
}

static void test_malformed(void **state)
{
    (void)state;
    size_t n = 50000;
    uint8_t *text = malloc(n), *back = malloc(n + 100);
    fill_text(text, n);
    char err[256];
    sl__bytes_t c = {0};
    for (int k = 0; k < NCODECS; k++) {
        int codec = codecs[k];
        assert_int_equal(sl__codec_compress(codec, text, n, &c, NULL, 0), 0);
        /* Wrong expected size, both ways. */
        err[0] = 0;
        assert_int_equal(
            sl__codec_decompress(codec, c.p, c.n, back, n - 1, err, sizeof err),
            SL_ECORRUPT);
        assert_true(strlen(err) > 0);
        assert_int_equal(
            sl__codec_decompress(codec, c.p, c.n, back, n + 1, err, sizeof err),
            SL_ECORRUPT);
        if (codec == SL_CODEC_NONE)
            continue;
        /* Truncated stream. */
        assert_int_equal(
            sl__codec_decompress(codec, c.p, c.n / 2, back, n, err, sizeof err),
            SL_ECORRUPT);
        /* Garbage. */
        uint8_t junk[300];
        fill_random(junk, sizeof junk, 7);
        assert_int_equal(sl__codec_decompress(codec, junk, sizeof junk, back, n,
                                              err, sizeof err),
                         SL_ECORRUPT);
        /* Empty input for a non-empty record. */
        assert_int_equal(
            sl__codec_decompress(codec, c.p, 0, back, n, err, sizeof err),
            SL_ECORRUPT);
    }
    assert_int_equal(sl__codec_decompress(77, text, 10, back, 10, NULL, 0),
                     SL_EUNSUPPORTED);
    assert_int_equal(sl__codec_compress(77, text, 10, &c, NULL, 0), SL_EINVAL);
    sl__bytes_free(&c);
    free(text);
    free(back);
}

/* Every single-byte flip of a small compressed stream either fails cleanly
 * or yields exactly raw_n bytes (never more: the buffer is exact). */
static void test_flips(void **state)
{
    (void)state;
    size_t n = 2000;
    uint8_t text[2000];
    fill_text(text, n);
    fill_random(text + 1000, 500, 3);
    sl__bytes_t c = {0};
    uint8_t *back = malloc(n);
    for (int k = 1; k < NCODECS; k++) {
        assert_int_equal(sl__codec_compress(codecs[k], text, n, &c, NULL, 0),
                         0);
        for (size_t i = 0; i < c.n; i++) {
            c.p[i] ^= 0x5a;
            int rc =
                sl__codec_decompress(codecs[k], c.p, c.n, back, n, NULL, 0);
            assert_true(rc == 0 || rc == SL_ECORRUPT);
            c.p[i] ^= 0x5a;
        }
    }
    free(back);
    sl__bytes_free(&c);
}

/* A zstd bomb: one frame of RLE blocks that says (and would write) 1 GiB,
 * in a record that says 1000 bytes. Refused from the frame header, before
 * any decompression (issue 14 item 10). */
static void test_zstd_frame_larger_than_record(void **state)
{
    (void)state;
    uint8_t f[4 + 1 + 8 + 4 * 8];
    size_t n = 0;
    sl__put_u32(f, 0xFD2FB528u);
    f[4] = 0xE0; /* single segment, 8-byte content size */
    sl__put_u64(f + 5, (uint64_t)1 << 30);
    n = 13;
    for (int i = 0; i < 8; i++) { /* RLE blocks of 128 KiB (truncated run) */
        uint32_t h = (1u << 17) << 3 | 1u << 1 | (i == 7);
        f[n++] = (uint8_t)h;
        f[n++] = (uint8_t)(h >> 8);
        f[n++] = (uint8_t)(h >> 16);
        f[n++] = 'x';
    }
    uint8_t out[1000];
    char err[256];
    assert_int_equal(sl__codec_decompress(SL_CODEC_ZSTD, f, n, out, sizeof out,
                                          err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "declares 1073741824 bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_compresses),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_flips),
        cmocka_unit_test(test_zstd_frame_larger_than_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
