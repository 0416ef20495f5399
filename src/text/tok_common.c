/* text/tok_common: what BPE and WordPiece share: id vectors, scratch, and
 * the dispatch on the tokenizer's kind. */
#include <stdlib.h>

#include "base/alloc.h"
#include "text/tok_internal.h"

int sl__ids_push(sl__ids_t *ids, int32_t id)
{
    if (sl__array_reserve(&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v, 256))
        return SL_ENOMEM;
    ids->v[ids->n++] = id;
    return 0;
}

void sl__ids_free(sl__ids_t *ids)
{
    if (!ids)
        return;
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

void sl__tok_free(sl__tok_t *t)
{
    if (!t)
        return;
    if (t->kind == SL__TOK_BPE)
        sl__bpe_free(t->bpe);
    else if (t->kind == SL__TOK_WORDPIECE)
        sl__wp_free(t->wp);
    free(t);
}

sl__tok_scratch_t *sl__tok_scratch_create(void)
{
    return calloc(1, sizeof(sl__tok_scratch_t));
}

void sl__tok_scratch_destroy(sl__tok_scratch_t *s)
{
    if (!s)
        return;
    sl__bpe_scratch_release(s);
    for (size_t i = 0; i < sizeof s->wp_buf / sizeof s->wp_buf[0]; i++)
        sl__bytes_free(&s->wp_buf[i]);
    free(s->wp_extra);
    free(s);
}

int sl__tok_encode(const sl__tok_t *t, const char *text, size_t n,
                   int allow_special, sl__tok_scratch_t *s, sl__ids_t *ids,
                   char *err, size_t errlen)
{
    if (!t || !s || !ids || (!text && n))
        return sl__fail(err, errlen, SL_EINVAL, "tokenize: invalid argument");
    switch (t->kind) {
    case SL__TOK_BPE:
        return sl__bpe_encode(t, text, n, allow_special, s, ids, err, errlen);
    case SL__TOK_WORDPIECE:
        return sl__wp_encode(t, text, n, s, ids, err, errlen);
    }
    return sl__fail(err, errlen, SL_EINVAL, "tokenize: unknown tokenizer kind");
}

int sl__tok_encode_part(const sl__tok_t *t, const char *text, size_t n,
                        int more, int allow_special, sl__tok_scratch_t *s,
                        sl__ids_t *ids, size_t *used, char *err, size_t errlen)
{
    *used = 0;
    if (!t || !s || !ids || (!text && n))
        return sl__fail(err, errlen, SL_EINVAL, "tokenize: invalid argument");
    if (t->kind == SL__TOK_BPE)
        return sl__bpe_encode_part(t, text, n, more, allow_special, s, ids,
                                   used, err, errlen);
    size_t cut = more ? sl__wp_cut(text, n) : n;
    int rc = sl__tok_encode(t, text, cut, allow_special, s, ids, err, errlen);
    *used = rc ? 0 : cut;
    return rc;
}

int32_t sl__tok_id(const sl__tok_t *t, const char *token)
{
    if (!t || !token)
        return -1;
    if (t->kind == SL__TOK_BPE)
        return sl__bpe_id(t->bpe, token);
    if (t->kind == SL__TOK_WORDPIECE)
        return sl__wp_id(t->wp, token);
    return -1;
}

size_t sl__tok_vocab_size(const sl__tok_t *t)
{
    if (!t)
        return 0;
    if (t->kind == SL__TOK_BPE)
        return sl__bpe_size(t->bpe);
    if (t->kind == SL__TOK_WORDPIECE)
        return sl__wp_size(t->wp);
    return 0;
}
