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
        rc = sl__bpe_encode_piece(b, text + ov[0], ov[1] - ov[0],
                                  SL__BPE_PATH_AUTO, s, ids, err, errlen);
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
