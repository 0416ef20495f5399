/* Built without liburing (SL_URING=OFF): no ring can be made, so the
 * loader keeps its thread-per-read path. See exec/uring.h. */
#include "exec/uring.h"

#include "base/base.h"

int sl__uring_probe(const char **why)
{
    if (why)
        *why = "built without liburing";
    return 0;
}

int sl__uring_open(sl__uring_t **out, unsigned entries, char *err,
                   size_t errlen)
{
    (void)entries;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED,
                    "sluice was built without liburing (io_uring)");
}

void sl__uring_close(sl__uring_t *u)
{
    (void)u;
}

int sl__uring_read(sl__uring_t *u, int fd, void *buf, size_t len, uint64_t off,
                   void *user)
{
    (void)u, (void)fd, (void)buf, (void)len, (void)off, (void)user;
    return 1;
}

int sl__uring_submit(sl__uring_t *u)
{
    (void)u;
    return -1;
}

int sl__uring_complete(sl__uring_t *u, void **user, int64_t *res,
                       int64_t timeout_ns)
{
    (void)u, (void)user, (void)res, (void)timeout_ns;
    return 0;
}
