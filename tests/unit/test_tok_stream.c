/* Text encoded in parts (sl__tok_encode_part, as `sluice tokenize` streams
 * a file) gives exactly the ids of the whole: every BPE encoding's pattern
 * and WordPiece, on random text made of what makes pre-tokenization look
 * ahead (whitespace runs before words, contractions, digits, punctuation
 * before newlines and '/', case changes, non-ASCII letters and marks,
 * invalid and cut UTF-8, special tokens and their prefixes), fed in steps
 * of 1, 2, 3, 7 and 61 bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "text/bpe_internal.h"
#include "text/tokenizer.h"
#include "text/wordpiece.h"

/* A rank file of the 256 bytes and a few merges, under `encoding`'s
 * pattern and special tokens: the pattern is what is tested. */
static sl__tok_t *small_bpe(const char *encoding)
{
    static const char *const merges[] = {"th",   "he", "the", " t",      " the",
                                         "in",   "er", "  ",  "\n\n",    "ab",
                                         "abab", "12", "'s",  "\xc3\xa9"};
    char f[8192], err[256];
    size_t n = 0, r = 0;
    for (int c = 0; c < 256; c++, r++) {
        uint8_t b = (uint8_t)c;
        n += tu_b64(&b, 1, f + n);
        n += (size_t)sprintf(f + n, " %zu\n", r);
    }
    for (size_t k = 0; k < sizeof merges / sizeof *merges; k++, r++) {
        n += tu_b64((const uint8_t *)merges[k], strlen(merges[k]), f + n);
        n += (size_t)sprintf(f + n, " %zu\n", r);
    }
    sl__tok_t *t = NULL;
    int rc =
        sl__bpe_load_tiktoken_mem(f, n, "small", encoding, &t, err, sizeof err);
    if (rc)
        fail_msg("%s: %s", encoding, err);
    return t;
}

/* Random text from fragments chosen to sit at part boundaries. */
static size_t random_text(uint64_t *seed, char *out, size_t cap)
{
    static const char *const frag[] = {"the",
                                       " the",
                                       "  ",
                                       "   ",
                                       "\n",
                                       "\r\n",
                                       "\n\n",
                                       "\t",
                                       " ",
                                       "'s",
                                       "'ll",
                                       "'S",
                                       "123",
                                       "4567",
                                       ".",
                                       "...",
                                       "/",
                                       ".\n/",
                                       "!\n",
                                       "ABC",
                                       "Abc",
                                       "aBC",
                                       "abab",
                                       "\xc3\xa9",
                                       "e\xcc\x81",
                                       "\xcc\x81",
                                       "\xe4\xb8\x80",
                                       "\xe4\xb8",
                                       "\xff",
                                       "\xc2\xa0",
                                       "\xf0\x9f\x98\x80",
                                       "<|endoftext|>",
                                       "<|endo",
                                       "<|",
                                       "[CLS]",
                                       "[SEP",
                                       "x",
                                       "\x01",
                                       "don't"};
    size_t n = 0, nf = sizeof frag / sizeof *frag;
    while (n + 16 < cap) {
        const char *f = frag[tu_rnd(seed) % nf];
        size_t k = strlen(f);
        memcpy(out + n, f, k);
        n += k;
        if (tu_rnd(seed) % 16 == 0)
            break;
    }
    return n;
}

/* The ids of text[0..n) fed `step` bytes at a time, as a stream. */
static void encode_in_steps(const sl__tok_t *t, const char *text, size_t n,
                            size_t step, int special, sl__tok_scratch_t *s,
                            sl__ids_t *ids)
{
    char err[256];
    size_t start = 0, end = 0; /* held: text[start..end) */
    ids->n = 0;
    while (end < n || start < end) {
        end = end + step < n ? end + step : n;
        size_t used;
        int rc = sl__tok_encode_part(t, text + start, end - start, end < n,
                                     special, s, ids, &used, err, sizeof err);
        if (rc)
            fail_msg("encode_part: %s", err);
        assert_true(used <= end - start);
        start += used;
        if (end == n)
            assert_int_equal(start, n); /* the last part takes the rest */
    }
}

static void check_tokenizer(const sl__tok_t *t, const char *what, uint64_t seed,
                            int texts)
{
    static const size_t steps[] = {1, 2, 3, 7, 61};
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t whole = {0}, parts = {0};
    char text[2048], err[256];
    for (int k = 0; k < texts; k++) {
        size_t n = random_text(&seed, text, sizeof text);
        int special = k % 2;
        whole.n = 0;
        assert_int_equal(
            sl__tok_encode(t, text, n, special, s, &whole, err, sizeof err), 0);
        for (size_t j = 0; j < sizeof steps / sizeof *steps; j++) {
            encode_in_steps(t, text, n, steps[j], special, s, &parts);
            if (parts.n != whole.n ||
                memcmp(parts.v, whole.v, whole.n * sizeof *whole.v)) {
                fprintf(stderr, "text (%zu bytes):", n);
                for (size_t i = 0; i < n; i++)
                    fprintf(stderr, " %02x", (unsigned char)text[i]);
                fail_msg("%s: text %d in steps of %zu: %zu ids, whole %zu",
                         what, k, steps[j], parts.n, whole.n);
            }
        }
    }
    sl__ids_free(&whole);
    sl__ids_free(&parts);
    sl__tok_scratch_destroy(s);
}

static void test_bpe_parts_equal_whole(void **state)
{
    (void)state;
    static const char *const encodings[] = {"gpt2",        "r50k_base",
                                            "p50k_base",   "p50k_edit",
                                            "cl100k_base", "o200k_base"};
    for (size_t e = 0; e < sizeof encodings / sizeof *encodings; e++) {
        sl__tok_t *t = small_bpe(encodings[e]);
        check_tokenizer(t, encodings[e], 0x9e3779b97f4a7c15ull + e, 300);
        sl__tok_free(t);
    }
    char *d = tu_shared_data("vocab");
    if (!d) {
        print_message("no shared data: the real GPT-2 vocabulary not used\n");
        return;
    }
    char enc[4096], mrg[4096], err[512];
    snprintf(enc, sizeof enc, "%s/gpt2-encoder.json", d);
    snprintf(mrg, sizeof mrg, "%s/gpt2-vocab.bpe", d);
    free(d);
    sl__tok_t *t = NULL;
    assert_int_equal(sl__bpe_load_gpt2(enc, mrg, &t, err, sizeof err), 0);
    check_tokenizer(t, "gpt2 (real)", 77, 300);
    sl__tok_free(t);
}

static void test_wordpiece_parts_equal_whole(void **state)
{
    (void)state;
    static const char v[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nab\n"
                            "##ab\n##s\n'\ns\n.\n/\n!\n1\n##2\n##3\n\xc3\xa9\n"
                            "e\n\xe4\xb8\x80\nx\nabc\n";
    char err[256];
    for (int uncased = 0; uncased <= 1; uncased++) {
        sl__tok_t *t = NULL;
        assert_int_equal(sl__wordpiece_load_mem(v, sizeof v - 1, "tiny",
                                                uncased, &t, err, sizeof err),
                         0);
        check_tokenizer(t, uncased ? "wordpiece uncased" : "wordpiece cased",
                        1234 + (uint64_t)uncased, 300);
        sl__tok_free(t);
    }
}

/* A part never ends inside a piece: text that goes on holds back its last
 * piece (0 bytes taken when all of it is one piece). */
static void test_part_holds_back_a_piece(void **state)
{
    (void)state;
    sl__tok_t *t = small_bpe("gpt2");
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    char err[256];
    size_t used;
    assert_int_equal(sl__tok_encode_part(t, "abababab", 8, 1, 0, s, &ids, &used,
                                         err, sizeof err),
                     0);
    assert_int_equal(used, 0);
    assert_int_equal(ids.n, 0);
    assert_int_equal(sl__tok_encode_part(t, "the abab", 8, 1, 0, s, &ids, &used,
                                         err, sizeof err),
                     0);
    assert_int_equal(used, 3); /* "the"; " abab" may go on */
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(s);
    sl__tok_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_parts_equal_whole),
        cmocka_unit_test(test_wordpiece_parts_equal_whole),
        cmocka_unit_test(test_part_holds_back_a_piece),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
