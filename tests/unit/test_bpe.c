/* Byte-level BPE: loaders (real files, malformed and truncated ones),
 * known ids (checked with tiktoken 0.14), special tokens, invalid UTF-8;
 * the per-piece merge against a reference (tiktoken's plain
 * byte_pair_merge) and its speed on a megabyte-long piece. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    assert_non_null(strstr(err, "rank 0 is given to two tokens"));
    /* a rank far above the file's lines (it sized the vocabulary: 2 GiB
     * for the duplicate check from 16 bytes); 2 x lines + 1024 is the
     * limit */
    const char *far = "YQ== 0\nYg== 2147483646\n";
    tu_write_file(ep, far, strlen(far));
    assert_int_equal(
        sl__bpe_load_tiktoken(ep, "cl100k_base", &t, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, "r.tiktoken:2: rank 2147483646 out of range"));
    const char *edge = "YQ== 0\nYg== 1027\n"; /* 2 lines: below 1028 */
    tu_write_file(ep, edge, strlen(edge));
    assert_int_equal(
        sl__bpe_load_tiktoken(ep, "cl100k_base", &t, err, sizeof err), 0);
    sl__tok_free(t);
    const char *over = "YQ== 0\nYg== 1028\n";
    tu_write_file(ep, over, strlen(over));
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

/* ---- the per-piece merge ---- */

/* Reference: tiktoken's _byte_pair_merge as first written (a boundary
 * array rescanned per merge, every lookup through the map), O(n^2). */
static void ref_merge(const struct sl__bpe *b, const uint8_t *p, size_t n,
                      sl__ids_t *ids)
{
    uint32_t r = sl__bpe_map_get(&b->map, p, n);
    if (r != SL__BPE_NORANK) {
        assert_int_equal(sl__ids_push(ids, (int32_t)r), 0);
        return;
    }
    size_t *st = malloc((n + 1) * sizeof *st), m = n + 1;
    assert_non_null(st);
    for (size_t i = 0; i <= n; i++)
        st[i] = i;
    for (;;) {
        uint32_t best = SL__BPE_NORANK;
        size_t at = 0;
        for (size_t i = 0; i + 2 < m; i++) {
            uint32_t q = sl__bpe_map_get(&b->map, p + st[i], st[i + 2] - st[i]);
            if (q < best) {
                best = q;
                at = i;
            }
        }
        if (best == SL__BPE_NORANK)
            break;
        memmove(st + at + 1, st + at + 2, (m - at - 2) * sizeof *st);
        m--;
    }
    for (size_t i = 0; i + 1 < m; i++) {
        r = sl__bpe_map_get(&b->map, p + st[i], st[i + 1] - st[i]);
        assert_int_not_equal(r, SL__BPE_NORANK);
        assert_int_equal(sl__ids_push(ids, (int32_t)r), 0);
    }
    free(st);
}

/* Encodes p[0..n) as one piece by each path; each equals the reference. */
static void same_as_ref(const sl__tok_t *t, const uint8_t *p, size_t n,
                        sl__tok_scratch_t *s)
{
    static const sl__bpe_path_t paths[] = {SL__BPE_PATH_AUTO, SL__BPE_PATH_TREE,
                                           SL__BPE_PATH_SCAN};
    sl__ids_t want = {0};
    ref_merge(t->bpe, p, n, &want);
    for (int k = 0; k < 3; k++) {
        if (paths[k] == SL__BPE_PATH_SCAN && n > SL__BPE_LARGE)
            break;
        sl__ids_t got = {0};
        char err[256];
        assert_int_equal(sl__bpe_encode_piece(t->bpe, p, n, paths[k], s, &got,
                                              err, sizeof err),
                         0);
        if (got.n != want.n || memcmp(got.v, want.v, got.n * sizeof *got.v))
            fail_msg("piece of %zu bytes (path %d): %zu ids, reference %zu", n,
                     (int)paths[k], got.n, want.n);
        sl__ids_free(&got);
    }
    sl__ids_free(&want);
}

/* A vocabulary trained on nothing: the 256 bytes, runs of 2..16 'a', then
 * `extra` tokens each the concatenation of two earlier ones over "abcd"
 * (up to 24 bytes), as a tiktoken rank file. Many overlapping merges,
 * unlike a real one. */
static sl__tok_t *random_vocab(uint64_t seed, size_t extra)
{
    size_t cap = 4096 + extra * 48, n = 0;
    char *f = malloc(cap), err[256];
    uint8_t(*tok)[24] = malloc((8 + extra) * sizeof *tok);
    size_t *len = malloc((8 + extra) * sizeof *len), nt = 0;
    assert_true(f && tok && len);
    for (int c = 0; c < 256; c++) {
        uint8_t b = (uint8_t)c;
        n += tu_b64(&b, 1, f + n);
        n += (size_t)sprintf(f + n, " %d\n", c);
    }
    for (int c = 0; c < 4; c++) {
        tok[nt][0] = (uint8_t)('a' + c);
        len[nt++] = 1;
    }
    size_t r = 256;
    for (size_t k = 2; k <= 16; k *= 2, nt++) { /* "aa" .. "a" x 16 first */
        memset(tok[nt], 'a', k);
        len[nt] = k;
        n += tu_b64(tok[nt], k, f + n);
        n += (size_t)sprintf(f + n, " %zu\n", r++);
    }
    sl__tok_t *t = NULL;
    for (size_t tries = 0; r < 256 + extra && tries < 100 * extra; tries++) {
        size_t x = tu_rnd(&seed) % nt, y = tu_rnd(&seed) % nt;
        if (len[x] + len[y] > 24)
            continue;
        memcpy(tok[nt], tok[x], len[x]);
        memcpy(tok[nt] + len[x], tok[y], len[y]);
        len[nt] = len[x] + len[y];
        int dup = 0;
        for (size_t k = 0; k < nt && !dup; k++)
            dup = len[k] == len[nt] && !memcmp(tok[k], tok[nt], len[nt]);
        if (dup)
            continue;
        n += tu_b64(tok[nt], len[nt], f + n);
        n += (size_t)sprintf(f + n, " %zu\n", r++);
        nt++;
    }
    assert_int_equal(sl__bpe_load_tiktoken_mem(f, n, "random", "cl100k_base",
                                               &t, err, sizeof err),
                     0);
    free(f);
    free(tok);
    free(len);
    return t;
}

/* Both merge paths equal the reference on `count` random pieces: 40
 * around the switch-over length, the rest 2..maxlen bytes. */
static void check_random_pieces(const sl__tok_t *t, const char *alpha,
                                uint64_t seed, int count, size_t maxlen)
{
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    size_t na = strlen(alpha);
    uint8_t *p = malloc(maxlen);
    assert_non_null(p);
    for (int k = 0; k < count; k++) {
        size_t n = k < 40 ? SL__BPE_LARGE - 20 + (size_t)k
                          : 2 + tu_rnd(&seed) % (maxlen - 1);
        /* runs of one letter (deep merges) mixed with random letters */
        for (size_t i = 0; i < n; i++)
            p[i] = i && tu_rnd(&seed) % 4 == 0
                       ? p[i - 1]
                       : (uint8_t)alpha[tu_rnd(&seed) % na];
        same_as_ref(t, p, n, s);
    }
    free(p);
    sl__tok_scratch_destroy(s);
}

static void test_merge_matches_reference(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        sl__tok_t *t = random_vocab(seed * 0x9e3779b97f4a7c15ull, 3000);
        check_random_pieces(t, "abcd", seed, 150, 1000);
        check_random_pieces(t, "ab", seed + 10, 60, 1000);
        check_random_pieces(t, "abcd", seed + 20, 45, 4000);
        sl__tok_free(t);
    }
    if (!gpt2)
        return;
    check_random_pieces(gpt2, "etaoinshrdlucmfwyp", 7, 150, 1000);
    check_random_pieces(gpt2, "etaoinshrdlucmfwyp", 8, 45, 4000);
    check_random_pieces(gpt2, "a", 9, 45, 4000);
    check_random_pieces(gpt2, "\xc3\xa9\xe4\xb8\x80 .", 10, 100, 1000);
}

/* One megabyte of one letter is one pre-token piece: it must take well
 * under a second, not the minutes a rescan per merge takes (issue 14). The
 * watchdog is loose for sanitizer builds; a release build prints ~0.3 s. */
static void test_long_piece_is_fast(void **state)
{
    (void)state;
    size_t n = 1000000;
    char *text = malloc(n);
    assert_non_null(text);
    memset(text, 'a', n);
    sl__tok_t *t = gpt2 ? gpt2 : random_vocab(42, 3000);
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    char err[256];
    tu_watchdog(20, 1,
                "test_bpe: a 1 MB piece (the merge is quadratic again?)");
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    assert_int_equal(sl__tok_encode(t, text, n, 0, s, &ids, err, sizeof err),
                     0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    tu_watchdog(0, 1, NULL);
    print_message("1 MB piece: %zu ids in %.3f s of CPU\n", ids.n,
                  (double)(t1.tv_sec - t0.tv_sec) +
                      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    /* gpt2 as tiktoken 0.14: 250,000 x "aaaa" (id 24794); the random
     * vocabulary: 62,500 x 'a' x 16 (rank 259) */
    size_t want_n = gpt2 ? 250000 : 62500;
    int32_t want = gpt2 ? 24794 : 259;
    assert_int_equal(ids.n, want_n);
    for (size_t i = 0; i < ids.n; i++)
        assert_int_equal(ids.v[i], want);
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(s);
    if (t != gpt2)
        sl__tok_free(t);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_known_ids),
        cmocka_unit_test(test_gpt2_invalid_utf8),
        cmocka_unit_test(test_malformed_files),
        cmocka_unit_test(test_utf8_repair),
        cmocka_unit_test(test_merge_matches_reference),
        cmocka_unit_test(test_long_piece_is_fast),
    };
    return cmocka_run_group_tests(tests, setup_gpt2, teardown_gpt2);
}
