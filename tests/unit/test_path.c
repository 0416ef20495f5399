/* base/path: sl__mkdir_made makes a folder and the missing folders above
 * it and says whether it made it (1) or found one there (0); a file in
 * the way is ENOTDIR, whether it is the folder itself or one above it;
 * the folder gets the caller's mode. sl__mkdir_p and sl__mkdir_parents
 * keep their rules on top of it. sl__path_join puts one slash between,
 * and its length is not bounded by a fixed buffer (pack's temp paths). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "testutil.h"

static int is_dir(const char *dir, const char *sub)
{
    char *p = sl__path_join(dir, sub);
    struct stat st;
    int r = p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
    free(p);
    return r;
}

static void test_mkdir_made(void **state)
{
    (void)state;
    char *root = tu_tmpdir("path");
    char *abc = sl__path_join(root, "a/b/c");
    assert_int_equal(sl__mkdir_made(abc, 0777), 1); /* a, a/b made too */
    assert_true(is_dir(root, "a/b/c"));
    assert_int_equal(sl__mkdir_made(abc, 0777), 0); /* already there */
    char *slash = sl__path_join(root, "a/b/c/");
    assert_int_equal(sl__mkdir_made(slash, 0777), 0);
    free(slash);
    /* trailing slashes, doubled ones: as mkdir -p takes them */
    char *d = sl__path_join(root, "x//y/z//");
    assert_int_equal(sl__mkdir_made(d, 0777), 1);
    assert_true(is_dir(root, "x/y/z"));
    free(d);

    /* the caller's mode for the folder (less the umask, 022 or less here) */
    mode_t old = umask(022);
    char *m = sl__path_join(root, "m/n");
    assert_int_equal(sl__mkdir_made(m, 0700), 1);
    struct stat st;
    assert_int_equal(stat(m, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    umask(old);
    free(m);

    /* a file in the way: the path itself, or a folder above it */
    char *f = sl__path_join(root, "file");
    assert_int_equal(tu_write_file(f, "x", 1), 0);
    errno = 0;
    assert_int_equal(sl__mkdir_made(f, 0777), -1);
    assert_int_equal(errno, ENOTDIR);
    char *under = sl__path_join(root, "file/p/q");
    errno = 0;
    assert_int_equal(sl__mkdir_made(under, 0777), -1);
    assert_int_equal(errno, ENOTDIR);
    /* sl__mkdir_p: made or there is 0, a file is -1 */
    assert_int_equal(sl__mkdir_p(abc), 0);
    char *e = sl__path_join(root, "e/f");
    assert_int_equal(sl__mkdir_p(e), 0);
    assert_true(is_dir(root, "e/f"));
    assert_int_equal(sl__mkdir_p(under), -1);
    /* sl__mkdir_parents: those above only */
    char *g = sl__path_join(root, "g/h/i");
    assert_int_equal(sl__mkdir_parents(g), 0);
    assert_true(is_dir(root, "g/h"));
    assert_false(is_dir(root, "g/h/i"));
    free(g);
    free(e);
    free(under);
    free(f);
    free(abc);
    tu_rmtree(root);
    free(root);
}

/* One slash between, whatever DIR ends with; a DIR longer than any fixed
 * buffer (PATH_MAX) comes back whole. */
static void test_path_join(void **state)
{
    (void)state;
    char *p = sl__path_join("shards/", "x");
    assert_string_equal(p, "shards/x");
    free(p);
    p = sl__path_join("shards", "x");
    assert_string_equal(p, "shards/x");
    free(p);
    p = sl__path_join("", "x");
    assert_string_equal(p, "x");
    free(p);
    p = sl__path_join("/", "x");
    assert_string_equal(p, "/x");
    free(p);
    size_t n = PATH_MAX + 100;
    char *dir = malloc(n + 1);
    assert_non_null(dir);
    memset(dir, 'd', n);
    dir[n] = 0;
    p = sl__path_join(dir, "shard-00000.sls");
    assert_non_null(p);
    assert_int_equal(strlen(p), n + 1 + strlen("shard-00000.sls"));
    assert_string_equal(p + n, "/shard-00000.sls");
    free(p);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mkdir_made),
        cmocka_unit_test(test_path_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
