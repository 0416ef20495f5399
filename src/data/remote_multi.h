/* data/remote_multi: ranged reads of data/remote objects, many in flight
 * from one thread, through libcurl's multi interface (exec/aread drives it
 * as it drives an io_uring). Each read follows exactly the blocking path's
 * rules (data/remote_req: the same setup, timeouts and stall limit, the
 * same retries with the same backoff, the same final message naming the
 * URL); a retry waits on the engine's clock, not on a sleeping thread.
 * Connections are kept in the engine's pool and reused across reads.
 *
 * An engine belongs to one thread (the objects read, sl__remote_t, may be
 * shared: they are only read). Optional with SL_CURL: without libcurl,
 * data/off/remote_multi_off.c refuses every open. Depends on base,
 * data/remote. */
#ifndef SL_REMOTE_MULTI_H
#define SL_REMOTE_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "data/remote.h"

typedef struct sl__rmulti sl__rmulti_t;

/* @return 0, or SL_EUNSUPPORTED (no libcurl) / SL_ENOMEM / SL_ESYSTEM with
 * the cause. */
int sl__rmulti_open(sl__rmulti_t **out, char *err, size_t errlen);
/* Whatever is still in flight is abandoned (its buffers no longer
 * written). NULL: nothing. */
void sl__rmulti_close(sl__rmulti_t *m);

/* Starts reading exactly len (> 0) bytes at off of r into buf, tagged
 * user; its failure's message (as sl__remote_read's) will go to
 * err[errlen], which must outlive the read. @return 0, or SL_ENOMEM (the
 * read was not started). */
int sl__rmulti_read(sl__rmulti_t *m, sl__remote_t *r, uint64_t off, void *buf,
                    size_t len, void *user, char *err, size_t errlen);
/* The same for the range [off, off + the pieces' lengths) scattered over
 * seg[0..nseg) in order (a piece with buf NULL is received and dropped),
 * retried at most `retries` times (< 0: as a single read; more than the
 * single read's retries: those). A retried attempt starts again from the
 * first piece. seg must outlive the read. */
int sl__rmulti_readv(sl__rmulti_t *m, sl__remote_t *r, uint64_t off,
                     const sl__rseg_t *seg, int nseg, int retries, void *user,
                     char *err, size_t errlen);
/* Reads started and not yet handed back. */
int sl__rmulti_pending(const sl__rmulti_t *m);
/* Runs the transfers until one read is over or timeout_ns has passed
 * (0: do not wait). @return 1 with *user and *rc (0, or the SL_E* code
 * with the message in the read's err), or 0. */
int sl__rmulti_complete(sl__rmulti_t *m, void **user, int *rc,
                        int64_t timeout_ns);
/* Ends every read in flight now: each is handed back by complete with
 * SL_EIO ("stopped"); its buffer is no longer written. */
void sl__rmulti_cancel(sl__rmulti_t *m);

#endif
