/* base/msgesc: outside names made safe to print (base.h). */
#include "base.h"

#include <stdlib.h>
#include <string.h>

static const char hex[] = "0123456789abcdef";

static int is_ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

void sl__msg_escape(char *buf, size_t len)
{
    if (!buf || !len)
        return;
    size_t n = strlen(buf), extra = 0;
    for (size_t i = 0; i < n; i++)
        extra += is_ctl((unsigned char)buf[i]) ? 3 : 0;
    if (!extra)
        return;
    /* in: the input bytes that fit once escaped, out: their length. */
    size_t in = 0, out = 0;
    for (; in < n; in++) {
        size_t w = is_ctl((unsigned char)buf[in]) ? 4 : 1;
        if (out + w > len - 1)
            break;
        out += w;
    }
    buf[out] = 0;
    /* Back to front: what is left to write (o bytes) never ends before
     * what is left to read (in bytes), so no byte is overwritten unread. */
    size_t o = out;
    while (in > 0) {
        unsigned char c = (unsigned char)buf[--in];
        if (is_ctl(c)) {
            o -= 4;
            buf[o] = '\\';
            buf[o + 1] = 'x';
            buf[o + 2] = hex[c >> 4];
            buf[o + 3] = hex[c & 15];
        } else {
            buf[--o] = (char)c;
        }
    }
}

char *sl__msg_escape_dup(const char *s)
{
    size_t n = strlen(s), cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += is_ctl((unsigned char)s[i]) ? 4 : 1;
    char *p = malloc(cap);
    if (!p)
        return NULL;
    memcpy(p, s, n + 1);
    sl__msg_escape(p, cap);
    return p;
}
