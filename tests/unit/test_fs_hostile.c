/* Hostile file-system entries in a source (issue 14, items 5 and 6): a FIFO
 * named like an image, at scan and swapped in after the scan; symlink loops
 * in an ImageFolder; a FIFO given as a text source. Each must give an error
 * (fail) or a listed skip (skip) within seconds, and destroy must return.
 * A watchdog (alarm) turns a hang into a failure. Also run under TSan. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "data/folder.h"
#include "sluice/sluice.h"
#include "testutil.h"
#include "text/textsrc.h"

#define WATCHDOG_S 30 /* a hang fails the test instead of the ctest timeout */

static sl_options_t opts(int on_error)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 16;
    o.no_shuffle = 1;
    o.read_threads = 2;
    o.decode_threads = 2;
    o.telemetry_ms = -1;
    o.on_error = on_error;
    return o;
}

/* Streams one epoch; counts samples; returns next()'s final code. */
static int stream(sl_loader_t *l, int64_t *samples)
{
    *samples = 0;
    int rc = sl_loader_start(l, NULL);
    if (rc)
        return rc;
    const sl_batch_t *b;
    while ((rc = sl_loader_next(l, &b)) == 0) {
        *samples += b->n;
        sl_loader_release(l, b);
    }
    return rc;
}

/* 1 if some skip message holds both strings. */
static int skipped_with(const sl_loader_t *l, const char *a, const char *b)
{
    for (int64_t i = 0; i < sl_loader_skipped_count(l); i++) {
        const char *m = sl_loader_skipped_message(l, i);
        if (m && strstr(m, a) && strstr(m, b))
            return 1;
    }
    return 0;
}

static void test_fifo_at_scan(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fs-fifo", 2, 3, 20, 20);
    char path[1024];
    snprintf(path, sizeof path, "%s/c0/x.jpg", root);
    assert_int_equal(mkfifo(path, 0600), 0);

    /* fail: create refuses the source, naming the entry and the cause. */
    sl_options_t o = opts(SL_ON_ERROR_FAIL);
    sl_loader_t *l = NULL;
    assert_int_not_equal(sl_loader_create(root, &o, &l), 0);
    assert_null(l);
    const char *e = sl_loader_last_error(NULL);
    assert_non_null(strstr(e, "c0/x.jpg"));
    assert_non_null(strstr(e, "not a regular file"));

    /* skip: the FIFO is left out, counted and listed; the rest delivered. */
    o = opts(SL_ON_ERROR_SKIP);
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_num_samples(l), 6);
    assert_int_equal(sl_loader_skipped_count(l), 1);
    assert_true(skipped_with(l, "c0/x.jpg", "not a regular file"));
    int64_t n;
    assert_int_equal(stream(l, &n), SL_EEND);
    assert_int_equal(n, 6);
    sl_loader_destroy(l);
    alarm(0);
    tu_rmtree(root);
    free(root);
}

/* A file replaced by a FIFO after the scan: the read refuses it at once
 * (no blocking open), the epoch ends, destroy returns. */
static void test_fifo_after_scan(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fs-fifo-late", 2, 3, 20, 20);
    char path[1024];
    snprintf(path, sizeof path, "%s/c1/i01.jpg", root);
    for (int mode = 0; mode < 2; mode++) {
        int skip = mode == 1;
        sl_options_t o = opts(skip ? SL_ON_ERROR_SKIP : SL_ON_ERROR_FAIL);
        sl_loader_t *l = NULL;
        assert_int_equal(sl_loader_create(root, &o, &l), 0);
        assert_int_equal(sl_loader_num_samples(l), 6);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(mkfifo(path, 0600), 0);
        int64_t n;
        int rc = stream(l, &n);
        if (skip) {
            assert_int_equal(rc, SL_EEND);
            assert_int_equal(n, 5);
            assert_int_equal(sl_loader_skipped_count(l), 1);
            assert_true(skipped_with(l, "c1/i01.jpg", "not a regular file"));
        } else {
            assert_int_not_equal(rc, SL_EEND);
            const char *e = sl_loader_last_error(l);
            assert_non_null(strstr(e, "c1/i01.jpg"));
            assert_non_null(strstr(e, "not a regular file"));
        }
        sl_loader_destroy(l); /* must not wait on a reader stuck in open */
        /* Put a real image back for the next mode. */
        assert_int_equal(unlink(path), 0);
        char src[1024];
        snprintf(src, sizeof src, "%s/c1/i00.jpg", root);
        size_t len;
        uint8_t *p = tu_read_file(src, &len);
        assert_int_equal(tu_write_file(path, p, len), 0);
        free(p);
    }
    alarm(0);
    tu_rmtree(root);
    free(root);
}

/* One image and two links to its own folder: one sample, at once (the
 * depth-limited walk made ~2^33 folder visits); each loop is a listed
 * warning, not an error, under both policies. */
static void test_symlink_loops(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fs-loop", 1, 1, 20, 20);
    char path[1024];
    snprintf(path, sizeof path, "%s/c0/a", root);
    assert_int_equal(symlink(".", path), 0);
    snprintf(path, sizeof path, "%s/c0/b", root);
    assert_int_equal(symlink(".", path), 0);
    snprintf(path, sizeof path, "%s/c0/up", root);
    assert_int_equal(symlink("..", path), 0);

    sl__folder_t *f = NULL;
    char err[512];
    assert_int_equal(sl__folder_scan(root, 0, &f, err, sizeof err), 0);
    assert_int_equal(f->n, 1);
    assert_int_equal(f->nnotes, 3);
    for (int i = 0; i < f->nnotes; i++) {
        assert_non_null(strstr(f->notes[i].msg, "already scanned"));
        assert_int_equal(f->notes[i].lost, 0);
    }
    sl__folder_free(f);

    for (int mode = 0; mode < 2; mode++) {
        sl_options_t o = opts(mode ? SL_ON_ERROR_SKIP : SL_ON_ERROR_FAIL);
        sl_loader_t *l = NULL;
        assert_int_equal(sl_loader_create(root, &o, &l), 0);
        assert_int_equal(sl_loader_num_samples(l), 1);
        assert_true(skipped_with(l, "c0/a", "already scanned"));
        assert_true(skipped_with(l, "c0/b", "already scanned"));
        sl_stats_t st;
        sl_stats_init(&st);
        assert_int_equal(sl_loader_stats(l, &st), 0);
        assert_int_equal(st.errors_skipped, 0); /* no sample was lost */
        int64_t n;
        assert_int_equal(stream(l, &n), SL_EEND);
        assert_int_equal(n, 1);
        sl_loader_destroy(l);
    }
    alarm(0);
    tu_rmtree(root);
    free(root);
}

/* Two links from one class into the other's folder: its images belong to
 * the class that reaches the folder first (once), and a deeper tree than
 * the old depth cap is walked whole. */
static void test_shared_and_deep_folders(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fs-share", 2, 2, 20, 20);
    char path[8192], deep[4096];
    snprintf(path, sizeof path, "%s/c0/l1", root);
    assert_int_equal(symlink("../c1", path), 0);
    snprintf(path, sizeof path, "%s/c0/l2", root);
    assert_int_equal(symlink("../c1", path), 0);
    /* c1/d/d/.../d (40 levels) holding one image. */
    int len = snprintf(deep, sizeof deep, "%s/c1", root);
    for (int i = 0; i < 40; i++) {
        len += snprintf(deep + len, sizeof deep - (size_t)len, "/d");
        assert_int_equal(mkdir(deep, 0755), 0);
    }
    char src[1024];
    snprintf(src, sizeof src, "%s/c1/i00.jpg", root);
    size_t n;
    uint8_t *p = tu_read_file(src, &n);
    snprintf(path, sizeof path, "%s/deep.jpg", deep);
    assert_int_equal(tu_write_file(path, p, n), 0);
    free(p);

    sl__folder_t *f = NULL;
    char err[512];
    assert_int_equal(sl__folder_scan(root, 0, &f, err, sizeof err), 0);
    /* c0: its 2 + c1's 3 through l1; l2 and the class folder c1: already
     * scanned. Every file once. */
    assert_int_equal(f->n, 5);
    int deep_seen = 0;
    for (int64_t i = 0; i < f->n; i++)
        deep_seen += strstr(f->paths[i], "deep.jpg") != NULL;
    assert_int_equal(deep_seen, 1);
    assert_int_equal(f->nnotes, 2);
    sl__folder_free(f);
    alarm(0);
    tu_rmtree(root);
    free(root);
}

/* A FIFO, a directory and a dangling link named like images, under fail
 * and skip at the scan level: errors / notes name the entry and cause. */
static void test_scan_bad_entries(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *root = tu_jpeg_tree("fs-bad", 1, 2, 20, 20);
    char path[1024];
    snprintf(path, sizeof path, "%s/c0/f.jpg", root);
    assert_int_equal(mkfifo(path, 0600), 0);
    sl__folder_t *f = NULL;
    char err[512];
    assert_int_not_equal(sl__folder_scan(root, 0, &f, err, sizeof err), 0);
    assert_null(f);
    assert_non_null(strstr(err, "c0/f.jpg"));
    assert_non_null(strstr(err, "not a regular file (FIFO)"));

    snprintf(path, sizeof path, "%s/c0/gone.png", root);
    assert_int_equal(symlink("nowhere.png", path), 0);
    snprintf(path, sizeof path, "%s/c0/zero.jpg", root);
    assert_int_equal(symlink("/dev/zero", path), 0);

    assert_int_equal(sl__folder_scan(root, 1, &f, err, sizeof err), 0);
    assert_int_equal(f->n, 2);
    assert_int_equal(f->nnotes, 3);
    int seen = 0;
    for (int i = 0; i < f->nnotes; i++) {
        const char *m = f->notes[i].msg;
        assert_int_equal(f->notes[i].lost, 1);
        seen |= (strstr(m, "f.jpg") && strstr(m, "not a regular file")) << 0;
        seen |= (strstr(m, "gone.png") && strstr(m, "No such file")) << 1;
        seen |= (strstr(m, "zero.jpg") && strstr(m, "not a regular file")) << 2;
    }
    assert_int_equal(seen, 7);
    sl__folder_free(f);
    alarm(0);
    tu_rmtree(root);
    free(root);
}

/* A FIFO given as a text source is refused at open, not waited on. */
static void test_text_fifo(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *dir = tu_tmpdir("fs-text-fifo");
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus.jsonl", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    const char *paths[1] = {path};
    sl__textsrc_t *s = NULL;
    char err[512];
    assert_int_not_equal(sl__textsrc_open(paths, 1, 0, 0, &s, err, sizeof err),
                         0);
    assert_null(s);
    assert_non_null(strstr(err, "corpus.jsonl"));
    assert_non_null(strstr(err, "not a regular file"));
    alarm(0);
    tu_rmtree(dir);
    free(dir);
}

/* Entries of dir (not . and ..). */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* sl__write_file_whole (a --state file): over a FIFO or a device it
 * refuses, leaving it as it is (was: the rename turned /dev/full into a
 * regular file); a write that fails (a file-size limit here, a full disk
 * in use) leaves the old file and no temp file (was: PATH.tmp left). */
static void test_write_whole_hostile_targets(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *dir = tu_tmpdir("fs-write-whole");
    char fifo[1024], file[1024], err[512];
    snprintf(fifo, sizeof fifo, "%s/st.fifo", dir);
    snprintf(file, sizeof file, "%s/st", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_not_equal(sl__write_file_whole(fifo, "x\n", 2, err, sizeof err),
                         0);
    assert_non_null(strstr(err, "not a regular file (FIFO)"));
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_not_equal(sl__write_file_whole(dir, "x", 1, err, sizeof err), 0);
    assert_non_null(strstr(err, "not a regular file (directory)"));
    assert_int_equal(dir_entries(dir), 1);

    assert_int_equal(sl__write_file_whole(file, "old\n", 4, err, sizeof err),
                     0);
    /* a file-size limit of 0: every write fails with EFBIG (SIGXFSZ
     * ignored, as the CLI does), as a full disk fails it with ENOSPC */
    struct rlimit old, zero = {0, 0};
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    zero.rlim_max = old.rlim_max;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &zero), 0);
    int rc = sl__write_file_whole(file, "new\n", 4, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, was);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err, "/st: write failed: File too large"));
    size_t n = 0;
    uint8_t *back = tu_read_file(file, &n);
    assert_non_null(back);
    assert_int_equal(n, 4);
    assert_memory_equal(back, "old\n", 4);
    free(back);
    assert_int_equal(dir_entries(dir), 2); /* the FIFO and st: no temp */

    assert_int_equal(sl__write_file_whole(file, "new\n", 4, err, sizeof err),
                     0);
    back = tu_read_file(file, &n);
    assert_non_null(back);
    assert_memory_equal(back, "new\n", 4);
    free(back);
    assert_int_equal(dir_entries(dir), 2);
    alarm(0);
    tu_rmtree(dir);
    free(dir);
}

/* Out of descriptors (ulimit -n): the open fails as a system error (never
 * a skippable bad file) and says which limit and its value, so the cure is
 * plain (was: "Too many open files" only). In a child: the limit dies with
 * it. */
static void test_emfile_names_the_limit(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("fs-emfile");
    char path[1024];
    snprintf(path, sizeof path, "%s/a.jpg", dir);
    assert_int_equal(tu_write_file(path, "x", 1), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit r;
        getrlimit(RLIMIT_NOFILE, &r);
        r.rlim_cur = 32;
        if (setrlimit(RLIMIT_NOFILE, &r))
            _exit(3);
        while (open("/dev/null", O_RDONLY) >= 0)
            ;
        char err[512];
        int rc = sl__open_regular(path, NULL, err, sizeof err);
        fprintf(stderr, "%d: %s\n", rc, err);
        _exit(rc == SL_ESYSTEM && strstr(err, "a.jpg: cannot open: ") &&
                      strstr(err, "ulimit -n, is 32")
                  ? 0
                  : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    tu_rmtree(dir);
    free(dir);
}

/* A small input that may be a pipe (an AWS credentials file): a FIFO
 * with no writer reads as empty at once (fopen waited for ever), a pipe
 * with a writer (process substitution's /dev/fd/N) is read whole, a
 * writer that sends nothing fails at the timeout, a device is refused
 * and one over the cap fails. */
static void test_small_input_pipes(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    char *dir = tu_tmpdir("input"), path[4200], err[512] = "";
    char *text = NULL;
    size_t n = 99;
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    int64_t t0 = sl__now_ns();
    assert_int_equal(
        sl__read_small_input(path, 1 << 20, 5000, &text, &n, err, sizeof err),
        0);
    assert_true(sl__now_ns() - t0 < 1000000000LL); /* at once, not 5 s */
    assert_int_equal(n, 0);
    free(text);
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], "[default]\nk = v\n", 16), 16);
    close(p[1]);
    snprintf(path, sizeof path, "/dev/fd/%d", p[0]);
    assert_int_equal(
        sl__read_small_input(path, 1 << 20, 5000, &text, &n, err, sizeof err),
        0);
    assert_int_equal(n, 16);
    assert_string_equal(text, "[default]\nk = v\n");
    free(text);
    close(p[0]);
    assert_int_equal(pipe(p), 0); /* a writer that holds it, silent */
    snprintf(path, sizeof path, "/dev/fd/%d", p[0]);
    assert_int_equal(
        sl__read_small_input(path, 1 << 20, 200, &text, &n, err, sizeof err),
        SL_EIO);
    assert_non_null(strstr(err, "a pipe whose writer sent nothing for 0.2 s"));
    assert_int_equal(write(p[1], "0123456789", 10), 10);
    /* some bytes, the writer still there: not "sent nothing" */
    assert_int_equal(
        sl__read_small_input(path, 1 << 20, 200, &text, &n, err, sizeof err),
        SL_EIO);
    assert_non_null(strstr(err, "a pipe whose writer sent 10 bytes and did "
                                "not close it within 0.2 s"));
    assert_int_equal(write(p[1], "0123456789", 10), 10);
    close(p[1]);
    assert_int_equal(
        sl__read_small_input(path, 4, 5000, &text, &n, err, sizeof err),
        SL_EUNSUPPORTED);
    close(p[0]);
    assert_int_equal(sl__read_small_input("/dev/zero", 1 << 20, 5000, &text, &n,
                                          err, sizeof err),
                     SL_EIO);
    assert_non_null(strstr(err, "/dev/zero: not a regular file or a pipe "
                                "(character device)"));
    snprintf(path, sizeof path, "%s/none", dir);
    assert_int_equal(
        sl__read_small_input(path, 1 << 20, 5000, &text, &n, err, sizeof err),
        SL_ENOTFOUND);
    alarm(0);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_at_scan),
        cmocka_unit_test(test_fifo_after_scan),
        cmocka_unit_test(test_symlink_loops),
        cmocka_unit_test(test_shared_and_deep_folders),
        cmocka_unit_test(test_scan_bad_entries),
        cmocka_unit_test(test_text_fifo),
        cmocka_unit_test(test_write_whole_hostile_targets),
        cmocka_unit_test(test_emfile_names_the_limit),
        cmocka_unit_test(test_small_input_pipes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
