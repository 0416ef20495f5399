/* Fuzz target: WordPiece vocab loading and encoding. The input's first
 * byte picks the mode: even, the rest is a vocab.txt (loaded from memory,
 * then used on a fixed text); odd, the rest is text for a small fixed
 * vocabulary (cased and uncased). Ids must stay in the vocabulary. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/wordpiece.h"

static const char small_vocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
    "a\nb\nab\n##b\n##c\n##\xc3\xa9\n\xe4\xb8\xad\n"
    ",\n.\n!\nhello\n##lo\nhel\ne\n";

static void encode(const sl__tok_t *t, const uint8_t *p, size_t n)
{
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    char err[256];
    if (s && sl__tok_encode(t, (const char *)p, n, 0, s, &ids, err,
                            sizeof err) == 0) {
        size_t nv = sl__tok_vocab_size(t);
        for (size_t i = 0; i < ids.n; i++)
            if (ids.v[i] < 0 || (size_t)ids.v[i] >= nv)
                abort();
    }
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char err[256];
    sl__tok_t *t = NULL;
    if (!(data[0] & 1)) {
        if (sl__wordpiece_load_mem(data + 1, size - 1, "fuzz", 1, &t, err,
                                   sizeof err) == 0) {
            static const char text[] = "Hello, w\xc3\xb6rld! ab abc [CLS]";
            encode(t, (const uint8_t *)text, sizeof text - 1);
            sl__tok_free(t);
        }
        return 0;
    }
    for (int uncased = 0; uncased < 2; uncased++) {
        if (sl__wordpiece_load_mem(small_vocab, sizeof small_vocab - 1, "small",
                                   uncased, &t, err, sizeof err))
            abort();
        encode(t, data + 1, size - 1);
        sl__tok_free(t);
    }
    return 0;
}
