/* base/abi: caller-allocated public structs that can grow.
 *
 * Every such struct starts with `size_t size`. The library copies only
 * the bytes both sides know: a struct from an older header is read with
 * its missing tail zeroed (the defaults), and an output struct is written
 * only up to the caller's size. Fields are only ever added at the end.
 *
 * The size is the caller's: the header's sl_X_init(o) is a macro for
 * sl_X_init_sized(o, sizeof *o), so an init never writes past the struct
 * the caller was compiled with (an init compiled into the library would
 * zero the library's sizeof: past an older program's struct). The plain
 * sl_X_init symbol stays, for programs built before the macro (those get
 * the library's size, as they always did). SL__ABI_INIT_PAIR defines
 * both. */
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

/* Defines sl_X_init_sized(s, size) (zeroes the caller's `size` bytes and
 * sets s->size; NULL does nothing) and the plain sl_X_init symbol (the
 * library's sizeof) for struct `type`, declared in the public header with
 * its macro. */
#define SL__ABI_INIT_PAIR(name, type)                                          \
    void name##_sized(type *s, size_t size)                                    \
    {                                                                          \
        sl__abi_init(s, size);                                                 \
    }                                                                          \
    void(name)(type * s)                                                       \
    {                                                                          \
        name##_sized(s, sizeof *s);                                            \
    }

/* The size field of a caller's struct. */
static inline size_t sl__abi_size(const void *s)
{
    return *(const size_t *)s;
}

#endif
