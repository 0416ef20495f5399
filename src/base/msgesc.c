/* base/msgesc: outside names made safe to print (base.h). */
#include "base.h"

#include <stdio.h>
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

int sl__msg_list_add(char ***v, int *n, const char *msg, const char *what)
{
    char **w = realloc(*v, (size_t)(*n + 1) * sizeof *w);
    if (!w)
        return SL_ENOMEM;
    *v = w;
    char *raw = NULL;
    if (asprintf(&raw, "%s%s", msg, what ? what : "") < 0)
        return SL_ENOMEM;
    w[*n] = sl__msg_escape_dup(raw);
    free(raw);
    if (!w[*n])
        return SL_ENOMEM;
    (*n)++;
    return 0;
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

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

void sl__json_escape(sl__sbuf_t *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = *p < 0x80 ? 1 : utf8_len(p);
        if (*p == '"' || *p == '\\')
            sl__sbuf_printf(b, "\\%c", *p);
        else if (is_ctl(*p))
            sl__sbuf_printf(b, "\\u%04x", *p);
        else if (n)
            sl__sbuf_printf(b, "%.*s", (int)n, (const char *)p);
        else /* not UTF-8: the byte as \xNN, as sl__msg_escape writes it */
            sl__sbuf_printf(b, "\\\\x%02x", *p);
        p += n ? n : 1;
    }
}

char *sl__json_escape_dup(const char *s)
{
    sl__sbuf_t b = {0};
    sl__json_escape(&b, s);
    char *p = malloc((size_t)b.need + 1);
    if (!p)
        return NULL;
    b = (sl__sbuf_t){.buf = p, .cap = (size_t)b.need + 1};
    p[0] = 0;
    sl__json_escape(&b, s);
    return p;
}
