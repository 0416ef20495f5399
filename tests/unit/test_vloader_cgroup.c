/* The volume loader's default memory budget under a real cgroup memory
 * limit (200 MB), the image and text loaders' rule (sched/limits.h): with
 * no memory_bytes it keeps half the limit and its messages say where the
 * budget came from; memory_bytes given stands, with nothing said. Without
 * the default a case whose offline stage needs 1.6 GB was allocated and
 * the OOM killer ended the process (no message); now it fails at once,
 * naming the sizes and the default. The limit is only read from the
 * process's own cgroup (telemetry/cgroup.c), so the checks run in a child
 * moved into a fresh v1 memory cgroup (or v2 with memory enabled for
 * children), removed when it ends, as tests/e2e/cgroup_memory.sh does;
 * skipped (77), with the reason, where none can be made (not root). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/testing.h"
#include "sluice/vloader.h"
#include "testutil.h"

static char list[1100]; /* one case, MR_Gd (176 x 188 x 144, 1 mm) */

static const char why200[] = " (the default: 1/2 of the cgroup's memory "
                             "limit of 200 MB; memory_bytes sets another)";

static sl_vloader_options_t opts(int64_t patch)
{
    sl_vloader_options_t o;
    sl_vloader_options_init(&o);
    o.batch_size = 1;
    o.threads = 1;
    o.prefetch = 2;
    o.unlabeled = 1;
    for (int i = 0; i < 3; i++)
        o.aug.patch[i] = patch;
    return o;
}

/* No memory_bytes: half the limit, said; a batch is made under it. */
static void test_default_half(void **state)
{
    (void)state;
    sl_vloader_options_t o = opts(16);
    sl_vloader_t *l = NULL;
    char err[1024] = "";
    int rc = sl_vloader_create(list, &o, &l, err, sizeof err);
    if (rc)
        fail_msg("create: %s", err);
    const char *why = NULL;
    assert_int_equal(sl__testing_vloader_memory_budget(l, &why), 100 << 20);
    assert_string_equal(why, why200);
    sl_vbatch_t *b = NULL;
    rc = sl_vloader_next(l, &b, err, sizeof err);
    if (rc)
        fail_msg("next: %s", err);
    assert_int_equal(b->n, 1);
    sl_vloader_destroy(l);
}

/* memory_bytes given stands (above the default too), nothing said. */
static void test_given_stands(void **state)
{
    (void)state;
    sl_vloader_options_t o = opts(16);
    o.memory_bytes = 150 << 20;
    sl_vloader_t *l = NULL;
    char err[1024] = "";
    int rc = sl_vloader_create(list, &o, &l, err, sizeof err);
    if (rc)
        fail_msg("create: %s", err);
    const char *why = NULL;
    assert_int_equal(sl__testing_vloader_memory_budget(l, &why), 150 << 20);
    assert_string_equal(why, "");
    sl_vloader_destroy(l);
}

/* Batch buffers over the default (3 of 200^3 voxels x 5 bytes: 120 MB)
 * fail create, the message saying where the budget came from. */
static void test_buffers_over_default(void **state)
{
    (void)state;
    sl_vloader_options_t o = opts(200);
    sl_vloader_t *l = NULL;
    char err[1024] = "";
    assert_int_equal(sl_vloader_create(list, &o, &l, err, sizeof err),
                     SL_ENOMEM);
    printf("# %s\n", err);
    assert_non_null(strstr(err, "memory_bytes allows 104.9 MB (the default: "
                                "1/2 of the cgroup's memory limit of 200 MB"));
    assert_null(l);
}

/* A case resampled to 0.25 mm (about 305 M voxels: 1.6 GB for its offline
 * stage) fails its batch at once, before it allocates, naming the sizes
 * and the default; without the default it was the OOM killer. */
static void test_case_over_default(void **state)
{
    (void)state;
    sl_vloader_options_t o = opts(16);
    for (int i = 0; i < 3; i++)
        o.target_spacing[i] = 0.25;
    sl_vloader_t *l = NULL;
    char err[1024] = "";
    int rc = sl_vloader_create(list, &o, &l, err, sizeof err);
    if (rc)
        fail_msg("create: %s", err);
    sl_vbatch_t *b = NULL;
    assert_int_equal(sl_vloader_next(l, &b, err, sizeof err), SL_ENOMEM);
    printf("# %s\n", err);
    assert_non_null(strstr(err, "its offline stage needs"));
    assert_non_null(strstr(err, why200));
    sl_vloader_destroy(l);
}

/* The checks, in a child in cgroup g (its procs file written first). */
static int run_in(const char *g)
{
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        char p[1100];
        snprintf(p, sizeof p, "%s/cgroup.procs", g);
        FILE *f = fopen(p, "w");
        if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f)) {
            printf("# joining %s: %s\n", g, strerror(errno));
            _exit(1);
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_default_half),
            cmocka_unit_test(test_given_stands),
            cmocka_unit_test(test_buffers_over_default),
            cmocka_unit_test(test_case_over_default),
        };
        _exit(cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) < 0)
        return 1;
    if (WIFSIGNALED(st))
        printf("# the checks died of signal %d (the OOM killer: no "
               "budget?)\n",
               WTERMSIG(st));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* A fresh memory cgroup limited to 200 MB at g, or 0 (and why). */
static int make_cgroup(char *g, size_t cap)
{
    static const struct {
        const char *root, *procs, *limit;
    } v[] = {{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/memory/cgroup.procs",
              "memory.limit_in_bytes"},
             {"/sys/fs/cgroup", "/sys/fs/cgroup/cgroup.subtree_control",
              "memory.max"}};
    for (int i = 0; i < 2; i++) {
        if (access(v[i].procs, W_OK))
            continue;
        if (i == 1) { /* v2: memory must be enabled for children */
            size_t n = 0;
            char *s = (char *)tu_read_file(v[i].procs, &n);
            int on = s && strstr(s, "memory");
            free(s);
            if (!on)
                continue;
        }
        snprintf(g, cap, "%s/sluice-vloader-%d", v[i].root, (int)getpid());
        if (mkdir(g, 0755))
            continue;
        char p[1100];
        snprintf(p, sizeof p, "%s/%s", g, v[i].limit);
        FILE *f = fopen(p, "w");
        if (f && fputs("200M\n", f) >= 0 && !fclose(f))
            return 1;
        if (f)
            fclose(f);
        rmdir(g);
    }
    return 0;
}

int main(void)
{
    char *mr = tu_shared_data("nifti/MR_Gd.nii.gz");
    if (!mr)
        return 77;
    char *dir = tu_tmpdir("vloader_cgroup");
    snprintf(list, sizeof list, "%s/cases.txt", dir);
    FILE *f = fopen(list, "w");
    if (!f || fprintf(f, "%s\n", mr) < 0 || fclose(f)) {
        printf("# %s: %s\n", list, strerror(errno));
        return 1;
    }
    char g[512];
    if (!make_cgroup(g, sizeof g)) {
        printf("# skip: no writable cgroup memory controller here (not "
               "root, or none mounted)\n");
        tu_rmtree(dir);
        return 77;
    }
    int rc = run_in(g);
    if (rmdir(g))
        printf("# removing %s: %s\n", g, strerror(errno));
    tu_rmtree(dir);
    free(dir);
    free(mr);
    return rc;
}
