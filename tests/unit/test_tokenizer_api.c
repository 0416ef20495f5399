/* The public tokenizer API (sluice/tokenizer.h): options and their size
 * field (an older, shorter struct is read as such), the one name resolver
 * (WordPiece uncased by default, --cased keeps case), encode's capacity
 * contract (SL_ERANGE with the count), errors through last_error, and
 * concurrent encodes on one tokenizer. GPT-2 cases use ../shared/data when
 * present. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/tokenizer.h"
#include "testutil.h"

static char vocab[1024], *tmp;

/* [PAD] [UNK] [CLS] [SEP] [MASK] hello world ##s Hello , */
static int setup(void **state)
{
    (void)state;
    static const char v[] =
        "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\nHello\n,\n";
    tmp = tu_tmpdir("tokapi");
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", tmp);
    return tu_write_file(vocab, v, sizeof v - 1);
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(tmp);
    free(tmp);
    return 0;
}

static sl_tokenizer_t *make(const char *name, const char *vocab_path,
                            const char *merges, int cased, int special)
{
    sl_tokenizer_options_t o;
    sl_tokenizer_options_init(&o);
    o.name = name;
    o.vocab = vocab_path;
    o.merges = merges;
    o.cased = cased;
    o.allow_special = special;
    sl_tokenizer_t *t = NULL;
    assert_int_equal(sl_tokenizer_create(&o, &t), 0);
    assert_non_null(t);
    return t;
}

static sl_tokenizer_t *wordpiece(int cased)
{
    return make("wordpiece", vocab, NULL, cased, 0);
}

static void expect(sl_tokenizer_t *t, const char *text, const int32_t *want,
                   size_t nwant)
{
    int32_t ids[64];
    size_t n = 0;
    assert_int_equal(sl_tokenizer_encode(t, text, strlen(text), ids, 64, &n),
                     0);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
}

static void test_options_init(void **state)
{
    (void)state;
    sl_tokenizer_options_t o;
    memset(&o, 0xab, sizeof o);
    sl_tokenizer_options_init(&o);
    assert_int_equal(o.size, sizeof o);
    assert_null(o.name);
    assert_null(o.vocab);
    assert_int_equal(o.cased, 0);
    sl_tokenizer_options_init(NULL); /* no crash */
}

static void test_wordpiece_default_uncased(void **state)
{
    (void)state;
    sl_tokenizer_t *t = wordpiece(0);
    assert_int_equal(sl_tokenizer_vocab_size(t), 10);
    expect(t, "Hello, worlds", (const int32_t[]){5, 9, 6, 7}, 4);
    expect(t, "", NULL, 0);
    sl_tokenizer_destroy(t);
    t = wordpiece(1);
    expect(t, "Hello, worlds", (const int32_t[]){8, 9, 6, 7}, 4);
    expect(t, "HELLO", (const int32_t[]){1}, 1); /* [UNK] when cased */
    sl_tokenizer_destroy(t);
}

static void test_capacity(void **state)
{
    (void)state;
    sl_tokenizer_t *t = wordpiece(0);
    const char *s = "hello hello world";
    int32_t ids[3] = {-1, -1, -1};
    size_t n = 0;
    assert_int_equal(sl_tokenizer_encode(t, s, strlen(s), ids, 2, &n),
                     SL_ERANGE);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 5);
    assert_int_equal(ids[1], 5);
    assert_int_equal(ids[2], -1); /* nothing past cap */
    assert_non_null(strstr(sl_tokenizer_last_error(t), "3 ids"));
    /* cap 0: counting only */
    assert_int_equal(sl_tokenizer_encode(t, s, strlen(s), NULL, 0, &n),
                     SL_ERANGE);
    assert_int_equal(n, 3);
    assert_int_equal(sl_tokenizer_encode(t, s, strlen(s), ids, 3, &n), 0);
    assert_int_equal(ids[2], 6);
    /* bad arguments */
    assert_int_equal(sl_tokenizer_encode(t, NULL, 3, ids, 3, &n), SL_EINVAL);
    assert_int_equal(sl_tokenizer_encode(t, s, 1, NULL, 3, &n), SL_EINVAL);
    assert_int_equal(sl_tokenizer_encode(t, s, 1, ids, 3, NULL), SL_EINVAL);
    assert_int_equal(sl_tokenizer_encode(NULL, s, 1, ids, 3, &n), SL_EINVAL);
    sl_tokenizer_destroy(t);
}

static void test_create_errors(void **state)
{
    (void)state;
    sl_tokenizer_t *t = (sl_tokenizer_t *)&t;
    sl_tokenizer_options_t o;
    memset(&o, 0, sizeof o); /* size 0: not initialised */
    o.name = "wordpiece";
    o.vocab = vocab;
    assert_int_equal(sl_tokenizer_create(&o, &t), SL_EINVAL);
    assert_int_equal(sl_tokenizer_create(NULL, &t), SL_EINVAL);
    sl_tokenizer_options_init(&o);
    assert_int_equal(sl_tokenizer_create(&o, NULL), SL_EINVAL);
    o.vocab = vocab;
    assert_int_equal(sl_tokenizer_create(&o, &t), SL_EINVAL); /* no name */
    assert_null(t);
    assert_non_null(strstr(sl_tokenizer_last_error(NULL), "name"));
    o.name = "bogus_base";
    assert_int_equal(sl_tokenizer_create(&o, &t), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_tokenizer_last_error(NULL), "bogus_base"));
    o.name = "wordpiece";
    o.vocab = "/nonexistent/vocab.txt";
    assert_true(sl_tokenizer_create(&o, &t) < 0);
    assert_non_null(
        strstr(sl_tokenizer_last_error(NULL), "/nonexistent/vocab.txt"));
    o.name = "cl100k_base";
    o.vocab = NULL;
    assert_int_equal(sl_tokenizer_create(&o, &t), SL_EINVAL);
    assert_non_null(strstr(sl_tokenizer_last_error(NULL), "vocabulary"));
    sl_tokenizer_destroy(NULL);
}

/* A caller built against an older, shorter struct: what lies past its
 * size is not read (here: cased, set but outside). */
static void test_older_struct(void **state)
{
    (void)state;
    sl_tokenizer_options_t o;
    sl_tokenizer_options_init(&o);
    o.size = offsetof(sl_tokenizer_options_t, cased);
    o.name = "wordpiece";
    o.vocab = vocab;
    o.cased = 1;
    sl_tokenizer_t *t = NULL;
    assert_int_equal(sl_tokenizer_create(&o, &t), 0);
    expect(t, "Hello", (const int32_t[]){5}, 1); /* uncased */
    sl_tokenizer_destroy(t);
}

typedef struct job {
    sl_tokenizer_t *t;
    const char *text;
    const int32_t *want;
    size_t nwant;
    int bad;
} job_t;

static void *encode_many(void *arg)
{
    job_t *j = arg;
    int32_t ids[256];
    for (int k = 0; k < 300; k++) {
        size_t n = 0;
        if (sl_tokenizer_encode(j->t, j->text, strlen(j->text), ids, 256, &n) ||
            n != j->nwant || memcmp(ids, j->want, n * sizeof *ids))
            j->bad++;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    sl_tokenizer_t *t = wordpiece(0);
    const char *text = "Hello, worlds hello world, HELLO worlds x";
    int32_t want[256];
    size_t nwant = 0;
    assert_int_equal(
        sl_tokenizer_encode(t, text, strlen(text), want, 256, &nwant), 0);
    assert_int_equal(nwant, 11);
    pthread_t th[4];
    job_t jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job_t){t, text, want, nwant, 0};
        assert_int_equal(pthread_create(&th[i], NULL, encode_many, &jobs[i]),
                         0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].bad, 0);
    }
    sl_tokenizer_destroy(t);
}

static void test_gpt2(void **state)
{
    (void)state;
    char *dir = tu_shared_data("vocab");
    if (!dir)
        return;
    char enc[1024], merges[1024];
    snprintf(enc, sizeof enc, "%s/gpt2-encoder.json", dir);
    snprintf(merges, sizeof merges, "%s/gpt2-vocab.bpe", dir);
    free(dir);
    sl_tokenizer_t *t = make("gpt2", enc, merges, 0, 0);
    assert_int_equal(sl_tokenizer_vocab_size(t), 50257);
    expect(t, "Hello world", (const int32_t[]){15496, 995}, 2);
    /* special tokens are text unless allowed */
    int32_t ids[16];
    size_t n = 0;
    assert_int_equal(sl_tokenizer_encode(t, "<|endoftext|>", 13, ids, 16, &n),
                     0);
    assert_true(n > 1);
    sl_tokenizer_destroy(t);
    t = make("gpt2", enc, merges, 0, 1);
    expect(t, "<|endoftext|>", (const int32_t[]){50256}, 1);
    sl_tokenizer_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_init),
        cmocka_unit_test(test_wordpiece_default_uncased),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_older_struct),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_gpt2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
