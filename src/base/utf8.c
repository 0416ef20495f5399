/* base/utf8: strict UTF-8 validation and repair (utf8.h). */
#include "base/utf8.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (1..4), or 0 with *bad set to the
 * length of its maximal invalid subpart (>= 1), per Unicode's "U+FFFD
 * substitution of maximal subparts", which CPython's decoder follows. */
static size_t utf8_seq(const uint8_t *p, size_t n, size_t *bad)
{
    uint8_t b = p[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf;
    if (b < 0x80)
        return 1;
    if (b >= 0xc2 && b <= 0xdf)
        need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
        need = 2;
        if (b == 0xe0)
            lo = 0xa0;
        else if (b == 0xed)
            hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 3;
        if (b == 0xf0)
            lo = 0x90;
        else if (b == 0xf4)
            hi = 0x8f;
    } else {
        *bad = 1;
        return 0;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n || p[i] < lo || p[i] > hi) {
            *bad = i;
            return 0;
        }
        lo = 0x80;
        hi = 0xbf;
    }
    return need + 1;
}

size_t sl__utf8_valid_prefix(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII runs, 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        size_t bad, k = utf8_seq(p + i, n - i, &bad);
        if (!k)
            return i;
        i += k;
    }
    return n;
}

int sl__utf8_repair(const uint8_t *p, size_t n, sl__bytes_t *out)
{
    out->n = 0;
    /* worst case: each byte -> 3 bytes of U+FFFD */
    if (n > SIZE_MAX / 3 || sl__bytes_reserve(out, n * 3 + 1))
        return SL_ENOMEM;
    uint8_t *o = out->p;
    size_t i = 0;
    while (i < n) {
        size_t bad, k = utf8_seq(p + i, n - i, &bad);
        if (k) {
            memcpy(o, p + i, k);
            o += k;
            i += k;
        } else {
            *o++ = 0xef;
            *o++ = 0xbf;
            *o++ = 0xbd;
            i += bad;
        }
    }
    out->n = (size_t)(o - out->p);
    return 0;
}

size_t sl__utf8_settled(const uint8_t *p, size_t n)
{
    /* the last byte that is not a continuation byte, in the last four */
    size_t i = n, stop = n > 4 ? n - 4 : 0;
    while (i > stop && (p[i - 1] & 0xc0) == 0x80)
        i--;
    if (i == stop && (i == 0 || (p[i - 1] & 0xc0) == 0x80))
        return n; /* no lead byte: each of them is decided alone */
    size_t lead = i - 1, bad;
    if (p[lead] < 0xc0)
        return n; /* ASCII: nothing after it is pending */
    /* a sequence that ran out of bytes, valid so far: more could finish
     * it; any other (complete, or invalid inside n) is decided */
    if (!utf8_seq(p + lead, n - lead, &bad) && lead + bad == n)
        return lead;
    return n;
}

size_t sl__utf8_raw_offset(const uint8_t *p, size_t n, size_t r)
{
    size_t i = 0, o = 0;
    while (i < n && o < r) {
        size_t bad, k = utf8_seq(p + i, n - i, &bad);
        i += k ? k : bad;
        o += k ? k : 3; /* U+FFFD */
    }
    return i;
}
