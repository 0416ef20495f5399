#include "sluice/sluice.h"

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
