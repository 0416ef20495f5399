#include "brace.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base.h"

typedef struct names {
    char **v;
    int n;
    size_t cap;
    int rc;
} names_t;

static void push(names_t *o, char *s)
{
    if (o->rc) {
        free(s);
        return;
    }
    if (o->n >= SL__BRACE_MAX_NAMES) {
        o->rc = SL_ERANGE;
        free(s);
        return;
    }
    if (sl__array_reserve(&o->v, &o->cap, (size_t)o->n + 2, sizeof *o->v, 16)) {
        o->rc = SL_ENOMEM;
        free(s);
        return;
    }
    o->v[o->n++] = s;
    o->v[o->n] = NULL;
}

/* The '}' matching the '{' at s[i], or -1. */
static long closing(const char *s, long i)
{
    int depth = 0;
    for (long j = i; s[j]; j++) {
        if (s[j] == '{')
            depth++;
        else if (s[j] == '}' && --depth == 0)
            return j;
    }
    return -1;
}

/* A bound of a range: optional '-', digits; *wide = 1 when written with
 * leading zeros (so the output is padded). */
static int parse_bound(const char *p, size_t len, long long *v, size_t *digits,
                       int *wide)
{
    size_t k = 0;
    if (k < len && p[k] == '-')
        k++;
    if (k == len || len > 19)
        return -1;
    for (size_t j = k; j < len; j++)
        if (!isdigit((unsigned char)p[j]))
            return -1;
    char buf[24];
    memcpy(buf, p, len);
    buf[len] = 0;
    errno = 0;
    *v = strtoll(buf, NULL, 10);
    if (errno)
        return -1;
    *digits = len;
    *wide = len - k > 1 && p[k] == '0';
    return 0;
}

/* inner = "A..B": 0 with the bounds and the padding width (0: none). */
static int parse_range(const char *inner, size_t len, long long *a,
                       long long *b, int *width)
{
    const char *dots = NULL;
    for (size_t k = 0; k + 1 < len; k++)
        if (inner[k] == '.' && inner[k + 1] == '.') {
            dots = inner + k;
            break;
        }
    if (!dots)
        return -1;
    size_t la = (size_t)(dots - inner), lb = len - la - 2, da, db;
    int wa, wb;
    if (parse_bound(inner, la, a, &da, &wa) ||
        parse_bound(dots + 2, lb, b, &db, &wb))
        return -1;
    *width = wa || wb ? (int)(da > db ? da : db) : 0;
    return 0;
}

static char *join3(const char *a, size_t la, const char *b, size_t lb,
                   const char *c)
{
    size_t lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
    return s;
}

static void expand(const char *s, long from, names_t *o);

/* s with s[i..j] replaced by alt, expanded further (alt itself may hold
 * groups, and so may the rest). */
static void expand_alt(const char *s, long i, long j, const char *alt,
                       size_t altlen, names_t *o)
{
    char *t = join3(s, (size_t)i, alt, altlen, s + j + 1);
    if (!t) {
        o->rc = o->rc ? o->rc : SL_ENOMEM;
        return;
    }
    expand(t, i, o);
    free(t);
}

/* Expands the first group at or after s[from]; a string without one is a
 * name. Everything before `from` is literal already. */
static void expand(const char *s, long from, names_t *o)
{
    for (long i = from; s[i] && !o->rc; i++) {
        if (s[i] != '{')
            continue;
        long j = closing(s, i);
        if (j < 0)
            break; /* unbalanced: the rest is literal */
        const char *in = s + i + 1;
        size_t len = (size_t)(j - i - 1);
        /* A list: top-level commas inside. */
        int depth = 0, commas = 0;
        for (size_t k = 0; k < len; k++) {
            if (in[k] == '{')
                depth++;
            else if (in[k] == '}')
                depth--;
            else if (in[k] == ',' && depth == 0)
                commas++;
        }
        if (commas) {
            size_t start = 0;
            depth = 0;
            for (size_t k = 0; k <= len && !o->rc; k++) {
                if (k < len && in[k] == '{')
                    depth++;
                else if (k < len && in[k] == '}')
                    depth--;
                else if (k == len || (in[k] == ',' && depth == 0)) {
                    expand_alt(s, i, j, in + start, k - start, o);
                    start = k + 1;
                }
            }
            return;
        }
        long long a, b;
        int width;
        if (!parse_range(in, len, &a, &b, &width)) {
            long long step = a <= b ? 1 : -1;
            for (long long v = a;; v += step) {
                char num[32];
                int k = v < 0 ? snprintf(num, sizeof num, "-%0*lld",
                                         width > 0 ? width - 1 : 0, -v)
                              : snprintf(num, sizeof num, "%0*lld", width, v);
                expand_alt(s, i, j, num, (size_t)k, o);
                if (v == b || o->rc)
                    break;
            }
            return;
        }
        /* Neither: the '{' is literal; groups inside it may still expand. */
    }
    if (o->rc)
        return;
    char *t = strdup(s);
    if (!t) {
        o->rc = SL_ENOMEM;
        return;
    }
    push(o, t);
}

int sl__brace_has(const char *pattern)
{
    return strchr(pattern, '{') != NULL;
}

int sl__brace_expand(const char *pattern, char ***out, int *n, char *err,
                     size_t errlen)
{
    names_t o = {0};
    expand(pattern, 0, &o);
    if (o.rc) {
        sl__strv_free(o.v, o.n);
        *out = NULL;
        *n = 0;
        return o.rc == SL_ERANGE
                   ? sl__fail(err, errlen, SL_ERANGE,
                              "%s: expands to more than %d names", pattern,
                              SL__BRACE_MAX_NAMES)
                   : sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    *out = o.v;
    *n = o.n;
    return 0;
}
