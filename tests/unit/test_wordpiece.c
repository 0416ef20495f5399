/* WordPiece (BERT uncased): known ids (checked against HF tokenizers
 * 0.23 BertWordPieceTokenizer, add_special_tokens=False), [UNK], "##"
 * continuations, the 100-char limit, CJK spacing, accents, control chars,
 * invalid UTF-8 (dropped bytes), malformed vocabularies, the canonical
 * order of combining marks and its speed on a megabyte of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "text/tok_internal.h"
#include "text/wordpiece.h"

static sl__tok_t *bert;

static int setup(void **state)
{
    (void)state;
    char *dir = tu_shared_data("vocab");
    if (!dir)
        return 0;
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/bert-base-uncased-vocab.txt", dir);
    free(dir);
    if (sl__wordpiece_load(path, 1, &bert, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sl__tok_free(bert);
    return 0;
}

static void expect_ids(sl__tok_t *t, const char *text, size_t n,
                       const int32_t *want, size_t nwant)
{
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    char err[256];
    assert_int_equal(sl__tok_encode(t, text, n, 0, s, &ids, err, sizeof err),
                     0);
    if (ids.n != nwant) {
        fprintf(stderr, "'%.*s': %zu ids:", (int)n, text, ids.n);
        for (size_t i = 0; i < ids.n; i++)
            fprintf(stderr, " %d", ids.v[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(ids.n, nwant);
    for (size_t i = 0; i < nwant; i++)
        assert_int_equal(ids.v[i], want[i]);
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(s);
}
#define EXPECT(t, text, ...)                                                   \
    do {                                                                       \
        const int32_t w_[] = {__VA_ARGS__};                                    \
        expect_ids(t, text, sizeof(text) - 1, w_, sizeof w_ / sizeof w_[0]);   \
    } while (0)

#define NEED_BERT()                                                            \
    do {                                                                       \
        if (!bert)                                                             \
            skip();                                                            \
    } while (0)

static void test_known_ids(void **state)
{
    (void)state;
    NEED_BERT();
    EXPECT(bert, "Hello, World!", 7592, 1010, 2088, 999);
    EXPECT(bert, "unaffable", 14477, 20961, 3468); /* una ##ffa ##ble */
    EXPECT(bert, "tokenization", 19204, 3989);     /* token ##ization */
    EXPECT(bert, "xyzzyqq", 1060, 2100, 28753, 4160, 4160);
    assert_int_equal(sl__tok_id(bert, "[UNK]"), 100);
    assert_int_equal(sl__tok_id(bert, "##ization"), 3989);
    assert_int_equal(sl__tok_vocab_size(bert), 30522);
}

static void test_normalizer(void **state)
{
    (void)state;
    NEED_BERT();
    EXPECT(bert,
           "H\xc3\xa9llo \xc3\x87"
           "a va?",
           7592, 6187, 12436, 1029);
    EXPECT(bert, "\xe4\xb8\xad\xe6\x96\x87", 1746, 1861); /* CJK split */
    /* NUL, C0 control, U+FFFD dropped (joining the word), not spaces. */
    EXPECT(bert,
           "a\0b\x01"
           "c\xef\xbf\xbd"
           "d",
           5925, 2094);
    /* BOM (Cf) dropped; CRLF is whitespace. */
    EXPECT(bert, "\xef\xbb\xbfhello\r\nworld", 7592, 2088);
}

static void test_unk_and_long(void **state)
{
    (void)state;
    NEED_BERT();
    EXPECT(bert, "\xe1\x88\xb4\xe1\x88\xb5", 100); /* unmatchable -> [UNK] */
    /* 100 chars still go through the model; 101 chars are one [UNK]
     * (counted in chars: "\xc3\xa9" x 101 is 202 bytes). */
    char w[400];
    int32_t want[50];
    memset(w, 'x', 101);
    want[0] = 22038; /* xx */
    for (int i = 1; i < 50; i++)
        want[i] = 20348; /* ##xx */
    expect_ids(bert, w, 100, want, 50);
    expect_ids(bert, w, 101, (const int32_t[]){100}, 1);
    for (int i = 0; i < 101; i++)
        memcpy(w + 2 * i, "\xc3\xa9", 2);
    want[0] = 25212; /* ee */
    for (int i = 1; i < 50; i++)
        want[i] = 4402; /* ##ee */
    expect_ids(bert, w, 200, want, 50);
    expect_ids(bert, w, 202, (const int32_t[]){100}, 1);
}

static void test_specials_in_text(void **state)
{
    (void)state;
    NEED_BERT();
    EXPECT(bert, "[CLS]x[SEP]", 101, 1060, 102);
    EXPECT(bert, "[cls]", 1031, 18856, 2015, 1033);
}

/* Invalid UTF-8: each invalid byte is dropped (as errors="replace" then
 * clean_text dropping U+FFFD). */
static void test_invalid_utf8(void **state)
{
    (void)state;
    NEED_BERT();
    EXPECT(bert, "hel\xffl\xc3o", 7592); /* -> "hello" */
    EXPECT(bert, "\xed\xa0\x80\xf4\x90\x80\x80\xc0\xafok", 7929);
}

static int load_str(const char *v, sl__tok_t **t, char *err, size_t errlen)
{
    return sl__wordpiece_load_mem(v, strlen(v), "v.txt", 1, t, err, errlen);
}

static void test_bad_vocab(void **state)
{
    (void)state;
    sl__tok_t *t = NULL;
    char err[256];
    assert_int_equal(load_str("", &t, err, sizeof err), SL_ECORRUPT);
    assert_non_null(strstr(err, "v.txt: empty"));
    assert_int_equal(load_str("a\nb\n", &t, err, sizeof err), SL_ECORRUPT);
    assert_non_null(strstr(err, "no [UNK]"));
    assert_int_equal(load_str("[UNK]\na\nb\na\n", &t, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "v.txt:4: duplicate token (first on line 2)"));
    assert_int_equal(load_str("[UNK]\n\xff\n", &t, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "v.txt:2: invalid UTF-8"));
    assert_null(t);
    /* Trailing whitespace is trimmed (HF: trim_end), CRLF files work, the
     * last line needs no newline. */
    assert_int_equal(load_str("[UNK]\r\nab \r\n##c\t\nd", &t, err, sizeof err),
                     0);
    assert_int_equal(sl__tok_id(t, "ab"), 1);
    assert_int_equal(sl__tok_id(t, "d"), 3);
    EXPECT(t, "abc d ab\xc3\xa9 x", 1, 2, 3, 0, 0); /* abe: no ##e */
    sl__tok_free(t);
    assert_int_equal(
        sl__wordpiece_load("/nonexistent/vocab.txt", 1, &t, err, sizeof err),
        SL_ENOTFOUND);
    assert_non_null(strstr(err, "/nonexistent/vocab.txt"));
    /* a device is refused, not read until memory runs out */
    assert_int_equal(sl__wordpiece_load("/dev/zero", 1, &t, err, sizeof err),
                     SL_EIO);
    assert_non_null(strstr(err, "/dev/zero: not a regular file"));
    /* the size cap of a file read whole (base/file), here 4 bytes */
    char *dir = tu_tmpdir("wpcap"), path[4096], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/v.txt", dir);
    assert_int_equal(tu_write_file(path, "[UNK]", 5), 0);
    assert_int_equal(sl__read_small_file(path, 4, &text, &n, err, sizeof err),
                     SL_EUNSUPPORTED);
    assert_non_null(strstr(err, "v.txt: 5 bytes, more than the 4 allowed"));
    assert_int_equal(sl__read_small_file(path, 5, &text, &n, err, sizeof err),
                     0);
    assert_int_equal(n, 5);
    assert_string_equal(text, "[UNK]");
    free(text);
    tu_rmtree(dir);
    free(dir);
}

/* ---- canonical ordering of combining marks (uncased NFD) ---- */

static sl__tok_t *tiny_vocab(void)
{
    static const char v[] = "[UNK]\na\nx\n";
    sl__tok_t *t = NULL;
    char err[256];
    assert_int_equal(
        sl__wordpiece_load_mem(v, sizeof v - 1, "tiny", 1, &t, err, sizeof err),
        0);
    return t;
}

typedef struct words {
    char buf[1024];
    size_t n;
} words_t;

static int keep_words(void *ctx, const char *buf, const sl__wp_word_t *w,
                      size_t nw)
{
    words_t *o = ctx;
    uint32_t beg = 0;
    for (size_t i = 0; i < nw; i++) {
        size_t len = w[i].end - beg;
        assert_true(o->n + len + 1 < sizeof o->buf);
        memcpy(o->buf + o->n, buf + beg, len);
        o->n += len;
        o->buf[o->n++] = '|';
        beg = w[i].end;
    }
    return 0;
}

/* "x" then `pairs` x (U+1D16D ccc 226, U+1D165 ccc 216), both Mc (kept by
 * accent stripping): NFD puts every 216 before every 226, as HF does. */
static void expect_marks_sorted(const sl__tok_t *t, int pairs)
{
    static const char c226[] = "\xf0\x9d\x85\xad", c216[] = "\xf0\x9d\x85\xa5";
    char in[512], want[512];
    size_t n = 0, k = 0;
    in[n++] = want[k++] = 'x';
    for (int i = 0; i < pairs; i++, n += 8) {
        memcpy(in + n, c226, 4);
        memcpy(in + n + 4, c216, 4);
    }
    for (int i = 0; i < pairs; i++, k += 4)
        memcpy(want + k, c216, 4);
    for (int i = 0; i < pairs; i++, k += 4)
        memcpy(want + k, c226, 4);
    want[k++] = '|';
    words_t o = {.n = 0};
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    assert_int_equal(sl__bert_split(t->wp, in, n, s, keep_words, &o), 0);
    sl__tok_scratch_destroy(s);
    assert_int_equal(o.n, k);
    assert_memory_equal(o.buf, want, k);
}

static void test_mark_order(void **state)
{
    (void)state;
    sl__tok_t *t = tiny_vocab();
    expect_marks_sorted(t, 1);
    expect_marks_sorted(t, 5);  /* a short run */
    expect_marks_sorted(t, 20); /* a long one (40 marks) */
    sl__tok_free(t);
}

/* "a" then 250,000 x (U+0301 ccc 230, U+0316 ccc 220): one run of non-
 * starters to put in canonical order. HF takes ~0.5 s; an insertion sort
 * took minutes (issue 14). Accents stripped, it is just "a". */
static void test_mark_run_is_fast(void **state)
{
    (void)state;
    size_t pairs = 250000, n = 1 + 4 * pairs;
    char *text = malloc(n);
    assert_non_null(text);
    text[0] = 'a';
    for (size_t i = 0; i < pairs; i++)
        memcpy(text + 1 + 4 * i, "\xcc\x81\xcc\x96", 4);
    sl__tok_t *t = tiny_vocab();
    tu_watchdog(20, 1,
                "test_wordpiece: a megabyte of combining marks (quadratic "
                "ordering?)");
    expect_ids(t, text, n, (const int32_t[]){1}, 1);
    tu_watchdog(0, 1, NULL);
    sl__tok_free(t);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_ids),
        cmocka_unit_test(test_normalizer),
        cmocka_unit_test(test_unk_and_long),
        cmocka_unit_test(test_specials_in_text),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_bad_vocab),
        cmocka_unit_test(test_mark_order),
        cmocka_unit_test(test_mark_run_is_fast),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
