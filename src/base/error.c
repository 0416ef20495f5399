#include <errno.h>

#include "base/base.h"

const char *sl_strerror(int code)
{
    switch (code) {
    case SL_OK:
        return "success";
#define SL__ERRNO_CASE(name, num, msg)                                         \
    case SL_E##name:                                                           \
        return msg;
        SL_ERRNO_MAP(SL__ERRNO_CASE)
#undef SL__ERRNO_CASE
    }
    return "unknown error";
}

int sl__errno_code(int e, int data_code)
{
    switch (e) {
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
    case EIO:
        return SL_ESYSTEM;
    }
    return data_code;
}

int sl__err_is_data(int rc)
{
    return rc != SL_ESYSTEM;
}

unsigned sl_version(void)
{
    return SL_VERSION_NUMBER;
}

const char *sl_version_string(void)
{
#define SL__STR2(x) #x
#define SL__STR(x) SL__STR2(x)
    return SL__STR(SL_VERSION_MAJOR) "." SL__STR(SL_VERSION_MINOR) "." SL__STR(
        SL_VERSION_PATCH);
}
