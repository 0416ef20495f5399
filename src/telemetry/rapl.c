/* telemetry/rapl: CPU package energy from the powercap sysfs tree. The
 * counters are microjoules that wrap at max_energy_range_uj (every few
 * minutes under load on a big package), so energy is accumulated from
 * deltas between calls rather than read as an absolute. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "telemetry/machine.h"

#define RAPL_MAX 16
#define RAPL_DIR "sys/class/powercap"

/* "intel-rapl:N" with N < RAPL_MAX -> N; subzones "intel-rapl:N:M" and
 * anything else -> -1. AMD packages appear under the same name. */
static int package_index(const char *name)
{
    static const char prefix[] = "intel-rapl:";
    if (strncmp(name, prefix, sizeof prefix - 1) != 0)
        return -1;
    const char *p = name + sizeof prefix - 1;
    int idx = 0;
    if (!*p || (p[0] == '0' && p[1])) /* so the name is "intel-rapl:%d" */
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        idx = idx * 10 + (*p - '0');
        if (idx >= RAPL_MAX)
            return -1;
    }
    return idx;
}

static int read_u64_file(const char *root, const char *rel, uint64_t *v)
{
    char buf[64];
    long n = sl__read_small(root, rel, buf, sizeof buf);
    if (n < 0)
        return -1;
    return sl__parse_u64_text(buf, (size_t)n, v) ? -1 : 0;
}

double sl__rapl_read(sl__rapl_t *r, const char *root)
{
    if (!r)
        return -1;
    /* on the heap: the first reading is at start-up (see sl__read_small) */
    char *dir = sl__path_join(root && *root ? root : "/", RAPL_DIR);
    DIR *d = dir ? opendir(dir) : NULL;
    free(dir);
    if (!d)
        return -1;
    uint64_t now[RAPL_MAX];
    uint32_t seen = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int i = package_index(de->d_name);
        if (i < 0)
            continue;
        char rel[128];
        snprintf(rel, sizeof rel, RAPL_DIR "/intel-rapl:%d/energy_uj", i);
        if (read_u64_file(root, rel, &now[i]))
            continue; /* 0400 to non-root since Linux 5.10 */
        seen |= 1u << i;
        if (r->max_uj[i] == 0) {
            snprintf(rel, sizeof rel,
                     RAPL_DIR "/intel-rapl:%d/max_energy_range_uj", i);
            if (read_u64_file(root, rel, &r->max_uj[i]))
                r->max_uj[i] = 0; /* unknown: a wrap is then dropped */
        }
    }
    closedir(d);
    if (!seen)
        return -1;
    int n = 0;
    for (int i = 0; i < RAPL_MAX; i++) {
        if (!(seen & (1u << i)))
            continue;
        n++;
        if (r->seen & (1u << i)) {
            uint64_t last = r->last_uj[i], cur = now[i], delta = 0;
            if (cur >= last)
                delta = cur - last;
            else if (r->max_uj[i] >= last) /* wrapped through max to 0 */
                delta = r->max_uj[i] - last + cur;
            /* else: went backwards with no known range; count nothing
             * rather than guess. */
            r->total_j += (double)delta * 1e-6;
        }
        r->last_uj[i] = now[i];
    }
    /* A package that went unreadable starts over from its next reading. */
    r->seen = seen;
    r->n = n;
    r->init = 1;
    return r->total_j;
}
