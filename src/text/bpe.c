/* text/bpe: byte-level BPE encoding, as tiktoken's CoreBPE::encode_native:
 * split at allowed special tokens, pre-tokenize each stretch with the
 * encoding's pattern (PCRE2 JIT), then per piece: its rank when the whole
 * piece is a token, else byte_pair_merge (repeatedly merge the adjacent
 * pair whose concatenation has the lowest rank; leftmost on ties). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"

void sl__bpe_scratch_release(sl__tok_scratch_t *s)
{
    pcre2_match_data_free((pcre2_match_data *)s->bpe_md);
    s->bpe_md = NULL;
    s->bpe_md_owner = NULL;
    free(s->bpe_parts);
    free(s->bpe_rank);
    s->bpe_parts = s->bpe_rank = NULL;
    s->bpe_cap = 0;
    free(s->bpe_cache);
    s->bpe_cache = NULL;
    sl__bytes_free(&s->bpe_buf);
}

static inline uint32_t rank_of(const struct sl__bpe *b, const uint8_t *p,
                               size_t n)
{
    if (n == 2)
        return b->pair2[p[0] << 8 | p[1]];
    if (n == 1)
        return b->byte_rank[p[0]];
    return sl__bpe_map_get(&b->map, p, n);
}

static int missing(const uint8_t *p, size_t n, char *err, size_t errlen)
{
    return sl__fail(err, errlen, SL_ECORRUPT,
                    "bpe: vocabulary has no token for bytes of a piece "
                    "(first byte 0x%02x, %zu bytes)",
                    p[0], n);
}

/* byte_pair_merge over piece p[0..n), n >= 2. */
static int merge_piece(const struct sl__bpe *b, const uint8_t *p, size_t n,
                       sl__tok_scratch_t *s, sl__ids_t *ids, char *err,
                       size_t errlen)
{
    if (n + 1 > s->bpe_cap) {
        size_t cap = n + 1 < 256 ? 256 : (n + 1) * 2;
        uint32_t *a = realloc(s->bpe_parts, cap * sizeof *a);
        if (!a)
            return SL_ENOMEM;
        s->bpe_parts = a;
        uint32_t *r = realloc(s->bpe_rank, cap * sizeof *r);
        if (!r)
            return SL_ENOMEM;
        s->bpe_rank = r;
        s->bpe_cap = cap;
    }
    uint32_t *st = s->bpe_parts, *rk = s->bpe_rank;
    /* parts: st[0..m) boundaries (m = parts + 1); rk[i] = rank of
     * p[st[i]..st[i+2]) (the merge of parts i and i+1) */
    size_t m = n + 1;
    uint32_t minr = SL__BPE_NORANK;
    size_t mini = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        st[i] = (uint32_t)i;
        uint32_t r = b->pair2[p[i] << 8 | p[i + 1]];
        rk[i] = r;
        if (r < minr) {
            minr = r;
            mini = i;
        }
    }
    st[n - 1] = (uint32_t)(n - 1);
    rk[n - 1] = SL__BPE_NORANK;
    st[n] = (uint32_t)n;
    rk[n] = SL__BPE_NORANK;
    while (minr != SL__BPE_NORANK) {
        size_t i = mini;
        /* merge parts i and i+1: drop boundary i+1 */
        if (i > 0)
            rk[i - 1] = i + 2 < m
                            ? rank_of(b, p + st[i - 1], st[i + 2] - st[i - 1])
                            : SL__BPE_NORANK;
        rk[i] = i + 3 < m ? rank_of(b, p + st[i], st[i + 3] - st[i])
                          : SL__BPE_NORANK;
        memmove(st + i + 1, st + i + 2, (m - i - 2) * sizeof *st);
        memmove(rk + i + 1, rk + i + 2, (m - i - 2) * sizeof *rk);
        m--;
        minr = SL__BPE_NORANK;
        for (size_t k = 0; k + 1 < m; k++)
            if (rk[k] < minr) {
                minr = rk[k];
                mini = k;
            }
    }
    for (size_t i = 0; i + 1 < m; i++) {
        uint32_t r = rank_of(b, p + st[i], st[i + 1] - st[i]);
        if (r == SL__BPE_NORANK)
            return missing(p + st[i], st[i + 1] - st[i], err, errlen);
        if (sl__ids_push(ids, (int32_t)r))
            return SL_ENOMEM;
    }
    return 0;
}

static int encode_piece(const struct sl__bpe *b, const uint8_t *p, size_t n,
                        sl__tok_scratch_t *s, sl__ids_t *ids, char *err,
                        size_t errlen)
{
    uint32_t r = rank_of(b, p, n);
    if (r != SL__BPE_NORANK)
        return sl__ids_push(ids, (int32_t)r) ? SL_ENOMEM : 0;
    if (n == 1)
        return missing(p, n, err, errlen);
    int rc = merge_piece(b, p, n, s, ids, err, errlen);
    return rc == SL_ENOMEM ? sl__fail(err, errlen, rc, "bpe: out of memory")
                           : rc;
}

/* Pre-tokenizes text[0..n) (valid UTF-8) and encodes each piece. */
static int encode_ordinary(const struct sl__bpe *b, const uint8_t *text,
                           size_t n, sl__tok_scratch_t *s, sl__ids_t *ids,
                           char *err, size_t errlen)
{
    pcre2_match_data *md = s->bpe_md;
    const pcre2_code *re = b->re;
    PCRE2_SIZE pos = 0;
    while (pos < n) {
        int rc = b->jit ? pcre2_jit_match(re, text, n, pos, 0, md, NULL)
                        : pcre2_match(re, text, n, pos, PCRE2_NO_UTF_CHECK, md,
                                      NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return sl__fail(err, errlen, SL_EINVAL, "bpe: pattern match: %s",
                            (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) { /* cannot happen with these patterns */
            pos = ov[1] + 1;
            continue;
        }
        rc = encode_piece(b, text + ov[0], ov[1] - ov[0], s, ids, err, errlen);
        if (rc)
            return rc;
        pos = ov[1];
    }
    return 0;
}

/* First allowed special token at or after `from`: its index, or -1. */
static long find_special(const struct sl__bpe *b, const uint8_t *t, size_t n,
                         size_t from, size_t *at)
{
    for (size_t i = from; i < n; i++) {
        if (!b->sp_first[t[i]])
            continue;
        for (size_t k = 0; k < b->nsp; k++)
            if (b->sp[k].n <= n - i && !memcmp(t + i, b->sp[k].s, b->sp[k].n)) {
                *at = i;
                return (long)k;
            }
    }
    return -1;
}

int sl__bpe_encode(const sl__tok_t *t, const char *text, size_t n,
                   int allow_special, sl__tok_scratch_t *s, sl__ids_t *ids,
                   char *err, size_t errlen)
{
    const struct sl__bpe *b = t->bpe;
    if (s->bpe_md_owner != b->re) {
        pcre2_match_data_free((pcre2_match_data *)s->bpe_md);
        s->bpe_md = pcre2_match_data_create_from_pattern(b->re, NULL);
        if (!s->bpe_md)
            return sl__fail(err, errlen, SL_ENOMEM, "bpe: out of memory");
        s->bpe_md_owner = b->re;
    }
    const uint8_t *p = (const uint8_t *)text;
    /* bytes input: invalid UTF-8 becomes U+FFFD first (docs/TEXT.md) */
    if (sl__utf8_valid_prefix(p, n) != n) {
        if (sl__utf8_repair(p, n, &s->bpe_buf))
            return sl__fail(err, errlen, SL_ENOMEM, "bpe: out of memory");
        p = s->bpe_buf.p;
        n = s->bpe_buf.n;
    }
    if (!allow_special || !b->nsp)
        return encode_ordinary(b, p, n, s, ids, err, errlen);
    size_t start = 0;
    for (;;) {
        size_t at = n;
        long k = find_special(b, p, n, start, &at);
        int rc = encode_ordinary(b, p + start, at - start, s, ids, err, errlen);
        if (rc)
            return rc;
        if (k < 0)
            return 0;
        if (sl__ids_push(ids, b->sp[k].id))
            return sl__fail(err, errlen, SL_ENOMEM, "bpe: out of memory");
        start = at + b->sp[k].n;
    }
}
