/* Shard labels are class indices, checked when a shard source is opened
 * (issue 14 item 7): a label outside [0, classes) fails the loader's
 * create, naming the shard and the record; under skip the record is
 * counted and listed, never delivered. Without classes.txt the classes are
 * numbered, up to a bound (not one name per value up to the largest
 * label). And classes.txt lines of any length are one class each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/shard.h"
#include "sluice/sluice.h"
#include "testutil.h"

#define NREC 6

static uint8_t *jpeg; /* one small valid JPEG, every record's bytes */
static size_t jpeg_n;

static int setup(void **state)
{
    (void)state;
    char *tree = tu_jpeg_tree("labels-src", 1, 1, 16, 16);
    char path[1024];
    snprintf(path, sizeof path, "%s/c0/i00.jpg", tree);
    jpeg = tu_read_file(path, &jpeg_n);
    assert_non_null(jpeg);
    tu_rmtree(tree);
    free(tree);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(jpeg);
    return 0;
}

/* A folder with shard-00000.sls of NREC records labelled 0,1,0,1,...,
 * record `bad_at` labelled `bad` instead (bad_at < 0: none), and
 * classes.txt holding `classes` (NULL: none). */
static char *make_pack(int bad_at, int64_t bad, const char *classes)
{
    char *dir = tu_tmpdir("labels");
    char path[1024];
    snprintf(path, sizeof path, "%s/shard-00000.sls", dir);
    sl__shard_writer_t *w = NULL;
    char err[512];
    assert_int_equal(sl__shard_writer_open(path, 0, &w, err, sizeof err), 0);
    for (int i = 0; i < NREC; i++) {
        char name[32];
        snprintf(name, sizeof name, "c/%d.jpg", i);
        assert_int_equal(sl__shard_writer_add(w, jpeg, jpeg_n,
                                              i == bad_at ? bad : i % 2, name,
                                              err, sizeof err),
                         0);
    }
    assert_int_equal(sl__shard_writer_finish(w, err, sizeof err), 0);
    if (classes) {
        snprintf(path, sizeof path, "%s/classes.txt", dir);
        assert_int_equal(tu_write_file(path, classes, strlen(classes)), 0);
    }
    return dir;
}

static sl_options_t opts(int skip)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 8;
    o.decode_threads = 1;
    o.read_threads = 1;
    o.no_shuffle = 1;
    o.telemetry_ms = -1;
    o.on_error = skip ? SL_ON_ERROR_SKIP : SL_ON_ERROR_FAIL;
    return o;
}

/* Create fails, and its message names the shard, record 3 and `why`. */
static void expect_refused(int64_t label, const char *classes, const char *why)
{
    char *dir = make_pack(3, label, classes);
    sl_options_t o = opts(0);
    sl_loader_t *l = NULL;
    int rc = sl_loader_create(dir, &o, &l);
    const char *msg = sl_loader_last_error(NULL);
    if (rc == 0 || !strstr(msg, "shard-00000.sls: record 3 (c/3.jpg)") ||
        !strstr(msg, why))
        fail_msg("label %lld: rc %d, message '%s'", (long long)label, rc, msg);
    sl_loader_destroy(l);
    tu_rmtree(dir);
    free(dir);
}

static void test_label_huge_no_classes(void **state)
{
    (void)state;
    expect_refused((int64_t)1 << 40, NULL, "label 1099511627776");
}

static void test_label_negative_no_classes(void **state)
{
    (void)state;
    expect_refused(-1, NULL, "label -1");
}

static void test_label_negative_with_classes(void **state)
{
    (void)state;
    expect_refused(-1, "a\nb\n", "label -1 outside classes.txt (2 classes)");
}

static void test_label_past_classes(void **state)
{
    (void)state;
    expect_refused(2, "a\nb\n", "label 2 outside classes.txt (2 classes)");
}

/* Under skip: created; the bad record is counted and listed each epoch,
 * and the other NREC - 1 are delivered with their labels. */
static void test_label_skipped(void **state)
{
    (void)state;
    char *dir = make_pack(3, (int64_t)1 << 40, NULL);
    sl_options_t o = opts(1);
    o.epochs = 1;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(dir, &o, &l), 0);
    assert_int_equal(sl_loader_num_classes(l), 2);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int rc, samples = 0;
    while ((rc = sl_loader_next(l, &b)) == 0) {
        for (int i = 0; i < b->n; i++)
            assert_true(b->labels[i] == 0 || b->labels[i] == 1);
        samples += b->n;
        sl_loader_release(l, b);
    }
    assert_int_equal(rc, SL_EEND);
    assert_int_equal(samples, NREC - 1);
    assert_int_equal(sl_loader_skipped_count(l), 1);
    const char *m = sl_loader_skipped_message(l, 0);
    assert_non_null(m);
    assert_non_null(strstr(m, "shard-00000.sls: record 3 (c/3.jpg)"));
    assert_non_null(strstr(m, "label 1099511627776"));
    sl_loader_destroy(l);
    tu_rmtree(dir);
    free(dir);
}

/* No classes.txt: classes numbered 0..largest label. */
static void test_numbered_classes(void **state)
{
    (void)state;
    char *dir = make_pack(3, 41, NULL);
    sl_options_t o = opts(0);
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(dir, &o, &l), 0);
    assert_int_equal(sl_loader_num_classes(l), 42);
    assert_string_equal(sl_loader_class_name(l, 41), "41");
    assert_string_equal(sl_loader_class_name(l, 0), "0");
    assert_null(sl_loader_class_name(l, 42));
    sl_loader_destroy(l);
    tu_rmtree(dir);
    free(dir);
}

/* A class name of 5000 bytes is one class, not two (fgets of 4096 split
 * it before), and CR LF line ends are taken off. */
static void test_long_class_name(void **state)
{
    (void)state;
    size_t n = 5000;
    char *classes = malloc(n + 16);
    memset(classes, 'x', n);
    memcpy(classes + n, "\r\nshort\n", 9);
    char *dir = make_pack(-1, 0, classes);
    sl_options_t o = opts(0);
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(dir, &o, &l), 0);
    assert_int_equal(sl_loader_num_classes(l), 2);
    assert_int_equal(strlen(sl_loader_class_name(l, 0)), n);
    assert_string_equal(sl_loader_class_name(l, 1), "short");
    sl_loader_destroy(l);
    tu_rmtree(dir);
    free(dir);
    free(classes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_huge_no_classes),
        cmocka_unit_test(test_label_negative_no_classes),
        cmocka_unit_test(test_label_negative_with_classes),
        cmocka_unit_test(test_label_past_classes),
        cmocka_unit_test(test_label_skipped),
        cmocka_unit_test(test_numbered_classes),
        cmocka_unit_test(test_long_class_name),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
