#include "base/abi.h"

#include <string.h>

#include "base/base.h"

void sl__abi_init(void *s, size_t size)
{
    if (!s)
        return;
    memset(s, 0, size);
    *(size_t *)s = size;
}

int sl__abi_in(void *dst, size_t dst_size, const void *src, size_t min_size,
               const char *what, char *err, size_t errlen)
{
    if (!src)
        return sl__fail(err, errlen, SL_EINVAL,
                        "no options: make them with %s_init()", what);
    size_t n = sl__abi_size(src);
    if (n < min_size)
        return sl__fail(err, errlen, SL_EINVAL,
                        "%s.size is %zu: initialise it with %s_init()", what, n,
                        what);
    if (n > dst_size)
        n = dst_size; /* a newer caller: its extra fields are unknown here */
    memcpy(dst, src, n);
    memset((char *)dst + n, 0, dst_size - n);
    *(size_t *)dst = dst_size;
    return 0;
}

int sl__abi_out(void *dst, const void *src, size_t src_size, size_t min_size)
{
    size_t n = sl__abi_size(dst);
    if (n < min_size)
        return SL_EINVAL;
    if (n > src_size)
        n = src_size;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
           n - sizeof(size_t));
    return 0;
}
