/* text/textsrc reads plain text a document at a time (base/fdcache keeps
 * a bounded set of files open): the descriptors held stay under
 * SL__FDCACHE_MAX however many files are read, a busy cache hands out a
 * reader's own; a document past 4 GiB keeps its length (the index's side
 * table, on a sparse file); a file truncated, rewritten or removed after
 * open is a bad document named FILE:LINE. tests/python/test_text_ondemand.py
 * checks the batches against the code that held the files whole. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/fdcache.h"
#include "testutil.h"
#include "text/textsrc.h"

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void test_fdcache_bounded(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("fdcache");
    enum { N = SL__FDCACHE_MAX + 8 };
    char path[N][512];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%02d", i);
        tu_write_at(dir, name, "x", 1);
        snprintf(path[i], sizeof path[i], "%s/%s", dir, name);
    }
    sl__fdcache_t c;
    sl__fdcache_init(&c);
    char err[256];
    int before = open_fds();
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            int fd = sl__fdcache_get(&c, i, path[i], err, sizeof err);
            assert_true(fd >= 0);
            sl__fdcache_put(&c, fd);
        }
    assert_int_equal(open_fds() - before, SL__FDCACHE_MAX);
    /* the same file again: the same descriptor */
    int a = sl__fdcache_get(&c, 3 + 8, path[3 + 8], err, sizeof err);
    int b = sl__fdcache_get(&c, 3 + 8, path[3 + 8], err, sizeof err);
    assert_int_equal(a, b);
    sl__fdcache_put(&c, a);
    sl__fdcache_put(&c, b);
    /* every cached one busy: a reader gets its own, closed when put */
    int held[SL__FDCACHE_MAX];
    for (int i = 0; i < SL__FDCACHE_MAX; i++)
        held[i] = sl__fdcache_get(&c, i, path[i], err, sizeof err);
    int own = sl__fdcache_get(&c, N - 1, path[N - 1], err, sizeof err);
    assert_true(own >= 0);
    assert_int_equal(open_fds() - before, SL__FDCACHE_MAX + 1);
    sl__fdcache_put(&c, own);
    assert_int_equal(open_fds() - before, SL__FDCACHE_MAX);
    for (int i = 0; i < SL__FDCACHE_MAX; i++)
        sl__fdcache_put(&c, held[i]);
    /* a file that is gone: open's message */
    assert_true(sl__fdcache_get(&c, 999, "/nonexistent/x", err, sizeof err) <
                0);
    assert_non_null(strstr(err, "/nonexistent/x"));
    sl__fdcache_free(&c);
    assert_int_equal(open_fds(), before);
    tu_rmtree(dir);
    free(dir);
}

static void test_textsrc_big_document(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("textbig");
    char big[512], small[512];
    snprintf(big, sizeof big, "%s/a-big.txt", dir);
    snprintf(small, sizeof small, "%s/b-small.txt", dir);
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    uint64_t len = ((uint64_t)4 << 30) + 10; /* sparse: no disk used */
    if (ftruncate(fd, (off_t)len)) {
        close(fd);
        skip();
    }
    close(fd);
    tu_write_file(small, "a\n\nb\r\n", 6);
    const char *paths[] = {big, small};
    sl__textsrc_t *s = NULL;
    char err[512];
    assert_int_equal(sl__textsrc_open(paths + 1, 1, 0, 0, &s, err, sizeof err),
                     0);
    assert_int_equal(sl__textsrc_count(s), 2);
    char where[600];
    assert_string_equal(sl__textsrc_describe(s, 1, where, sizeof where) +
                            strlen(dir) + 1,
                        "b-small.txt:3");
    sl__textsrc_close(s);
    /* doc_per_file: the big file is one document, found by its size */
    assert_int_equal(sl__textsrc_open(paths, 2, 1, 0, &s, err, sizeof err), 0);
    assert_int_equal(sl__textsrc_count(s), 2);
    assert_true(sl__textsrc_size(s, 0) == len);
    assert_true(sl__textsrc_size(s, 1) == 6);
    sl__textsrc_close(s);
    tu_rmtree(dir);
    free(dir);
}

static void test_textsrc_truncated(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("textcut");
    char path[512];
    snprintf(path, sizeof path, "%s/cut.txt", dir);
    tu_write_file(path, "one\ntwo\r\nthree\n", 15);
    const char *paths[] = {path};
    sl__textsrc_t *s = NULL;
    char err[1024];
    assert_int_equal(sl__textsrc_open(paths, 1, 0, 0, &s, err, sizeof err), 0);
    assert_int_equal(sl__textsrc_count(s), 3);
    sl__bytes_t buf = {0}, scratch = {0};
    const char *p;
    size_t n;
    assert_int_equal(
        sl__textsrc_get(s, 1, &buf, &scratch, &p, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(p, "two", 3);
    assert_int_equal(truncate(path, 6), 0);
    assert_int_equal(
        sl__textsrc_get(s, 1, &buf, &scratch, &p, &n, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, "cut.txt:2: the file was truncated after the "
                                "loader opened it: 6 bytes now, 15 then"));
    /* rewritten: "one" now ends where it did not */
    tu_write_file(path, "oneone\ntwo\r\nthree\n", 18);
    assert_int_equal(
        sl__textsrc_get(s, 0, &buf, &scratch, &p, &n, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, "cut.txt:1: the file changed after the loader "
                                "opened it: the line no longer ends at byte "
                                "3"));
    sl__textsrc_close(s);
    /* removed after open (no descriptor held yet): named, with the cause */
    assert_int_equal(sl__textsrc_open(paths, 1, 0, 0, &s, err, sizeof err), 0);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(
        sl__textsrc_get(s, 0, &buf, &scratch, &p, &n, err, sizeof err),
        SL_ENOTFOUND);
    assert_non_null(strstr(err, "cut.txt:1: reading it again: "));
    assert_non_null(strstr(err, "No such file"));
    sl__bytes_free(&buf);
    sl__bytes_free(&scratch);
    sl__textsrc_close(s);
    tu_rmtree(dir);
    free(dir);
}

/* A file replaced after open (a new file renamed over its path, the same
 * size and line ends): its documents are the other file's bytes. They were
 * read as if nothing changed, and a descriptor the cache still held read
 * the old file, so the stream depended on which reader held which
 * descriptor. Now a bad document, named. */
static void test_textsrc_replaced(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("textswap");
    char path[512], next[512];
    snprintf(path, sizeof path, "%s/swap.txt", dir);
    snprintf(next, sizeof next, "%s/swap.new", dir);
    tu_write_file(path, "aaa\nbbb\n", 8);
    for (int whole = 0; whole <= 1; whole++) {
        const char *paths[] = {path};
        sl__textsrc_t *s = NULL;
        char err[1024];
        assert_int_equal(
            sl__textsrc_open(paths, 1, whole, 0, &s, err, sizeof err), 0);
        tu_write_file(next, "ccc\nddd\n", 8);
        assert_int_equal(rename(next, path), 0);
        sl__bytes_t buf = {0}, scratch = {0};
        const char *p;
        size_t n;
        assert_int_equal(
            sl__textsrc_get(s, 0, &buf, &scratch, &p, &n, err, sizeof err),
            SL_ECORRUPT);
        assert_non_null(strstr(err, whole ? "swap.txt: the file was replaced"
                                          : "swap.txt:1: the file was "
                                            "replaced"));
        assert_non_null(strstr(err, "after the loader opened it"));
        sl__bytes_free(&buf);
        sl__bytes_free(&scratch);
        sl__textsrc_close(s);
    }
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fdcache_bounded),
        cmocka_unit_test(test_textsrc_big_document),
        cmocka_unit_test(test_textsrc_truncated),
        cmocka_unit_test(test_textsrc_replaced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
