#include "remote_parse.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

int sl__remote_is_url(const char *s)
{
    return s && (!strncasecmp(s, "http://", 7) ||
                 !strncasecmp(s, "https://", 8) || !strncasecmp(s, "s3://", 5));
}

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* [*p, *p + *n) without blanks at either end. */
static void trim(const char **p, size_t *n)
{
    while (*n && blank(**p)) {
        (*p)++;
        (*n)--;
    }
    while (*n && blank((*p)[*n - 1]))
        (*n)--;
}

int sl__http_header(const char *line, size_t n, const char *name,
                    const char **val, size_t *vlen)
{
    size_t m = strlen(name);
    if (n <= m || line[m] != ':' || strncasecmp(line, name, m))
        return 0;
    *val = line + m + 1;
    *vlen = n - m - 1;
    trim(val, vlen);
    return 1;
}

/* Decimal digits at [*p, end): 0 and *v (no overflow), or -1. */
static int number(const char **p, const char *end, uint64_t *v)
{
    const char *s = *p;
    *v = 0;
    while (*p < end && **p >= '0' && **p <= '9') {
        unsigned d = (unsigned)(**p - '0');
        if (*v > (UINT64_MAX - d) / 10)
            return -1;
        *v = *v * 10 + d;
        (*p)++;
    }
    return *p > s ? 0 : -1;
}

int sl__http_u64(const char *v, size_t n, uint64_t *len)
{
    trim(&v, &n);
    const char *p = v, *end = v + n;
    return number(&p, end, len) || p != end ? -1 : 0;
}

int sl__http_content_range(const char *v, size_t n, uint64_t *first,
                           uint64_t *last, uint64_t *total)
{
    trim(&v, &n);
    const char *p = v, *end = v + n;
    *first = *last = *total = UINT64_MAX;
    if (n < 6 || strncasecmp(p, "bytes", 5) || !blank(p[5]))
        return -1;
    p += 6;
    while (p < end && blank(*p))
        p++;
    if (p < end && *p == '*') {
        p++;
    } else if (number(&p, end, first) || p >= end || *p++ != '-' ||
               number(&p, end, last) || *first > *last) {
        return -1;
    }
    if (p >= end || *p++ != '/')
        return -1;
    if (p < end && *p == '*') {
        p++;
    } else if (number(&p, end, total) ||
               (*last != UINT64_MAX && *last >= *total)) {
        return -1;
    }
    return p == end ? 0 : -1;
}

int sl__ini_get(const char *text, size_t n, const char *section,
                const char *key, char *out, size_t outlen)
{
    const char *p = text, *end = text + n;
    int in = 0;
    size_t sl = strlen(section), kl = strlen(key);
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        const char *line = p;
        size_t len = (size_t)((e ? e : end) - p);
        p = e ? e + 1 : end;
        trim(&line, &len);
        if (!len || line[0] == '#' || line[0] == ';')
            continue;
        if (line[0] == '[') {
            const char *s = line + 1;
            size_t m = len - 1;
            if (!m || s[m - 1] != ']')
                continue;
            m--;
            trim(&s, &m);
            in = m == sl && !memcmp(s, section, sl);
            continue;
        }
        const char *eq = memchr(line, '=', len);
        if (!in || !eq)
            continue;
        const char *k = line, *v = eq + 1;
        size_t km = (size_t)(eq - line), vm = len - km - 1;
        trim(&k, &km);
        trim(&v, &vm);
        if (km != kl || strncasecmp(k, key, kl))
            continue;
        if (vm >= outlen)
            return 0;
        memcpy(out, v, vm);
        out[vm] = 0;
        return 1;
    }
    return 0;
}
