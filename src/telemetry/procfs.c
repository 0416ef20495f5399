/* telemetry/procfs: parsers for /proc text and the small readers beside
 * them. Parsers walk [text, text + n) with spans, never past it and never
 * relying on a NUL, since their input is whatever bytes a file held. */
#include "telemetry/machine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/base.h"

/* The argument rule of every parser here: a missing output is the caller's
 * mistake (SL_EINVAL); missing text is input that could not be read
 * (SL_ECORRUPT). */
#define CHECK_ARGS(out_ok, text)                                               \
    do {                                                                       \
        if (!(out_ok))                                                         \
            return SL_EINVAL;                                                  \
        if (!(text))                                                           \
            return SL_ECORRUPT;                                                \
    } while (0)

/* A piece of the input: [p, e). */
typedef struct span {
    const char *p, *e;
} span_t;

/* Next line of [*pos, end), without its '\n'; 0 at the end. */
static int next_line(const char **pos, const char *end, span_t *line)
{
    if (*pos >= end)
        return 0;
    const char *nl = memchr(*pos, '\n', (size_t)(end - *pos));
    line->p = *pos;
    line->e = nl ? nl : end;
    *pos = nl ? nl + 1 : end;
    return 1;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Next blank-separated token of `line` (consumed from it); 0 when none. */
static int next_tok(span_t *line, span_t *tok)
{
    const char *p = line->p;
    while (p < line->e && is_blank(*p))
        p++;
    if (p == line->e) {
        line->p = p;
        return 0;
    }
    tok->p = p;
    while (p < line->e && !is_blank(*p))
        p++;
    tok->e = p;
    line->p = p;
    return 1;
}

/* Next line of [*pos, end) that holds a token: its first token (the key of
 * /proc's "key value..." lines) in key, the rest of the line in line. 0 at
 * the end. */
static int next_keyed_line(const char **pos, const char *end, span_t *line,
                           span_t *key)
{
    while (next_line(pos, end, line))
        if (next_tok(line, key))
            return 1;
    return 0;
}

static int tok_eq(span_t t, const char *s)
{
    size_t n = strlen(s);
    return (size_t)(t.e - t.p) == n && memcmp(t.p, s, n) == 0;
}

/* Decimal digits only, no sign, no overflow. 0 or -1. */
static int span_u64(span_t t, uint64_t *v)
{
    if (t.p == t.e)
        return -1;
    uint64_t x = 0;
    for (const char *p = t.p; p < t.e; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

/* The next token as a number. */
static int tok_u64(span_t *line, uint64_t *v)
{
    span_t t;
    return next_tok(line, &t) ? span_u64(t, v) : -1;
}

/* "12.34" as the kernel prints PSI averages: digits, optional fraction. */
static int span_fixed(span_t t, double *v)
{
    const char *p = t.p;
    double x = 0, scale = 1;
    int digits = 0, dot = 0;
    if (t.e - t.p > 32)
        return -1;
    for (; p < t.e; p++) {
        if (*p == '.' && !dot) {
            dot = 1;
        } else if (*p >= '0' && *p <= '9') {
            digits++;
            if (dot)
                scale /= 10;
            x = dot ? x + (*p - '0') * scale : x * 10 + (*p - '0');
        } else {
            return -1;
        }
    }
    if (!digits)
        return -1;
    *v = x;
    return 0;
}

/* "<key> <number> kB" -> bytes, for meminfo and status lines. */
static int kb_value(span_t *line, uint64_t *bytes)
{
    uint64_t kb;
    span_t unit;
    if (tok_u64(line, &kb) || !next_tok(line, &unit) || !tok_eq(unit, "kB"))
        return -1;
    if (kb > UINT64_MAX / 1024)
        return -1;
    *bytes = kb * 1024;
    return 0;
}

int sl__parse_u64_text(const char *text, size_t n, uint64_t *v)
{
    CHECK_ARGS(v, text);
    span_t t = {text, text + n};
    while (t.e > t.p && (t.e[-1] == '\n' || is_blank(t.e[-1])))
        t.e--;
    return span_u64(t, v) ? SL_ECORRUPT : 0;
}

/* The fields after "cpu"/"cpuN": user nice system idle [iowait irq softirq
 * steal guest guest_nice]. Kernels before 2.6 printed only four; guest
 * time is already counted in user, so it is not added again. */
static int cpu_fields(span_t *line, sl__cpu_times_t *t)
{
    uint64_t f[8] = {0};
    int k = 0;
    span_t tok;
    while (k < 8 && next_tok(line, &tok)) {
        if (span_u64(tok, &f[k]))
            return -1;
        k++;
    }
    if (k < 4)
        return -1;
    t->busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    t->total = t->busy + f[3] + f[4];
    return 0;
}

int sl__parse_proc_stat(const char *text, size_t n, sl__proc_stat_t *out)
{
    CHECK_ARGS(out, text);
    memset(out, 0, sizeof *out);
    int have_all = 0, have_running = 0;
    const char *pos = text, *end = text + n;
    span_t line, tok;
    while (next_keyed_line(&pos, end, &line, &tok)) {
        size_t len = (size_t)(tok.e - tok.p);
        if (len >= 3 && memcmp(tok.p, "cpu", 3) == 0) {
            sl__cpu_times_t t;
            if (cpu_fields(&line, &t))
                return SL_ECORRUPT;
            if (len == 3) {
                out->all = t;
                have_all = 1;
                continue;
            }
            uint64_t i;
            if (span_u64((span_t){tok.p + 3, tok.e}, &i))
                return SL_ECORRUPT;
            if (i < SL_MAX_CPUS) { /* beyond: dropped, "cpu" still counts */
                out->cpu[i] = t;
                if ((int)i >= out->ncpu)
                    out->ncpu = (int)i + 1;
            }
        } else if (tok_eq(tok, "procs_running")) {
            uint64_t v;
            if (tok_u64(&line, &v) || v > INT_MAX)
                return SL_ECORRUPT;
            out->procs_running = (int)v;
            have_running = 1;
        }
    }
    /* procs_running sits near the end: without it the text was cut. */
    return have_all && have_running ? 0 : SL_ECORRUPT;
}

/* "avg10=0.00 avg60=0.00 avg300=0.00 total=0"; unknown keys are skipped so
 * that a kernel adding one does not break us. */
static int psi_line(span_t line, double *avg10, uint64_t *total)
{
    int have_avg = 0, have_total = 0;
    span_t tok;
    while (next_tok(&line, &tok)) {
        const char *eq = memchr(tok.p, '=', (size_t)(tok.e - tok.p));
        if (!eq)
            return -1;
        span_t key = {tok.p, eq}, val = {eq + 1, tok.e};
        double d;
        if (tok_eq(key, "avg10")) {
            if (span_fixed(val, avg10))
                return -1;
            have_avg = 1;
        } else if (tok_eq(key, "total")) {
            if (span_u64(val, total))
                return -1;
            have_total = 1;
        } else if (tok_eq(key, "avg60") || tok_eq(key, "avg300")) {
            if (span_fixed(val, &d))
                return -1;
        }
    }
    return have_avg && have_total ? 0 : -1;
}

int sl__parse_psi(const char *text, size_t n, sl__psi_t *out)
{
    CHECK_ARGS(out, text);
    memset(out, 0, sizeof *out);
    int have_some = 0;
    const char *pos = text, *end = text + n;
    span_t line, tok;
    while (next_keyed_line(&pos, end, &line, &tok)) {
        if (tok_eq(tok, "some")) {
            if (psi_line(line, &out->some_avg10, &out->some_total_us))
                return SL_ECORRUPT;
            have_some = 1;
        } else if (tok_eq(tok, "full")) {
            if (psi_line(line, &out->full_avg10, &out->full_total_us))
                return SL_ECORRUPT;
        } else {
            return SL_ECORRUPT;
        }
    }
    if (!have_some)
        return SL_ECORRUPT;
    out->present = 1;
    return 0;
}

int sl__parse_meminfo(const char *text, size_t n, uint64_t *total,
                      uint64_t *available)
{
    CHECK_ARGS(total && available, text);
    int have_total = 0, have_avail = 0;
    const char *pos = text, *end = text + n;
    span_t line, tok;
    while (next_keyed_line(&pos, end, &line, &tok)) {
        if (tok_eq(tok, "MemTotal:")) {
            if (kb_value(&line, total))
                return SL_ECORRUPT;
            have_total = 1;
        } else if (tok_eq(tok, "MemAvailable:")) {
            if (kb_value(&line, available))
                return SL_ECORRUPT;
            have_avail = 1;
        }
    }
    return have_total && have_avail ? 0 : SL_ECORRUPT;
}

/* "pid (comm) state ppid ...": comm may hold spaces, ')' and even '\n'
 * (prctl PR_SET_NAME takes any bytes), so the fields start after the LAST
 * ')' and run to the end of that line. */
int sl__parse_pid_stat(const char *text, size_t n, uint64_t *cpu_jiffies)
{
    CHECK_ARGS(cpu_jiffies, text && n > 0);
    const char *lp = memchr(text, '(', n);
    const char *rp = NULL;
    for (size_t i = n; i > 0; i--) {
        if (text[i - 1] == ')') {
            rp = text + i - 1;
            break;
        }
    }
    if (!lp || !rp || rp < lp)
        return SL_ECORRUPT;
    span_t head = {text, lp}, tok;
    uint64_t pid;
    if (tok_u64(&head, &pid) || next_tok(&head, &tok))
        return SL_ECORRUPT;
    const char *end = text + n;
    const char *nl = memchr(rp, '\n', (size_t)(end - rp));
    span_t rest = {rp + 1, nl ? nl : end};
    /* Field 3 (state) is the first after ')'; utime and stime are 14, 15. */
    for (int field = 3; field < 14; field++)
        if (!next_tok(&rest, &tok))
            return SL_ECORRUPT;
    uint64_t utime, stime;
    if (tok_u64(&rest, &utime) || tok_u64(&rest, &stime))
        return SL_ECORRUPT;
    *cpu_jiffies = utime + stime;
    return 0;
}

int sl__parse_status_rss(const char *text, size_t n, uint64_t *rss)
{
    CHECK_ARGS(rss, text);
    const char *pos = text, *end = text + n;
    span_t line, tok;
    while (next_keyed_line(&pos, end, &line, &tok)) {
        if (tok_eq(tok, "VmRSS:"))
            return kb_value(&line, rss) ? SL_ECORRUPT : 0;
    }
    return SL_ECORRUPT; /* kernel threads have none; we are not one */
}

int sl__parse_self_io(const char *text, size_t n, sl__self_io_t *out)
{
    CHECK_ARGS(out, text);
    static const char *const keys[4] = {
        "rchar:", "wchar:", "read_bytes:", "write_bytes:"};
    uint64_t *dst[4] = {&out->rchar, &out->wchar, &out->read_bytes,
                        &out->write_bytes};
    unsigned have = 0;
    const char *pos = text, *end = text + n;
    span_t line, tok;
    while (next_keyed_line(&pos, end, &line, &tok)) {
        for (int k = 0; k < 4; k++) {
            if (tok_eq(tok, keys[k])) {
                if (tok_u64(&line, dst[k]))
                    return SL_ECORRUPT;
                have |= 1u << k;
            }
        }
    }
    return have == 15 ? 0 : SL_ECORRUPT;
}

/* Columns: major minor name, then reads_completed reads_merged
 * sectors_read ms_reading writes_completed writes_merged sectors_written
 * ms_writing ios_in_progress io_ms ... (Documentation/admin-guide/
 * iostats.rst); sectors are 512 bytes whatever the device's block size. */
int sl__parse_diskstats(const char *text, size_t n, const char *dev,
                        sl__disk_t *out)
{
    CHECK_ARGS(out && dev && *dev, text);
    const char *pos = text, *end = text + n;
    span_t line, name;
    int lines = 0;
    while (next_line(&pos, end, &line)) {
        uint64_t major, minor;
        if (line.p == line.e)
            continue;
        if (tok_u64(&line, &major) || tok_u64(&line, &minor) ||
            !next_tok(&line, &name))
            return SL_ECORRUPT;
        lines++;
        if (!tok_eq(name, dev))
            continue;
        uint64_t f[10];
        for (int k = 0; k < 10; k++)
            if (tok_u64(&line, &f[k]))
                return SL_ECORRUPT;
        if (f[2] > UINT64_MAX / 512)
            return SL_ECORRUPT;
        out->read_bytes = f[2] * 512;
        out->io_ms = f[9];
        return 0;
    }
    return lines ? SL_ENOTFOUND : SL_ECORRUPT;
}

/* Two header lines (with '|'), then "name: rx_bytes rx_packets rx_errs
 * rx_drop rx_fifo rx_frame rx_compressed rx_multicast tx_bytes ...". Old
 * kernels printed "eth0:123" with no blank after the colon; names cannot
 * hold ':' or blanks, so the first ':' ends the name. */
int sl__parse_net_dev(const char *text, size_t n, sl__net_t *out)
{
    CHECK_ARGS(out, text);
    memset(out, 0, sizeof *out);
    const char *pos = text, *end = text + n;
    span_t line, name;
    int ifaces = 0;
    while (next_line(&pos, end, &line)) {
        size_t len = (size_t)(line.e - line.p);
        if (memchr(line.p, '|', len))
            continue;
        const char *colon = memchr(line.p, ':', len);
        if (!colon) {
            if (next_tok(&line, &name)) /* a blank line is harmless */
                return SL_ECORRUPT;
            continue;
        }
        span_t head = {line.p, colon}, extra;
        if (!next_tok(&head, &name) || next_tok(&head, &extra))
            return SL_ECORRUPT;
        span_t rest = {colon + 1, line.e};
        uint64_t f[9];
        for (int k = 0; k < 9; k++)
            if (tok_u64(&rest, &f[k]))
                return SL_ECORRUPT;
        ifaces++;
        if (tok_eq(name, "lo"))
            continue;
        out->rx_bytes += f[0];
        out->tx_bytes += f[8];
    }
    return ifaces ? 0 : SL_ECORRUPT;
}

/* ---- readers */

int sl__fds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 3;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 3; /* less the directory's own descriptor */
}

long sl__read_small(const char *root, const char *rel, char *buf, size_t cap)
{
    if (!rel || !buf || cap == 0) {
        errno = EINVAL;
        return -1;
    }
    /* The path on the heap: this runs at start-up (the cgroup's limits) on
     * a main thread whose whole stack may be 32 KB (ulimit -s 32), where
     * PATH_MAX a frame adds up fast. */
    while (*rel == '/')
        rel++;
    char *path = sl__path_join(root && *root ? root : "/", rel);
    if (!path) {
        errno = ENOMEM;
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0)
        return -1;
    size_t got = 0;
    int err = 0;
    for (;;) {
        char probe;
        int full = got == cap - 1;
        ssize_t r =
            full ? read(fd, &probe, 1) : read(fd, buf + got, cap - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err = errno;
            break;
        }
        if (r == 0)
            break;
        if (full) {
            err = EFBIG;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    if (err) {
        errno = err;
        return -1;
    }
    return (long)got;
}

int sl__read_psi(const char *root, const char *resource, sl__psi_t *out)
{
    if (!resource || !out)
        return SL_EINVAL;
    memset(out, 0, sizeof *out);
    char rel[64], buf[512];
    int w = snprintf(rel, sizeof rel, "proc/pressure/%s", resource);
    if (w < 0 || (size_t)w >= sizeof rel)
        return SL_EINVAL;
    long n = sl__read_small(root, rel, buf, sizeof buf);
    if (n < 0)
        return errno == EFBIG ? SL_ECORRUPT : 0; /* absent: present = 0 */
    return sl__parse_psi(buf, (size_t)n, out);
}

int sl__disk_for_devnum(const char *root, unsigned maj, unsigned min, char *dev,
                        size_t devlen)
{
    if (!dev || devlen == 0)
        return SL_EINVAL;
    dev[0] = '\0';
    if (maj == 0) /* anonymous: overlay, tmpfs, proc, btrfs subvolumes */
        return SL_ENOTFOUND;
    /* Paths on the heap, as in sl__read_small: this runs at start-up */
    char rel[64];
    snprintf(rel, sizeof rel, "sys/dev/block/%u:%u", maj, min);
    char *link = sl__path_join(root && *root ? root : "/", rel);
    /* The link points at .../block/vda, or .../block/vda/vda1 for a
     * partition, whose disk is then the parent directory. */
    char *real = link ? realpath(link, NULL) : NULL;
    free(link);
    if (!real)
        return SL_ENOTFOUND;
    char *part = sl__path_join(real, "partition");
    int is_part = part && access(part, F_OK) == 0;
    free(part);
    char *slash = strrchr(real, '/');
    if (is_part && slash) {
        *slash = '\0';
        slash = strrchr(real, '/');
    }
    int rc = SL_ENOTFOUND;
    if (slash && slash[1]) {
        size_t len = strlen(slash + 1);
        rc = len < devlen ? 0 : SL_ERANGE;
        if (rc == 0)
            memcpy(dev, slash + 1, len + 1);
    }
    free(real);
    return rc;
}

int sl__disk_for_path(const char *path, char *dev, size_t devlen)
{
    if (!path || !dev || devlen == 0)
        return SL_EINVAL;
    dev[0] = '\0';
    struct stat st;
    if (stat(path, &st) != 0)
        return SL_EIO;
    return sl__disk_for_devnum("/", major(st.st_dev), minor(st.st_dev), dev,
                               devlen);
}
