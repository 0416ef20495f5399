/* text/bpe: byte-level BPE encoding, as tiktoken's CoreBPE::encode_native:
 * split at allowed special tokens, pre-tokenize each stretch with the
 * encoding's pattern (PCRE2 JIT), then encode each piece (bpe_merge.c). */
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
    free(s->bpe_work);
    s->bpe_work = NULL;
    s->bpe_work_cap = 0;
    free(s->bpe_cache);
    s->bpe_cache = NULL;
    sl__bytes_free(&s->bpe_buf);
}

/* Pre-tokenizes text[0..n) (valid UTF-8) and encodes each piece; *used:
 * where the last piece encoded ends. more: text goes on past n, so only
 * matches that PCRE2 completes without reaching n are taken (partial-hard
 * matching reports the others as partial): what they are cannot change
 * with the bytes that follow, whatever they are. */
static int encode_ordinary(const struct sl__bpe *b, const uint8_t *text,
                           size_t n, int more, sl__tok_scratch_t *s,
                           sl__ids_t *ids, size_t *used, char *err,
                           size_t errlen)
{
    pcre2_match_data *md = s->bpe_md;
    const pcre2_code *re = b->re;
    uint32_t opt = more ? PCRE2_PARTIAL_HARD : 0;
    PCRE2_SIZE pos = 0;
    *used = 0;
    while (pos < n) {
        int rc = b->jit ? pcre2_jit_match(re, text, n, pos, opt, md, NULL)
                        : pcre2_match(re, text, n, pos,
                                      PCRE2_NO_UTF_CHECK | opt, md, NULL);
        if (rc == PCRE2_ERROR_PARTIAL)
            return 0;
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
        rc = sl__bpe_encode_piece(b, text + ov[0], ov[1] - ov[0],
                                  SL__BPE_PATH_AUTO, s, ids, err, errlen);
        if (rc)
            return rc;
        pos = ov[1];
        *used = pos;
    }
    *used = more ? *used : n;
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

/* Where in t[from..n) a special token may begin that the bytes after n
 * would complete (the ordinary text must stop there), or n. */
static size_t special_tail(const struct sl__bpe *b, const uint8_t *t, size_t n,
                           size_t from)
{
    for (size_t i = from; i < n; i++) {
        if (!b->sp_first[t[i]])
            continue;
        for (size_t k = 0; k < b->nsp; k++)
            if (b->sp[k].n > n - i && !memcmp(t + i, b->sp[k].s, n - i))
                return i;
    }
    return n;
}

/* sl__bpe_encode_part on valid UTF-8. */
static int encode_valid(const struct sl__bpe *b, const uint8_t *p, size_t n,
                        int more, int allow_special, sl__tok_scratch_t *s,
                        sl__ids_t *ids, size_t *used, char *err, size_t errlen)
{
    if (!allow_special || !b->nsp)
        return encode_ordinary(b, p, n, more, s, ids, used, err, errlen);
    size_t start = 0;
    for (;;) {
        size_t at = n, u;
        long k = find_special(b, p, n, start, &at);
        /* text up to a special token ends there; the last stretch goes
         * on past n, unless a special token may start in it */
        int go_on = k < 0 && more;
        if (go_on)
            at = special_tail(b, p, n, start);
        int rc = encode_ordinary(b, p + start, at - start, go_on, s, ids, &u,
                                 err, errlen);
        *used = start + u;
        if (rc || k < 0)
            return rc;
        if (sl__ids_push(ids, b->sp[k].id))
            return sl__fail(err, errlen, SL_ENOMEM, "bpe: out of memory");
        start = at + b->sp[k].n;
        *used = start;
    }
}

int sl__bpe_encode_part(const sl__tok_t *t, const char *text, size_t n,
                        int more, int allow_special, sl__tok_scratch_t *s,
                        sl__ids_t *ids, size_t *used, char *err, size_t errlen)
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
    size_t m = more ? sl__utf8_settled(p, n) : n;
    if (sl__utf8_valid_prefix(p, m) == m)
        return encode_valid(b, p, m, more, allow_special, s, ids, used, err,
                            errlen);
    /* bytes input: invalid UTF-8 becomes U+FFFD first (docs/TEXT.md) */
    if (sl__utf8_repair(p, m, &s->bpe_buf))
        return sl__fail(err, errlen, SL_ENOMEM, "bpe: out of memory");
    size_t u;
    int rc = encode_valid(b, s->bpe_buf.p, s->bpe_buf.n, more, allow_special, s,
                          ids, &u, err, errlen);
    *used = u == s->bpe_buf.n ? m : sl__utf8_raw_offset(p, m, u);
    return rc;
}

int sl__bpe_encode(const sl__tok_t *t, const char *text, size_t n,
                   int allow_special, sl__tok_scratch_t *s, sl__ids_t *ids,
                   char *err, size_t errlen)
{
    size_t used;
    return sl__bpe_encode_part(t, text, n, 0, allow_special, s, ids, &used, err,
                               errlen);
}
