/* exec/uring: the one place that talks to io_uring (liburing), for the
 * asynchronous read path (exec/aread). A ring belongs to one thread.
 *
 * Optional (cmake/SluiceComponents.cmake, SL_URING): built without
 * liburing, off/uring_off.c stands in and every open fails with
 * SL_EUNSUPPORTED, so the loader keeps its thread-per-read path. A kernel
 * or a seccomp filter that refuses io_uring shows the same way at run
 * time: sl__uring_probe says which, once per process. Depends on base. */
#ifndef SL_URING_H
#define SL_URING_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__uring sl__uring_t;

/* Can this process use io_uring? 1, or 0 with the reason in why (a static
 * string: "built without liburing", "io_uring_queue_init: ..."). Tried
 * once (a ring made and closed), then remembered. Any thread. */
int sl__uring_probe(const char **why);

/* A ring for up to `entries` submissions at once (completions: twice as
 * many). @return 0, or SL_EUNSUPPORTED / SL_ENOMEM with the cause. */
int sl__uring_open(sl__uring_t **out, unsigned entries, char *err,
                   size_t errlen);
void sl__uring_close(sl__uring_t *u); /* NULL: nothing */

/* Queues a read of len bytes at off of fd into buf, tagged user.
 * @return 0, or 1 when the submission queue is full (submit first). */
int sl__uring_read(sl__uring_t *u, int fd, void *buf, size_t len, uint64_t off,
                   void *user);
/* Hands what was queued to the kernel. @return 0; 1 when the kernel is
 * busy for now (EAGAIN, EBUSY: try again after reaping); or -errno when
 * it refuses (a filter on io_uring_enter, ...): what was queued will never
 * be read by the ring. */
int sl__uring_submit(sl__uring_t *u);
/* One completion: 1 and *user, *res (bytes read or -errno); 0 when none
 * came within timeout_ns (0: do not wait; < 0: wait until one comes). */
int sl__uring_complete(sl__uring_t *u, void **user, int64_t *res,
                       int64_t timeout_ns);

#endif
