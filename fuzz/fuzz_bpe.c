/* Fuzz target: the byte-level BPE loaders and encoder. data[0] picks:
 *   0: GPT-2 loader, encoder.json and vocab.bpe split at the first NUL;
 *   1: tiktoken rank-file loader (encoding from data[1]);
 *   2: encode data[1..] with the real GPT-2 vocabulary, loaded once from
 *      $SL_SHARED_DATA/vocab (skipped when absent, e.g. in CI replay).
 * A loaded tokenizer also encodes the input itself, with and without
 * special tokens, and as one piece by both merge paths (bpe_merge.c),
 * which must agree, and in parts as a stream (sl__tok_encode_part), which
 * must give the ids of the whole. Nothing may crash, leak or read out of
 * bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"

static const char *const ENCS[] = {"gpt2", "cl100k_base", "o200k_base",
                                   "p50k_edit"};

/* d[0..n) fed `step` bytes at a time must give `whole`'s ids. */
static void parts_equal_whole(const sl__tok_t *t, const uint8_t *d, size_t n,
                              int special, size_t step, sl__tok_scratch_t *s,
                              const sl__ids_t *whole)
{
    char err[256];
    sl__ids_t ids = {0};
    size_t start = 0, end = 0;
    while (end < n || start < end) {
        end = end + step < n ? end + step : n;
        size_t used;
        if (sl__tok_encode_part(t, (const char *)d + start, end - start,
                                end < n, special, s, &ids, &used, err,
                                sizeof err) ||
            used > end - start)
            abort();
        start += used;
    }
    if (ids.n != whole->n ||
        (ids.n && memcmp(ids.v, whole->v, ids.n * sizeof *ids.v)))
        abort();
    sl__ids_free(&ids);
}

static void encode_all(const sl__tok_t *t, const uint8_t *d, size_t n)
{
    char err[256];
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    if (!s)
        return;
    for (int special = 0; special <= 1; special++) {
        ids.n = 0;
        if (sl__tok_encode(t, (const char *)d, n, special, s, &ids, err,
                           sizeof err))
            continue;
        for (size_t i = 0; i < ids.n; i++)
            if (ids.v[i] < 0 || (size_t)ids.v[i] >= sl__tok_vocab_size(t))
                abort();
        parts_equal_whole(t, d, n, special, 1 + n % 13, s, &ids);
    }
    if (n >= 2 && n <= SL__BPE_LARGE) {
        sl__ids_t heap = {0};
        ids.n = 0;
        int a = sl__bpe_encode_piece(t->bpe, d, n, SL__BPE_PATH_SCAN, s, &ids,
                                     err, sizeof err);
        int b = sl__bpe_encode_piece(t->bpe, d, n, SL__BPE_PATH_TREE, s, &heap,
                                     err, sizeof err);
        if (a != b || (!a && (ids.n != heap.n ||
                              memcmp(ids.v, heap.v, ids.n * sizeof *ids.v))))
            abort();
        sl__ids_free(&heap);
    }
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(s);
}

static sl__tok_t *real_gpt2(void)
{
    static int tried;
    static sl__tok_t *t;
    if (tried)
        return t;
    tried = 1;
    const char *d = getenv("SL_SHARED_DATA");
    if (!d)
        return NULL;
    char e[4096], m[4096], err[512];
    snprintf(e, sizeof e, "%s/vocab/gpt2-encoder.json", d);
    snprintf(m, sizeof m, "%s/vocab/gpt2-vocab.bpe", d);
    if (sl__bpe_load_gpt2(e, m, &t, err, sizeof err))
        t = NULL;
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    char err[512];
    sl__tok_t *t = NULL;
    const char *p = (const char *)data + 2;
    size_t n = size - 2;
    switch (data[0] % 3) {
    case 0: {
        const char *z = memchr(p, 0, n);
        size_t en = z ? (size_t)(z - p) : n;
        const char *m = z ? z + 1 : p + n;
        size_t mn = z ? n - en - 1 : 0;
        if (!sl__bpe_load_gpt2_mem(p, en, "encoder.json", m, mn, "vocab.bpe",
                                   &t, err, sizeof err)) {
            encode_all(t, data, size);
            sl__tok_free(t);
        }
        break;
    }
    case 1:
        if (!sl__bpe_load_tiktoken_mem(p, n, "ranks", ENCS[data[1] % 4], &t,
                                       err, sizeof err)) {
            encode_all(t, data, size);
            sl__tok_free(t);
        }
        break;
    case 2:
        if ((t = real_gpt2()))
            encode_all(t, data + 1, size - 1);
        break;
    }
    return 0;
}
