/* analysis/sized: the public API's caller-allocated structs whose first
 * field is `size_t size` (sluice/analysis.h). init zeroes the struct and
 * sets size; the library reads only min(size, its own size) bytes of a
 * caller's struct, so an older caller's smaller struct reads as its fields
 * plus defaults (zeroes) for the rest. If base/ gains the same helper for
 * the core API, this gives way to it. */
#ifndef SL_SIZED_H
#define SL_SIZED_H

#include <stddef.h>

/* Zeroes s (ours bytes) and sets its size field; NULL does nothing. */
void sl__sized_init(void *s, size_t ours);

/* dst (ours bytes) = zeroes overlaid with min(src's size, ours) bytes of
 * src, and dst's size = ours. SL_EINVAL when src is NULL or its size is 0
 * (never initialised: the message names init_fn). */
int sl__sized_copy(void *dst, size_t ours, const void *src, const char *init_fn,
                   char *err, size_t errlen);

#endif
