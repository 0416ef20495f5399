/* text/wordpiece: BERT vocab.txt loading, the token map, and the WordPiece
 * model (greedy longest-match-first) over the words of bert_basic.c.
 * Behaviour and errors: see wordpiece.h and docs/TEXT.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/utf8.h"
#include "text/wordpiece.h"

const char *const sl__wp_special_names[SL__WP_NSPECIAL] = {
    "[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]"};

/* ---- the map ---- */

static inline uint64_t wp_hash(const char *w, size_t n)
{
    return XXH3_64bits(w, n);
}

static int map_init(sl__wp_map_t *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n) /* load factor <= 1/2: short probes */
        cap *= 2;
    m->slot = calloc(cap, sizeof *m->slot);
    if (!m->slot)
        return SL_ENOMEM;
    m->mask = cap - 1;
    return 0;
}

/* Returns the slot holding w, or the empty slot where it would go. */
static inline sl__wp_slot_t *map_find(const sl__wp_map_t *m, const char *pool,
                                      const char *w, size_t n, uint64_t h)
{
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & m->mask;; i = (i + 1) & m->mask) {
        sl__wp_slot_t *e = &m->slot[i];
        if (!e->off)
            return e;
        if (e->tag == tag && e->len == n &&
            memcmp(pool + e->off - 1, w, n) == 0)
            return e;
    }
}

int32_t sl__wp_map_get(const struct sl__wp *wp, const sl__wp_map_t *m,
                       const char *w, size_t n)
{
    const sl__wp_slot_t *e = map_find(m, wp->pool, w, n, wp_hash(w, n));
    return e->off ? e->id : -1;
}

/* ---- loading ---- */

/* Rust's char::is_whitespace (White_Space) for the trim_end() HF applies to
 * each vocab line; c is the code point ending at line[len - k]. */
static size_t trailing_space_len(const char *line, size_t len)
{
    const unsigned char *p = (const unsigned char *)line;
    if (len >= 1 &&
        (p[len - 1] == ' ' || (p[len - 1] >= 9 && p[len - 1] <= 13)))
        return 1;
    if (len >= 2 && p[len - 2] == 0xC2 &&
        (p[len - 1] == 0x85 || p[len - 1] == 0xA0))
        return 2;
    if (len >= 3) {
        uint32_t c =
            (uint32_t)p[len - 3] << 16 | (uint32_t)p[len - 2] << 8 | p[len - 1];
        if (c == 0xE19A80 /* U+1680 */ ||
            (c >= 0xE28080 && c <= 0xE2808A) /* U+2000..U+200A */ ||
            c == 0xE280A8 || c == 0xE280A9 || c == 0xE280AF /* 2028 2029 202F */
            || c == 0xE2819F /* U+205F */ || c == 0xE38080 /* U+3000 */)
            return 3;
    }
    return 0;
}

void sl__wp_free(struct sl__wp *wp)
{
    if (!wp)
        return;
    free(wp->all.slot);
    free(wp->cont.slot);
    free(wp->pool);
    free(wp);
}

static int wp_fail(struct sl__wp *wp, char *err, size_t errlen, int code,
                   const char *fmt, const char *name, size_t line)
{
    sl__wp_free(wp);
    return sl__fail(err, errlen, code, fmt, name, line);
}

int sl__wp_load_mem(const void *data, size_t n, const char *name, int uncased,
                    struct sl__wp **out, char *err, size_t errlen)
{
    const char *d = data;
    *out = NULL;
    if (!name)
        name = "vocab";
    if (n > UINT32_MAX - 1)
        return sl__fail(err, errlen, SL_ECORRUPT, "%s: vocabulary over 4 GiB",
                        name);
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += d[i] == '\n';
    if (n && d[n - 1] != '\n')
        lines++; /* a last line without its newline still counts */
    if (lines == 0)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: empty vocabulary (want one token per line)", name);
    if (lines > INT32_MAX)
        return sl__fail(err, errlen, SL_ECORRUPT, "%s: too many lines", name);

    struct sl__wp *wp = calloc(1, sizeof *wp);
    if (!wp)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    wp->uncased = uncased;
    wp->pool = malloc(n ? n : 1);
    if (!wp->pool || map_init(&wp->all, lines) || map_init(&wp->cont, lines))
        return wp_fail(wp, err, errlen, SL_ENOMEM, "%s:%zu: out of memory",
                       name, (size_t)0);
    if (n)
        memcpy(wp->pool, d, n);

    size_t pos = 0;
    for (size_t line = 0; line < lines; line++) {
        const char *nl = memchr(d + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - d) : n;
        size_t len = end - pos;
        if (sl__utf8_valid_prefix((const uint8_t *)d + pos, len) != len)
            return wp_fail(wp, err, errlen, SL_ECORRUPT,
                           "%s:%zu: invalid UTF-8 in token", name, line + 1);
        for (size_t k; (k = trailing_space_len(d + pos, len)) != 0;)
            len -= k;
        const char *w = wp->pool + pos;
        uint64_t h = wp_hash(w, len);
        sl__wp_slot_t *e = map_find(&wp->all, wp->pool, w, len, h);
        if (e->off) {
            /* HF keeps the later line's id silently; two ids for one token
             * is a broken vocabulary, so say where. */
            char msg[160];
            snprintf(msg, sizeof msg,
                     "%%s:%%zu: duplicate token (first on line %d)", e->id + 1);
            return wp_fail(wp, err, errlen, SL_ECORRUPT, msg, name, line + 1);
        }
        *e = (sl__wp_slot_t){(uint32_t)(h >> 32), (uint32_t)pos + 1,
                             (uint32_t)len, (int32_t)line};
        if (len >= 2 && w[0] == '#' && w[1] == '#') {
            uint64_t hc = wp_hash(w + 2, len - 2);
            sl__wp_slot_t *c =
                map_find(&wp->cont, wp->pool, w + 2, len - 2, hc);
            *c = (sl__wp_slot_t){(uint32_t)(hc >> 32), (uint32_t)pos + 3,
                                 (uint32_t)len - 2, (int32_t)line};
            if (len - 2 > wp->max_cont)
                wp->max_cont = (uint32_t)(len - 2);
        }
        if (len > wp->max_len)
            wp->max_len = (uint32_t)len;
        pos = end + 1;
    }
    wp->n_tokens = lines;
    for (int i = 0; i < SL__WP_NSPECIAL; i++) {
        const char *s = sl__wp_special_names[i];
        wp->special[i] = sl__wp_map_get(wp, &wp->all, s, strlen(s));
    }
    wp->unk = wp->special[0];
    if (wp->unk < 0)
        return wp_fail(wp, err, errlen, SL_ECORRUPT,
                       "%s:%zu: no [UNK] token in the vocabulary", name, lines);
    *out = wp;
    return 0;
}

int sl__wordpiece_load_mem(const void *data, size_t n, const char *name,
                           int uncased, sl__tok_t **out, char *err,
                           size_t errlen)
{
    *out = NULL;
    sl__tok_t *t = calloc(1, sizeof *t);
    if (!t)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory",
                        name ? name : "vocab");
    int rc = sl__wp_load_mem(data, n, name, uncased, &t->wp, err, errlen);
    if (rc) {
        free(t);
        return rc;
    }
    t->kind = SL__TOK_WORDPIECE;
    *out = t;
    return 0;
}

int sl__wordpiece_load(const char *vocab_txt, int uncased, sl__tok_t **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    if (!vocab_txt)
        return sl__fail(err, errlen, SL_EINVAL, "wordpiece: no vocab path");
    char *text;
    size_t n;
    int rc = sl__read_small_file(vocab_txt, SL__VOCAB_MAX_BYTES, &text, &n, err,
                                 errlen);
    if (rc)
        return rc;
    rc = sl__wordpiece_load_mem(text, n, vocab_txt, uncased, out, err, errlen);
    free(text);
    return rc;
}

int32_t sl__wp_id(const struct sl__wp *wp, const char *token)
{
    if (!wp || !token)
        return -1;
    return sl__wp_map_get(wp, &wp->all, token, strlen(token));
}

size_t sl__wp_size(const struct sl__wp *wp)
{
    return wp ? wp->n_tokens : 0;
}

/* ---- the model ---- */

typedef struct wp_run {
    const struct sl__wp *wp;
    sl__ids_t *ids;
} wp_run_t;

static inline int is_cont_byte(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/* Greedy longest-match-first of one word (HF's WordPiece::tokenize). */
static int wp_word(const struct sl__wp *wp, const char *w, size_t len,
                   sl__ids_t *ids)
{
    if (len > SL__WP_MAX_CHARS) {
        size_t chars = 0;
        for (size_t i = 0; i < len; i++)
            chars += !is_cont_byte((unsigned char)w[i]);
        if (chars > SL__WP_MAX_CHARS)
            return sl__ids_push(ids, wp->unk);
    }
    uint64_t h = wp_hash(w, len);
    if (len <= wp->max_len) { /* most words are whole tokens */
        const sl__wp_slot_t *e = map_find(&wp->all, wp->pool, w, len, h);
        if (e->off)
            return sl__ids_push(ids, e->id);
    }
    size_t mark = ids->n;
    for (size_t start = 0; start < len;) {
        const sl__wp_map_t *m = start ? &wp->cont : &wp->all;
        size_t lim = start ? wp->max_cont : wp->max_len;
        size_t end = len - start > lim ? start + lim : len;
        int32_t id = -1;
        for (; end > start; end--) {
            if (end < len && is_cont_byte((unsigned char)w[end]))
                continue; /* only whole chars */
            const sl__wp_slot_t *e =
                map_find(m, wp->pool, w + start, end - start,
                         wp_hash(w + start, end - start));
            if (e->off) {
                id = e->id;
                break;
            }
        }
        if (id < 0) {
            ids->n = mark; /* the whole word is unknown */
            return sl__ids_push(ids, wp->unk);
        }
        int rc = sl__ids_push(ids, id);
        if (rc)
            return rc;
        start = end;
    }
    return 0;
}

static int wp_sink(void *ctx, const char *buf, const sl__wp_word_t *w,
                   size_t nw)
{
    wp_run_t *r = ctx;
    uint32_t beg = 0;
    for (size_t i = 0; i < nw; i++) {
        int rc;
        if (w[i].special >= 0)
            rc = sl__ids_push(r->ids, w[i].special);
        else if (w[i].special == SL__WP_WORD_LONG)
            rc = sl__ids_push(r->ids, r->wp->unk);
        else
            rc = wp_word(r->wp, buf + beg, w[i].end - beg, r->ids);
        if (rc)
            return rc;
        beg = w[i].end;
    }
    return 0;
}

/* BERT's words never span whitespace, and nothing before an ASCII byte
 * depends on what follows it (bert_basic.c: non-ASCII runs are processed
 * as units, canonical ordering never crosses an ASCII starter, a dropped
 * invalid byte is dropped alone), so text cut after ASCII whitespace
 * encodes as it would whole. */
size_t sl__wp_cut(const char *text, size_t n)
{
    while (n > 0 && !(text[n - 1] == ' ' || text[n - 1] == '\n' ||
                      text[n - 1] == '\t' || text[n - 1] == '\r'))
        n--;
    return n;
}

int sl__wp_encode(const sl__tok_t *t, const char *text, size_t n,
                  sl__tok_scratch_t *s, sl__ids_t *ids, char *err,
                  size_t errlen)
{
    wp_run_t r = {t->wp, ids};
    size_t n0 = ids->n;
    int rc = sl__bert_split(t->wp, text, n, s, wp_sink, &r);
    if (rc) {
        ids->n = n0;
        return sl__fail(err, errlen, rc, "wordpiece: %s",
                        rc == SL_ENOMEM ? "out of memory" : "encode failed");
    }
    return 0;
}
