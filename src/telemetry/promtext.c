#include "promtext.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base.h"

/* A cursor over one line: [p, end). */
typedef struct cur {
    const char *p, *end;
} cur_t;

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}
static int is_alpha_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void skip_ws(cur_t *c)
{
    while (c->p < c->end && is_ws(*c->p))
        c->p++;
}

/* A name into out (cap bytes): 1 read, 0 none there, -1 too long (the
 * cursor still moves past it, so the line can be checked to its end). */
static int read_name(cur_t *c, int colon, char *out, size_t cap)
{
    const char *s = c->p;
    if (c->p >= c->end || !(is_alpha_(*c->p) || (colon && *c->p == ':')))
        return 0;
    while (c->p < c->end &&
           (is_alpha_(*c->p) || is_digit(*c->p) || (colon && *c->p == ':')))
        c->p++;
    size_t n = (size_t)(c->p - s);
    if (n >= cap)
        return -1;
    memcpy(out, s, n);
    out[n] = 0;
    return 1;
}

/* A quoted label value, unescaped into out: 1, -1 too long, 0 bad. */
static int read_quoted(cur_t *c, char *out, size_t cap)
{
    if (c->p >= c->end || *c->p != '"')
        return 0;
    c->p++;
    size_t n = 0;
    int fits = 1;
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if (ch == '\\') {
            if (c->p >= c->end)
                return 0;
            ch = *c->p++;
            if (ch == 'n')
                ch = '\n';
            else if (ch != '\\' && ch != '"')
                return 0;
        }
        if (n + 1 < cap)
            out[n++] = ch;
        else
            fits = 0;
    }
    if (c->p >= c->end)
        return 0; /* unterminated */
    c->p++;
    out[n] = 0;
    return fits ? 1 : -1;
}

/* A value token: a float strtod takes whole, or NaN / [+-]Inf. */
static int read_value(cur_t *c, double *v)
{
    const char *s = c->p;
    while (c->p < c->end && !is_ws(*c->p))
        c->p++;
    size_t n = (size_t)(c->p - s);
    char tok[64];
    if (n == 0 || n >= sizeof tok)
        return -1;
    memcpy(tok, s, n);
    tok[n] = 0;
    if (!strcmp(tok, "NaN")) {
        *v = NAN;
        return 0;
    }
    if (!strcmp(tok, "+Inf") || !strcmp(tok, "Inf")) {
        *v = INFINITY;
        return 0;
    }
    if (!strcmp(tok, "-Inf")) {
        *v = -INFINITY;
        return 0;
    }
    /* Digits, sign, point and exponent only: strtod would also take
     * "nan(...)", "infinity" and hex, which the format does not. */
    for (size_t i = 0; i < n; i++)
        if (!is_digit(tok[i]) && !strchr("+-.eE", tok[i]))
            return -1;
    char *e;
    *v = strtod(tok, &e);
    return *e ? -1 : 0;
}

/* One sample line into *s: 0 ok, 1 ok but it does not fit (skip), or
 * -1 with *why set. */
static int parse_sample(cur_t *c, sl__prom_sample_t *s, const char **why)
{
    int fits = 1, r;
    memset(s, 0, sizeof *s);
    if ((r = read_name(c, 1, s->name, sizeof s->name)) == 0) {
        *why = "expected a metric name";
        return -1;
    }
    fits &= r > 0;
    const char *after_name = c->p;
    skip_ws(c);
    if (c->p < c->end && *c->p == '{') {
        c->p++;
        for (;;) {
            skip_ws(c);
            if (c->p < c->end && *c->p == '}')
                break;
            sl__prom_label_t tmp, *l = s->nlabels < SL__PROM_LABELS
                                           ? &s->label[s->nlabels]
                                           : &tmp;
            if (l == &tmp)
                fits = 0;
            if ((r = read_name(c, 0, l->name, sizeof l->name)) == 0) {
                *why = "expected a label name";
                return -1;
            }
            fits &= r > 0;
            skip_ws(c);
            if (c->p >= c->end || *c->p != '=') {
                *why = "expected '=' after a label name";
                return -1;
            }
            c->p++;
            skip_ws(c);
            if ((r = read_quoted(c, l->value, sizeof l->value)) == 0) {
                *why = "expected a quoted label value";
                return -1;
            }
            fits &= r > 0;
            if (l != &tmp)
                s->nlabels++;
            skip_ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (c->p < c->end && *c->p == '}')
                break;
            *why = "expected ',' or '}' after a label";
            return -1;
        }
        c->p++; /* '}' */
        after_name = c->p;
        skip_ws(c);
    }
    if (c->p >= c->end || c->p == after_name) {
        *why = "expected a space and a value";
        return -1;
    }
    if (read_value(c, &s->value)) {
        *why = "bad value";
        return -1;
    }
    skip_ws(c);
    if (c->p < c->end) { /* a timestamp: an integer, ignored */
        if (*c->p == '-' || *c->p == '+')
            c->p++;
        const char *d = c->p;
        while (c->p < c->end && is_digit(*c->p))
            c->p++;
        skip_ws(c);
        if (c->p == d || c->p < c->end) {
            *why = "bad timestamp or text after the value";
            return -1;
        }
    }
    return fits ? 0 : 1;
}

void sl__prom_set_free(sl__prom_set_t *set)
{
    free(set->s);
    memset(set, 0, sizeof *set);
}

int sl__promtext_parse(const char *text, size_t len, sl__prom_set_t *out,
                       char *err, size_t errlen)
{
    out->n = 0;
    out->skipped = 0;
    const char *p = text, *end = text + len;
    long line = 0;
    while (p < end) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        cur_t c = {p, nl ? nl : end};
        p = nl ? nl + 1 : end;
        if (c.end > c.p && c.end[-1] == '\r')
            c.end--;
        skip_ws(&c);
        if (c.p >= c.end || *c.p == '#')
            continue;
        if (out->n >= SL__PROM_SAMPLES) {
            out->n = 0;
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "line %ld: more than %d samples", line,
                            SL__PROM_SAMPLES);
        }
        if (sl__array_reserve(&out->s, &out->cap, out->n + 1, sizeof *out->s,
                              64)) {
            out->n = 0;
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        }
        const char *why = NULL;
        int r = parse_sample(&c, &out->s[out->n], &why);
        if (r < 0) {
            out->n = 0;
            return sl__fail(err, errlen, SL_ECORRUPT, "line %ld: %s", line,
                            why);
        }
        if (r == 0)
            out->n++;
        else
            out->skipped++;
    }
    return 0;
}

const char *sl__prom_label(const sl__prom_sample_t *s, const char *label)
{
    for (int i = 0; i < s->nlabels; i++)
        if (!strcmp(s->label[i].name, label))
            return s->label[i].value;
    return NULL;
}

const sl__prom_sample_t *sl__prom_find(const sl__prom_set_t *set,
                                       const char *name, const char *label,
                                       const char *value)
{
    for (size_t i = 0; i < set->n; i++) {
        const sl__prom_sample_t *s = &set->s[i];
        if (strcmp(s->name, name))
            continue;
        if (!label)
            return s;
        const char *v = sl__prom_label(s, label);
        if (v && !strcmp(v, value))
            return s;
    }
    return NULL;
}

double sl__prom_get(const sl__prom_set_t *set, const char *name,
                    const char *label, const char *value, double dflt)
{
    const sl__prom_sample_t *s = sl__prom_find(set, name, label, value);
    return s ? s->value : dflt;
}
