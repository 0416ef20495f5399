/* text/tokenizer: exact tokenizers of the reference implementations.
 *   - byte-level BPE (GPT-2 encoder.json + vocab.bpe; tiktoken rank files
 *     such as cl100k_base), with each encoding's pre-tokenization regex
 *     (PCRE2, JIT) and merges by rank: ids equal to tiktoken's;
 *   - WordPiece (BERT): basic tokenizer (utf8proc: NFD, accents, categories)
 *     then greedy longest-match-first: ids equal to HF tokenizers'.
 * Depends on base only. A tokenizer is immutable after load: encode is
 * thread-safe when each thread passes its own sl__tok_scratch_t. */
#ifndef SL_TOKENIZER_H
#define SL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* The largest vocabulary file read (a rank file, encoder.json, vocab.bpe,
 * a WordPiece vocab.txt): the largest real ones are a few MB (o200k_base:
 * 3.6 MB); more is not a vocabulary, and is refused before it is read. */
#define SL__VOCAB_MAX_BYTES ((size_t)64 << 20)

typedef struct sl__tok sl__tok_t;
typedef struct sl__tok_scratch sl__tok_scratch_t;

/* Growable id output. */
typedef struct sl__ids {
    int32_t *v;
    size_t n, cap;
} sl__ids_t;
int sl__ids_push(sl__ids_t *ids, int32_t id);
void sl__ids_free(sl__ids_t *ids);

/* GPT-2: encoder.json + vocab.bpe (data_gym format). */
int sl__bpe_load_gpt2(const char *encoder_json, const char *vocab_bpe,
                      sl__tok_t **out, char *err, size_t errlen);
/* tiktoken rank file ("base64-token rank" per line) with the named
 * encoding's pattern and special tokens ("cl100k_base", "gpt2", ...). */
int sl__bpe_load_tiktoken(const char *ranks_path, const char *encoding,
                          sl__tok_t **out, char *err, size_t errlen);
/* BERT vocab.txt (one token per line, id = line number). */
int sl__wordpiece_load(const char *vocab_txt, int uncased, sl__tok_t **out,
                       char *err, size_t errlen);
void sl__tok_free(sl__tok_t *t);
/* Whether `encoding` names one of the BPE encodings (gpt2, r50k_base,
 * p50k_base, p50k_edit, cl100k_base, o200k_base). */
int sl__bpe_encoding_known(const char *encoding);

/* The one place that chooses a tokenizer from its name (tok_open.c):
 * "wordpiece" reads vocab.txt, uncased unless `cased` (as bert-base-uncased
 * and HF BertTokenizer's do_lower_case=True); "gpt2" with `merges` reads
 * encoder.json + vocab.bpe; any other BPE encoding name (and gpt2 without
 * merges) reads a tiktoken rank file. `merges` and `cased` are ignored
 * where they do not apply. @return 0, SL_EINVAL (no name or vocab),
 * SL_EUNSUPPORTED (unknown name), or the loader's error. */
int sl__tok_open(const char *name, const char *vocab, const char *merges,
                 int cased, sl__tok_t **out, char *err, size_t errlen);

sl__tok_scratch_t *sl__tok_scratch_create(void);
void sl__tok_scratch_destroy(sl__tok_scratch_t *s);

/* Appends the ids of text[0..n) to ids. allow_special: special tokens
 * (e.g. <|endoftext|>) in the text become their ids, as tiktoken's
 * allowed_special="all"; otherwise they are ordinary text. Invalid UTF-8:
 * see docs/TEXT.md for each tokenizer's documented behaviour. */
int sl__tok_encode(const sl__tok_t *t, const char *text, size_t n,
                   int allow_special, sl__tok_scratch_t *s, sl__ids_t *ids,
                   char *err, size_t errlen);
/* As sl__tok_encode, for text that may go on past n (more = 1: a stream
 * read in blocks): appends the ids of the longest prefix text[0..*used)
 * whose ids no following bytes can change (0 bytes when none is certain
 * yet: call again with more text). more = 0: the text ends at n and all of
 * it is encoded. The ids of successive parts, in order, are exactly the
 * ids of the whole text: a BPE part ends where a pre-token piece ends that
 * the pattern completed before the end (PCRE2 partial matching) and no
 * special token may begin; a WordPiece part after whitespace. What is held
 * back is at most one piece or word, and the bytes before it that it
 * starts with (a special token's prefix, a UTF-8 sequence's). */
int sl__tok_encode_part(const sl__tok_t *t, const char *text, size_t n,
                        int more, int allow_special, sl__tok_scratch_t *s,
                        sl__ids_t *ids, size_t *used, char *err, size_t errlen);
/* Receives ids in order, in runs; nonzero stops the encoding (returned). */
typedef int (*sl__tok_emit_fn)(const int32_t *ids, size_t n, void *ctx);
/* Encodes what fd reads to its end as one text, with sl__tok_encode's ids
 * (tok_stream.c), handing them to emit a block at a time; ids is the
 * scratch for them. Errors name the file (`name`). *bytes (may be NULL):
 * the bytes read. @return 0, emit's nonzero, or an SL_E* code. */
int sl__tok_encode_fd(const sl__tok_t *t, int fd, const char *name,
                      int allow_special, sl__tok_scratch_t *s, sl__ids_t *ids,
                      sl__tok_emit_fn emit, void *ctx, uint64_t *bytes,
                      char *err, size_t errlen);
/* Id of a token string (e.g. "[CLS]", "<|endoftext|>"), or -1. */
int32_t sl__tok_id(const sl__tok_t *t, const char *token);
size_t sl__tok_vocab_size(const sl__tok_t *t);

#endif
