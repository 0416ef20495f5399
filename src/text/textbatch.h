/* text/textbatch: the pure functions behind the text batch modes
 * (docs/TEXT.md "Batch modes"): the epoch plan (document order, chunks),
 * the group shuffle, and the samples one chunk yields (lm windows, mlm
 * instances). Everything is a function of (seed, epoch, chunk), never of a
 * thread, so the loader may run chunks in any order on any thread.
 * Depends on base and text/textsrc. */
#ifndef SL_TEXTBATCH_H
#define SL_TEXTBATCH_H

#include <stddef.h>
#include <stdint.h>

#include "text/textsrc.h"
#include "text/tokenizer.h"

/* One epoch: documents in order `order`, cut into chunks; chunk c holds
 * order[chunk_start[c] .. chunk_start[c + 1]). */
typedef struct sl__text_plan {
    int64_t epoch;
    int64_t ndocs;
    int64_t *order;
    int64_t nchunks;
    int64_t *chunk_start; /* nchunks + 1 */
} sl__text_plan_t;

/* Document order: Fisher-Yates with the (seed, epoch, 0, SL_RNG_TEXT_DOCS)
 * stream (identity when !shuffle); a chunk closes after the document that
 * brings its stored bytes to >= chunk_bytes. */
int sl__text_plan_make(sl__text_plan_t *p, const sl__textsrc_t *src,
                       uint64_t seed, int64_t epoch, int shuffle,
                       uint64_t chunk_bytes);
void sl__text_plan_free(sl__text_plan_t *p);

/* perm = 0..n-1 shuffled by Fisher-Yates (i from n-1 down to 1, swap with
 * j = below(i + 1)) on the (seed, epoch, item, purpose) stream. */
void sl__text_permute(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch,
                      uint64_t item, uint32_t purpose);

enum { SL__TEXT_LM = 0, SL__TEXT_MLM = 1 };

typedef struct sl__text_spec {
    int task;
    int seq_len;                 /* lm: L (windows of L + 1); mlm: max_len */
    int32_t eos;                 /* lm */
    int32_t cls, sep, mask, pad; /* mlm */
    int32_t vocab_size;
    double mask_prob;
    uint64_t seed;
} sl__text_spec_t;

/* int32 values one sample takes: lm L + 1 (the window); mlm 4 x max_len
 * (input_ids, labels, attention_mask, token_type_ids). */
size_t sl__text_sample_width(const sl__text_spec_t *sp);

/* mlm: packs the documents of one chunk (tokens ids[0..doc_end[ndocs-1]),
 * document k ending at doc_end[k]) into instances and masks them with the
 * (seed, epoch, chunk << 32 | instance, SL_RNG_TEXT_MASK) streams. Appends
 * the samples to out; returns how many, or < 0 (SL_ENOMEM). */
int64_t sl__text_mlm_build(const sl__text_spec_t *sp, const int32_t *ids,
                           const size_t *doc_end, size_t ndocs, int64_t epoch,
                           int64_t chunk, sl__ids_t *out);

#endif
