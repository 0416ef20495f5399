/* base/msgesc: outside names made safe to print (base.h). */
#include "base.h"
#include "utf8.h"

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

void sl__json_escape(sl__sbuf_t *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left) {
        /* the well-formed run from p (ASCII included), then a bad byte */
        size_t ok = sl__utf8_valid_prefix(p, left);
        for (size_t i = 0; i < ok; i++)
            if (p[i] == '"' || p[i] == '\\')
                sl__sbuf_printf(b, "\\%c", p[i]);
            else if (is_ctl(p[i]))
                sl__sbuf_printf(b, "\\u%04x", p[i]);
            else
                sl__sbuf_printf(b, "%c", p[i]);
        p += ok;
        left -= ok;
        if (left) { /* not UTF-8: the byte as \xNN, as sl__msg_escape */
            sl__sbuf_printf(b, "\\\\x%02x", *p);
            p++;
            left--;
        }
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
