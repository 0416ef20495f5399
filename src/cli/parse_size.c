/* sl__parse_size: "4096", "64K", "256M", "1G", "2T" (binary units; an
 * optional trailing "B" or "iB" is accepted: "256MB", "256MiB"). */
#include <ctype.h>
#include <limits.h>

#include "cli.h"

long long sl__parse_size(const char *s)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    long long v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        int d = *s - '0';
        if (v > (LLONG_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    int shift = 0;
    switch (toupper((unsigned char)*s)) {
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    }
    if (shift) {
        s++;
        if (*s == 'i')
            s++;
    }
    if (toupper((unsigned char)*s) == 'B')
        s++;
    if (*s)
        return -1;
    if (v > (LLONG_MAX >> shift))
        return -1;
    return v << shift;
}
