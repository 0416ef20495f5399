#include "scrape.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"

int sl__url_parse(const char *url, sl__url_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->port = 80;
    if (strncmp(url, "http://", 7))
        return sl__fail(err, errlen, SL_EINVAL,
                        "%s: not an http:// URL (https is not spoken)", url);
    const char *h = url + 7, *hend;
    if (*h == '[') { /* [IPv6] */
        hend = strchr(h, ']');
        if (!hend)
            return sl__fail(err, errlen, SL_EINVAL, "%s: no ']'", url);
        h++;
    } else {
        hend = h + strcspn(h, ":/");
    }
    size_t hn = (size_t)(hend - h);
    if (hn == 0 || hn >= sizeof out->host)
        return sl__fail(err, errlen, SL_EINVAL, "%s: bad host", url);
    memcpy(out->host, h, hn);
    for (size_t i = 0; i < hn; i++) {
        char c = out->host[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr(".-_:%", c)) ||
            (c == ':' && *hend != ']'))
            return sl__fail(err, errlen, SL_EINVAL, "%s: bad host", url);
    }
    const char *p = hend + (*hend == ']');
    if (*p == ':') {
        char *e;
        long port = strtol(p + 1, &e, 10);
        if (e == p + 1 || port < 1 || port > 65535 || (*e && *e != '/'))
            return sl__fail(err, errlen, SL_EINVAL, "%s: bad port", url);
        out->port = (int)port;
        p = e;
    }
    if (*p && *p != '/')
        return sl__fail(err, errlen, SL_EINVAL, "%s: bad host", url);
    const char *path = *p && strcmp(p, "/") ? p : "/metrics";
    if (strlen(path) >= sizeof out->path || strpbrk(path, " \r\n"))
        return sl__fail(err, errlen, SL_EINVAL, "%s: bad path", url);
    strcpy(out->path, path);
    return 0;
}

int sl__http_reply_parse(const char *buf, size_t len, int *status,
                         size_t *body_off, char *err, size_t errlen)
{
    /* "HTTP/1.x NNN" */
    if (len < 12 || memcmp(buf, "HTTP/1.", 7) || buf[8] != ' ')
        return sl__fail(err, errlen, SL_ECORRUPT, "not an HTTP reply");
    int st = 0;
    for (int i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "HTTP reply without a status");
        st = st * 10 + (buf[i] - '0');
    }
    /* The headers end at the first empty line (CRLF CRLF, or bare LFs). */
    for (size_t i = 12; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < len && buf[i + 1] == '\n') {
            *body_off = i + 2;
            *status = st;
            return 0;
        }
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
            *body_off = i + 3;
            *status = st;
            return 0;
        }
    }
    return sl__fail(err, errlen, SL_ECORRUPT, "HTTP reply without a body");
}

static int ms_left(int64_t deadline)
{
    int64_t left = (deadline - sl__now_ns()) / 1000000;
    return left < 0 ? 0 : (int)left;
}

/* Connects to one address before the deadline: the socket, or -1 with
 * *e the errno (ETIMEDOUT at the deadline). */
static int connect_by(const struct addrinfo *a, int64_t deadline, int *e)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *e = errno;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
        return fd;
    if (errno != EINPROGRESS) {
        *e = errno;
        close(fd);
        return -1;
    }
    struct pollfd p = {fd, POLLOUT, 0};
    int r;
    while ((r = poll(&p, 1, ms_left(deadline))) < 0 && errno == EINTR)
        ;
    int so = 0;
    socklen_t sl = sizeof so;
    if (r == 0)
        so = ETIMEDOUT;
    else if (r < 0)
        so = errno;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl))
        so = errno;
    if (so) {
        *e = so;
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads to EOF (an HTTP/1.0 server closes after the reply). */
static int read_all(int fd, int64_t deadline, char **out, size_t *n, char *err,
                    size_t errlen)
{
    size_t cap = 16384, len = 0;
    char *b = malloc(cap + 1);
    if (!b)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(b);
            return sl__fail(err, errlen, SL_EIO, "no complete reply in time");
        }
        if (len == cap) {
            if (cap >= SL__SCRAPE_MAX) {
                free(b);
                return sl__fail(err, errlen, SL_EIO,
                                "reply longer than %d bytes", SL__SCRAPE_MAX);
            }
            cap *= 2;
            char *nb = realloc(b, cap + 1);
            if (!nb) {
                free(b);
                return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            }
            b = nb;
        }
        ssize_t got = read(fd, b + len, cap - len);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got < 0) {
            int e = errno;
            free(b);
            return sl__fail(err, errlen, e == ECONNRESET ? SL_EEND : SL_EIO,
                            "read: %s", strerror(e));
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    b[len] = 0;
    *out = b;
    *n = len;
    return 0;
}

static int send_all(int fd, const char *s, size_t n, int64_t deadline)
{
    while (n) {
        struct pollfd p = {fd, POLLOUT, 0};
        int r = poll(&p, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (w < 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int sl__http_get(const sl__url_t *u, int timeout_ms, char **body, size_t *blen,
                 char *err, size_t errlen)
{
    *body = NULL;
    *blen = 0;
    int64_t deadline = sl__now_ns() + (int64_t)timeout_ms * 1000000;
    char port[16];
    snprintf(port, sizeof port, "%d", u->port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(u->host, port, &hints, &res);
    if (g)
        return sl__fail(err, errlen, SL_EIO, "%s: %s", u->host,
                        gai_strerror(g));
    int fd = -1, e = 0;
    for (const struct addrinfo *a = res; a && fd < 0; a = a->ai_next)
        fd = connect_by(a, deadline, &e);
    freeaddrinfo(res);
    if (fd < 0)
        return sl__fail(err, errlen, e == ECONNREFUSED ? SL_EEND : SL_EIO,
                        "%s:%d: %s", u->host, u->port, strerror(e));
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.0\r\nHost: %s:%d\r\n"
                     "User-Agent: sluice-top\r\nAccept: text/plain\r\n\r\n",
                     u->path, u->host, u->port);
    char *raw = NULL;
    size_t rawn = 0;
    int rc = 0;
    if (n < 0 || (size_t)n >= sizeof req ||
        send_all(fd, req, (size_t)n, deadline))
        rc = sl__fail(err, errlen, SL_EIO, "%s:%d: request not sent", u->host,
                      u->port);
    else
        rc = read_all(fd, deadline, &raw, &rawn, err, errlen);
    close(fd);
    if (rc)
        return rc;
    int status = 0;
    size_t off = 0;
    if ((rc = sl__http_reply_parse(raw, rawn, &status, &off, err, errlen))) {
        free(raw);
        return rc;
    }
    if (status != 200) {
        free(raw);
        return sl__fail(err, errlen, status == 503 ? SL_EEND : SL_EIO,
                        "http://%s:%d%s: HTTP status %d", u->host, u->port,
                        u->path, status);
    }
    memmove(raw, raw + off, rawn - off + 1); /* with the NUL */
    *body = raw;
    *blen = rawn - off;
    return 0;
}
