/* telemetry/machine: the /proc and /sys parsers on recorded fixtures
 * (tests/fixtures/proc, a fake powercap tree in tests/fixtures/sys),
 * truncated and garbage inputs, the readers, and NVML where absent. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "sched/limits.h"
#include "sluice/sluice.h"
#include "telemetry/machine.h"
#include "testutil.h"

/* tests/fixtures, found from this file's path (CMake passes it absolute),
 * or $SL_FIXTURES. */
static char g_fix[4096];

static const char *fixtures(void)
{
    if (g_fix[0])
        return g_fix;
    const char *env = getenv("SL_FIXTURES");
    if (env && *env) {
        snprintf(g_fix, sizeof g_fix, "%s", env);
        return g_fix;
    }
    snprintf(g_fix, sizeof g_fix, "%s", __FILE__);
    char *u = strstr(g_fix, "/unit/test_machine.c");
    if (u)
        strcpy(u, "/fixtures");
    else
        snprintf(g_fix, sizeof g_fix, "tests/fixtures");
    return g_fix;
}

/* A fixture in a buffer of exactly its size, so ASan sees any over-read. */
static char *fixture(const char *rel, size_t *n)
{
    char path[4600];
    snprintf(path, sizeof path, "%s/%s", fixtures(), rel);
    char *p = (char *)tu_read_file(path, n);
    if (!p)
        fail_msg("missing fixture %s", path);
    return p;
}

/* Copies the first k bytes to an exact-size heap buffer. */
static char *prefix(const char *p, size_t k)
{
    char *q = malloc(k ? k : 1);
    assert_non_null(q);
    memcpy(q, p, k);
    return q;
}

static sl__proc_stat_t g_ps; /* ~16 KiB, off the stack */

static void test_proc_stat_real(void **state)
{
    (void)state;
    size_t n;
    char *t = fixture("proc/stat", &n);
    assert_int_equal(sl__parse_proc_stat(t, n, &g_ps), 0);
    /* cpu  151896 0 47896 206571 3463 0 297 2257 0 0 */
    assert_int_equal(g_ps.all.busy, 151896 + 47896 + 297 + 2257);
    assert_int_equal(g_ps.all.total,
                     151896 + 47896 + 297 + 2257 + 206571 + 3463);
    assert_int_equal(g_ps.ncpu, 2);
    assert_true(g_ps.cpu[1].total > g_ps.cpu[1].busy);
    assert_int_equal(g_ps.procs_running, 2);
    free(t);
}

static void test_proc_stat_128(void **state)
{
    (void)state;
    size_t n;
    char *t = fixture("proc/stat_128", &n);
    assert_int_equal(sl__parse_proc_stat(t, n, &g_ps), 0);
    assert_int_equal(g_ps.ncpu, 128);
    assert_int_equal(g_ps.all.busy, 3763097025ull);
    assert_int_equal(g_ps.all.total, 4999111275ull);
    assert_int_equal(g_ps.cpu[127].busy, 37601527);
    assert_int_equal(g_ps.cpu[127].total, 42929508);
    assert_int_equal(g_ps.procs_running, 37);
    uint64_t sum = 0;
    for (int i = 0; i < g_ps.ncpu; i++)
        sum += g_ps.cpu[i].busy;
    assert_int_equal(sum, g_ps.all.busy);
    free(t);
}

/* More CPUs than SL_MAX_CPUS: extras dropped, aggregate still parsed. */
static void test_proc_stat_too_many_cpus(void **state)
{
    (void)state;
    size_t cap = 64 * (SL_MAX_CPUS + 100) + 256, n = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    n += (size_t)sprintf(t + n, "cpu  9 1 1 100 0 0 0 0 0 0\n");
    for (int i = 0; i < SL_MAX_CPUS + 100; i++)
        n += (size_t)sprintf(t + n, "cpu%d 1 0 0 2 0 0 0 0 0 0\n", i);
    n += (size_t)sprintf(t + n, "procs_running 1\n");
    assert_int_equal(sl__parse_proc_stat(t, n, &g_ps), 0);
    assert_int_equal(g_ps.ncpu, SL_MAX_CPUS);
    assert_int_equal(g_ps.all.busy, 11);
    assert_int_equal(g_ps.all.total, 111);
    assert_int_equal(g_ps.cpu[SL_MAX_CPUS - 1].total, 3);
    free(t);
}

static void test_proc_stat_bad(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "cpu 1 2 3\nprocs_running 1\n",   /* too few fields */
        "cpu 1 2 3 x\nprocs_running 1\n", /* not a number */
        "cpu 1 2 3 4\n",                  /* cut: no procs_running */
        "cpu 1 2 3 4\nprocs_running\n",   /* no value */
        "cpu 1 2 3 4\ncpuX 1 2 3 4\nprocs_running 1\n",
        "cpu 99999999999999999999 0 0 0\nprocs_running 1\n", /* overflow */
        "procs_running 1\n",                                 /* no aggregate */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *t = prefix(bad[i], strlen(bad[i]));
        assert_int_equal(sl__parse_proc_stat(t, strlen(bad[i]), &g_ps),
                         SL_ECORRUPT);
        free(t);
    }
    assert_int_equal(sl__parse_proc_stat(NULL, 0, &g_ps), SL_ECORRUPT);
    /* No NUL needed: "procs_running 12" cut to "procs_running 1". */
    const char *s = "cpu 1 1 1 1\nprocs_running 12";
    assert_int_equal(sl__parse_proc_stat(s, strlen(s) - 1, &g_ps), 0);
    assert_int_equal(g_ps.procs_running, 1);
}

static void test_psi(void **state)
{
    (void)state;
    size_t n;
    sl__psi_t p;
    char *t = fixture("proc/pressure/io", &n);
    assert_int_equal(sl__parse_psi(t, n, &p), 0);
    assert_int_equal(p.present, 1);
    assert_int_equal(p.some_total_us, 33129426);
    assert_int_equal(p.full_total_us, 28275185);
    free(t);

    const char *s = "some avg10=12.50 avg60=1.00 avg300=0.10 total=42\n";
    assert_int_equal(sl__parse_psi(s, strlen(s), &p), 0);
    assert_true(fabs(p.some_avg10 - 12.5) < 1e-9);
    assert_int_equal(p.some_total_us, 42);
    assert_int_equal(p.full_total_us, 0); /* no full line */

    static const char *bad[] = {
        "",
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        "some avg10=0.00 avg60=0.00 avg300=0.00\n",
        "some avg10=x total=1\n",
        "some avg10=1.2.3 total=1\n",
        "some avg10 total=1\n",
        "weird avg10=0.00 total=0\n",
        "some avg10=0.00 avg60=0.00 avg300"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *b = prefix(bad[i], strlen(bad[i]));
        assert_int_equal(sl__parse_psi(b, strlen(bad[i]), &p), SL_ECORRUPT);
        free(b);
    }
}

/* PSI through the reader: present on the fixture tree, absent (and no
 * error) under a root without proc/pressure; the parser is not reached. */
static void test_psi_reader(void **state)
{
    (void)state;
    sl__psi_t p;
    char root[4200];
    assert_int_equal(sl__read_psi(fixtures(), "cpu", &p), 0);
    assert_int_equal(p.present, 1);
    assert_int_equal(p.some_total_us, 278273883);
    snprintf(root, sizeof root, "%s/sys", fixtures());
    p.present = 7;
    assert_int_equal(sl__read_psi(root, "cpu", &p), 0);
    assert_int_equal(p.present, 0);
    assert_int_equal(sl__read_psi("/nonexistent-root", "memory", &p), 0);
    assert_int_equal(p.present, 0);
    /* Live: present or not, never an error. */
    assert_int_equal(sl__read_psi("/", "cpu", &p), 0);
    print_message("live PSI cpu: %s\n", p.present ? "present" : "absent");
}

static void test_meminfo(void **state)
{
    (void)state;
    size_t n;
    uint64_t total, avail;
    char *t = fixture("proc/meminfo", &n);
    assert_int_equal(sl__parse_meminfo(t, n, &total, &avail), 0);
    assert_int_equal(total, 24684096ull * 1024);
    assert_int_equal(avail, 24103672ull * 1024);
    /* Cut after MemTotal's line: MemAvailable (3rd line) missing. */
    const char *nl = memchr(t, '\n', n);
    char *cut = prefix(t, (size_t)(nl - t) + 1);
    assert_int_equal(
        sl__parse_meminfo(cut, (size_t)(nl - t) + 1, &total, &avail),
        SL_ECORRUPT);
    free(cut);
    const char *s = "MemTotal: 10\nMemAvailable: 5 kB\n"; /* no unit */
    assert_int_equal(sl__parse_meminfo(s, strlen(s), &total, &avail),
                     SL_ECORRUPT);
    s = "MemTotal: 18446744073709551615 kB\nMemAvailable: 5 kB\n";
    assert_int_equal(sl__parse_meminfo(s, strlen(s), &total, &avail),
                     SL_ECORRUPT);
    free(t);
}

static void test_pid_stat(void **state)
{
    (void)state;
    size_t n;
    uint64_t j;
    char *t = fixture("proc/pid_stat", &n);
    assert_int_equal(sl__parse_pid_stat(t, n, &j), 0);
    assert_int_equal(j, 0);
    free(t);
    /* comm "a) b) (c d)": spaces and ')' inside; utime 1234, stime 567. */
    t = fixture("proc/pid_stat_comm", &n);
    assert_int_equal(sl__parse_pid_stat(t, n, &j), 0);
    assert_int_equal(j, 1234 + 567);
    /* Every cut before stime's last digit is an error, or (inside stime,
     * leaving a shorter number) a smaller value; never a crash. */
    const char *st = strstr(t, " 567 ");
    assert_non_null(st);
    for (size_t k = 0; k < n; k++) {
        char *c = prefix(t, k);
        int rc = sl__parse_pid_stat(c, k, &j);
        if (k <= (size_t)(st - t) + 1)
            assert_int_equal(rc, SL_ECORRUPT);
        free(c);
    }
    free(t);
    const char *s = "12 (x\n) S 1 1 1 0 -1 0 0 0 0 0 7 8 0\n";
    assert_int_equal(sl__parse_pid_stat(s, strlen(s), &j), 0);
    assert_int_equal(j, 15);
    s = "12 x) S 1 1 1 0 -1 0 0 0 0 0 7 8 0\n"; /* no '(' */
    assert_int_equal(sl__parse_pid_stat(s, strlen(s), &j), SL_ECORRUPT);
    s = ")12 (x S 1 1 1 0 -1 0 0 0 0 0 7 8 0\n"; /* ')' before '(' */
    assert_int_equal(sl__parse_pid_stat(s, strlen(s), &j), SL_ECORRUPT);
}

static void test_status_and_io(void **state)
{
    (void)state;
    size_t n;
    uint64_t rss;
    char *t = fixture("proc/status", &n);
    assert_int_equal(sl__parse_status_rss(t, n, &rss), 0);
    assert_int_equal(rss, 2160 * 1024);
    free(t);
    const char *s = "Name: x\nVmRSS:\t  12";
    assert_int_equal(sl__parse_status_rss(s, strlen(s), &rss), SL_ECORRUPT);

    sl__self_io_t io;
    t = fixture("proc/self_io", &n);
    assert_int_equal(sl__parse_self_io(t, n, &io), 0);
    assert_int_equal(io.rchar, 10668);
    assert_int_equal(io.wchar, 0);
    assert_int_equal(io.read_bytes, 0);
    /* Cut after the 2nd line: read_bytes / write_bytes missing. */
    assert_int_equal(sl__parse_self_io(t, 24, &io), SL_ECORRUPT);
    free(t);
}

static void test_diskstats(void **state)
{
    (void)state;
    size_t n;
    sl__disk_t d;
    char *t = fixture("proc/diskstats_multi", &n);
    assert_int_equal(sl__parse_diskstats(t, n, "vda", &d), 0);
    assert_int_equal(d.read_bytes, 14507338ull * 512);
    assert_int_equal(d.io_ms, 57696);
    assert_int_equal(sl__parse_diskstats(t, n, "sda", &d), 0);
    assert_int_equal(d.read_bytes, 800000ull * 512);
    assert_int_equal(d.io_ms, 4200);
    assert_int_equal(sl__parse_diskstats(t, n, "sda1", &d), 0);
    assert_int_equal(d.io_ms, 4100);
    assert_int_equal(sl__parse_diskstats(t, n, "nvme0n1", &d), 0);
    assert_int_equal(d.io_ms, 67890);
    assert_int_equal(sl__parse_diskstats(t, n, "dm-0", &d), 0); /* 4.18 */
    assert_int_equal(sl__parse_diskstats(t, n, "sdb", &d), SL_ENOTFOUND);
    assert_int_equal(sl__parse_diskstats(t, n, "", &d), SL_EINVAL);
    /* Cut inside vda's line (it is 5th): too few fields. */
    const char *v = strstr(t, " vda ");
    char *c = prefix(t, (size_t)(v - t) + 20);
    assert_int_equal(sl__parse_diskstats(c, (size_t)(v - t) + 20, "vda", &d),
                     SL_ECORRUPT);
    free(c);
    free(t);
    t = fixture("proc/diskstats", &n);
    assert_int_equal(sl__parse_diskstats(t, n, "vda", &d), 0);
    free(t);
    const char *s = "x 0 vda 1 2 3 4 5 6 7 8 9 10 11\n";
    assert_int_equal(sl__parse_diskstats(s, strlen(s), "vda", &d), SL_ECORRUPT);
}

static void test_net_dev(void **state)
{
    (void)state;
    size_t n;
    sl__net_t nd;
    char *t = fixture("proc/net_dev_simple", &n);
    assert_int_equal(sl__parse_net_dev(t, n, &nd), 0);
    assert_int_equal(nd.rx_bytes, 111767421); /* eth0 only, not lo */
    assert_int_equal(nd.tx_bytes, 131560);
    free(t);
    t = fixture("proc/net_dev", &n);
    assert_int_equal(sl__parse_net_dev(t, n, &nd), 0);
    free(t);
    const char *s = "eth0:100 0 0 0 0 0 0 0 200 0 0 0 0 0 0 0\n"; /* old */
    assert_int_equal(sl__parse_net_dev(s, strlen(s), &nd), 0);
    assert_int_equal(nd.rx_bytes, 100);
    assert_int_equal(nd.tx_bytes, 200);
    static const char *bad[] = {"",
                                "Inter-| a\n face |b\n",
                                "eth0: 1 2 3\n",
                                "eth0 1 2 3 4 5 6 7 8 9\n",
                                "a b: 1 2 3 4 5 6 7 8 9\n",
                                ": 1 2 3 4 5 6 7 8 9\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *b = prefix(bad[i], strlen(bad[i]));
        assert_int_equal(sl__parse_net_dev(b, strlen(bad[i]), &nd),
                         SL_ECORRUPT);
        free(b);
    }
}

/* Every prefix and some byte flips of every fixture through every parser:
 * only the return code may vary. */
static void test_all_parsers_any_bytes(void **state)
{
    (void)state;
    static const char *files[] = {"proc/stat",          "proc/stat_128",
                                  "proc/meminfo",       "proc/pid_stat",
                                  "proc/pid_stat_comm", "proc/status",
                                  "proc/self_io",       "proc/diskstats_multi",
                                  "proc/net_dev",       "proc/pressure/memory"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        size_t n;
        char *t = fixture(files[f], &n);
        size_t step = n > 2000 ? 97 : 1;
        for (size_t k = 0; k <= n; k += step) {
            for (int flip = 0; flip < 2; flip++) {
                char *c = prefix(t, k);
                if (flip && k)
                    c[k / 2] ^= (char)0x41;
                uint64_t a, b;
                sl__psi_t p;
                sl__self_io_t io;
                sl__disk_t d;
                sl__net_t nd;
                (void)sl__parse_proc_stat(c, k, &g_ps);
                (void)sl__parse_psi(c, k, &p);
                (void)sl__parse_meminfo(c, k, &a, &b);
                (void)sl__parse_pid_stat(c, k, &a);
                (void)sl__parse_status_rss(c, k, &a);
                (void)sl__parse_self_io(c, k, &io);
                (void)sl__parse_diskstats(c, k, "vda", &d);
                (void)sl__parse_net_dev(c, k, &nd);
                (void)sl__parse_u64_text(c, k, &a);
                free(c);
            }
        }
        free(t);
    }
}

static void test_read_small(void **state)
{
    (void)state;
    char buf[64];
    long n = sl__read_small(fixtures(), "proc/pressure/cpu", buf, sizeof buf);
    assert_int_equal(n, -1); /* 102 bytes do not fit in 63 */
    assert_int_equal(errno, EFBIG);
    char big[256];
    n = sl__read_small(fixtures(), "/proc/pressure/cpu", big, sizeof big);
    assert_int_equal(n, 102);
    assert_int_equal(big[n], '\0');
    assert_int_equal(strncmp(big, "some avg10=", 11), 0);
    assert_int_equal(sl__read_small(fixtures(), "proc/none", big, sizeof big),
                     -1);
    /* Exactly cap - 1 bytes fits. */
    assert_int_equal(sl__read_small(fixtures(), "proc/pressure/cpu", big, 103),
                     102);
    char line[4096]; /* /proc/self/stat is ~300 bytes */
    n = sl__read_small("/", "proc/self/stat", line, sizeof line);
    assert_true(n > 0);
    uint64_t j;
    assert_int_equal(sl__parse_pid_stat(line, (size_t)n, &j), 0);
}

static void mkdirs(const char *path)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

static void put(const char *dir, const char *rel, const char *text)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
}

/* A fixture cgroup tree: proc/self/cgroup and the files named. */
static char *cgroup_tree(const char *self, const char *const *files)
{
    char *root = tu_tmpdir("cgroup");
    char d[4400];
    snprintf(d, sizeof d, "%s/proc/self", root);
    mkdirs(d);
    put(root, "proc/self/cgroup", self);
    for (int i = 0; files[i]; i += 2) {
        snprintf(d, sizeof d, "%s/%s", root, files[i]);
        *strrchr(d, '/') = 0;
        mkdirs(d);
        put(root, files[i], files[i + 1]);
    }
    return root;
}

/* The cgroup CPU quota: v2 (the lowest along the path: the pod's over its
 * container's "max"), v1 (cpu,cpuacct), a container's own cgroup mounted
 * as the root while /proc names the host's path, none, and bad text. */
static void test_cgroup_cpus(void **state)
{
    (void)state;
    static const char *const v2[] = {
        "sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n",
        "sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n", NULL};
    char *r = cgroup_tree("0::/kubepods/pod1/ctr\n", v2);
    assert_true(sl__read_cgroup_cpus(r) == 2.5);
    tu_rmtree(r);
    free(r);
    static const char *const v1[] = {
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us",
        "150000\n",
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us",
        "100000\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us",
        "-1\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us",
        "100000\n",
        NULL};
    r = cgroup_tree("12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n"
                    "0::/docker/abc\n",
                    v1);
    assert_true(sl__read_cgroup_cpus(r) == 1.5);
    tu_rmtree(r);
    free(r);
    static const char *const own[] = {"sys/fs/cgroup/cpu.max", "50000 100000",
                                      NULL};
    r = cgroup_tree("0::/system.slice/docker-1.scope\n", own);
    assert_true(sl__read_cgroup_cpus(r) == 0.5);
    tu_rmtree(r);
    free(r);
    static const char *const none[] = {NULL};
    r = cgroup_tree("0::/\n", none);
    assert_true(sl__read_cgroup_cpus(r) == 0);
    tu_rmtree(r);
    free(r);
    char a[64], b[64];
    double c;
    assert_int_equal(
        sl__parse_cgroup_paths("garbage", 7, "cpu", a, b, sizeof a),
        SL_ECORRUPT);
    assert_int_equal(
        sl__parse_cgroup_paths("0::rel\n", 6, "cpu", a, b, sizeof a),
        SL_ECORRUPT);
    assert_int_equal(sl__parse_cpu_max("abc 100000", 10, &c), SL_ECORRUPT);
    assert_int_equal(sl__parse_cpu_max("100000 0", 8, &c), SL_ECORRUPT);
    assert_int_equal(sl__parse_cpu_max("max 100000\n", 11, &c), 0);
    assert_true(c == 0);
    int n = sl__cpus_usable(); /* live: within the mask */
    assert_true(n >= 1 && n <= sl__ncpu());
}

/* The cgroup memory limit: v2 (the pod's 1 GiB over its container's
 * "max"), v1 (the container's limit under a root with v1's "no limit"
 * number), none, and the parser's edges. */
static void test_cgroup_memory(void **state)
{
    (void)state;
    static const char *const v2[] = {
        "sys/fs/cgroup/kubepods/pod1/memory.max", "1073741824\n",
        "sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n", NULL};
    char *r = cgroup_tree("0::/kubepods/pod1/ctr\n", v2);
    assert_int_equal(sl__read_cgroup_memory(r), 1073741824u);
    tu_rmtree(r);
    free(r);
    static const char *const v1[] = {
        "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n",
        /* the CPU line's path must not be the one walked */
        "sys/fs/cgroup/memory/other/memory.limit_in_bytes", "1048576\n", NULL};
    r = cgroup_tree("11:cpu,cpuacct:/other\n4:memory:/docker/abc\n0::/\n", v1);
    assert_int_equal(sl__read_cgroup_memory(r), 536870912u);
    tu_rmtree(r);
    free(r);
    static const char *const none[] = {
        "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n",
        NULL};
    r = cgroup_tree("4:memory:/\n0::/\n", none);
    assert_int_equal(sl__read_cgroup_memory(r), 0);
    tu_rmtree(r);
    free(r);
    uint64_t b = 1;
    assert_int_equal(sl__parse_mem_max("max\n", 4, &b), 0);
    assert_int_equal(b, 0);
    assert_int_equal(sl__parse_mem_max("209715200\n", 10, &b), 0);
    assert_int_equal(b, 209715200u);
    assert_int_equal(sl__parse_mem_max("4611686018427387904", 19, &b), 0);
    assert_int_equal(b, 0); /* 2^62: no machine's, "no limit" */
    assert_int_equal(sl__parse_mem_max("12 MB", 5, &b), SL_ECORRUPT);
    assert_int_equal(sl__parse_mem_max("-1", 2, &b), SL_ECORRUPT);
    assert_int_equal(sl__parse_mem_max("", 0, &b), SL_ECORRUPT);
    /* the default budget: half the limit, none without one */
    static const char O[] = "max_memory_bytes (--max-memory)";
    assert_int_equal(sl__limits_default_memory(209715200u, 0, O, NULL, 0),
                     104857600);
    assert_int_equal(sl__limits_default_memory(0, 0, O, NULL, 0), 0);
    /* a cache asked for is held besides the half, at most the limit */
    assert_int_equal(
        sl__limits_default_memory(209715200u, 52428800, O, NULL, 0), 157286400);
    assert_int_equal(
        sl__limits_default_memory(209715200u, 157286400, O, NULL, 0),
        209715200);
    assert_int_equal(sl__limits_default_memory(0, 52428800, O, NULL, 0), 0);
    char why[256] = "x";
    assert_int_equal(sl__limits_default_memory(0, 0, O, why, sizeof why), 0);
    assert_string_equal(why, ""); /* no limit: nothing to say */
    assert_int_equal(
        sl__limits_default_memory(209715200u, 0, O, why, sizeof why),
        104857600);
    assert_string_equal(why, " (the default: 1/2 of the cgroup's memory "
                             "limit of 200 MB; max_memory_bytes "
                             "(--max-memory) sets another)");
    assert_int_equal(
        sl__limits_default_memory(209715200u, 52428800, O, why, sizeof why),
        157286400);
    assert_string_equal(why, " (the default: 1/2 of the cgroup's memory "
                             "limit of 200 MB, plus the cache's 50 MB, at "
                             "most the limit; max_memory_bytes "
                             "(--max-memory) sets another)");
}

/* Package 0 wraps through max_energy_range_uj, package 1 counts up; the
 * subzone intel-rapl:0:0 and intel-rapl-mmio:0 must not be summed. */
static void test_rapl_wrap(void **state)
{
    (void)state;
    sl__rapl_t r = {0};
    assert_true(sl__rapl_read(&r, fixtures()) == 0.0);
    assert_int_equal(r.n, 2);

    char *tmp = tu_tmpdir("rapl");
    assert_non_null(tmp);
    char d[4200];
    snprintf(d, sizeof d, "%s/sys/class/powercap/intel-rapl:0", tmp);
    mkdirs(d);
    put(d, "energy_uj", "1000000\n");
    put(d, "max_energy_range_uj", "262143328850\n");
    snprintf(d, sizeof d, "%s/sys/class/powercap/intel-rapl:0:0", tmp);
    mkdirs(d);
    put(d, "energy_uj", "999999999\n");
    snprintf(d, sizeof d, "%s/sys/class/powercap/intel-rapl:1", tmp);
    mkdirs(d);
    put(d, "energy_uj", "3000000\n");
    put(d, "max_energy_range_uj", "262143328850\n");

    /* pkg0: 262143000000 -> wrap -> 1000000: 328850 + 1000000 uJ;
     * pkg1: 1000000 -> 3000000: 2000000 uJ. */
    double j = sl__rapl_read(&r, tmp);
    assert_true(fabs(j - 3.32885) < 1e-9);
    assert_true(fabs(sl__rapl_read(&r, tmp) - 3.32885) < 1e-9);

    /* Unreadable: < 0, and the total so far is kept. */
    char none[4300];
    snprintf(none, sizeof none, "%s/nothing", tmp);
    assert_true(sl__rapl_read(&r, none) < 0);
    assert_true(fabs(r.total_j - 3.32885) < 1e-9);
    tu_rmtree(tmp);
    free(tmp);

    /* This machine: a value, or < 0; never made up. */
    sl__rapl_t live = {0};
    double lj = sl__rapl_read(&live, "/");
    print_message("live RAPL: %s (%d packages)\n",
                  lj < 0 ? "unreadable" : "readable", live.n);
    assert_true(lj < 0 || lj == 0.0);
}

static void test_disk_for_devnum(void **state)
{
    (void)state;
    char *tmp = tu_tmpdir("sysblk");
    assert_non_null(tmp);
    char p[4400], l[4400];
    snprintf(p, sizeof p, "%s/sys/devices/pci0/block/sda/sda1", tmp);
    mkdirs(p);
    put(p, "partition", "1\n");
    snprintf(p, sizeof p, "%s/sys/dev/block", tmp);
    mkdirs(p);
    snprintf(l, sizeof l, "%s/sys/dev/block/8:0", tmp);
    assert_int_equal(symlink("../../devices/pci0/block/sda", l), 0);
    snprintf(l, sizeof l, "%s/sys/dev/block/8:1", tmp);
    assert_int_equal(symlink("../../devices/pci0/block/sda/sda1", l), 0);

    char dev[32];
    assert_int_equal(sl__disk_for_devnum(tmp, 8, 1, dev, sizeof dev), 0);
    assert_string_equal(dev, "sda");
    assert_int_equal(sl__disk_for_devnum(tmp, 8, 0, dev, sizeof dev), 0);
    assert_string_equal(dev, "sda");
    assert_int_equal(sl__disk_for_devnum(tmp, 8, 2, dev, sizeof dev),
                     SL_ENOTFOUND);
    assert_string_equal(dev, "");
    assert_int_equal(sl__disk_for_devnum(tmp, 0, 45, dev, sizeof dev),
                     SL_ENOTFOUND); /* overlay / tmpfs */
    assert_string_equal(dev, "");
    assert_int_equal(sl__disk_for_devnum(tmp, 8, 0, dev, 3), SL_ERANGE);
    tu_rmtree(tmp);
    free(tmp);
}

/* Live: the disk under the fixtures (and the shared data) must be a line
 * of this machine's /proc/diskstats, or be reported as unknown. */
static void test_disk_for_path_live(void **state)
{
    (void)state;
    char dev[64];
    static char ds[1 << 16];
    assert_int_equal(sl__disk_for_path("/nonexistent/x", dev, sizeof dev),
                     SL_EIO);
    assert_int_equal(sl__disk_for_path("/proc/self", dev, sizeof dev),
                     SL_ENOTFOUND);
    const char *paths[2] = {fixtures(), getenv("SL_SHARED_DATA")};
    for (int i = 0; i < 2; i++) {
        if (!paths[i])
            continue;
        int rc = sl__disk_for_path(paths[i], dev, sizeof dev);
        print_message("disk for %s: %s (%d)\n", paths[i], rc ? "unknown" : dev,
                      rc);
        if (rc == SL_EIO)
            continue; /* shared data not present here */
        assert_true(rc == 0 || rc == SL_ENOTFOUND);
        if (rc)
            continue;
        long n = sl__read_small("/", "proc/diskstats", ds, sizeof ds);
        assert_true(n > 0);
        sl__disk_t d;
        assert_int_equal(sl__parse_diskstats(ds, (size_t)n, dev, &d), 0);
    }
}

static void test_live_proc(void **state)
{
    (void)state;
    static char buf[1 << 20];
    long n = sl__read_small("/", "proc/stat", buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(sl__parse_proc_stat(buf, (size_t)n, &g_ps), 0);
    assert_true(g_ps.ncpu >= 1 && g_ps.all.total > 0);
    uint64_t a, b;
    n = sl__read_small("/", "proc/meminfo", buf, sizeof buf);
    assert_int_equal(sl__parse_meminfo(buf, (size_t)n, &a, &b), 0);
    assert_true(a > 0 && b <= a);
    n = sl__read_small("/", "proc/self/status", buf, sizeof buf);
    assert_int_equal(sl__parse_status_rss(buf, (size_t)n, &a), 0);
    assert_true(a > 0);
    sl__net_t nd;
    n = sl__read_small("/", "proc/net/dev", buf, sizeof buf);
    if (n > 0)
        assert_int_equal(sl__parse_net_dev(buf, (size_t)n, &nd), 0);
    sl__self_io_t io;
    n = sl__read_small("/", "proc/self/io", buf, sizeof buf);
    if (n > 0) /* absent without CONFIG_TASK_IO_ACCOUNTING */
        assert_int_equal(sl__parse_self_io(buf, (size_t)n, &io), 0);
}

/* No NVIDIA driver on the test machines: valid 0, fields absent. Where a
 * driver is present, the values must be sane. */
static void test_gpu(void **state)
{
    (void)state;
    sl__gpu_t g;
    sl__gpu_read(&g, NULL);
    sl__gpu_read(&g, "0000:ff:1f.7"); /* the once-only load, twice; an id
                                         no GPU has: GPU 0, if any */
    print_message("NVML: %s\n", g.valid ? "GPU found" : "no GPU");
    if (!g.valid) {
        assert_int_equal(g.count, 0);
        assert_true(g.energy_j < 0 && g.util < 0 && g.power_w < 0);
        return;
    }
    assert_true(g.count >= 1);
    assert_int_equal(g.index, 0);
    assert_true(g.util < 0 || (g.util >= 0 && g.util <= 1));
    assert_true(g.mem_used <= g.mem_total);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proc_stat_real),
        cmocka_unit_test(test_proc_stat_128),
        cmocka_unit_test(test_proc_stat_too_many_cpus),
        cmocka_unit_test(test_proc_stat_bad),
        cmocka_unit_test(test_psi),
        cmocka_unit_test(test_psi_reader),
        cmocka_unit_test(test_meminfo),
        cmocka_unit_test(test_pid_stat),
        cmocka_unit_test(test_status_and_io),
        cmocka_unit_test(test_diskstats),
        cmocka_unit_test(test_net_dev),
        cmocka_unit_test(test_all_parsers_any_bytes),
        cmocka_unit_test(test_read_small),
        cmocka_unit_test(test_cgroup_cpus),
        cmocka_unit_test(test_cgroup_memory),
        cmocka_unit_test(test_rapl_wrap),
        cmocka_unit_test(test_disk_for_devnum),
        cmocka_unit_test(test_disk_for_path_live),
        cmocka_unit_test(test_live_proc),
        cmocka_unit_test(test_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
