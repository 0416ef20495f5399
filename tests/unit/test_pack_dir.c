/* data/shard_out, data/manifest, data/pack_dir: a pack is written whole
 * or not at all, and read only when whole (issue 14 item 8). The writer's
 * temp folder and its rename; the manifest's text both ways; a pack with a
 * missing, extra or foreign shard, or another pack's classes.txt, refused
 * by pack_dir (and by the text source) with a message naming the shard;
 * older packs (no manifest) read when numbered without gaps. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/base.h"
#include "data/manifest.h"
#include "data/pack_dir.h"
#include "data/shard_out.h"
#include "testutil.h"
#include "text/textsrc.h"

static char *root;

static int setup(void **state)
{
    (void)state;
    root = tu_tmpdir("packdir");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

/* Packs n records of ~100 bytes (tag in each) into root/name, 3 records
 * a shard, with classes {a, b} when classes; force as given. */
static int pack(const char *name, int n, char tag, int classes, int force,
                char *err, size_t errlen)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    sl__pack_out_t o = {
        .dir = dir, .codec = 0, .shard_size = 400, .force = force};
    int rc = sl__pack_out_begin(&o, err, errlen);
    if (rc)
        return rc;
    for (int i = 0; i < n && !rc; i++) {
        char rec[100], nm[32];
        memset(rec, tag, sizeof rec);
        rec[0] = (char)i;
        snprintf(nm, sizeof nm, "r%d", i);
        int fatal;
        rc = sl__pack_out_add(&o, rec, sizeof rec, i % 2, nm, &fatal, err,
                              errlen);
    }
    char *names[] = {"a", "b"};
    if (!rc && classes)
        rc = sl__pack_out_classes(&o, names, 2, err, errlen);
    if (!rc)
        return sl__pack_out_commit(&o, err, errlen);
    sl__pack_out_abort(&o);
    return rc;
}

/* Shards in root/name's manifest. */
static int nshards_of(const char *name)
{
    char dir[1024], err[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    sl__manifest_t m;
    assert_int_equal(sl__manifest_read(dir, &m, err, sizeof err), 0);
    int n = m.nshards;
    sl__manifest_free(&m);
    return n;
}

static char *path_of(const char *a, const char *b)
{
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s%s%s", root, a, b ? "/" : "", b ? b : "") >
                0);
    return p;
}

static void copy(const char *from, const char *to)
{
    char *a = path_of(from, NULL), *b = path_of(to, NULL);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", b, a, b);
    assert_int_equal(system(cmd), 0);
    free(a);
    free(b);
}

/* Opening root/name under mode fails, naming `needle`. */
static void refused(const char *name, int mode, const char *needle)
{
    char *dir = path_of(name, NULL), err[2048];
    sl__pack_dir_t p;
    int rc = sl__pack_dir_open(dir, mode, &p, err, sizeof err);
    if (rc == 0 || !strstr(err, needle))
        fail_msg("%s: rc %d, '%s' (wanted '%s')", name, rc, rc ? err : "",
                 needle);
    free(dir);
}

/* No file or folder in root whose name starts with a dot (temp folders). */
static int no_temp(void)
{
    DIR *d = opendir(root);
    struct dirent *e;
    int ok = 1;
    while ((e = readdir(d)))
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") &&
            strcmp(e->d_name, ".."))
            ok = 0;
    closedir(d);
    return ok;
}

static void test_whole_pack(void **state)
{
    (void)state;
    char err[2048];
    assert_int_equal(pack("A", 10, 'a', 1, 0, err, sizeof err), 0);
    assert_true(no_temp());
    char *dir = path_of("A", NULL);
    sl__pack_dir_t p;
    assert_int_equal(
        sl__pack_dir_open(dir, SL__PACK_STRICT, &p, err, sizeof err), 0);
    assert_int_equal(p.manifest, 1);
    assert_int_equal(p.nshards, nshards_of("A"));
    assert_true(p.nshards >= 3);
    assert_int_equal(p.nclasses, 2);
    assert_string_equal(p.classes[1], "b");
    assert_int_equal(p.nbad, 0);
    sl__pack_dir_close(&p);
    sl__manifest_t m;
    assert_int_equal(sl__manifest_read(dir, &m, err, sizeof err), 0);
    assert_int_equal(m.records, 10);
    assert_int_equal(m.classes, 2);
    assert_string_equal(m.shards[2].name, "shard-00002.sls");
    uint64_t sum = 0;
    for (int k = 0; k < m.nshards; k++)
        sum += m.shards[k].records;
    assert_int_equal(sum, 10);
    sl__manifest_free(&m);
    /* Without --force a pack is not written over. */
    assert_int_equal(pack("A", 4, 'x', 1, 0, err, sizeof err), SL_ESTATE);
    assert_non_null(strstr(err, "use --force"));
    free(dir);
}

static void test_broken_packs(void **state)
{
    (void)state;
    char err[2048];
    assert_int_equal(pack("A", 10, 'a', 1, 0, err, sizeof err), 0);
    assert_int_equal(pack("B", 10, 'b', 0, 0, err, sizeof err), 0);

    copy("A", "missing");
    char *p = path_of("missing", "shard-00002.sls");
    unlink(p);
    free(p);
    refused("missing", SL__PACK_STRICT, "shard-00002.sls is missing");
    refused("missing", SL__PACK_SKIP_DAMAGED, "shard-00002.sls is missing");

    copy("A", "extra");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp '%s/B/shard-00000.sls' '%s/extra/x.sls'",
             root, root);
    assert_int_equal(system(cmd), 0);
    refused("extra", SL__PACK_STRICT, "x.sls is not part of this pack");

    copy("A", "mixed");
    snprintf(cmd, sizeof cmd,
             "cp '%s/B/shard-00001.sls' '%s/mixed/shard-00001.sls'", root,
             root);
    assert_int_equal(system(cmd), 0);
    refused("mixed", SL__PACK_SKIP_DAMAGED,
            "mixed/shard-00001.sls: not the shard");

    copy("A", "cls");
    p = path_of("cls", "classes.txt");
    tu_write_file(p, "a\nc\n", 4);
    free(p);
    refused("cls", SL__PACK_STRICT, "classes.txt is not the one");

    /* B names no classes: a classes.txt in it is not B's. */
    copy("B", "nocls");
    p = path_of("nocls", "classes.txt");
    tu_write_file(p, "a\n", 2);
    free(p);
    refused("nocls", SL__PACK_STRICT, "classes.txt is not part of this pack");

    /* A damaged shard is left out under skip (its records unknown); the
     * pack's shape is still checked. */
    copy("A", "trunc");
    p = path_of("trunc", "shard-00001.sls");
    assert_int_equal(truncate(p, 100), 0);
    free(p);
    refused("trunc", SL__PACK_STRICT, "shard-00001.sls: truncated");
    char *dir = path_of("trunc", NULL);
    sl__pack_dir_t pd;
    assert_int_equal(
        sl__pack_dir_open(dir, SL__PACK_SKIP_DAMAGED, &pd, err, sizeof err), 0);
    assert_int_equal(pd.nshards, nshards_of("A") - 1);
    assert_int_equal(pd.nbad, 1);
    assert_int_equal(pd.nunreadable, 1);
    sl__pack_dir_close(&pd);
    free(dir);

    /* verify's mode: every problem listed, none fatal. */
    copy("missing", "both");
    snprintf(cmd, sizeof cmd, "cp '%s/B/shard-00000.sls' '%s/both/y.sls'", root,
             root);
    assert_int_equal(system(cmd), 0);
    dir = path_of("both", NULL);
    assert_int_equal(
        sl__pack_dir_open(dir, SL__PACK_REPORT_ALL, &pd, err, sizeof err), 0);
    assert_int_equal(pd.nbad, 2);
    assert_int_equal(pd.nshards, nshards_of("A") - 1);
    sl__pack_dir_close(&pd);
    free(dir);

    /* The text source reads packs through pack_dir too. */
    dir = path_of("missing", NULL);
    const char *src[] = {dir};
    sl__textsrc_t *ts = NULL;
    assert_int_not_equal(sl__textsrc_open(src, 1, 0, 0, &ts, err, sizeof err),
                         0);
    assert_non_null(strstr(err, "shard-00002.sls is missing"));
    free(dir);
    dir = path_of("B", NULL);
    src[0] = dir;
    assert_int_equal(sl__textsrc_open(src, 1, 0, 0, &ts, err, sizeof err), 0);
    assert_int_equal(sl__textsrc_count(ts), 10);
    sl__textsrc_close(ts);
    free(dir);

    /* ... and leaves a damaged shard out under skip, noting it, as the
     * image source does; strict, the open fails naming it. */
    dir = path_of("trunc", NULL);
    src[0] = dir;
    assert_int_not_equal(sl__textsrc_open(src, 1, 0, 0, &ts, err, sizeof err),
                         0);
    assert_non_null(strstr(err, "shard-00001.sls: truncated"));
    assert_int_equal(sl__textsrc_open(src, 1, 0, 1, &ts, err, sizeof err), 0);
    assert_int_equal(sl__textsrc_left_out_count(ts), 1);
    const char *m = sl__textsrc_left_out(ts, 0);
    assert_non_null(strstr(m, "shard-00001.sls: truncated"));
    assert_non_null(strstr(m, "(whole shard left out)"));
    assert_null(sl__textsrc_left_out(ts, 1));
    int64_t kept = sl__textsrc_count(ts);
    assert_true(kept > 0);
    sl__textsrc_close(ts);
    /* every shard damaged: nothing left, the open fails naming the first */
    for (int k = 0; k < nshards_of("A"); k++) {
        char name[32];
        snprintf(name, sizeof name, "shard-%05d.sls", k);
        p = path_of("trunc", name);
        assert_int_equal(truncate(p, 100), 0);
        free(p);
    }
    assert_int_not_equal(sl__textsrc_open(src, 1, 0, 1, &ts, err, sizeof err),
                         0);
    assert_non_null(strstr(err, "no readable documents"));
    assert_non_null(strstr(err, "shard-00000.sls"));
    free(dir);
}

/* Packs without a manifest (older sluice): numbered without gaps. */
static void test_older_packs(void **state)
{
    (void)state;
    char err[2048];
    assert_int_equal(pack("A", 10, 'a', 1, 0, err, sizeof err), 0);
    copy("A", "old");
    char *p = path_of("old", SL__MANIFEST_NAME);
    unlink(p);
    free(p);
    char *dir = path_of("old", NULL);
    sl__pack_dir_t pd;
    assert_int_equal(
        sl__pack_dir_open(dir, SL__PACK_STRICT, &pd, err, sizeof err), 0);
    assert_int_equal(pd.manifest, 0);
    assert_int_equal(pd.nshards, nshards_of("A"));
    sl__pack_dir_close(&pd);
    copy("old", "gap");
    p = path_of("gap", "shard-00001.sls");
    unlink(p);
    free(p);
    refused("gap", SL__PACK_STRICT, "shard-00001.sls is missing");
    copy("old", "odd");
    p = path_of("odd", "shard-7.sls");
    tu_write_file(p, "x", 1);
    free(p);
    refused("odd", SL__PACK_STRICT, "shard-7.sls is not a shard-NNNNN.sls");
    free(dir);
}

/* The manifest and classes.txt are read by base/file's rule for small
 * files: none is no fault (SL_ENOTFOUND, nothing in err); a FIFO or a
 * folder in their place is refused at once, named with its type; one over
 * the cap is refused, named, before it is read. */
static void test_manifest_files(void **state)
{
    (void)state;
    char err[2048] = "";
    char *dir = path_of("mfiles", NULL);
    assert_int_equal(mkdir(dir, 0700), 0);
    sl__manifest_t m;
    assert_int_equal(sl__manifest_read(dir, &m, err, sizeof err), SL_ENOTFOUND);
    assert_string_equal(err, "");
    char **names;
    int n;
    assert_int_equal(sl__classes_read(dir, &names, &n, NULL, err, sizeof err),
                     SL_ENOTFOUND);
    assert_string_equal(err, "");

    char *mp = path_of("mfiles", SL__MANIFEST_NAME);
    assert_int_equal(mkfifo(mp, 0600), 0);
    assert_int_equal(sl__manifest_read(dir, &m, err, sizeof err), SL_EIO);
    assert_non_null(strstr(err, mp));
    assert_non_null(strstr(err, "not a regular file (FIFO)"));
    unlink(mp);
    assert_int_equal(tu_write_file(mp, "sluice-pack 1\n", 14), 0);
    assert_int_equal(truncate(mp, SL__MANIFEST_MAX_BYTES + 1), 0);
    assert_int_not_equal(sl__manifest_read(dir, &m, err, sizeof err), 0);
    assert_non_null(strstr(err, mp));
    assert_non_null(strstr(err, "more than the 67108864 allowed"));

    char *cp = path_of("mfiles", "classes.txt");
    assert_int_equal(mkdir(cp, 0700), 0);
    assert_int_equal(sl__classes_read(dir, &names, &n, NULL, err, sizeof err),
                     SL_EIO);
    assert_non_null(strstr(err, cp));
    assert_non_null(strstr(err, "not a regular file (directory)"));
    free(mp), free(cp), free(dir);
}

/* A re-pack that fails leaves the old pack; one that succeeds leaves no
 * old shard; a folder of other files is not packed into. */
static void test_repack(void **state)
{
    (void)state;
    char err[2048];
    assert_int_equal(pack("A", 10, 'a', 1, 0, err, sizeof err), 0);
    char *dir = path_of("A", NULL);
    sl__manifest_t before, after;
    assert_int_equal(sl__manifest_read(dir, &before, err, sizeof err), 0);
    /* A re-pack given up (a failed read) after two shards were finished
     * and a third begun. */
    sl__pack_out_t o = {.dir = dir, .shard_size = 400, .force = 1};
    assert_int_equal(sl__pack_out_begin(&o, err, sizeof err), 0);
    char rec[100] = {0};
    int fatal;
    for (int i = 0; i < 7; i++)
        assert_int_equal(sl__pack_out_add(&o, rec, sizeof rec, 0, "new", &fatal,
                                          err, sizeof err),
                         0);
    sl__pack_out_abort(&o);
    assert_true(no_temp());
    assert_int_equal(sl__manifest_read(dir, &after, err, sizeof err), 0);
    assert_int_equal(after.nshards, before.nshards);
    for (int k = 0; k < before.nshards; k++)
        assert_true(after.shards[k].digest == before.shards[k].digest);
    sl__manifest_free(&after);
    sl__pack_dir_t pd;
    assert_int_equal(
        sl__pack_dir_open(dir, SL__PACK_STRICT, &pd, err, sizeof err), 0);
    sl__pack_dir_close(&pd);

    /* --force, smaller and without classes: the new pack alone. */
    assert_int_equal(pack("A", 2, 'z', 0, 1, err, sizeof err), 0);
    assert_true(no_temp());
    assert_int_equal(
        sl__pack_dir_open(dir, SL__PACK_STRICT, &pd, err, sizeof err), 0);
    assert_int_equal(pd.nshards, 1);
    assert_int_equal(pd.nclasses, -1);
    sl__pack_dir_close(&pd);
    char *p = path_of("A", "shard-00001.sls");
    assert_int_not_equal(access(p, F_OK), 0);
    free(p);
    sl__manifest_free(&before);
    free(dir);

    dir = path_of("mine", NULL);
    mkdir(dir, 0755);
    p = path_of("mine", "notes.txt");
    tu_write_file(p, "keep", 4);
    assert_int_equal(pack("mine", 4, 'm', 0, 1, err, sizeof err), SL_ESTATE);
    assert_non_null(strstr(err, "notes.txt"));
    assert_int_equal(access(p, F_OK), 0);
    free(p);
    free(dir);
    /* Through a symlink: the pack goes where it points; the link stays. */
    dir = path_of("A", NULL);
    p = path_of("link", NULL);
    assert_int_equal(symlink(dir, p), 0);
    assert_int_equal(pack("link", 4, 'l', 1, 1, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(nshards_of("A"), nshards_of("link"));
    assert_int_equal(
        sl__pack_dir_open(dir, SL__PACK_STRICT, &pd, err, sizeof err), 0);
    assert_int_equal(pd.nclasses, 2);
    sl__pack_dir_close(&pd);
    assert_true(no_temp());
    free(p);
    free(dir);
    /* An empty folder is packed into. */
    dir = path_of("empty", NULL);
    mkdir(dir, 0755);
    assert_int_equal(pack("empty", 4, 'e', 0, 0, err, sizeof err), 0);
    free(dir);
}

static void expect_bad(const char *text, const char *needle)
{
    sl__manifest_t m;
    char err[512];
    int rc = sl__manifest_parse(text, strlen(text), "M", &m, err, sizeof err);
    if (rc != SL_ECORRUPT || !strstr(err, needle))
        fail_msg("'%s': rc %d, '%s' (wanted '%s')", text, rc, rc ? err : "",
                 needle);
}

#define HEAD "sluice-pack 1\nshards 1\nrecords 3\nclasses 2 0123456789abcdef\n"
#define SHARD0 "shard shard-00000.sls 100 3 00000000000000ff\n"

static void test_manifest_text(void **state)
{
    (void)state;
    sl__manifest_t m;
    char err[512];
    const char *ok = HEAD SHARD0 "end\n";
    assert_int_equal(
        sl__manifest_parse(ok, strlen(ok), "M", &m, err, sizeof err), 0);
    assert_int_equal(m.classes, 2);
    assert_true(m.classes_sum == 0x0123456789abcdefULL);
    assert_true(m.shards[0].digest == 0xff);
    char *text;
    size_t n;
    assert_int_equal(sl__manifest_format(&m, &text, &n), 0);
    assert_int_equal(n, strlen(ok));
    assert_memory_equal(text, ok, n);
    free(text);
    sl__manifest_free(&m);

    expect_bad("sluice-pack 2\n", "line 1: not a sluice pack manifest");
    expect_bad(HEAD SHARD0, "line 6: no \"end\" line");
    expect_bad(HEAD SHARD0 "end", "no newline at the end");
    expect_bad(HEAD SHARD0 SHARD0 "end\n", "line 6: more shard lines");
    expect_bad(HEAD "end\n", "fewer shard lines");
    expect_bad("sluice-pack 1\nshards 1\nrecords 4\nclasses none\n" SHARD0
               "end\n",
               "do not add up");
    expect_bad(HEAD "shard ../x.sls 100 3 00000000000000ff\nend\n",
               "line 5: expected \"shard NAME.sls");
    expect_bad(HEAD "shard shard-00000.sls -1 3 00000000000000ff\nend\n",
               "line 5");
    expect_bad(HEAD "shard shard-00000.sls 100 3 ff\nend\n", "line 5");
    expect_bad(HEAD SHARD0 "end\nmore\n", "line 7: text after");
    expect_bad(
        "sluice-pack 1\nshards 2\nrecords 6\nclasses none\n" SHARD0 SHARD0
        "end\n",
        "shard shard-00000.sls listed twice");
    expect_bad("sluice-pack 1\nshards  1\n", "line 2: expected \"shards N\"");
}

static void test_classes_text(void **state)
{
    (void)state;
    char **v;
    int n;
    char err[256];
    assert_int_equal(
        sl__classes_parse("a\r\nb\n\nc", 8, "C", &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 4);
    assert_string_equal(v[0], "a");
    assert_string_equal(v[2], "");
    assert_string_equal(v[3], "c");
    sl__strv_free(v, n);
    size_t big = SL__CLASS_NAME_MAX + 1;
    char *t = malloc(big + 3);
    memcpy(t, "a\n", 2);
    memset(t + 2, 'x', big);
    t[big + 2] = '\n';
    assert_int_equal(
        sl__classes_parse(t, big + 3, "C", &v, &n, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, "C: line 2: a class name of 65536 bytes"));
    free(t);
}

/* A killed pack's temp folder whose path is PATH_MAX - 1 bytes (as long
 * as a path can be) is removed by the next pack into the same output:
 * the paths shard_out makes are joined without a fixed buffer (the stale
 * folder's, "PARENT/" + "/" + name, was one byte past 4096 and skipped). */
static void test_stale_near_path_max(void **state)
{
    (void)state;
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    assert_true(dead > 0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    char stale_name[64];
    snprintf(stale_name, sizeof stale_name, ".out.tmp-%ld", (long)dead);
    /* root/dddd.../ddd: folders of at most 200 bytes, so that
     * parent + "/" + stale_name is PATH_MAX - 1 bytes */
    size_t want = PATH_MAX - 1 - 1 - strlen(stale_name);
    char *parent = malloc(PATH_MAX);
    assert_non_null(parent);
    size_t n = (size_t)snprintf(parent, PATH_MAX, "%s", root);
    assert_true(n + 2 < want);
    while (n < want) {
        size_t k = want - n - 1; /* "/" + k bytes, the rest after them */
        if (k > 200)
            k = k - 200 == 1 ? 199 : 200; /* never a rest of "/" alone */
        parent[n++] = '/';
        memset(parent + n, 'd', k);
        n += k;
        parent[n] = 0;
        assert_int_equal(mkdir(parent, 0777), 0);
    }
    assert_int_equal(strlen(parent), want);
    char *stale = sl__path_join(parent, stale_name);
    char *out = sl__path_join(parent, "out");
    assert_int_equal(strlen(stale), PATH_MAX - 1);
    assert_int_equal(mkdir(stale, 0777), 0);

    sl__pack_out_t o = {.dir = out, .shard_size = 400};
    char err[8192];
    /* begin may refuse the new temp folder (its PID can be longer) */
    if (sl__pack_out_begin(&o, err, sizeof err) == 0)
        sl__pack_out_abort(&o);
    struct stat st;
    assert_int_equal(stat(stale, &st), -1);
    free(out);
    free(stale);
    free(parent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_whole_pack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broken_packs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_older_packs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_near_path_max, setup,
                                        teardown),
        cmocka_unit_test(test_manifest_text),
        cmocka_unit_test(test_classes_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
