/* Text encoded in parts (sl__tok_encode_part, as `sluice tokenize` streams
 * a file) gives exactly the ids of the whole: every BPE encoding's pattern
 * and WordPiece, on random text made of what makes pre-tokenization look
 * ahead (whitespace runs before words, contractions, digits, punctuation
 * before newlines and '/', case changes, non-ASCII letters and marks,
 * invalid and cut UTF-8, special tokens and their prefixes), fed in steps
 * of 1, 2, 3, 7 and 61 bytes. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static int collect(const int32_t *v, size_t n, void *ctx)
{
    sl__ids_t *all = ctx;
    for (size_t i = 0; i < n; i++)
        if (sl__ids_push(all, v[i]))
            return SL_ENOMEM;
    return 0;
}

/* text[0..n) written to a file and encoded as `sluice tokenize` streams
 * it (1 MiB blocks, doubling for a longer piece) gives the ids of the
 * whole. */
static void check_file(const sl__tok_t *t, const char *path, const char *text,
                       size_t n, int special, const char *what)
{
    char err[256];
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t whole = {0}, part = {0}, all = {0};
    assert_int_equal(
        sl__tok_encode(t, text, n, special, s, &whole, err, sizeof err), 0);
    assert_int_equal(tu_write_file(path, text, n), 0);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    uint64_t bytes = 0;
    int rc = sl__tok_encode_fd(t, fd, path, special, s, &part, collect, &all,
                               &bytes, err, sizeof err);
    close(fd);
    if (rc)
        fail_msg("%s: %s", what, err);
    assert_int_equal(bytes, n);
    if (all.n != whole.n ||
        (whole.n && memcmp(all.v, whole.v, whole.n * sizeof *all.v)))
        fail_msg("%s (%zu bytes): %zu ids streamed, %zu whole", what, n, all.n,
                 whole.n);
    sl__ids_free(&whole);
    sl__ids_free(&part);
    sl__ids_free(&all);
    sl__tok_scratch_destroy(s);
}

/* What sits across the first block's end (1 MiB), a step back or on: a
 * special token, CRLF, a UTF-8 sequence, whitespace before a word, a
 * contraction; a piece of exactly a block, and one a byte either side of
 * the doubling steps; an empty file, and one without a final newline. */
static void test_file_at_block_edges(void **state)
{
    (void)state;
    static const char *const frag[] = {
        "<|endoftext|>", "\r\n\r\n", " \r\n",    "\xe4\xb8\x80\xf0\x9f\x98\x80",
        "   the",        "don't",    "\xe4\xb8", " [SEP] x"};
    const size_t B = (size_t)1 << 20;
    char *dir = tu_tmpdir("tokedge");
    char path[512];
    snprintf(path, sizeof path, "%s/edge.txt", dir);
    char *text = malloc(2 * B + 64);
    assert_non_null(text);
    sl__tok_t *tk[2] = {small_bpe("cl100k_base"), NULL};
    static const char v[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nab\n"
                            "##ab\n'\nt\ndon\n\xe4\xb8\x80\nx\n";
    char err[256];
    assert_int_equal(sl__wordpiece_load_mem(v, sizeof v - 1, "tiny", 1, &tk[1],
                                            err, sizeof err),
                     0);
    char what[128];
    for (int k = 0; k < 2; k++) {
        for (size_t f = 0; f < sizeof frag / sizeof *frag; f++) {
            size_t fl = strlen(frag[f]);
            /* the fragment starts each of 0..3 bytes back, half way, a
             * byte short of its end and at it: every cut of a short one */
            size_t backs[] = {0, 1, 2, 3, fl / 2, fl - 1, fl};
            for (size_t b = 0; b < sizeof backs / sizeof *backs; b++) {
                size_t back = backs[b];
                if (back > fl || (b && back <= backs[b - 1]))
                    continue;
                /* "ab " words up to the fragment, which starts `back`
                 * bytes before the block's end */
                size_t at = B - back, n = 0;
                while (n < at)
                    text[n] = "ab "[n % 3], n++;
                memcpy(text + n, frag[f], fl);
                n += fl;
                memcpy(text + n, " the ab\n", 8);
                n += 8;
                snprintf(what, sizeof what,
                         "tokenizer %d, fragment %zu, %zu "
                         "bytes back",
                         k, f, back);
                check_file(tk[k], path, text, n, (int)(back & 1), what);
            }
        }
        /* one piece of a block, a byte either side, the doubling step */
        static const size_t lens[] = {(size_t)1 << 20, ((size_t)1 << 20) - 1,
                                      ((size_t)1 << 20) + 1, (size_t)2 << 20};
        for (size_t j = 0; j < sizeof lens / sizeof *lens; j++)
            for (int tail = 0; tail < 3; tail++) {
                size_t n = 0;
                while (n < lens[j])
                    text[n] = "abab"[n % 4], n++;
                if (tail == 1)
                    memcpy(text + n, " x\n", 3), n += 3;
                if (tail == 2)
                    text[n++] = '\n';
                snprintf(what, sizeof what,
                         "tokenizer %d, a piece of %zu, "
                         "tail %d",
                         k, lens[j], tail);
                check_file(tk[k], path, text, n, 0, what);
            }
        check_file(tk[k], path, "", 0, 0, "empty file");
        check_file(tk[k], path, "the ab", 6, 0, "no final newline");
        sl__tok_free(tk[k]);
    }
    free(text);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_parts_equal_whole),
        cmocka_unit_test(test_wordpiece_parts_equal_whole),
        cmocka_unit_test(test_part_holds_back_a_piece),
        cmocka_unit_test(test_file_at_block_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
