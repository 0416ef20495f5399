/* text/wordpiece: BERT WordPiece, private to src/text (and its tests).
 *
 * Exactly what HF `tokenizers` does for BertWordPieceTokenizer(vocab,
 * lowercase, strip_accents, clean_text, handle_chinese_chars), without the
 * [CLS]/[SEP] post-processing:
 *   added tokens   the vocabulary's [UNK] [SEP] [CLS] [PAD] [MASK], found
 *                  verbatim in the raw text, become their ids (HF registers
 *                  them as special added tokens, matched before anything);
 *   normalizer     (bert_basic.c) drop U+0000, U+FFFD and "other" (C*)
 *                  chars, map whitespace to ' ', spaces around CJK
 *                  ideographs, then (uncased) NFD, drop Mn, lowercase;
 *   pre-tokenizer  split on whitespace, isolate punctuation;
 *   model          (wordpiece.c) greedy longest-match-first with "##",
 *                  words over 100 chars and unmatchable words -> [UNK].
 * Invalid UTF-8 in the text: each invalid byte is dropped, as if the text
 * were decoded with errors="replace" (U+FFFD, which the normalizer drops).
 *
 * Depends on base and utf8proc. A loaded sl__wp is immutable: encode is
 * thread-safe with one scratch per thread. */
#ifndef SL_WORDPIECE_H
#define SL_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#include "text/tok_internal.h"

/* Tokens longer than this (bytes) are kept in the vocabulary but can never
 * match: a word is at most 100 chars of at most 4 bytes. */
#define SL__WP_MAX_CHARS 100
#define SL__WP_MAX_WORD_BYTES (4 * SL__WP_MAX_CHARS)

/* Open-addressing map from token bytes to id (linear probing). */
typedef struct sl__wp_slot {
    uint32_t tag; /* high half of the hash; 0 = empty slot is off == 0 */
    uint32_t off; /* into pool, + 1 (0 = empty) */
    uint32_t len;
    int32_t id;
} sl__wp_slot_t;

typedef struct sl__wp_map {
    sl__wp_slot_t *slot;
    size_t mask;
} sl__wp_map_t;

enum { SL__WP_NSPECIAL = 5 };

struct sl__wp {
    char *pool;        /* all token bytes, back to back */
    sl__wp_map_t all;  /* full token -> id */
    sl__wp_map_t cont; /* token without its "##" -> id ("##x" tokens) */
    size_t n_tokens;   /* distinct tokens (= lines) */
    uint32_t max_len;  /* longest word-initial token, bytes */
    uint32_t max_cont; /* longest continuation (without "##"), bytes */
    int32_t unk;       /* id of [UNK] */
    int32_t special[SL__WP_NSPECIAL]; /* [UNK] [SEP] [CLS] [PAD] [MASK] or -1 */
    int uncased;                      /* NFD + strip accents + lowercase */
};

/* The special added tokens, in the order of struct sl__wp.special. */
extern const char *const sl__wp_special_names[SL__WP_NSPECIAL];

/* Loads a vocab.txt held in memory (name is used in messages only).
 * Line i (0-based, split on '\n', trailing whitespace trimmed) is token id i.
 * Errors (SL_ECORRUPT, naming name:line): empty vocabulary, invalid UTF-8,
 * a duplicate token (HF would silently keep the later id), no [UNK]. */
int sl__wp_load_mem(const void *data, size_t n, const char *name, int uncased,
                    struct sl__wp **out, char *err, size_t errlen);
/* Same, wrapped in an sl__tok_t (kind SL__TOK_WORDPIECE). */
int sl__wordpiece_load_mem(const void *data, size_t n, const char *name,
                           int uncased, sl__tok_t **out, char *err,
                           size_t errlen);

/* Id of token bytes w[0..n) in a map, or -1. */
int32_t sl__wp_map_get(const struct sl__wp *wp, const sl__wp_map_t *m,
                       const char *w, size_t n);

/* ---- bert_basic.c: normalizer + pre-tokenizer ---- */

/* A finished pre-token in the word buffer: bytes [prev end, end). special
 * >= 0: an added token's id (no bytes); SL__WP_WORD_LONG: over
 * SL__WP_MAX_WORD_BYTES (bytes beyond were not kept: it is [UNK]). */
typedef struct sl__wp_word {
    uint32_t end;
    int32_t special;
} sl__wp_word_t;
#define SL__WP_WORD_PLAIN (-1)
#define SL__WP_WORD_LONG (-2)

/* Called with a batch of words: their bytes in buf, words w[0..nw).
 * Returns 0 or a negative SL_E* code (stops the split). */
typedef int (*sl__wp_sink_fn)(void *ctx, const char *buf,
                              const sl__wp_word_t *w, size_t nw);

/* Normalizes and pre-tokenizes text[0..n), handing words to sink in
 * batches (in order). Uses s->wp_buf[0..3]. */
int sl__bert_split(const struct sl__wp *wp, const char *text, size_t n,
                   sl__tok_scratch_t *s, sl__wp_sink_fn sink, void *ctx);

#endif
