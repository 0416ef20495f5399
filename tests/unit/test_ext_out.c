/* data/ext_out: a failed WebDataset / TFRecord pack removes what it wrote
 * (sl__ext_out_abort): the finished files, their sidecar indexes, the
 * open temp file and the folder it made, also where the folder's path is
 * as long as a path can be. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "data/ext_out.h"
#include "data/recfile.h" /* SL__FMT_WDS */
#include "testutil.h"

static char *root;

static int setup(void **state)
{
    (void)state;
    root = tu_tmpdir("ext_out");
    return root ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

/* Writes two samples into dir with a shard size that closes the first
 * file (renamed, its index written) when the second starts, then aborts
 * as a failed pack does. */
static void pack_two_and_abort(const char *dir)
{
    sl__ext_out_t o = {.dir = dir, .fmt = SL__FMT_WDS, .shard_size = 2048};
    char err[512];
    assert_int_equal(sl__ext_out_begin(&o, err, sizeof err), 0);
    uint8_t img[600];
    memset(img, 0x5a, sizeof img);
    for (int i = 0; i < 2; i++)
        if (sl__ext_out_add(&o, img, sizeof img, i, "x.jpg", err, sizeof err))
            fail_msg("add %d: %s", i, err);
    assert_int_equal(o.files, 2);
    assert_true(o.made_dir);
    sl__ext_out_abort(&o);
}

static void test_abort_removes_what_it_wrote(void **state)
{
    (void)state;
    char *dir = sl__path_join(root, "out");
    pack_two_and_abort(dir);
    struct stat st;
    assert_int_equal(stat(dir, &st), -1); /* emptied, so removed */
    free(dir);
}

/* The output folder given with trailing slashes ("out/////") and a path
 * so long that the first file's sidecar index, joined as the files were
 * (one slash), is a few bytes under PATH_MAX: the abort's paths are
 * joined the same way, not "%s/%s%s" into a 4096-byte buffer, which cut
 * the index's path (one byte per extra slash) so it stayed, and the folder
 * with it. */
static void test_abort_near_path_max(void **state)
{
    (void)state;
    /* written: BASE/shard-000000.tar.slidx (BASE + 23) through its temp
     * file (+ 4): BASE of PATH_MAX - 1 - 27 bytes, then 5 slashes */
    size_t want = PATH_MAX - 1 - 27;
    char *base = malloc(PATH_MAX + 8);
    assert_non_null(base);
    size_t n = (size_t)snprintf(base, PATH_MAX, "%s", root);
    assert_true(n + 2 < want);
    while (n < want) { /* folders of at most 200 bytes, the last made by */
        size_t k = want - n - 1; /* the pack */
        if (k > 200)
            k = k - 200 == 1 ? 199 : 200; /* never a rest of "/" alone */
        base[n++] = '/';
        memset(base + n, 'd', k);
        n += k;
        base[n] = 0;
        if (n < want)
            assert_int_equal(mkdir(base, 0777), 0);
    }
    assert_int_equal(strlen(base), want);
    strcat(base, "/////");
    pack_two_and_abort(base);
    base[want] = 0;
    struct stat st;
    if (stat(base, &st) == 0) {
        DIR *d = opendir(base);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                fprintf(stderr, "left: %s\n", e->d_name);
        if (d)
            closedir(d);
        fail_msg("the output folder is still there");
    }
    free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abort_removes_what_it_wrote),
        cmocka_unit_test(test_abort_near_path_max),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
