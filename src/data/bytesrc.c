#include "bytesrc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "remote.h"
#include "remote_parse.h"

struct sl__bytesrc {
    char *name;
    uint64_t size;
    int fd;               /* -1 for memory and remote */
    const uint8_t *mem;   /* memory source */
    sl__remote_t *remote; /* a URL */
    uint8_t *win;         /* sl__bytesrc_sequential's read-ahead */
    uint64_t win_at;
    size_t win_n;
};

static int make(const char *name, sl__bytesrc_t **out, char *err, size_t errlen)
{
    sl__bytesrc_t *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(name))) {
        free(s);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    s->fd = -1;
    *out = s;
    return 0;
}

int sl__bytesrc_open_file(const char *path, sl__bytesrc_t **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    if (sl__remote_is_url(path)) {
        sl__remote_t *r;
        uint64_t rsize;
        int rc = sl__remote_open(path, &r, &rsize, err, errlen);
        if (rc)
            return rc;
        /* Named as printed: a URL's secrets are never in a message. */
        if ((rc = make(sl__remote_name(r), out, err, errlen))) {
            sl__remote_close(r);
            return rc;
        }
        (*out)->remote = r;
        (*out)->size = rsize;
        return 0;
    }
    int64_t size = 0;
    int fd = sl__open_regular(path, &size, err, errlen);
    if (fd < 0)
        return fd;
    int rc = make(path, out, err, errlen);
    if (rc) {
        close(fd);
        return rc;
    }
    (*out)->fd = fd;
    (*out)->size = (uint64_t)size;
    return 0;
}

int sl__bytesrc_open_mem(const void *p, size_t n, const char *name,
                         sl__bytesrc_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = make(name, out, err, errlen);
    if (!rc) {
        (*out)->mem = p;
        (*out)->size = n;
    }
    return rc;
}

void sl__bytesrc_close(sl__bytesrc_t *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    sl__remote_close(s->remote);
    free(s->win);
    free(s->name);
    free(s);
}

sl__remote_t *sl__bytesrc_remote(const sl__bytesrc_t *s)
{
    return s->remote;
}

int sl__bytesrc_is_remote(const sl__bytesrc_t *s)
{
    return s->remote != NULL;
}

int sl__bytesrc_sequential(sl__bytesrc_t *s, int on)
{
    free(s->win);
    s->win = NULL;
    s->win_n = 0;
    if (on && s->remote && !(s->win = malloc(SL__BYTESRC_AHEAD)))
        return SL_ENOMEM;
    return 0;
}

/* A remote read through the read-ahead window when it is on and the read
 * is small; else one request. */
static int remote_read(const sl__bytesrc_t *cs, uint64_t off, void *buf,
                       size_t len, char *err, size_t errlen)
{
    sl__bytesrc_t *s = (sl__bytesrc_t *)cs; /* the window is a cache */
    if (!s->win || len > SL__BYTESRC_AHEAD / 4)
        return sl__remote_read(s->remote, off, buf, len, err, errlen);
    if (!(off >= s->win_at && off + len <= s->win_at + s->win_n)) {
        uint64_t n = s->size - off < SL__BYTESRC_AHEAD ? s->size - off
                                                       : SL__BYTESRC_AHEAD;
        s->win_n = 0;
        int rc =
            sl__remote_read(s->remote, off, s->win, (size_t)n, err, errlen);
        if (rc)
            return rc;
        s->win_at = off;
        s->win_n = (size_t)n;
    }
    memcpy(buf, s->win + (off - s->win_at), len);
    return 0;
}

const char *sl__bytesrc_name(const sl__bytesrc_t *s)
{
    return s->name;
}

uint64_t sl__bytesrc_size(const sl__bytesrc_t *s)
{
    return s->size;
}

int sl__bytesrc_read(const sl__bytesrc_t *s, uint64_t off, void *buf,
                     size_t len, char *err, size_t errlen)
{
    if (off > s->size || len > s->size - off)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: truncated: %zu bytes wanted at offset %llu, the "
                        "file has %llu",
                        s->name, len, (unsigned long long)off,
                        (unsigned long long)s->size);
    if (s->remote)
        return remote_read(s, off, buf, len, err, errlen);
    if (s->fd < 0) {
        memcpy(buf, s->mem + off, len);
        return 0;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r =
            pread(s->fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return sl__fail(err, errlen, sl__errno_code(errno, SL_EIO),
                            "%s: read failed at offset %llu: %s", s->name,
                            (unsigned long long)(off + got), strerror(errno));
        if (r == 0)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: truncated: the file shrank to %llu bytes",
                            s->name, (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return 0;
}
