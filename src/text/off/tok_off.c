/* text/off/tok_off: the tokenizers of a build configured with -DSL_TEXT=OFF
 * (cmake/SluiceComponents.cmake), which compiles none of the BPE and
 * WordPiece sources and so needs neither PCRE2 nor utf8proc. Every load
 * fails with SL_EUNSUPPORTED, so no sl__tok_t ever exists and the entry
 * points tok_common.c dispatches to are never reached; the text loader, the
 * CLI and Python report the message unchanged. */
#include "text/bpe_internal.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

#define SL__TEXT_OFF                                                           \
    "sluice was built without text support (configured with -DSL_TEXT=OFF; "   \
    "the tokenizers need PCRE2 and utf8proc)"

int sl__bpe_load_gpt2(const char *encoder_json, const char *vocab_bpe,
                      sl__tok_t **out, char *err, size_t errlen)
{
    (void)encoder_json, (void)vocab_bpe;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__TEXT_OFF);
}

int sl__bpe_load_tiktoken(const char *ranks_path, const char *encoding,
                          sl__tok_t **out, char *err, size_t errlen)
{
    (void)ranks_path, (void)encoding;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__TEXT_OFF);
}

int sl__wordpiece_load(const char *vocab_txt, int uncased, sl__tok_t **out,
                       char *err, size_t errlen)
{
    (void)vocab_txt, (void)uncased;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__TEXT_OFF);
}

/* Unreachable without a tokenizer; defined for tok_common.c. */
int sl__bpe_encode(const sl__tok_t *t, const char *text, size_t n,
                   int allow_special, sl__tok_scratch_t *s, sl__ids_t *ids,
                   char *err, size_t errlen)
{
    (void)t, (void)text, (void)n, (void)allow_special, (void)s, (void)ids;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__TEXT_OFF);
}

int sl__bpe_encode_part(const sl__tok_t *t, const char *text, size_t n,
                        int more, int allow_special, sl__tok_scratch_t *s,
                        sl__ids_t *ids, size_t *used, char *err, size_t errlen)
{
    (void)t, (void)text, (void)n, (void)more, (void)allow_special, (void)s;
    (void)ids;
    *used = 0;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__TEXT_OFF);
}

size_t sl__wp_cut(const char *text, size_t n)
{
    (void)text;
    return n;
}

int sl__wp_encode(const sl__tok_t *t, const char *text, size_t n,
                  sl__tok_scratch_t *s, sl__ids_t *ids, char *err,
                  size_t errlen)
{
    (void)t, (void)text, (void)n, (void)s, (void)ids;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__TEXT_OFF);
}

void sl__bpe_free(struct sl__bpe *bpe)
{
    (void)bpe;
}
void sl__wp_free(struct sl__wp *wp)
{
    (void)wp;
}
void sl__bpe_scratch_release(sl__tok_scratch_t *s)
{
    (void)s;
}

int32_t sl__bpe_id(const struct sl__bpe *bpe, const char *token)
{
    (void)bpe, (void)token;
    return -1;
}

int32_t sl__wp_id(const struct sl__wp *wp, const char *token)
{
    (void)wp, (void)token;
    return -1;
}

size_t sl__bpe_size(const struct sl__bpe *bpe)
{
    (void)bpe;
    return 0;
}

size_t sl__wp_size(const struct sl__wp *wp)
{
    (void)wp;
    return 0;
}

/* Every name passes, so that the load reports the missing component
 * rather than an unknown encoding. */
int sl__bpe_encoding_known(const char *encoding)
{
    (void)encoding;
    return 1;
}
