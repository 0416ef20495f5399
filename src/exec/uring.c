/* io_uring through liburing: see uring.h. */
#include "exec/uring.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

struct sl__uring {
    struct io_uring ring;
};

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_ok;
static char probe_why[128];

static void probe(void)
{
    struct io_uring r;
    int rc = io_uring_queue_init(4, &r, 0);
    if (rc < 0) {
        snprintf(probe_why, sizeof probe_why, "io_uring_queue_init: %s",
                 strerror(-rc));
        return;
    }
    /* IORING_OP_READ came with Linux 5.6: an older ring would fail every
     * read. */
    struct io_uring_probe *p = io_uring_get_probe_ring(&r);
    probe_ok = p && io_uring_opcode_supported(p, IORING_OP_READ);
    if (!probe_ok)
        snprintf(probe_why, sizeof probe_why,
                 "io_uring without IORING_OP_READ (Linux < 5.6)");
    if (p)
        io_uring_free_probe(p);
    /* A filter may allow the ring but refuse io_uring_enter (seccomp):
     * one no-op there and back, or no ring. */
    if (probe_ok) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&r);
        io_uring_prep_nop(sqe);
        struct io_uring_cqe *cqe = NULL;
        struct __kernel_timespec ts = {1, 0};
        rc = io_uring_submit(&r);
        if (rc >= 0)
            rc = io_uring_wait_cqe_timeout(&r, &cqe, &ts);
        if (rc < 0 || !cqe) {
            probe_ok = 0;
            snprintf(probe_why, sizeof probe_why, "io_uring_enter: %s",
                     rc < 0 ? strerror(-rc) : "no completion");
        }
    }
    io_uring_queue_exit(&r);
}

int sl__uring_probe(const char **why)
{
    pthread_once(&probe_once, probe);
    if (why)
        *why = probe_ok ? "" : probe_why;
    return probe_ok;
}

int sl__uring_open(sl__uring_t **out, unsigned entries, char *err,
                   size_t errlen)
{
    *out = NULL;
    sl__uring_t *u = calloc(1, sizeof *u);
    if (!u)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int rc = io_uring_queue_init(entries, &u->ring, 0);
    if (rc < 0) {
        free(u);
        return sl__fail(err, errlen,
                        rc == -ENOMEM ? SL_ENOMEM : SL_EUNSUPPORTED,
                        "io_uring_queue_init: %s", strerror(-rc));
    }
    *out = u;
    return 0;
}

void sl__uring_close(sl__uring_t *u)
{
    if (!u)
        return;
    io_uring_queue_exit(&u->ring);
    free(u);
}

int sl__uring_read(sl__uring_t *u, int fd, void *buf, size_t len, uint64_t off,
                   void *user)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe)
        return 1;
    io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
    io_uring_sqe_set_data(sqe, user);
    return 0;
}

int sl__uring_submit(sl__uring_t *u)
{
    int rc;
    do
        rc = io_uring_submit(&u->ring);
    while (rc == -EINTR);
    if (rc >= 0)
        return 0;
    return rc == -EAGAIN || rc == -EBUSY ? 1 : rc;
}

int sl__uring_complete(sl__uring_t *u, void **user, int64_t *res,
                       int64_t timeout_ns)
{
    struct io_uring_cqe *cqe = NULL;
    int rc;
    if (timeout_ns == 0) {
        rc = io_uring_peek_cqe(&u->ring, &cqe);
    } else if (timeout_ns < 0) {
        do
            rc = io_uring_wait_cqe(&u->ring, &cqe);
        while (rc == -EINTR);
    } else {
        struct __kernel_timespec ts = {timeout_ns / 1000000000,
                                       timeout_ns % 1000000000};
        rc = io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
    }
    if (rc < 0 || !cqe)
        return 0;
    *user = io_uring_cqe_get_data(cqe);
    *res = cqe->res;
    io_uring_cqe_seen(&u->ring, cqe);
    return 1;
}
