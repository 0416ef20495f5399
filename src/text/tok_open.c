/* text/tok_open: which tokenizer a name means, written once for the CLI,
 * the text loader and the public API (see sl__tok_open in tokenizer.h). */
#include <string.h>

#include "text/tokenizer.h"

int sl__tok_open(const char *name, const char *vocab, const char *merges,
                 int cased, sl__tok_t **out, char *err, size_t errlen)
{
    if (!name)
        return sl__fail(err, errlen, SL_EINVAL, "no tokenizer name given");
    if (!vocab)
        return sl__fail(err, errlen, SL_EINVAL, "no vocabulary file given");
    if (!strcmp(name, "wordpiece"))
        return sl__wordpiece_load(vocab, !cased, out, err, errlen);
    if (!sl__bpe_encoding_known(name))
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "unknown tokenizer '%s' (gpt2, r50k_base, p50k_base, "
                        "p50k_edit, cl100k_base, o200k_base, wordpiece)",
                        name);
    if (!strcmp(name, "gpt2") && merges)
        return sl__bpe_load_gpt2(vocab, merges, out, err, errlen);
    return sl__bpe_load_tiktoken(vocab, name, out, err, errlen);
}
