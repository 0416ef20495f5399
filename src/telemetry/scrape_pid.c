/* Attach by pid: which TCP ports a process listens on. Nothing is written
 * by the job for this (no file to go stale after a crash): its sockets are
 * its descriptors (/proc/PID/fd -> "socket:[INODE]"), and its network
 * namespace's table (/proc/PID/net/tcp, tcp6) gives each listening
 * socket's inode and port. Reading another user's descriptors needs their
 * rights, as for ls -l /proc/PID/fd. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "scrape.h"

/* The next whitespace-separated token of [*p, end): its start and length,
 * or 0 at the end. */
static size_t token(const char **p, const char *end, const char **tok)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
    *tok = *p;
    while (*p < end && **p != ' ' && **p != '\t')
        (*p)++;
    return (size_t)(*p - *tok);
}

static int hexval(const char *s, size_t n, unsigned long *v)
{
    *v = 0;
    if (n == 0 || n > 8)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0)
            return -1;
        *v = *v * 16 + (unsigned long)d;
    }
    return 0;
}

int sl__parse_net_tcp(const char *text, size_t len, int *ports,
                      unsigned long *inodes, int max)
{
    const char *p = text, *end = text + len;
    int n = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end, *c = p, *tok[10];
        size_t tl[10];
        p = nl ? nl + 1 : end;
        int nt = 0;
        while (nt < 10 && (tl[nt] = token(&c, le, &tok[nt])) > 0)
            nt++;
        if (nt == 0 || (tl[0] == 2 && !memcmp(tok[0], "sl", 2)))
            continue; /* blank, or the header */
        if (nt < 10 || tok[0][tl[0] - 1] != ':')
            return SL_ECORRUPT;
        const char *colon = memchr(tok[1], ':', tl[1]);
        unsigned long port, st, inode = 0;
        if (!colon ||
            hexval(colon + 1, tl[1] - (size_t)(colon + 1 - tok[1]), &port) ||
            port > 65535 || hexval(tok[3], tl[3], &st))
            return SL_ECORRUPT;
        if (tl[9] > 19)
            return SL_ECORRUPT;
        for (size_t i = 0; i < tl[9]; i++) {
            if (tok[9][i] < '0' || tok[9][i] > '9')
                return SL_ECORRUPT;
            inode = inode * 10 + (unsigned long)(tok[9][i] - '0');
        }
        if (st == 0x0A && n < max) {
            ports[n] = (int)port;
            inodes[n] = inode;
            n++;
        }
    }
    return n;
}

/* The socket inodes among pid's descriptors, into a malloc'd array. */
static int pid_sockets(int pid, unsigned long **out, size_t *n, char *err,
                       size_t errlen)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        if (e == ENOENT)
            return sl__fail(err, errlen, SL_ENOTFOUND, "no process %d", pid);
        return sl__fail(err, errlen, SL_EIO,
                        "%s: %s (attach by --port, or run as the job's user)",
                        dir, strerror(e));
    }
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char path[320], link[64];
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        ssize_t ln = readlink(path, link, sizeof link - 1);
        if (ln <= 0)
            continue;
        link[ln] = 0;
        unsigned long ino;
        if (sscanf(link, "socket:[%lu]", &ino) != 1)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            unsigned long *nb = realloc(*out, cap * sizeof *nb);
            if (!nb) {
                closedir(d);
                free(*out);
                *out = NULL;
                return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            }
            *out = nb;
        }
        (*out)[(*n)++] = ino;
    }
    closedir(d);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int sl__pid_listen_ports(int pid, int *ports, int max, char *err, size_t errlen)
{
    unsigned long *socks = NULL;
    size_t nsocks = 0;
    int rc = pid_sockets(pid, &socks, &nsocks, err, errlen);
    if (rc)
        return rc;
    int n = 0;
    static const char *const tables[] = {"tcp", "tcp6"};
    for (int t = 0; t < 2 && n < max; t++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/net/%s", pid, tables[t]);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        /* Read whole: a busy host's table may be large, but it is text of
         * fixed-width rows; 4 MiB is ~27,000 sockets. */
        size_t cap = 1 << 16, len = 0;
        char *buf = malloc(cap);
        while (buf) {
            len += fread(buf + len, 1, cap - len, f);
            if (len < cap || cap >= (4u << 20))
                break;
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            } else {
                buf = nb;
            }
        }
        fclose(f);
        if (!buf)
            continue;
        while (len > 0 && buf[len - 1] != '\n') /* a row cut at the cap */
            len--;
        enum { ROWS = 4096 }; /* listening sockets of the namespace */
        int lp[ROWS];
        unsigned long li[ROWS];
        int k = sl__parse_net_tcp(buf, len, lp, li, ROWS);
        free(buf);
        for (int i = 0; i < k && n < max; i++)
            for (size_t j = 0; j < nsocks; j++)
                if (socks[j] == li[i]) {
                    int dup = 0;
                    for (int m = 0; m < n; m++)
                        dup |= ports[m] == lp[i];
                    if (!dup)
                        ports[n++] = lp[i];
                    break;
                }
    }
    free(socks);
    qsort(ports, (size_t)n, sizeof *ports, cmp_int);
    return n;
}
