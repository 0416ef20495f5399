/* base/lasterr: the message behind sl_X_last_error(h), kept per thread.
 *
 * Like errno, the last failure is the calling thread's own: a public call
 * that fails stores its message with the handle it failed on, and
 * sl_X_last_error(h) on the same thread reads it back. Failures on other
 * threads (the scheduler's refused knob steps on the telemetry thread, a
 * second user thread) never overwrite it, and there is nothing to lock. */
#ifndef SL_LASTERR_H
#define SL_LASTERR_H

#include <stddef.h>

#define SL_LASTERR_LEN 1024

/* Stores the calling thread's last failure: `owner` (the handle, or for
 * a failed create a tag of that kind of handle's own, so one kind's
 * sl_X_last_error(NULL) never reads another kind's) and the message.
 * Returns code. */
int sl__lasterr_set(const void *owner, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The calling thread's last message for `owner`; "" when its last failure
 * was on another owner, or none. Never NULL. */
const char *sl__lasterr_get(const void *owner);

/* A destroyed handle's message goes (the calling thread's), so a new
 * handle at the same address starts with none. */
void sl__lasterr_forget(const void *owner);

/* The calling thread's message buffer, for code that writes messages with
 * sl__fail(err, errlen, ...); sl__lasterr_own(owner) then claims it. */
char *sl__lasterr_buf(size_t *len);
void sl__lasterr_own(const void *owner);

#endif
