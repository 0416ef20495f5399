/* data/shard_walk: the *.sls listing (sorted, dot files left out, joined
 * by base/path's rule: one slash whatever DIR ends with), the
 * classes.txt count, a shard's summary from its index, and the checked
 * read of every record (checksum damage and labels outside classes.txt
 * reported, each naming the record). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "data/shard.h"
#include "data/shard_walk.h"
#include "testutil.h"

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = tu_tmpdir("shardwalk");
    return dir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    free(dir);
    return 0;
}

/* dir/NAME with records of labels `labels` (n of them), codec zstd. */
static void write_shard(const char *name, const int64_t *labels, int n)
{
    char path[1024], err[512], rec[64], rname[32];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sl__shard_writer_t *w = NULL;
    assert_int_equal(
        sl__shard_writer_open(path, SL_CODEC_ZSTD, &w, err, sizeof err), 0);
    for (int i = 0; i < n; i++) {
        memset(rec, 'a' + i, sizeof rec);
        snprintf(rname, sizeof rname, "rec_%d", i);
        assert_int_equal(sl__shard_writer_add(w, rec, sizeof rec, labels[i],
                                              rname, err, sizeof err),
                         0);
    }
    assert_int_equal(sl__shard_writer_finish(w, err, sizeof err), 0);
}

static sl__shard_t *open_shard(const char *name)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sl__shard_t *s = NULL;
    assert_int_equal(sl__shard_open(path, &s, err, sizeof err), 0);
    return s;
}

static void test_list(void **state)
{
    (void)state;
    static const int64_t l[] = {0};
    write_shard("b.sls", l, 1);
    write_shard("a.sls", l, 1);
    char p[1024];
    snprintf(p, sizeof p, "%s/.tmp.sls", dir); /* a writer's temp file */
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    char **paths = NULL;
    int n = -1;
    assert_int_equal(sl__shard_list(dir, &paths, &n), 0);
    assert_int_equal(n, 2);
    assert_non_null(strstr(paths[0], "/a.sls"));
    assert_non_null(strstr(paths[1], "/b.sls"));
    sl__shard_list_free(paths, n);
    /* "DIR/" (as a shell completes it) lists DIR/a.sls, not DIR//a.sls:
     * the names verify prints and the manifest's are matched against */
    char slash[1024], want[1024];
    snprintf(slash, sizeof slash, "%s//", dir);
    snprintf(want, sizeof want, "%s/a.sls", dir);
    assert_int_equal(sl__shard_list(slash, &paths, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(paths[0], want);
    sl__shard_list_free(paths, n);
    assert_int_equal(sl__shard_list("/nonexistent/dir", &paths, &n), SL_EIO);
    assert_null(paths);
    assert_int_equal(n, 0);
}

static void test_classes_count(void **state)
{
    (void)state;
    char p[1024];
    snprintf(p, sizeof p, "%s/classes.txt", dir);
    assert_int_equal(sl__classes_count("/nonexistent/dir"), -1);
    assert_int_equal(tu_write_file(p, "cat\ndog\n", 8), 0);
    assert_int_equal(sl__classes_count(dir), 2);
    assert_int_equal(tu_write_file(p, "cat\ndog", 7), 0); /* no last \n */
    assert_int_equal(sl__classes_count(dir), 2);
    assert_int_equal(tu_write_file(p, "", 0), 0);
    assert_int_equal(sl__classes_count(dir), 0);
}

static void test_summary(void **state)
{
    (void)state;
    static const int64_t l[] = {2, 0, 2, 5};
    write_shard("sum.sls", l, 4);
    sl__shard_t *s = open_shard("sum.sls");
    sl__shard_summary_t sum;
    assert_int_equal(sl__shard_summarize(s, &sum), 0);
    assert_int_equal(sum.records, 4);
    assert_int_equal(sum.raw_bytes, 4 * 64);
    assert_true(sum.stored_bytes > 0 && sum.stored_bytes < sum.raw_bytes);
    assert_int_equal(sum.per_codec[SL_CODEC_ZSTD], 4);
    assert_int_equal(sum.per_codec[SL_CODEC_NONE], 0);
    assert_int_equal(sum.label_min, 0);
    assert_int_equal(sum.label_max, 5);
    assert_int_equal(sum.labels_distinct, 3);
    sl__shard_close(s);
    write_shard("empty.sls", l, 0);
    s = open_shard("empty.sls");
    assert_int_equal(sl__shard_summarize(s, &sum), 0);
    assert_int_equal(sum.records, 0);
    assert_int_equal(sum.labels_distinct, 0);
    sl__shard_close(s);
}

typedef struct damage {
    int n;
    char last[1024];
} damage_t;

static void on_damage(void *ctx, const char *msg)
{
    damage_t *d = ctx;
    d->n++;
    snprintf(d->last, sizeof d->last, "%s", msg);
}

static void test_check(void **state)
{
    (void)state;
    static const int64_t l[] = {0, 1, 2};
    write_shard("chk.sls", l, 3);
    sl__shard_t *s = open_shard("chk.sls");
    damage_t d = {0, ""};
    uint64_t bytes = 0;
    assert_int_equal(sl__shard_check(s, -1, on_damage, &d, &bytes), 0);
    assert_int_equal(d.n, 0);
    assert_true(bytes > 0);
    /* with 2 classes, label 2 is out of range */
    assert_int_equal(sl__shard_check(s, 2, on_damage, &d, &bytes), 1);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.last, "record 2 (rec_2): label 2 outside"));
    const sl__shard_entry_t *e = sl__shard_entry(s, 1);
    uint64_t off = e->offset;
    sl__shard_close(s);
    /* flip a stored byte of record 1 */
    char p[1024];
    snprintf(p, sizeof p, "%s/chk.sls", dir);
    size_t n = 0;
    uint8_t *bytes_in = tu_read_file(p, &n);
    assert_non_null(bytes_in);
    bytes_in[off + 2] ^= 0xff;
    assert_int_equal(tu_write_file(p, bytes_in, n), 0);
    free(bytes_in);
    s = open_shard("chk.sls");
    d.n = 0;
    assert_int_equal(sl__shard_check(s, -1, on_damage, &d, &bytes), 1);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.last, "record 1 (rec_1)"));
    sl__shard_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_classes_count),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
