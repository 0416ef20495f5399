/* base/abi: caller-allocated public structs that can grow.
 *
 * Every such struct starts with `size_t size`. The library copies only
 * the bytes both sides know: a struct from an older header is read with
 * its missing tail zeroed (the defaults), and an output struct is written
 * only up to the caller's size. Fields are only ever added at the end.
 *
 * Not yet closed: sl_X_init is compiled into the library, so it sets and
 * zeroes the library's sizeof, not the caller's; a program built against
 * an older, smaller struct that calls a newer library's init has the
 * tail written past its struct. The cure is an init the header expands
 * with the caller's sizeof (sl_X_init(o) -> sl_X_init_sized(o, sizeof
 * *o), the old symbol kept for older programs); until then a program
 * that sets `size` itself (as tests/unit/test_abi.c does) is safe. */
#ifndef SL_ABI_H
#define SL_ABI_H

#include <stddef.h>

/* Zeroes a struct of `size` bytes and sets its leading size field; does
 * nothing when s is NULL (so an sl_X_init is this one call). */
void sl__abi_init(void *s, size_t size);

/* Copies the caller's input struct `src` into the library's `dst`
 * (dst_size bytes): min(src->size, dst_size) bytes, the rest zeroed, and
 * dst->size = dst_size. Returns 0, or SL_EINVAL with a message naming
 * `what` when src is NULL or src->size is below `min_size` (0: never
 * initialised). */
int sl__abi_in(void *dst, size_t dst_size, const void *src, size_t min_size,
               const char *what, char *err, size_t errlen);

/* Copies the library's `src` (src_size bytes) into the caller's output
 * struct `dst`: min(dst->size, src_size) bytes, keeping dst->size.
 * Returns 0, or SL_EINVAL when dst->size is below `min_size`. */
int sl__abi_out(void *dst, const void *src, size_t src_size, size_t min_size);

/* The size field of a caller's struct. */
static inline size_t sl__abi_size(const void *s)
{
    return *(const size_t *)s;
}

#endif
