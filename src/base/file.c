/* base/file: the one way sluice opens an input file, and writes a small
 * output whole (see base.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

const char *sl__file_type_name(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return "regular file";
    case S_IFDIR:
        return "directory";
    case S_IFIFO:
        return "FIFO";
    case S_IFSOCK:
        return "socket";
    case S_IFCHR:
        return "character device";
    case S_IFBLK:
        return "block device";
    case S_IFLNK:
        return "symlink";
    default:
        return "unknown type";
    }
}

/* An open of path that failed with e: its code and "PATH: cannot open:
 * CAUSE" in err. */
static int open_failed(const char *path, int e, char *err, size_t errlen)
{
    /* EMFILE is the process's limit, not the file's fault: say which
     * limit, so the cure (ulimit -n, fewer reads in flight) is plain */
    char lim[96] = "";
    struct rlimit r;
    if (e == EMFILE && getrlimit(RLIMIT_NOFILE, &r) == 0)
        snprintf(lim, sizeof lim,
                 " (the open-files limit, ulimit -n, is %llu; fewer "
                 "read threads or a higher limit)",
                 (unsigned long long)r.rlim_cur);
    return sl__fail(err, errlen,
                    e == ENOENT || e == ENOTDIR ? SL_ENOTFOUND
                                                : sl__errno_code(e, SL_EIO),
                    "%s: cannot open: %s%s", path, strerror(e), lim);
}

int sl__open_regular(const char *path, int64_t *size, char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO (or a device) returns at once instead of
     * waiting for a writer; it changes nothing for a regular file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return open_failed(path, errno, err, errlen);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sl__fail(err, errlen, sl__errno_code(e, SL_EIO), "%s: %s", path,
                        strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sl__fail(err, errlen, SL_EIO, "%s: not a regular file (%s)",
                        path, sl__file_type_name((unsigned)st.st_mode));
    }
    if (size)
        *size = (int64_t)st.st_size;
    return fd;
}

int sl__read_small_file(const char *path, size_t max, char **text, size_t *n,
                        char *err, size_t errlen)
{
    int64_t size;
    int fd = sl__open_regular(path, &size, err, errlen);
    if (fd < 0)
        return fd;
    if ((uint64_t)size > max) {
        close(fd);
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "%s: %lld bytes, more than the %zu allowed", path,
                        (long long)size, max);
    }
    char *p = malloc((size_t)size + 1);
    if (!p) {
        close(fd);
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < (size_t)size) {
        ssize_t k = read(fd, p + got, (size_t)size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : 0;
            close(fd);
            free(p);
            return sl__fail(err, errlen, e ? sl__errno_code(e, SL_EIO) : SL_EIO,
                            "%s: read failed: %s", path,
                            e ? strerror(e) : "the file shrank while read");
        }
        got += (size_t)k;
    }
    close(fd);
    p[got] = 0;
    *text = p;
    *n = got;
    return 0;
}

/* A pipe's bytes into *p (grown), up to max, waiting at most timeout_ms
 * in all for them: the descriptor is non-blocking, so a writer that holds
 * the pipe open and writes nothing is a failure, not a hang. */
static int read_pipe(int fd, const char *path, size_t max, int timeout_ms,
                     sl__bytes_t *b, char *err, size_t errlen)
{
    int64_t end = sl__now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        if (b->n > max)
            return sl__fail(err, errlen, SL_EUNSUPPORTED,
                            "%s: more than the %zu bytes allowed", path, max);
        if (sl__bytes_reserve(b, b->n + 4096))
            return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
        ssize_t k = read(fd, b->p + b->n, b->cap - b->n - 1);
        if (k > 0) {
            b->n += (size_t)k;
            continue;
        }
        if (k == 0) /* the writers closed it, or a FIFO had none */
            return 0;
        int e = errno;
        if (e == EINTR)
            continue;
        int64_t left = (end - sl__now_ns()) / 1000000;
        if (e != EAGAIN)
            return sl__fail(err, errlen, sl__errno_code(e, SL_EIO),
                            "%s: read failed: %s", path, strerror(e));
        if (left <= 0 && b->n == 0)
            return sl__fail(err, errlen, SL_EIO,
                            "%s: a pipe whose writer sent nothing for %.1f s",
                            path, timeout_ms / 1000.0);
        if (left <= 0) /* its end is what says the bytes are whole */
            return sl__fail(err, errlen, SL_EIO,
                            "%s: a pipe whose writer sent %zu bytes and did "
                            "not close it within %.1f s",
                            path, b->n, timeout_ms / 1000.0);
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        poll(&pf, 1, (int)left);
    }
}

int sl__read_small_input(const char *path, size_t max, int timeout_ms,
                         char **text, size_t *n, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO's open does not wait for a writer, and one with
     * none reads as empty at once. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return open_failed(path, errno, err, errlen);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = sl__fail(err, errlen, sl__errno_code(errno, SL_EIO), "%s: %s",
                      path, strerror(errno));
    else if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
        rc = sl__fail(err, errlen, SL_EIO,
                      "%s: not a regular file or a pipe (%s)", path,
                      sl__file_type_name((unsigned)st.st_mode));
    if (rc || S_ISREG(st.st_mode)) {
        close(fd);
        return rc ? rc : sl__read_small_file(path, max, text, n, err, errlen);
    }
    sl__bytes_t b = {0};
    rc = read_pipe(fd, path, max, timeout_ms, &b, err, errlen);
    close(fd);
    if (rc) {
        sl__bytes_free(&b);
        return rc;
    }
    if (sl__bytes_reserve(&b, b.n + 1)) {
        sl__bytes_free(&b);
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
    }
    b.p[b.n] = 0;
    *text = (char *)b.p;
    *n = b.n;
    return 0;
}

int sl__write_file_whole(const char *path, const void *p, size_t n, char *err,
                         size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return sl__fail(err, errlen, SL_EIO,
                        "%s: not a regular file (%s), left as it is", path,
                        sl__file_type_name((unsigned)st.st_mode));
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp-%ld", path, (long)getpid()) < 0)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
    int e = 0;
    const char *what = NULL; /* an open that failed: "PATH: cause" */
    int fd =
        open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0)
        e = errno;
    for (size_t done = 0; !e && done < n;) {
        ssize_t w = write(fd, (const char *)p + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            e = errno;
        else
            done += (size_t)w;
        what = "write failed";
    }
    if (!e && fsync(fd))
        e = errno, what = "write failed";
    if (fd >= 0 && close(fd) && !e)
        e = errno, what = "write failed";
    if (!e && rename(tmp, path))
        e = errno, what = "cannot rename the temp file over it";
    if (e && fd >= 0)
        unlink(tmp);
    free(tmp);
    if (e)
        return sl__fail(err, errlen, sl__errno_code(e, SL_EIO), "%s: %s%s%s",
                        path, what ? what : "", what ? ": " : "", strerror(e));
    return 0;
}

int sl__read_line(FILE *f, size_t max, char **buf, size_t *cap, size_t *len)
{
    size_t n = 0;
    int c, over = 0, any = 0;
    if (!*cap) { /* an empty first line still needs its terminator */
        char *nb = realloc(*buf, 4096);
        if (!nb)
            return SL_ENOMEM;
        *buf = nb;
        *cap = 4096;
    }
    while ((c = getc(f)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (n >= max)
            over = 1; /* the rest of the line is read and dropped */
        if (over)
            continue;
        if (n + 1 >= *cap) {
            size_t nc = *cap * 2;
            char *nb = realloc(*buf, nc);
            if (!nb)
                return SL_ENOMEM;
            *buf = nb;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (ferror(f))
        return SL_EIO;
    if (!any)
        return SL__LINE_EOF;
    if (over)
        return SL__LINE_LONG;
    (*buf)[n] = 0;
    *len = n;
    return 0;
}
