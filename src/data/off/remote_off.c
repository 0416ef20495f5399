/* data/remote without libcurl (SL_CURL=OFF): the same calls, each failing
 * with "sluice was built without libcurl", so a URL source is refused with
 * a clear message and the rest of the library is unchanged. */
#include "data/remote.h"

#include <stdlib.h>
#include <string.h>

static int off(const char *url, char *err, size_t errlen)
{
    return sl__fail(err, errlen, SL_EUNSUPPORTED,
                    "%s: sluice was built without libcurl (remote sources: "
                    "configure with -DSL_CURL=ON and libcurl4-openssl-dev, "
                    "libxml2-dev)",
                    url);
}

int sl__remote_open(const char *url, sl__remote_t **out, uint64_t *size,
                    char *err, size_t errlen)
{
    *out = NULL;
    *size = 0;
    return off(url, err, errlen);
}

int sl__remote_read(sl__remote_t *r, uint64_t off_, void *buf, size_t len,
                    char *err, size_t errlen)
{
    (void)r;
    (void)off_;
    (void)buf;
    (void)len;
    return off("remote", err, errlen);
}

/* Nothing is requested without libcurl; the one message names the URL as
 * given. */
char *sl__remote_redact(const char *url)
{
    return strdup(url);
}

const char *sl__remote_given(const sl__remote_t *r)
{
    (void)r;
    return "";
}

const char *sl__remote_name(const sl__remote_t *r)
{
    (void)r;
    return "";
}

void sl__remote_stop_on(const atomic_int *flag)
{
    (void)flag;
}

void sl__remote_close(sl__remote_t *r)
{
    (void)r;
}

int sl__remote_get(const char *url, size_t max, sl__bytes_t *out, char *err,
                   size_t errlen)
{
    (void)max;
    (void)out;
    return off(url, err, errlen);
}

int sl__remote_list(const char *url, char ***names, int *n, char *err,
                    size_t errlen)
{
    *names = NULL;
    *n = 0;
    return off(url, err, errlen);
}

/* data/remote_multi: no engine; exec/aread reads URLs (none open) inline. */
#include "data/remote_multi.h"

int sl__rmulti_open(sl__rmulti_t **out, char *err, size_t errlen)
{
    *out = NULL;
    return off("remote reads", err, errlen);
}

void sl__rmulti_close(sl__rmulti_t *m)
{
    (void)m;
}

int sl__rmulti_read(sl__rmulti_t *m, sl__remote_t *r, uint64_t off_, void *buf,
                    size_t len, void *user, char *err, size_t errlen)
{
    (void)m;
    (void)r;
    (void)off_;
    (void)buf;
    (void)len;
    (void)user;
    return off("remote", err, errlen);
}

int sl__rmulti_readv(sl__rmulti_t *m, sl__remote_t *r, uint64_t off_,
                     const sl__rseg_t *seg, int nseg, int retries, void *user,
                     char *err, size_t errlen)
{
    (void)m;
    (void)r;
    (void)off_;
    (void)seg;
    (void)nseg;
    (void)retries;
    (void)user;
    return off("remote", err, errlen);
}

int sl__rmulti_pending(const sl__rmulti_t *m)
{
    (void)m;
    return 0;
}

int sl__rmulti_complete(sl__rmulti_t *m, void **user, int *rc,
                        int64_t timeout_ns)
{
    (void)m;
    (void)user;
    (void)rc;
    (void)timeout_ns;
    return 0;
}

void sl__rmulti_cancel(sl__rmulti_t *m)
{
    (void)m;
}
