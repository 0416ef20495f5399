/* telemetry/scrape: reaching a running job's metrics endpoint from another
 * process (`sluice top`): a URL's parts, one HTTP/1.0 GET with bounded time
 * and bytes, and the TCP ports a process listens on (attach by pid). The
 * reply and /proc/PID/net/tcp are outside bytes: their parsers take text,
 * so tests feed them fixtures and fuzz/fuzz_top.c feeds them anything.
 * Depends on base only. */
#ifndef SL_SCRAPE_H
#define SL_SCRAPE_H

#include <stddef.h>

#define SL__SCRAPE_MAX (1 << 20) /* bytes of a reply we read at most */

typedef struct sl__url {
    char host[256];
    int port;
    char path[512];
} sl__url_t;

/** "http://HOST[:PORT][/PATH]" (PORT 80 by default; PATH "/metrics" when
 *  absent or "/"). HOST may be a name, an IPv4 address or [IPv6]. @return 0,
 *  or SL_EINVAL with the cause in err. */
int sl__url_parse(const char *url, sl__url_t *out, char *err, size_t errlen);

/** An HTTP reply's status and where its body starts. @return 0, or
 *  SL_ECORRUPT when the bytes are not "HTTP/1.x NNN ...", headers and a
 *  blank line. */
int sl__http_reply_parse(const char *buf, size_t len, int *status,
                         size_t *body_off, char *err, size_t errlen);

/** GETs u->path from u->host:u->port within timeout_ms (connect, send and
 *  receive together) and at most SL__SCRAPE_MAX bytes. On 200: 0, *body
 *  (malloc'd, NUL-terminated; the caller frees it) and *blen. Otherwise:
 *  SL_EEND when nothing listens there (connection refused) or the server
 *  says it has no loader any more (503): the job has ended or not begun;
 *  SL_IO for a timeout, another network error, another status or a reply
 *  too long; SL_ECORRUPT for a reply that is not HTTP. err says which. */
int sl__http_get(const sl__url_t *u, int timeout_ms, char **body, size_t *blen,
                 char *err, size_t errlen);

/** Listening TCP sockets of a /proc/net/tcp or tcp6 text: fills up to max
 *  (port, socket inode) pairs of the lines in state 0A (LISTEN).
 *  @return how many, or SL_ECORRUPT for a line that is not such a row. */
int sl__parse_net_tcp(const char *text, size_t len, int *ports,
                      unsigned long *inodes, int max);

/** The TCP ports process `pid` listens on (its sockets, /proc/PID/fd,
 *  matched with /proc/PID/net/tcp and tcp6), up to max, lowest first.
 *  @return how many (0: none), or SL_ENOTFOUND (no such process) /
 *  SL_EIO (its descriptors cannot be read: another user's) with err. */
int sl__pid_listen_ports(int pid, int *ports, int max, char *err,
                         size_t errlen);

#endif
