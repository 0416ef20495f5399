#include "sized.h"

#include <string.h>

#include "base/base.h"

void sl__sized_init(void *s, size_t ours)
{
    if (!s)
        return;
    memset(s, 0, ours);
    memcpy(s, &ours, sizeof ours);
}

int sl__sized_copy(void *dst, size_t ours, const void *src, const char *init_fn,
                   char *err, size_t errlen)
{
    size_t theirs = 0;
    if (src)
        memcpy(&theirs, src, sizeof theirs);
    if (theirs == 0)
        return sl__fail(err, errlen, SL_EINVAL, "options not initialised (%s)",
                        init_fn);
    memset(dst, 0, ours);
    memcpy(dst, src, theirs < ours ? theirs : ours);
    memcpy(dst, &ours, sizeof ours);
    return 0;
}
