/* The CPUs a process may use: its affinity mask, lowered to its cgroup's
 * CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us)
 * rounded up. A container with a 2-CPU quota on a 64-core host has 64 CPUs
 * in its mask and time for 2; threads sized by the mask are throttled.
 * And its memory limit (v2 memory.max, v1 memory.limit_in_bytes), past
 * which the OOM killer ends it, whatever the host has free. Each limit is
 * the lowest along the path from the process's cgroup up to the
 * hierarchy's root (a pod's limit sits above its container's). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sluice/sluice.h"
#include "telemetry/machine.h"

/* "N:CONTROLLERS:PATH" lines: CONTROLLERS "" is v2's, a comma list holding
 * ctl ("cpu", "memory") is v1's controller of that name. */
static int has_ctl(const char *p, const char *e, const char *ctl)
{
    size_t m = strlen(ctl);
    while (p < e) {
        const char *c = memchr(p, ',', (size_t)(e - p));
        const char *end = c ? c : e;
        if ((size_t)(end - p) == m && memcmp(p, ctl, m) == 0)
            return 1;
        p = end + 1;
    }
    return 0;
}

static int put_path(char *dst, size_t cap, const char *p, const char *e)
{
    size_t n = (size_t)(e - p);
    if (n == 0 || p[0] != '/' || n >= cap || memchr(p, '\0', n))
        return SL_ECORRUPT;
    memcpy(dst, p, n);
    dst[n] = 0;
    return 0;
}

int sl__parse_cgroup_paths(const char *text, size_t n, const char *ctl,
                           char *v2, char *v1, size_t cap)
{
    if (!text || !ctl || !v2 || !v1 || cap == 0)
        return SL_EINVAL;
    v2[0] = v1[0] = 0;
    const char *pos = text, *end = text + n;
    while (pos < end) {
        const char *nl = memchr(pos, '\n', (size_t)(end - pos));
        const char *le = nl ? nl : end;
        const char *c1 = memchr(pos, ':', (size_t)(le - pos));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(le - c1 - 1)) : NULL;
        if (!c2) {
            if (le > pos)
                return SL_ECORRUPT;
        } else if (c2 == c1 + 1 && c1 - pos == 1 && pos[0] == '0') {
            if (put_path(v2, cap, c2 + 1, le))
                return SL_ECORRUPT;
        } else if (has_ctl(c1 + 1, c2, ctl) && !v1[0]) {
            if (put_path(v1, cap, c2 + 1, le))
                return SL_ECORRUPT;
        }
        pos = nl ? nl + 1 : end;
    }
    return 0;
}

/* One decimal number, or "-1" / "max" as none (-1). */
static int quota_tok(const char *p, const char *e, double *v)
{
    if ((e - p == 3 && memcmp(p, "max", 3) == 0) ||
        (e - p == 2 && memcmp(p, "-1", 2) == 0)) {
        *v = -1;
        return 0;
    }
    uint64_t x;
    if (sl__parse_u64_text(p, (size_t)(e - p), &x))
        return SL_ECORRUPT;
    *v = (double)x;
    return 0;
}

int sl__parse_cpu_max(const char *text, size_t n, double *cpus)
{
    if (!text || !cpus)
        return SL_EINVAL;
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        n--;
    const char *sp = memchr(text, ' ', n);
    double q, per;
    if (!sp || quota_tok(text, sp, &q) || quota_tok(sp + 1, text + n, &per) ||
        !(per > 0))
        return SL_ECORRUPT;
    *cpus = q < 0 ? 0 : q / per;
    return 0;
}

int sl__parse_mem_max(const char *text, size_t n, uint64_t *bytes)
{
    if (!text || !bytes)
        return SL_EINVAL;
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        n--;
    if (n == 3 && memcmp(text, "max", 3) == 0) {
        *bytes = 0;
        return 0;
    }
    uint64_t v;
    if (sl__parse_u64_text(text, n, &v))
        return SL_ECORRUPT;
    /* v1 writes "no limit" as the largest page count it keeps, in bytes
     * (2^63 - 4096 on x86-64): no machine has 2^62 bytes */
    *bytes = v >= (UINT64_C(1) << 62) ? 0 : v;
    return 0;
}

/* root/rel/name's text into buf; bytes, or -1. The path on the heap, as
 * every path here: this runs at start-up on the main thread, whose whole
 * stack may be 32 KB (ulimit -s 32). */
static long read_in(const char *root, const char *rel, const char *name,
                    char *buf, size_t cap)
{
    char *f = sl__path_join(rel, name);
    long k = f ? sl__read_small(root, f, buf, cap) : -1;
    free(f);
    return k;
}

/* What one cgroup directory is read for: which files, which version. */
enum { CPU_V1, CPU_V2, MEM_V1, MEM_V2 };

/* The limit of one cgroup directory rel (under root): CPUs or bytes, 0
 * for none, -1 when it has no such files (not this hierarchy's
 * directory). */
static double dir_limit(const char *root, const char *rel, int kind)
{
    char buf[64];
    if (kind == MEM_V1 || kind == MEM_V2) {
        uint64_t b;
        long k = read_in(
            root, rel, kind == MEM_V2 ? "memory.max" : "memory.limit_in_bytes",
            buf, sizeof buf);
        return k > 0 && !sl__parse_mem_max(buf, (size_t)k, &b) ? (double)b : -1;
    }
    if (kind == CPU_V2) {
        long k = read_in(root, rel, "cpu.max", buf, sizeof buf);
        double c;
        return k > 0 && !sl__parse_cpu_max(buf, (size_t)k, &c) ? c : -1;
    }
    double q, per;
    long k = read_in(root, rel, "cpu.cfs_quota_us", buf, sizeof buf);
    if (k <= 0 || quota_tok(buf, buf + strcspn(buf, "\n"), &q))
        return -1;
    k = read_in(root, rel, "cpu.cfs_period_us", buf, sizeof buf);
    if (k <= 0 || quota_tok(buf, buf + strcspn(buf, "\n"), &per) || !(per > 0))
        return -1;
    return q < 0 ? 0 : q / per;
}

/* The lowest limit from mount/path up to mount/ (0: none). A path the
 * mount does not show (a container's own cgroup mounted as the root, the
 * path the host's) is looked at from the mount's root only. */
static double hierarchy_limit(const char *root, const char *mount,
                              const char *path, int kind)
{
    size_t base = strlen(mount);
    char *rel = malloc(base + strlen(path) + 1);
    if (!rel)
        return 0;
    memcpy(rel, mount, base);
    strcpy(rel + base, path);
    while (strlen(rel) > base + 1 && rel[strlen(rel) - 1] == '/')
        rel[strlen(rel) - 1] = 0;
    double best = 0;
    int seen = 0;
    for (;;) {
        double c = dir_limit(root, rel, kind);
        if (c >= 0)
            seen = 1;
        if (c > 0 && (best == 0 || c < best))
            best = c;
        char *slash = strrchr(rel + base, '/');
        if (!slash)
            break;
        if (slash == rel + base) { /* at the mount's root: looked at last */
            if (rel[base + 1] == 0)
                break;
            rel[base + 1] = 0;
        } else {
            *slash = 0;
        }
    }
    free(rel);
    return seen ? best : 0;
}

/* proc/self/cgroup and the two paths read from it: 12 KB, on the heap
 * (see read_in). */
typedef struct self_cgroup {
    char text[4096], v2[PATH_MAX], v1[PATH_MAX];
} self_cgroup_t;

/* The lowest limit of controller ctl (0: none): v1's hierarchy (at
 * mount1, or mount1b where distributions name it so) before v2's. */
static double read_limit(const char *root, const char *ctl, const char *mount1,
                         const char *mount1b, int kind1, int kind2)
{
    self_cgroup_t *s = malloc(sizeof *s);
    if (!s)
        return 0;
    long k = sl__read_small(root, "proc/self/cgroup", s->text, sizeof s->text);
    double c = 0;
    if (k > 0 && !sl__parse_cgroup_paths(s->text, (size_t)k, ctl, s->v2, s->v1,
                                         sizeof s->v2)) {
        if (s->v1[0]) {
            c = hierarchy_limit(root, mount1, s->v1, kind1);
            if (c == 0 && mount1b)
                c = hierarchy_limit(root, mount1b, s->v1, kind1);
        }
        if (c == 0 && s->v2[0])
            c = hierarchy_limit(root, "sys/fs/cgroup", s->v2, kind2);
    }
    free(s);
    return c;
}

double sl__read_cgroup_cpus(const char *root)
{
    return read_limit(root, "cpu", "sys/fs/cgroup/cpu",
                      "sys/fs/cgroup/cpu,cpuacct", CPU_V1, CPU_V2);
}

uint64_t sl__read_cgroup_memory(const char *root)
{
    return (uint64_t)read_limit(root, "memory", "sys/fs/cgroup/memory", NULL,
                                MEM_V1, MEM_V2);
}

int sl__cpus_usable(void)
{
    int n = sl__ncpu();
    double q = sl__read_cgroup_cpus("/");
    if (q > 0 && ceil(q) < n)
        n = (int)ceil(q);
    return n > 0 ? n : 1;
}
