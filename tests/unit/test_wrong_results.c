/* Issue 14 item 11, "silently wrong results": each case is now an error
 * (or a correct result), never a quiet success.
 *  - an epoch whose every sample was skipped fails next() (ordered: at the
 *    epoch's end; unordered: at the run's end) instead of an empty epoch;
 *  - unordered delivery has no position inside an epoch: start refuses it;
 *  - a start position whose batch numbers would overflow is refused;
 *  - resource errors (EMFILE at open) fail the run even under skip, naming
 *    the file and the cause; a shard that cannot be opened for lack of
 *    descriptors is not "left out";
 *  - the state file parser (core/statefile) refuses every hostile field;
 *  - text: a resume batch that overflows, or lies past the epoch's end, is
 *    an error, not a silently skipped epoch;
 *  - a batch released twice is refused (text: it corrupted the free list,
 *    so two later batches shared one buffer). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/statefile.h"
#include "data/shard.h"
#include "sluice/sluice.h"
#include "sluice/text.h"
#include "testutil.h"

static sl_options_t opts(int unordered)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 2;
    o.image_size = 32;
    o.decode_threads = 2;
    o.read_threads = 1;
    o.telemetry_ms = -1; /* no collector reading /proc under low limits */
    o.policy = SL_POLICY_STATIC;
    o.unordered = unordered;
    o.on_error = SL_ON_ERROR_SKIP;
    return o;
}

/* ------------------------------------------------------ every one skipped */

static char *bad_tree(void)
{
    char *root = tu_tmpdir("all_bad");
    char p[1024];
    for (int c = 0; c < 2; c++) {
        snprintf(p, sizeof p, "%s/c%d", root, c);
        mkdir(p, 0755);
        for (int i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s/c%d/x%d.jpg", root, c, i);
            assert_int_equal(tu_write_file(p, "not a jpeg", 10), 0);
        }
    }
    return root;
}

static void all_skipped(int unordered)
{
    char *root = bad_tree();
    sl_options_t o = opts(unordered);
    o.epochs = 3;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int rc = sl_loader_next(l, &b);
    assert_int_equal(rc, SL_ECORRUPT); /* was SL_EEND: an empty run */
    const char *m = sl_loader_last_error(l);
    assert_non_null(strstr(m, "every sample was skipped"));
    assert_non_null(strstr(m, "x")); /* the first skip, naming its file */
    if (!unordered) /* at the first epoch's end, not after all three */
        assert_non_null(strstr(m, "epoch 0:"));
    assert_int_equal(sl_loader_next(l, &b), SL_ECORRUPT); /* and it stays */
    sl_loader_destroy(l);
    tu_rmtree(root);
    free(root);
}

static void test_all_skipped_ordered(void **state)
{
    (void)state;
    all_skipped(0);
}

static void test_all_skipped_unordered(void **state)
{
    (void)state;
    all_skipped(1);
}

/* ------------------------------------------------------------- positions */

static void test_start_positions(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("positions", 2, 4, 40, 30);
    sl_options_t o = opts(1);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_batches_per_epoch(l), 4);
    sl_position_t mid = {0, 1}, edge = {1, 0}, end = {0, 4};
    assert_int_equal(sl_loader_start(l, &mid), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(l), "ordered"));
    assert_int_equal(sl_loader_start(l, &edge), 0);
    assert_int_equal(sl_loader_start(l, &end), 0); /* == epoch 1, batch 0 */
    /* (epoch + epochs) * batches must fit in int64 */
    sl_position_t far = {INT64_MAX / 2, 0}, neg = {INT64_MIN, 0};
    assert_int_equal(sl_loader_start(l, &far), SL_ERANGE);
    assert_int_equal(sl_loader_start(l, &neg), SL_ERANGE);
    sl_loader_destroy(l);
    o = opts(0); /* ordered: any batch of the epoch */
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, &mid), 0);
    assert_int_equal(sl_loader_start(l, &far), SL_ERANGE);
    sl_loader_destroy(l);
    tu_rmtree(root);
    free(root);
}

/* ------------------------------------------------------- resource errors */

/* Lowers the soft RLIMIT_NOFILE so that at most `spare` more descriptors
 * can be opened; returns the old limit. */
static struct rlimit squeeze_fds(int spare)
{
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    int fd = open("/dev/null", O_RDONLY); /* the lowest free descriptor */
    assert_true(fd >= 0);
    close(fd);
    struct rlimit lim = old;
    lim.rlim_cur = (rlim_t)(fd + spare);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    return old;
}

static void test_emfile_fails_under_skip(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("emfile", 2, 6, 40, 30);
    sl_options_t o = opts(0);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    struct rlimit old = squeeze_fds(0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int rc;
    while ((rc = sl_loader_next(l, &b)) == 0)
        sl_loader_release(l, b);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    /* was: every file "skipped" as bad data, then an empty epoch */
    assert_int_equal(rc, SL_ESYSTEM);
    const char *m = sl_loader_last_error(l);
    assert_non_null(strstr(m, ".jpg"));
    assert_non_null(strstr(m, strerror(EMFILE)));
    assert_int_equal(sl_loader_skipped_count(l), 0);
    sl_loader_destroy(l);
    tu_rmtree(root);
    free(root);
}

static void test_emfile_keeps_shards(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("emfile_shards");
    char p[1024], err[256];
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/shard-%05d.sls", dir, s);
        sl__shard_writer_t *w;
        assert_int_equal(sl__shard_writer_open(p, 0, &w, err, sizeof err), 0);
        assert_int_equal(
            sl__shard_writer_add(w, "x", 1, 0, "r", err, sizeof err), 0);
        assert_int_equal(sl__shard_writer_finish(w, err, sizeof err), 0);
    }
    sl_options_t o = opts(0);
    sl_loader_t *l = NULL;
    /* One spare descriptor: the folder listing and the first shard open;
     * the second shard's open fails with EMFILE. */
    struct rlimit old = squeeze_fds(1);
    int rc = sl_loader_create(dir, &o, &l);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sl_loader_last_error(NULL));
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    /* was: 0, the second shard "left out" as bad, half the data gone */
    assert_int_equal(rc, SL_ESYSTEM);
    assert_null(l);
    assert_non_null(strstr(msg, "shard-00001.sls"));
    assert_non_null(strstr(msg, strerror(EMFILE)));
    tu_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------ state file */

static int parses(const char *text)
{
    sl__state_t s;
    char err[256];
    return sl__state_parse(text, strlen(text), "M 2", &s, err, sizeof err);
}

static void test_state_parse(void **state)
{
    (void)state;
    sl__state_t s = {{3, 7}, 0xabcdef0123456789u, 42, 120, 0xffffffffffffffffu};
    char buf[SL__STATE_MAX_BYTES + 1];
    int n = sl__state_format("M 2", &s, buf, sizeof buf);
    assert_true(n > 0);
    sl__state_t t;
    char err[256];
    assert_int_equal(
        sl__state_parse(buf, (size_t)n, "M 2", &t, err, sizeof err), 0);
    assert_memory_equal(&s, &t, sizeof s);
    assert_int_equal(
        sl__state_parse(buf, (size_t)n, "M 1", &t, err, sizeof err),
        SL_ECORRUPT);
    const char *tail = "digest 0000000000000000\nconfig 0000000000000001\n"
                       "samples 5\ndataset 0000000000000002\n";
    const char *heads[] = {
        "M 2\nepoch -9223372036854775808\nbatch 0\n", /* INT64_MIN */
        "M 2\nepoch -1\nbatch 0\n",
        "M 2\nepoch 9223372036854775807\nbatch 0\n", /* 19 digits */
        "M 2\nepoch 1\nbatch 99999999999999999999\n",
        "M 2\nepoch +1\nbatch 0\n",
        "M 2\nepoch  1\nbatch 0\n",
        "M 2\nepoch 1 \nbatch 0\n",
        "M 2\nepoch \nbatch 0\n",
        "M 2\nepoch 0x1\nbatch 0\n",
        "M 2\nepoch 01\nbatch 0\n", /* one spelling per number */
        "M 2\nbatch 0\nepoch 1\n",
        "M 2\r\nepoch 1\nbatch 0\n",
    };
    char text[1024];
    snprintf(text, sizeof text, "M 2\nepoch 1\nbatch 0\n%s", tail);
    assert_int_equal(parses(text), 0);
    for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
        snprintf(text, sizeof text, "%s%s", heads[i], tail);
        assert_int_equal(parses(text), SL_ECORRUPT);
    }
    assert_int_equal(parses("M 2\nepoch 1\nbatch 0\ndigest "
                            "000000000000000G\nconfig 0000000000000001\n"
                            "samples 5\ndataset 0000000000000002\n"),
                     SL_ECORRUPT);
    assert_int_equal(parses("M 2\nepoch 1\nbatch 0\ndigest "
                            "ABCDEF0000000000\nconfig 0000000000000001\n"
                            "samples 5\ndataset 0000000000000002\n"),
                     SL_ECORRUPT);
    assert_int_equal(parses("M 2\nepoch 1\nbatch 0\n"), SL_ECORRUPT);
    /* a bad value is named on its own line, not the next one */
    static const struct {
        const char *text, *want;
    } at[] = {
        {"M 2\nepoch 99999999999999999999\n", "line 2: expected \"epoch\""},
        {"M 2\nepoch 1\nbatch x\n", "line 3: expected \"batch\""},
        {"M 2\nepoch 1\nbatch 0\ndigest 0\n", "line 4: expected \"digest\""},
        {"M 2\nepoch 1\nbatch 0\n", "line 4: expected \"digest\""},
    };
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        assert_int_equal(sl__state_parse(at[i].text, strlen(at[i].text), "M 2",
                                         &t, err, sizeof err),
                         SL_ECORRUPT);
        if (!strstr(err, at[i].want))
            fail_msg("'%s': '%s' (want '%s')", at[i].text, err, at[i].want);
    }
    snprintf(text, sizeof text, "M 2\nepoch 1\nbatch 0\n%sjunk", tail);
    assert_int_equal(parses(text), SL_ECORRUPT);
    snprintf(text, sizeof text, "M 2\nepoch 1\nbatch 0\n%s", tail);
    n = (int)strlen(text);
    text[n - 1] = 0; /* no final newline */
    assert_int_equal(parses(text), SL_ECORRUPT);
    text[6] = 0; /* a NUL inside */
    assert_int_equal(
        sl__state_parse(text, (size_t)n, "M 2", &t, err, sizeof err),
        SL_ECORRUPT);
    char big[SL__STATE_MAX_BYTES + 2];
    memset(big, '\n', sizeof big);
    assert_int_equal(
        sl__state_parse(big, sizeof big, "M 2", &t, err, sizeof err),
        SL_ECORRUPT);
    /* and the writer refuses what the parser would */
    s.pos.epoch = -1;
    assert_int_equal(sl__state_format("M 2", &s, buf, sizeof buf), -1);
}

/* ------------------------------------------------------------ text loader */

static char *text_dir, text_vocab[1024], text_corpus[1024];

static int text_setup(void **state)
{
    (void)state;
    text_dir = tu_tmpdir("text_wrong");
    snprintf(text_vocab, sizeof text_vocab, "%s/vocab.txt", text_dir);
    snprintf(text_corpus, sizeof text_corpus, "%s/corpus.txt", text_dir);
    FILE *f = fopen(text_vocab, "w");
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", f);
    for (int i = 0; i < 26; i++)
        fprintf(f, "%c\n##%c\n", 'a' + i, 'a' + i);
    fclose(f);
    f = fopen(text_corpus, "w");
    for (int d = 0; d < 200; d++) {
        for (int w = 0; w < 12; w++)
            fprintf(f, "%c%c ", 'a' + (d + w) % 26, 'a' + (d * w) % 26);
        fputc('\n', f);
    }
    fclose(f);
    return 0;
}

static int text_teardown(void **state)
{
    (void)state;
    tu_rmtree(text_dir);
    free(text_dir);
    return 0;
}

/* A text loader over the corpus, or NULL when the build has no tokenizers
 * (SL_TEXT off: the test is skipped). */
static sl_text_loader_t *text_open(void)
{
    sl_text_options_t o;
    sl_text_options_init(&o);
    o.task = SL_TEXT_LM;
    o.tokenizer = "wordpiece";
    o.vocab = text_vocab;
    o.seq_len = 16;
    o.batch_size = 4;
    o.decode_threads = 2;
    o.telemetry_ms = -1;
    o.chunk_bytes = 1000;
    const char *src = text_corpus;
    sl_text_loader_t *l = NULL;
    int rc = sl_text_loader_create(&src, 1, &o, &l);
    if (rc == SL_EUNSUPPORTED)
        return NULL;
    assert_int_equal(rc, 0);
    return l;
}

static void test_text_resume_range(void **state)
{
    (void)state;
    sl_text_loader_t *l = text_open();
    if (!l) {
        skip();
        return;
    }
    const sl_text_batch_t *b;
    int64_t nb = 0;
    assert_int_equal(sl_text_loader_start(l, NULL), 0);
    while (sl_text_loader_next(l, &b) == 0) {
        nb++;
        sl_text_loader_release(l, b);
    }
    assert_true(nb > 2);
    /* batch x batch_size overflowed */
    sl_position_t huge = {0, INT64_MAX / 2}, late = {INT64_MAX, 0};
    assert_int_equal(sl_text_loader_start(l, &huge), SL_ERANGE);
    assert_int_equal(sl_text_loader_start(l, &late), SL_ERANGE);
    /* past the end: was the next epoch (here: SL_EEND), the epoch gone */
    sl_position_t past = {0, nb + 5};
    assert_int_equal(sl_text_loader_start(l, &past), 0);
    assert_int_equal(sl_text_loader_next(l, &b), SL_ERANGE);
    assert_non_null(strstr(sl_text_loader_last_error(l), "past the end"));
    /* the last batch itself, and the position just after it, still work */
    sl_position_t last = {0, nb - 1}, after = {0, nb};
    assert_int_equal(sl_text_loader_start(l, &last), 0);
    assert_int_equal(sl_text_loader_next(l, &b), 0);
    assert_int_equal(b->index, nb - 1);
    sl_text_loader_release(l, b);
    assert_int_equal(sl_text_loader_next(l, &b), SL_EEND);
    assert_int_equal(sl_text_loader_start(l, &after), 0);
    assert_int_equal(sl_text_loader_next(l, &b), SL_EEND);
    sl_text_loader_destroy(l);
}

static void test_text_double_release(void **state)
{
    (void)state;
    sl_text_loader_t *l = text_open();
    if (!l) {
        skip();
        return;
    }
    assert_int_equal(sl_text_loader_start(l, NULL), 0);
    const sl_text_batch_t *a, *b, *c;
    assert_int_equal(sl_text_loader_next(l, &a), 0);
    assert_int_equal(sl_text_loader_release(l, a), 0);
    assert_int_equal(sl_text_loader_release(l, a), SL_ESTATE);
    assert_non_null(strstr(sl_text_loader_last_error(l), "already released"));
    /* the free list holds the block once: two live batches, two blocks */
    assert_int_equal(sl_text_loader_next(l, &b), 0);
    assert_int_equal(sl_text_loader_next(l, &c), 0);
    assert_ptr_not_equal(b, c);
    sl_text_batch_t other = {0};
    assert_int_equal(sl_text_loader_release(l, &other), SL_EINVAL);
    assert_int_equal(sl_text_loader_release(l, b), 0);
    assert_int_equal(sl_text_loader_release(l, c), 0);
    assert_int_equal(sl_text_loader_release(l, NULL), 0);
    sl_text_loader_destroy(l);
}

static void test_image_double_release(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("double_release", 2, 4, 40, 30);
    sl_options_t o = opts(0);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *a;
    assert_int_equal(sl_loader_next(l, &a), 0);
    assert_int_equal(sl_loader_release(l, a), 0);
    assert_int_equal(sl_loader_release(l, a), SL_ESTATE);
    assert_non_null(strstr(sl_loader_last_error(l), "not held"));
    sl_loader_destroy(l);
    tu_rmtree(root);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_skipped_ordered),
        cmocka_unit_test(test_all_skipped_unordered),
        cmocka_unit_test(test_start_positions),
        cmocka_unit_test(test_emfile_fails_under_skip),
        cmocka_unit_test(test_emfile_keeps_shards),
        cmocka_unit_test(test_state_parse),
        cmocka_unit_test(test_text_resume_range),
        cmocka_unit_test(test_text_double_release),
        cmocka_unit_test(test_image_double_release),
    };
    return cmocka_run_group_tests(tests, text_setup, text_teardown);
}
