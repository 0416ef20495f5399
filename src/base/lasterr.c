#include "base/lasterr.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local struct {
    const void *owner;
    char msg[SL_LASTERR_LEN];
} tl;

int sl__lasterr_set(const void *owner, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl.msg, sizeof tl.msg, fmt, ap);
    va_end(ap);
    tl.owner = owner;
    return code;
}

const char *sl__lasterr_get(const void *owner)
{
    return tl.owner == owner ? tl.msg : "";
}

char *sl__lasterr_buf(size_t *len)
{
    *len = sizeof tl.msg;
    return tl.msg;
}

void sl__lasterr_own(const void *owner)
{
    tl.owner = owner;
}

void sl__lasterr_forget(const void *owner)
{
    if (tl.owner == owner) {
        tl.owner = NULL;
        tl.msg[0] = 0;
    }
}
