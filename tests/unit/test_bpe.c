/* Byte-level BPE: loaders (real files, malformed and truncated ones),
 * known ids (checked with tiktoken 0.14), special tokens, invalid UTF-8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "text/bpe_internal.h"
#include "text/tokenizer.h"

static sl__tok_t *gpt2;

static int setup_gpt2(void **state)
{
    (void)state;
    char *d = tu_shared_data("vocab");
    if (!d)
        return 0;
    char e[4096], m[4096], err[512];
    snprintf(e, sizeof e, "%s/gpt2-encoder.json", d);
    snprintf(m, sizeof m, "%s/gpt2-vocab.bpe", d);
    free(d);
    int rc = sl__bpe_load_gpt2(e, m, &gpt2, err, sizeof err);
    if (rc)
        fprintf(stderr, "load: %s\n", err);
    return rc;
}

static int teardown_gpt2(void **state)
{
    (void)state;
    sl__tok_free(gpt2);
    return 0;
}

static void expect_ids(const sl__tok_t *t, const char *text, size_t n,
                       int special, const int32_t *want, size_t nwant)
{
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    char err[256];
    assert_int_equal(
        sl__tok_encode(t, text, n, special, s, &ids, err, sizeof err), 0);
    assert_int_equal(ids.n, nwant);
    for (size_t i = 0; i < nwant; i++)
        assert_int_equal(ids.v[i], want[i]);
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(s);
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__})
#define NIDS(...) (sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define EXPECT(t, text, special, ...)                                          \
    expect_ids(t, text, sizeof(text) - 1, special, IDS(__VA_ARGS__),           \
               NIDS(__VA_ARGS__))

static void test_gpt2_known_ids(void **state)
{
    (void)state;
    if (!gpt2)
        skip();
    assert_int_equal(sl__tok_vocab_size(gpt2), 50257);
    assert_int_equal(sl__tok_id(gpt2, "<|endoftext|>"), 50256);
    EXPECT(gpt2, "Hello world, it's <|endoftext|> 123456 test   \n\n", 0, 15496,
           995, 11, 340, 338, 1279, 91, 437, 1659, 5239, 91, 29, 17031, 29228,
           1332, 220, 220, 220, 628);
    EXPECT(gpt2, "Hello world, it's <|endoftext|> 123456 test   \n\n", 1, 15496,
           995, 11, 340, 338, 220, 50256, 17031, 29228, 1332, 220, 220, 220,
           628);
    expect_ids(gpt2, "", 0, 0, NULL, 0);
}

static void test_gpt2_invalid_utf8(void **state)
{
    (void)state;
    if (!gpt2)
        skip();
    /* as tiktoken on b"a\xffb\xe2\x82".decode("utf-8", "replace") */
    EXPECT(gpt2,
           "a\xff"
           "b\xe2\x82",
           0, 64, 4210, 65, 4210);
}

static void write_pair(const char *dir, const char *enc, const char *merges,
                       char *ep, char *mp)
{
    sprintf(ep, "%s/encoder.json", dir);
    sprintf(mp, "%s/vocab.bpe", dir);
    tu_write_file(ep, enc, strlen(enc));
    tu_write_file(mp, merges, strlen(merges));
}

/* A whole tiny vocabulary: the 256 bytes then merges; built as text. */
static char *tiny_encoder(const char *extra)
{
    /* data_gym characters of ranks 0..255: printable Latin-1 first, then
     * U+0100.. for the others */
    char *o = malloc(8192);
    size_t n = 0;
    int r = 0, x = 0;
    n += (size_t)sprintf(o + n, "{");
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 256; b++) {
            int pr = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) ||
                     (b >= 0xae);
            if (pr != !pass)
                continue;
            unsigned cp = pass ? 256u + (unsigned)x++ : (unsigned)b;
            n += (size_t)sprintf(o + n, "\"\\u%04x\": %d, ", cp, r++);
        }
    n += (size_t)sprintf(o + n, "%s}", extra);
    return o;
}

static void test_malformed_files(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("bpe");
    char ep[4096], mp[4096], err[512];
    sl__tok_t *t = NULL;
    char *enc = tiny_encoder("\"ab\": 256, \"abc\": 257");

    /* good */
    write_pair(dir, enc, "#version: 0.2\na b\nab c\n", ep, mp);
    assert_int_equal(sl__bpe_load_gpt2(ep, mp, &t, err, sizeof err), 0);
    EXPECT(t, "abc ab", 0, 257, 220, 256);
    sl__tok_free(t);

    /* merge line with three fields: names file and line */
    write_pair(dir, enc, "#version: 0.2\na b\nab c d\n", ep, mp);
    assert_int_equal(sl__bpe_load_gpt2(ep, mp, &t, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "vocab.bpe:3"));

    /* truncated: last line without newline */
    write_pair(dir, enc, "#version: 0.2\na b\nab", ep, mp);
    assert_int_equal(sl__bpe_load_gpt2(ep, mp, &t, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "truncated"));

    /* encoder disagrees with merges */
    free(enc);
    enc = tiny_encoder("\"ab\": 257, \"abc\": 256");
    write_pair(dir, enc, "#version: 0.2\na b\nab c\n", ep, mp);
    assert_int_equal(sl__bpe_load_gpt2(ep, mp, &t, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "encoder.json:1"));

    /* truncated JSON */
    enc[strlen(enc) - 5] = 0;
    write_pair(dir, enc, "#version: 0.2\na b\nab c\n", ep, mp);
    assert_int_equal(sl__bpe_load_gpt2(ep, mp, &t, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "encoder.json"));

    /* tiktoken rank files */
    sprintf(ep, "%s/r.tiktoken", dir);
    const char *bad = "YQ== 0\nYg== 1\nYWI= x\n";
    tu_write_file(ep, bad, strlen(bad));
    assert_int_equal(
        sl__bpe_load_tiktoken(ep, "cl100k_base", &t, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, "r.tiktoken:3"));
    const char *b64 = "YQ== 0\nY!== 1\n";
    tu_write_file(ep, b64, strlen(b64));
    assert_int_equal(
        sl__bpe_load_tiktoken(ep, "cl100k_base", &t, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, "r.tiktoken:2"));
    const char *dup = "YQ== 0\nYg== 0\n";
    tu_write_file(ep, dup, strlen(dup));
    assert_int_equal(
        sl__bpe_load_tiktoken(ep, "cl100k_base", &t, err, sizeof err),
        SL_ECORRUPT);
    const char *ok = "YQ== 0\nYg== 1\nYWI= 2\n";
    tu_write_file(ep, ok, strlen(ok));
    assert_int_equal(sl__bpe_load_tiktoken(ep, "nope", &t, err, sizeof err),
                     SL_EUNSUPPORTED);
    assert_int_equal(
        sl__bpe_load_tiktoken(ep, "cl100k_base", &t, err, sizeof err), 0);
    EXPECT(t, "ab<|endoftext|>", 1, 2, 100257);
    /* a byte without a token is an error, not a crash */
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    assert_int_equal(sl__tok_encode(t, "abc", 3, 0, s, &ids, err, sizeof err),
                     SL_ECORRUPT);
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(s);
    sl__tok_free(t);

    sprintf(ep, "%s/absent", dir);
    assert_int_equal(sl__bpe_load_tiktoken(ep, "gpt2", &t, err, sizeof err),
                     SL_ENOTFOUND);
    free(enc);
    tu_rmtree(dir);
    free(dir);
}

static void test_utf8_repair(void **state)
{
    (void)state;
    /* as Python's decode('utf-8', 'replace') (maximal subparts) */
    const char *in = "a\xe0\x80"
                     "b\xf0\x9f\x98"
                     "c\xed\xa0\x80\xc3";
    sl__bytes_t o = {0};
    assert_int_equal(sl__utf8_valid_prefix((const uint8_t *)in, strlen(in)), 1);
    assert_int_equal(sl__utf8_repair((const uint8_t *)in, strlen(in), &o), 0);
    const char *want = "a\xef\xbf\xbd\xef\xbf\xbd"
                       "b\xef\xbf\xbd"
                       "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd";
    assert_int_equal(o.n, strlen(want));
    assert_memory_equal(o.p, want, o.n);
    sl__bytes_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_known_ids),
        cmocka_unit_test(test_gpt2_invalid_utf8),
        cmocka_unit_test(test_malformed_files),
        cmocka_unit_test(test_utf8_repair),
    };
    return cmocka_run_group_tests(tests, setup_gpt2, teardown_gpt2);
}
