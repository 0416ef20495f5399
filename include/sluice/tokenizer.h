/* sluice/tokenizer.h: the tokenizers of the text loader, on their own.
 *
 * Byte-level BPE (GPT-2 encoder.json + vocab.bpe, or a tiktoken rank file
 * such as cl100k_base.tiktoken) gives the ids of tiktoken; WordPiece (BERT
 * vocab.txt) gives those of HF tokenizers' BertWordPieceTokenizer with
 * add_special_tokens=False. docs/TEXT.md says what each does with invalid
 * UTF-8 and which file errors it reports.
 *
 * Threads: a tokenizer is immutable once created; sl_tokenizer_encode,
 * sl_tokenizer_vocab_size and sl_tokenizer_last_error may be called from
 * any number of threads at once on the same tokenizer. Destroy it when no
 * call on it is running. */
#ifndef SLUICE_TOKENIZER_H
#define SLUICE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_tokenizer sl_tokenizer_t;

/** How to build a tokenizer. Caller-allocated: fill it with
 *  sl_tokenizer_options_init first, so that `size` tells the library which
 *  version of the struct it was given (fields are only ever added at the
 *  end). Zero means the default. */
typedef struct sl_tokenizer_options {
    size_t size;        /**< sizeof(sl_tokenizer_options_t), set by _init */
    const char *name;   /**< "gpt2" | "r50k_base" | "p50k_base" | "p50k_edit"
                             | "cl100k_base" | "o200k_base" | "wordpiece" */
    const char *vocab;  /**< gpt2 with merges: encoder.json; other BPE: a
                             tiktoken rank file; wordpiece: vocab.txt */
    const char *merges; /**< gpt2: vocab.bpe (NULL: vocab is a rank file) */
    int cased;          /**< wordpiece: keep case and accents [0: uncased,
                             as bert-base-uncased] */
    int allow_special;  /**< BPE: special tokens written in the text
                             (<|endoftext|>, ...) become their ids, as
                             tiktoken's allowed_special="all" [0: text] */
} sl_tokenizer_options_t;

/** Zeroes *opt and sets opt->size. */
SL_API void sl_tokenizer_options_init(sl_tokenizer_options_t *opt);
SL_API void sl_tokenizer_options_init_sized(sl_tokenizer_options_t *opt,
                                            size_t size);
#define sl_tokenizer_options_init(o)                                           \
    sl_tokenizer_options_init_sized((o), sizeof *(o))

/** Loads the tokenizer `opt` names. The library reads min(opt->size, its
 *  own sizeof) bytes of *opt and keeps no pointer into it.
 *  @return 0 with *out set, or SL_EINVAL (opt NULL, size 0, no name or
 *  vocab), SL_EUNSUPPORTED (unknown name), SL_ENOTFOUND / SL_EIO (a file),
 *  SL_ECORRUPT (a malformed vocabulary), SL_ENOMEM; then
 *  sl_tokenizer_last_error(NULL) says why. */
SL_API int sl_tokenizer_create(const sl_tokenizer_options_t *opt,
                               sl_tokenizer_t **out);

/** Encodes text[0..len) (UTF-8; len bytes, no terminator needed) into ids.
 *  *n is set to the number of ids the text has; the first min(*n, cap) are
 *  written to ids. Valid UTF-8 never makes more ids than bytes, so
 *  cap >= len suffices for it, and cap >= 3 * len for any bytes (BPE reads
 *  an invalid byte as U+FFFD). @return 0, SL_ERANGE (cap < *n: ids holds
 *  the first cap; call again with cap >= *n), SL_EINVAL, SL_ENOMEM, or
 *  SL_ECORRUPT (a rank file lacking a byte the text needs). */
SL_API int sl_tokenizer_encode(sl_tokenizer_t *t, const char *text, size_t len,
                               int32_t *ids, size_t cap, size_t *n);

/** Receives the ids of sl_tokenizer_encode_file in order, in runs (ids
 *  valid during the call only); nonzero stops the encoding. */
typedef int (*sl_tokenizer_emit_fn)(const int32_t *ids, size_t n, void *ctx);

/** Encodes the regular file at `path` as one text: the same ids as
 *  sl_tokenizer_encode of all its bytes, read in blocks and handed to
 *  `emit` as soon as they are certain. Memory held: a block (1 MiB), the
 *  text whose ids are not yet certain (at most one pre-token piece, or
 *  WordPiece word) and that block's ids, not the file: a file of prose
 *  takes a few MB whatever its length; a single piece (a line with no
 *  whitespace) takes about 9 bytes a byte of it (BPE). *bytes (may be
 *  NULL): the bytes read. Messages name the file.
 *  @return 0, emit's nonzero, or as sl_tokenizer_encode and the file's
 *  open/read errors (SL_ENOTFOUND, SL_EIO; a FIFO or device is refused). */
SL_API int sl_tokenizer_encode_file(sl_tokenizer_t *t, const char *path,
                                    sl_tokenizer_emit_fn emit, void *ctx,
                                    uint64_t *bytes);

/** @return how many ids the vocabulary holds (0 for NULL). */
SL_API size_t sl_tokenizer_vocab_size(const sl_tokenizer_t *t);

/** @return the message of the calling thread's last failed sl_tokenizer_*
 *  call (t may be NULL, as after a failed create; "" when none failed).
 *  Valid until this thread's next failing sl_tokenizer_* call. */
SL_API const char *sl_tokenizer_last_error(const sl_tokenizer_t *t);

/** Frees the tokenizer; NULL does nothing. */
SL_API void sl_tokenizer_destroy(sl_tokenizer_t *t);

#ifdef __cplusplus
}
#endif

#endif
