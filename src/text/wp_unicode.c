/* text/wp_unicode: see wp_unicode.h. */
#include <utf8proc.h>

#include "text/wp_unicode.h"
#include "text/wp_unicode_compat.h"

#define NRANGES(t) (sizeof(t) / sizeof(t[0]))

/* Index of the row of t[0..n) holding c, or -1 (t sorted, disjoint): rows
 * are ranges [first, last], or with `point` single code points
 * {code point, value}. */
static long find_row(const uint32_t (*t)[2], size_t n, uint32_t c, int point)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < t[mid][0])
            hi = mid;
        else if (c > t[mid][point ? 0 : 1])
            lo = mid + 1;
        else
            return (long)mid;
    }
    return -1;
}
#define IN(t, c) (find_row(t, NRANGES(t), c, 0) >= 0)

static inline utf8proc_category_t cat(uint32_t c)
{
    return utf8proc_category((utf8proc_int32_t)c);
}

int sl__wpu_is_other(uint32_t c)
{
    switch (cat(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
        return (c != '\t' && c != '\n' && c != '\r') ^ IN(wpc_other_flip, c);
    default:
        return IN(wpc_other_flip, c);
    }
}

int sl__wpu_is_space(uint32_t c)
{
    /* White_Space: a short, stable list (utf8proc has no such property). */
    switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
        return 1;
    default:
        return c >= 0x2000 && c <= 0x200A;
    }
}

int sl__wpu_is_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

int sl__wpu_is_mn(uint32_t c)
{
    return (cat(c) == UTF8PROC_CATEGORY_MN) ^ IN(wpc_mn_flip, c);
}

int sl__wpu_is_punct(uint32_t c)
{
    utf8proc_category_t k = cat(c);
    return (k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO) ^
           IN(wpc_punct_flip, c);
}

uint32_t sl__wpu_lower(uint32_t c)
{
    /* wpc_lower: {code point, its lower case}, sorted by code point. */
    long i = find_row(wpc_lower, NRANGES(wpc_lower), c, 1);
    if (i >= 0)
        return wpc_lower[i][1];
    return (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
}

int sl__wpu_decomposes(uint32_t c)
{
    return !IN(wpc_nodecomp, c);
}

int sl__wpu_ccc(uint32_t c)
{
    int cc = utf8proc_get_property((utf8proc_int32_t)c)->combining_class;
    return cc && IN(wpc_starter, c) ? 0 : cc;
}
