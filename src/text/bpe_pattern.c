/* text/bpe_pattern: a tiktoken pattern rewritten for PCRE2, its Unicode
 * classes as tiktoken's, not as the system PCRE2's.
 *
 * tiktoken matches its patterns with Rust's regex crate, whose Unicode
 * tables are those of the regex-syntax it was built with (tiktoken 0.14:
 * Unicode 16); PCRE2's \p{..} uses the tables of whichever PCRE2 the system
 * has (Debian 12's 10.42: Unicode 14, so U+13460, a letter since Unicode 16,
 * was punctuation to us and "\U00013460:A" split differently; a newer
 * PCRE2 can be ahead of tiktoken instead). PCRE2's \s also matches U+180E,
 * Rust's is White_Space. The classes as tiktoken sees them are in
 * bpe_uclass.h, generated from tiktoken itself by
 * tests/python/gen_bpe_uclass.py.
 *
 * Spelling every class out as ranges is exact but slow: PCRE2 10.42 tries
 * a class's ranges one by one, and \p{Lu} alone is 651 of them. So once
 * per process, the first time a pattern names \p{X}, we ask the linked
 * PCRE2 which code points it holds (~4 ms a class: cl100k_base names
 * two, o200k_base eight), and each bracket becomes PCRE2's own \p{..}
 * items (a table lookup) plus the ranges tiktoken has and PCRE2 lacks,
 * minus (as a guard) those PCRE2 has and tiktoken lacks. \s is always
 * spelled out (ten ranges). A class whose probe cannot run is spelled out
 * in full: slower, still exact. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"
#include "text/bpe_uclass.h"

typedef struct strbuf {
    char *s;
    size_t n, cap;
    int oom;
} strbuf_t;

static void sb_add(strbuf_t *b, const char *p, size_t k)
{
    if (b->oom)
        return;
    if (b->n + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->n + k + 1 > cap)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, k);
    b->n += k;
    b->s[b->n] = 0;
}

/* A set of code points as ranges; sorted and disjoint after rs_norm(). */
typedef struct ranges {
    uint32_t (*r)[2];
    size_t n, cap;
} ranges_t;

static int rs_push(ranges_t *rs, uint32_t lo, uint32_t hi)
{
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? rs->cap * 2 : 64;
        uint32_t(*nr)[2] = realloc(rs->r, cap * sizeof *nr);
        if (!nr)
            return -1;
        rs->r = nr;
        rs->cap = cap;
    }
    rs->r[rs->n][0] = lo;
    rs->r[rs->n++][1] = hi;
    return 0;
}

static int rs_add(ranges_t *rs, const uint32_t (*r)[2], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rs_push(rs, r[i][0], r[i][1]))
            return -1;
    return 0;
}

static int cmp_range(const void *a, const void *b)
{
    uint32_t x = ((const uint32_t *)a)[0], y = ((const uint32_t *)b)[0];
    return x < y ? -1 : x > y;
}

static int cmp_size_desc(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    uint32_t nx = x[1] - x[0], ny = y[1] - y[0];
    return nx > ny ? -1 : nx < ny ? 1 : cmp_range(a, b);
}

/* Sorts and merges overlapping and adjacent ranges. */
static void rs_norm(ranges_t *rs)
{
    if (!rs->n)
        return; /* r may be NULL, which qsort must not get */
    qsort(rs->r, rs->n, sizeof *rs->r, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < rs->n;) {
        uint32_t lo = rs->r[i][0], hi = rs->r[i][1];
        for (i++; i < rs->n && rs->r[i][0] <= hi + 1; i++)
            if (rs->r[i][1] > hi)
                hi = rs->r[i][1];
        rs->r[m][0] = lo;
        rs->r[m++][1] = hi;
    }
    rs->n = m;
}

/* out = a - b, both normalized. */
static int rs_sub(const ranges_t *a, const ranges_t *b, ranges_t *out)
{
    size_t j = 0;
    out->n = 0;
    for (size_t i = 0; i < a->n; i++) {
        uint32_t lo = a->r[i][0], hi = a->r[i][1];
        while (j < b->n && b->r[j][1] < lo)
            j++;
        for (size_t k = j; k < b->n && b->r[k][0] <= hi; k++) {
            if (b->r[k][0] > lo && rs_push(out, lo, b->r[k][0] - 1))
                return -1;
            if (b->r[k][1] >= hi) {
                lo = hi + 1; /* nothing left (hi < 0x110000: no wrap) */
                break;
            }
            lo = b->r[k][1] + 1;
        }
        if (lo <= hi && rs_push(out, lo, hi))
            return -1;
    }
    return 0;
}

/* Appends the ranges largest first: PCRE2 (10.42, JIT too) tries a class's
 * ranges in the order given, so the big blocks (CJK, Hangul) are found
 * after a few compares. Sorts rs in place. */
static void sb_ranges(strbuf_t *b, ranges_t *rs)
{
    if (!rs->n)
        return;
    qsort(rs->r, rs->n, sizeof *rs->r, cmp_size_desc);
    for (size_t i = 0; i < rs->n; i++) {
        uint32_t lo = rs->r[i][0], hi = rs->r[i][1];
        char tmp[40];
        int k = lo == hi ? snprintf(tmp, sizeof tmp, "\\x{%x}", lo)
                         : snprintf(tmp, sizeof tmp, "\\x{%x}-\\x{%x}", lo, hi);
        sb_add(b, tmp, (size_t)k);
    }
}

/* ---- what the linked PCRE2 holds in each \p{X} ---- */

#define NCLASS (sizeof BPEU_CLASSES / sizeof BPEU_CLASSES[0])

/* Probed when a pattern first names the class, under native_mu; a probe
 * that fails leaves it empty, so that class is spelled out in full. Never
 * changed after, and read only by a thread that took native_mu since. */
static pthread_mutex_t native_mu = PTHREAD_MUTEX_INITIALIZER;
static ranges_t native[NCLASS]; /* normalized; empty for "s" */
static int native_probed[NCLASS];

static uint32_t utf8_at(const uint8_t *p)
{
    if (p[0] < 0x80)
        return p[0];
    if (p[0] < 0xE0)
        return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    if (p[0] < 0xF0)
        return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 |
               (p[2] & 0x3F);
    return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
           (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
}

/* Every scalar value, in order, as UTF-8. */
static uint8_t *all_code_points(size_t *n)
{
    uint8_t *buf = malloc(0x110000 * 4), *o = buf;
    if (!buf)
        return NULL;
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c < 0xE000)
            continue;
        if (c < 0x80)
            *o++ = (uint8_t)c;
        else if (c < 0x800) {
            *o++ = (uint8_t)(0xC0 | c >> 6);
            *o++ = (uint8_t)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *o++ = (uint8_t)(0xE0 | c >> 12);
            *o++ = (uint8_t)(0x80 | (c >> 6 & 0x3F));
            *o++ = (uint8_t)(0x80 | (c & 0x3F));
        } else {
            *o++ = (uint8_t)(0xF0 | c >> 18);
            *o++ = (uint8_t)(0x80 | (c >> 12 & 0x3F));
            *o++ = (uint8_t)(0x80 | (c >> 6 & 0x3F));
            *o++ = (uint8_t)(0x80 | (c & 0x3F));
        }
    }
    *n = (size_t)(o - buf);
    return buf;
}

/* The runs of \p{name}+ over every code point: PCRE2's members. */
static int probe_class(const char *name, const uint8_t *all, size_t n,
                       ranges_t *out)
{
    char pat[32];
    snprintf(pat, sizeof pat, "\\p{%s}+", name);
    int ec, rc = -1;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &ec, &eoff, NULL);
    pcre2_match_data *md =
        re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    if (!md)
        goto done;
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* else the interpreter */
    for (PCRE2_SIZE pos = 0;;) {
        int m = pcre2_match(re, all, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH)
            break;
        if (m < 0)
            goto done;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        const uint8_t *last = all + ov[1] - 1;
        while ((*last & 0xC0) == 0x80)
            last--;
        if (rs_push(out, utf8_at(all + ov[0]), utf8_at(last)))
            goto done;
        pos = ov[1];
    }
    rc = 0;
done:
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc;
}

/* Probes each class in mask not probed yet. */
static void probe_native(unsigned mask)
{
    pthread_mutex_lock(&native_mu);
    uint8_t *all = NULL;
    size_t n = 0;
    for (size_t i = 0; i < NCLASS; i++) {
        if (!(mask & 1u << i) || native_probed[i])
            continue;
        native_probed[i] = 1;
        if (!strcmp(BPEU_CLASSES[i].name, "s"))
            continue;
        if (!all && !(all = all_code_points(&n)))
            continue;
        if (probe_class(BPEU_CLASSES[i].name, all, n, &native[i])) {
            free(native[i].r);
            native[i] = (ranges_t){0};
        }
    }
    free(all);
    pthread_mutex_unlock(&native_mu);
}

/* ---- the rewrite ---- */

/* The class an escape at p (p[0] == '\\') names, with its length in *len;
 * -1 if it is not one we expand. *bad is set for a \p{..} we lack. */
static int escape_class(const char *p, size_t *len, int *bad)
{
    const char *name = NULL;
    size_t nlen = 0;
    if (p[1] == 's' || p[1] == 'S') {
        name = "s";
        nlen = 1;
        *len = 2;
    } else if (p[1] == 'p' && p[2] == '{') {
        const char *e = strchr(p + 3, '}');
        if (!e) {
            *bad = 1;
            return -1;
        }
        name = p + 3;
        nlen = (size_t)(e - name);
        *len = (size_t)(e - p) + 1;
    } else if (p[1] == 'P') {
        *bad = 1; /* no pattern uses \P; refuse rather than use PCRE2's */
        return -1;
    } else
        return -1;
    for (size_t i = 0; i < NCLASS; i++)
        if (strlen(BPEU_CLASSES[i].name) == nlen &&
            !memcmp(BPEU_CLASSES[i].name, name, nlen))
            return (int)i;
    *bad = 1;
    return -1;
}

/* One bracket (or one bare \p{X}, \s, \S): its literal items as written in
 * lit, the classes it names in the mask. X = the union of those classes as
 * tiktoken has them, P = as PCRE2 has them (probed; the props are
 * then written as \p{..}). Writes
 *   (?:[lit props]|[X-P])                P within X, not negated
 *   (?:(?![P-X])(?:[lit props]|[X-P]))   otherwise
 *   [^lit props X-P]                     P within X, negated
 *   (?:[P-X]|[^lit props X-P])           otherwise
 * ([lit props X-P] when there are no props or no X-P.)
 * P-X holds no literal item (\r, \n, '/'): those are never letters, marks
 * or numbers. */
static int emit_bracket(strbuf_t *b, int neg, const char *lit, size_t litn,
                        unsigned mask)
{
    ranges_t x = {0}, p = {0}, plus = {0}, minus = {0};
    int rc = -1;
    for (size_t i = 0; i < NCLASS; i++)
        if (mask & 1u << i) {
            if (rs_add(&x, BPEU_CLASSES[i].r, BPEU_CLASSES[i].n) ||
                rs_add(&p, native[i].r, native[i].n))
                goto done;
        }
    rs_norm(&x);
    rs_norm(&p);
    if (rs_sub(&x, &p, &plus) || rs_sub(&p, &x, &minus))
        goto done;
    if (minus.n) {
        sb_add(b, neg ? "(?:[" : "(?:(?![", neg ? 4 : 7);
        sb_ranges(b, &minus);
        sb_add(b, neg ? "]|" : "])", 2);
    }
    int props = 0;
    for (size_t i = 0; i < NCLASS; i++)
        props |= mask & 1u << i && native[i].n;
    /* A class with a \p{..} in it makes PCRE2 walk its whole item list for
     * a character it does not hold, ASCII too; a class of ranges only
     * settles a character under 256 with its bitmap. So a positive class
     * is [lit props] or [X-P], and X-P costs nothing where it cannot match
     * (o200k's [\p{Lu}..]* meets every lowercase letter). */
    int split = !neg && props && plus.n;
    sb_add(b, split ? "(?:[" : neg ? "[^" : "[", split ? 4 : neg ? 2 : 1);
    sb_add(b, lit, litn);
    for (size_t i = 0; i < NCLASS; i++)
        if (mask & 1u << i && native[i].n) {
            sb_add(b, "\\p{", 3);
            sb_add(b, BPEU_CLASSES[i].name, strlen(BPEU_CLASSES[i].name));
            sb_add(b, "}", 1);
        }
    if (split)
        sb_add(b, "]|[", 3);
    sb_ranges(b, &plus);
    sb_add(b, split ? "])" : "]", split ? 2 : 1);
    if (minus.n)
        sb_add(b, ")", 1);
    rc = 0;
done:
    free(x.r);
    free(p.r);
    free(plus.r);
    free(minus.r);
    return rc;
}

int sl__bpe_pattern_for_pcre2(const char *pat, char **out)
{
    unsigned used = 0;
    for (const char *p = pat; *p; p++)
        if (p[0] == '\\' && p[1]) {
            size_t len = 2;
            int bad = 0, c = escape_class(p, &len, &bad);
            if (c >= 0)
                used |= 1u << c;
            p++;
        }
    probe_native(used);
    strbuf_t b = {0};
    char lit[64];
    size_t litn = 0;
    unsigned mask = 0;
    int in_class = 0, neg = 0, bad = 0;
    *out = NULL;
    for (const char *p = pat; *p && !bad && !b.oom;) {
        if (p[0] == '\\' && p[1]) {
            size_t len = 2;
            int c = escape_class(p, &len, &bad);
            if (bad)
                break;
            if (c < 0 && in_class) {
                if (litn + 2 > sizeof lit) {
                    bad = 1;
                    break;
                }
                memcpy(lit + litn, p, 2); /* \r, \n: as written */
                litn += 2;
            } else if (c < 0)
                sb_add(&b, p, 2);
            else if (in_class) {
                if (p[1] == 'S') {
                    bad = 1; /* a complement inside a class: not needed */
                    break;
                }
                mask |= 1u << c;
            } else if (emit_bracket(&b, p[1] == 'S', "", 0, 1u << c))
                b.oom = 1;
            p += len;
        } else if (p[0] == '[' && !in_class) {
            /* A ']' right after '[' or '[^' would be a literal in PCRE2;
             * no tiktoken pattern has one. */
            in_class = 1;
            neg = p[1] == '^';
            litn = 0;
            mask = 0;
            p += neg ? 2 : 1;
        } else if (p[0] == ']' && in_class) {
            if (emit_bracket(&b, neg, lit, litn, mask))
                b.oom = 1;
            in_class = 0;
            p++;
        } else if (in_class) {
            if (litn + 1 > sizeof lit) {
                bad = 1;
                break;
            }
            lit[litn++] = *p++;
        } else
            sb_add(&b, p++, 1);
    }
    if (bad || in_class || b.oom || !b.s) {
        free(b.s);
        return b.oom ? SL_ENOMEM : SL_EUNSUPPORTED;
    }
    *out = b.s;
    return 0;
}
