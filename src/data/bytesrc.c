#include "bytesrc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

struct sl__bytesrc {
    char *name;
    uint64_t size;
    int fd;             /* -1 for memory */
    const uint8_t *mem; /* memory source */
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
    free(s->name);
    free(s);
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
