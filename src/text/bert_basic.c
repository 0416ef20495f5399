/* text/bert_basic: HF tokenizers' BertNormalizer + BertPreTokenizer in one
 * pass, producing the words the WordPiece model sees.
 *
 * Order (as HF): clean (drop U+0000, U+FFFD, category C*; whitespace -> ' ')
 * -> spaces around CJK ideographs -> NFD -> drop Mn -> lowercase (the last
 * three only when uncased) -> split on whitespace, isolate punctuation.
 *
 * ASCII bytes go through tables; a maximal run of non-ASCII bytes goes
 * through utf8proc as a unit (decode, clean, decompose, canonical order).
 * Runs never need context from outside: every ASCII char is a starter
 * (combining class 0), so canonical ordering never crosses an ASCII byte.
 * Where HF's Unicode data (Rust std, the unicode_categories crate) and
 * utf8proc's disagree, wp_unicode.c says which way HF goes. */
#include <string.h>
#include <utf8proc.h>

#include "text/wordpiece.h"
#include "text/wp_unicode.h"

/* Words are handed to the sink once this many bytes are buffered. */
#define SPLIT_CHUNK (32u << 10)

enum { K_WORD, K_SPACE, K_PUNCT, K_DROP, K_HIGH };

/* BERT's ASCII classes: C0 controls and DEL are "other" (dropped), except
 * \t \n \r which are whitespace; punctuation is 33-47, 58-64, 91-96,
 * 123-126. */
static const unsigned char ascii_class[256] = {
    [0 ... 8] = K_DROP,     ['\t'] = K_SPACE,        ['\n'] = K_SPACE,
    [11 ... 12] = K_DROP,   ['\r'] = K_SPACE,        [14 ... 31] = K_DROP,
    [' '] = K_SPACE,        [33 ... 47] = K_PUNCT,   [48 ... 57] = K_WORD,
    [58 ... 64] = K_PUNCT,  [65 ... 90] = K_WORD,    [91 ... 96] = K_PUNCT,
    [97 ... 122] = K_WORD,  [123 ... 126] = K_PUNCT, [127] = K_DROP,
    [128 ... 255] = K_HIGH,
};

#define BREAK_CP 0xFFFFFFFFu /* a word boundary in the code point stream */

typedef struct split {
    const struct sl__wp *wp;
    sl__bytes_t *wb; /* word bytes */
    sl__bytes_t *wr; /* sl__wp_word_t records */
    size_t nw;       /* records in wr */
    size_t wstart;   /* start of the open word in wb */
    int wlong;       /* the open word went over SL__WP_MAX_WORD_BYTES */
    sl__wp_sink_fn sink;
    void *ctx;
} split_t;

static int push_rec(split_t *st, int32_t special)
{
    size_t need = (st->nw + 1) * sizeof(sl__wp_word_t);
    if (need > st->wr->cap &&
        sl__bytes_reserve(st->wr, need > 4096 ? need * 2 : 4096))
        return SL_ENOMEM;
    sl__wp_word_t *w = (sl__wp_word_t *)(void *)st->wr->p;
    w[st->nw++] = (sl__wp_word_t){(uint32_t)st->wb->n, special};
    st->wstart = st->wb->n;
    return 0;
}

static inline int end_word(split_t *st)
{
    if (st->wlong) {
        st->wlong = 0;
        return push_rec(st, SL__WP_WORD_LONG);
    }
    if (st->wb->n > st->wstart)
        return push_rec(st, SL__WP_WORD_PLAIN);
    return 0;
}

/* Hands the buffered words over; only between words. */
static int flush(split_t *st)
{
    if (!st->nw)
        return 0;
    int rc = st->sink(st->ctx, (const char *)st->wb->p,
                      (const sl__wp_word_t *)(void *)st->wr->p, st->nw);
    st->nw = 0;
    st->wb->n = st->wstart = 0;
    return rc;
}

static inline int maybe_flush(split_t *st)
{
    return st->wb->n >= SPLIT_CHUNK ? flush(st) : 0;
}

/* Appends the UTF-8 of c to the open word. */
static int append_cp(split_t *st, uint32_t c)
{
    if (st->wlong)
        return 0;
    if (sl__bytes_reserve(st->wb, st->wb->n + 4))
        return SL_ENOMEM;
    uint8_t *d = st->wb->p + st->wb->n;
    size_t k = (size_t)utf8proc_encode_char((utf8proc_int32_t)c, d);
    st->wb->n += k;
    if (st->wb->n - st->wstart > SL__WP_MAX_WORD_BYTES) {
        st->wlong = 1; /* over 100 chars for sure: [UNK], bytes unneeded */
        st->wb->n = st->wstart;
    }
    return 0;
}

/* Decodes one UTF-8 char at p[0..n) (n >= 1); returns its length, or 0
 * when the bytes there are not a valid char (the caller drops one byte:
 * the same chars survive as with Python's errors="replace"). */
static inline size_t utf8_decode(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint32_t c = p[0], min;
    size_t k;
    if (c >= 0xC2 && c <= 0xDF)
        k = 1, c &= 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        k = 2, c &= 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        k = 3, c &= 0x07, min = 0x10000;
    else
        return 0;
    if (n <= k)
        return 0;
    for (size_t j = 1; j <= k; j++) {
        if ((p[j] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (p[j] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return k + 1;
}

static int reserve_u32(sl__bytes_t *b, size_t n)
{
    return sl__bytes_reserve(b, n * sizeof(uint32_t));
}

/* Stable sort of r[0..n), non-starters, by combining class: insertion
 * sort for the usual few marks, else a counting sort through tmp, so a
 * megabyte of alternating marks is not quadratic (issue 14). */
static int sort_marks(uint32_t *r, size_t n, sl__bytes_t *tmp)
{
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t v = r[i];
            int cc = sl__wpu_ccc(v);
            size_t j = i;
            for (; j > 0 && sl__wpu_ccc(r[j - 1]) > cc; j--)
                r[j] = r[j - 1];
            r[j] = v;
        }
        return 0;
    }
    if (reserve_u32(tmp, n))
        return SL_ENOMEM;
    uint32_t *t = (uint32_t *)(void *)tmp->p;
    size_t at[257] = {0};
    for (size_t i = 0; i < n; i++)
        at[sl__wpu_ccc(r[i]) + 1]++;
    for (int c = 1; c <= 256; c++)
        at[c] += at[c - 1];
    for (size_t i = 0; i < n; i++)
        t[at[sl__wpu_ccc(r[i])]++] = r[i];
    memcpy(r, t, n * sizeof *r);
    return 0;
}

/* One run of non-ASCII bytes. */
static int split_high(split_t *st, const uint8_t *p, size_t n, sl__bytes_t *b1,
                      sl__bytes_t *b2)
{
    /* 1. decode + clean + CJK spacing: at most 3 entries per byte. */
    if (reserve_u32(b1, 3 * n))
        return SL_ENOMEM;
    uint32_t *cp = (uint32_t *)(void *)b1->p;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k = utf8_decode(p + i, n - i, &c);
        if (!k) {
            i++;
            continue;
        }
        i += k;
        if (c == 0xFFFD || sl__wpu_is_other(c))
            continue;
        if (sl__wpu_is_space(c)) {
            cp[m++] = BREAK_CP;
        } else if (sl__wpu_is_cjk(c)) {
            cp[m++] = BREAK_CP;
            cp[m++] = c;
            cp[m++] = BREAK_CP;
        } else {
            cp[m++] = c;
        }
    }

    /* 2. uncased: NFD (decompose, then canonical order of non-starters). */
    if (st->wp->uncased) {
        size_t cap = 4 * m + 16;
        if (reserve_u32(b2, cap))
            return SL_ENOMEM;
        uint32_t *d = (uint32_t *)(void *)b2->p;
        size_t k = 0;
        for (size_t i = 0; i < m; i++) {
            if (cp[i] == BREAK_CP || cp[i] < 0xC0 ||
                !sl__wpu_decomposes(cp[i])) {
                d[k++] = cp[i];
                continue;
            }
            if (k + 8 > cap) {
                cap = 2 * cap + 8;
                if (reserve_u32(b2, cap))
                    return SL_ENOMEM;
                d = (uint32_t *)(void *)b2->p;
            }
            int bc = 0;
            utf8proc_ssize_t r = utf8proc_decompose_char(
                (utf8proc_int32_t)cp[i], (utf8proc_int32_t *)(d + k), 8,
                UTF8PROC_DECOMPOSE, &bc);
            if (r < 1 || r > 8) {
                d[k++] = cp[i];
                continue;
            }
            k += (size_t)r;
        }
        /* Canonical ordering: stable sort of each maximal run of
         * non-starters by combining class. b1 is free again (its code
         * points are decomposed into d). */
        for (size_t i = 0; i < k;) {
            if (d[i] == BREAK_CP || !sl__wpu_ccc(d[i])) {
                i++;
                continue;
            }
            size_t j = i + 1;
            while (j < k && d[j] != BREAK_CP && sl__wpu_ccc(d[j]))
                j++;
            if (j - i > 1 && sort_marks(d + i, j - i, b1))
                return SL_ENOMEM;
            i = j;
        }
        cp = d;
        m = k;
    }

    /* 3. strip accents + lowercase (uncased), then pre-tokenize. */
    int rc;
    for (size_t i = 0; i < m; i++) {
        uint32_t c = cp[i];
        if (c == BREAK_CP) {
            if ((rc = end_word(st)) || (rc = maybe_flush(st)))
                return rc;
            continue;
        }
        if (st->wp->uncased) {
            if (sl__wpu_is_mn(c))
                continue;
            c = sl__wpu_lower(c);
        }
        if (c < 0x80) {
            int cls = ascii_class[c];
            if (cls == K_SPACE) {
                if ((rc = end_word(st)))
                    return rc;
                continue;
            }
            if (cls == K_PUNCT) {
                if ((rc = end_word(st)) || (rc = append_cp(st, c)) ||
                    (rc = end_word(st)))
                    return rc;
                continue;
            }
            /* K_DROP cannot come out of NFD/lowercase; K_WORD appends. */
        } else if (sl__wpu_is_space(c)) {
            if ((rc = end_word(st)))
                return rc;
            continue;
        } else if (sl__wpu_is_punct(c)) {
            if ((rc = end_word(st)) || (rc = append_cp(st, c)) ||
                (rc = end_word(st)))
                return rc;
            continue;
        }
        if ((rc = append_cp(st, c)))
            return rc;
    }
    return 0;
}

/* The added special token starting at p (p[0] == '['), or -1. */
static int32_t match_special(const struct sl__wp *wp, const uint8_t *p,
                             size_t n, size_t *len)
{
    for (int i = 0; i < SL__WP_NSPECIAL; i++) {
        if (wp->special[i] < 0)
            continue;
        size_t k = strlen(sl__wp_special_names[i]);
        if (k <= n && memcmp(p, sl__wp_special_names[i], k) == 0) {
            *len = k;
            return wp->special[i];
        }
    }
    return -1;
}

int sl__bert_split(const struct sl__wp *wp, const char *text, size_t n,
                   sl__tok_scratch_t *s, sl__wp_sink_fn sink, void *ctx)
{
    static unsigned char lower_tab[256], same_tab[256];
    static int tabs_ready; /* benign race: every writer writes the same */
    if (!tabs_ready) {
        for (int c = 0; c < 256; c++) {
            same_tab[c] = (unsigned char)c;
            lower_tab[c] = (unsigned char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        __atomic_store_n(&tabs_ready, 1, __ATOMIC_RELEASE);
    }
    const unsigned char *lower = wp->uncased ? lower_tab : same_tab;
    split_t st = {wp, &s->wp_buf[0], &s->wp_buf[1], 0, 0, 0, sink, ctx};
    st.wb->n = 0;
    const uint8_t *p = (const uint8_t *)text;
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        unsigned c = p[i];
        switch (ascii_class[c]) {
        case K_WORD: {
            size_t j = i;
            if (!st.wlong) {
                if (sl__bytes_reserve(st.wb,
                                      st.wb->n + SL__WP_MAX_WORD_BYTES + 8))
                    return SL_ENOMEM;
                size_t room = st.wstart + SL__WP_MAX_WORD_BYTES - st.wb->n;
                size_t lim = n - i > room ? i + room + 1 : n;
                uint8_t *d = st.wb->p + st.wb->n;
                while (j < lim && ascii_class[p[j]] == K_WORD)
                    *d++ = lower[p[j++]];
                st.wb->n = (size_t)(d - st.wb->p);
                if (st.wb->n - st.wstart > SL__WP_MAX_WORD_BYTES) {
                    st.wlong = 1;
                    st.wb->n = st.wstart;
                }
            }
            if (st.wlong)
                while (j < n && ascii_class[p[j]] == K_WORD)
                    j++;
            i = j;
            break;
        }
        case K_SPACE:
            i++;
            if (!(rc = end_word(&st)))
                rc = maybe_flush(&st);
            break;
        case K_PUNCT: {
            size_t len;
            int32_t id = c == '[' ? match_special(wp, p + i, n - i, &len) : -1;
            if ((rc = end_word(&st)))
                break;
            if (id >= 0) {
                rc = push_rec(&st, id);
                i += len;
                break;
            }
            if (!(rc = append_cp(&st, c)) && !(rc = end_word(&st)))
                rc = maybe_flush(&st);
            i++;
            break;
        }
        case K_DROP:
            i++;
            break;
        default: { /* K_HIGH */
            size_t j = i + 1;
            while (j < n && p[j] >= 0x80)
                j++;
            rc = split_high(&st, p + i, j - i, &s->wp_buf[2], &s->wp_buf[3]);
            i = j;
            break;
        }
        }
    }
    if (!rc)
        rc = end_word(&st);
    if (!rc)
        rc = flush(&st);
    return rc;
}
