/*
 * sluice/text.h: the text loader: documents tokenized into language-model (lm)
 * or masked-language-model (mlm) batches (docs/TEXT.md); the same
 * conventions, positions, knobs and error policy as the image loader.
 */
#ifndef SLUICE_TEXT_H
#define SLUICE_TEXT_H

#include "sluice/sluice.h"
#include "sluice/telemetry.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Text batch modes (docs/TEXT.md gives their exact definitions). */
typedef enum sl_text_task {
    SL_TEXT_LM = 0, /**< windows of seq_len + 1 tokens of the documents
                         joined with EOS: input_ids, labels (shifted) */
    SL_TEXT_MLM = 1 /**< BERT instances of max_len with [CLS]/[SEP], 15 %
                         masked (80/10/10) */
} sl_text_task_t;

/** Text loader options; a zero field takes the default in brackets. Make
 *  one with sl_text_options_init(). */
typedef struct sl_text_options {
    size_t size;           /**< sizeof(sl_text_options_t), by
                                sl_text_options_init */
    int task;              /**< sl_text_task_t [SL_TEXT_LM] */
    const char *tokenizer; /**< "gpt2", a tiktoken encoding name
                                ("cl100k_base", ...) or "wordpiece"
                                [lm: "gpt2", mlm: "wordpiece"] */
    const char *vocab;     /**< encoder.json | rank file | vocab.txt */
    const char *merges;    /**< gpt2: vocab.bpe */
    int cased;             /**< wordpiece: keep case and accents [uncased] */
    int doc_per_file;      /**< plain text: a file is one document [a line] */
    int seq_len;           /**< lm: tokens per sequence [1024]; mlm:
                                max_len [512] */
    int batch_size;        /**< sequences per batch [8] */
    uint64_t seed;         /**< everything random follows the seed [0] */
    int no_shuffle;        /**< 1: documents and windows in source order */
    int drop_last;         /**< 1: no short last batch in an epoch */
    int rank;              /**< this process's rank [0] */
    int world_size;        /**< ranks sharing the data [1] */
    int64_t epochs;        /**< epochs streamed by one start [1] */
    int decode_threads;    /**< tokenizing workers [usable CPUs]; a knob
                                (SL_PARAM_DECODE_THREADS) the scheduler
                                tunes when left at 0 / SL_AUTOTUNE */
    int on_error;          /**< sl_on_error_t [SL_ON_ERROR_FAIL]: FAIL: a bad
                                document ends the stream; SKIP: it is left
                                out, counted and described */
    int32_t eos_id;        /**< lm: token after each document, in 0 ..
                                vocab size - 1 [0: the tokenizer's
                                <|endoftext|>, or [SEP]; id 0 itself:
                                SL_TEXT_GIVEN_EOS_ID in `given`] */
    double mask_prob;      /**< mlm: share of tokens predicted, in [0, 1]
                                [0.15; no masking: 0 with
                                SL_TEXT_GIVEN_MASK_PROB in `given`] */
    int64_t chunk_bytes;   /**< documents per tokenizing job, in stored
                                bytes [262144] */
    int group_chunks;      /**< chunks whose samples are shuffled together
                                [16] */
    int prefetch_chunks;   /**< chunks tokenized ahead [2 x group_chunks] */
    int telemetry_ms;      /**< telemetry period [100]; < 0: no collector */
    const char *telemetry_path; /**< JSON Lines, one snapshot a period
                                     [none] */
    int policy;                 /**< sl_policy_t [SL_POLICY_HEURISTIC] */
    int max_threads;            /**< budget: tokenizing threads + 1 (the
                                     consumer's copy into batches)
                                     [2 x cores] */
    /** Allocator for batch arrays [aligned_alloc / free]; as
     *  sl_options_t.buffer_alloc (e.g. page-locked memory). */
    void *(*buffer_alloc)(size_t bytes, void *ctx);
    void (*buffer_free)(void *p, void *ctx);
    void *buffer_ctx;
    /* Appended (the struct's size tells which fields a caller has). */
    unsigned given; /**< SL_TEXT_GIVEN_*: these fields are taken as set, 0
                         included, instead of 0 meaning the default [0] */
    /** Memory budget in bytes [half the cgroup's memory limit where one is
     *  set, as if given; else none], the image loader's rule and default
     *  (sl_options_t.max_memory_bytes): a quarter (at least 32 MB) for
     *  tokenizing, the rest for batch buffers; a budget that holds no
     *  batch fails create. Each document is charged before it is read
     *  (its stored bytes x SL_TEXT_MEM_PER_BYTE: its text, its ids and
     *  the merge of its longest piece) and waits until that fits; one
     *  that can never fit fails at once, as a bad document ("FILE:LINE:
     *  tokenizing it needs X MB, the memory budget allows Y MB"): the end
     *  of the stream, or with SL_ON_ERROR_SKIP left out, counted and
     *  listed. Documents are read when they are tokenized, under their
     *  charge (no file is held). Not charged: the corpus's index (about
     *  25 bytes a document) and the chunks tokenized ahead
     *  (prefetch_chunks x about 4 x chunk_bytes). */
    int64_t max_memory_bytes;
} sl_text_options_t;

/** Bytes of memory charged per stored byte of a document while it is
 *  read and tokenized (sl_text_options_t.max_memory_bytes): its text read
 *  and parsed (2), its ids (4: at most one a byte), the merge of a piece
 *  as long as all of it (about 4.3, text/bpe_merge.c) or WordPiece's
 *  scratch, rounded up. */
#define SL_TEXT_MEM_PER_BYTE 12

/** sl_text_options_t.given: the fields whose 0 is a value, not "default"
 *  (zero is every field's default, so an explicit 0 is flagged). */
enum {
    SL_TEXT_GIVEN_EOS_ID = 1,   /**< eos_id 0 is token 0 */
    SL_TEXT_GIVEN_MASK_PROB = 2 /**< mask_prob 0: nothing masked, every
                                     label -100 (as HF's collator with
                                     mlm_probability=0) */
};

/** Zeroes *o (every field its default) and sets o->size. */
SL_API void sl_text_options_init(sl_text_options_t *o);
SL_API void sl_text_options_init_sized(sl_text_options_t *o, size_t size);
#define sl_text_options_init(o) sl_text_options_init_sized((o), sizeof *(o))

/** One text batch: n rows of seq_len int32 each. Owned by the loader;
 *  valid until sl_text_loader_release(). */
typedef struct sl_text_batch {
    int32_t *input_ids;
    int32_t *labels;         /**< lm: the next token; mlm: the original
                                  token where masked, -100 elsewhere */
    int32_t *attention_mask; /**< mlm: 1 token, 0 padding; NULL for lm */
    int32_t *token_type_ids; /**< mlm: 0 segment A, 1 segment B; NULL for
                                  lm */
    int n;                   /**< rows (< batch_size: an epoch's last) */
    int seq_len;
    int64_t tokens; /**< lm: n x seq_len; mlm: non-padding */
    int64_t epoch;  /**< epoch this batch belongs to */
    int64_t index;  /**< batch index within the epoch (this rank) */
} sl_text_batch_t;

/** Make one with sl_text_stats_init(). */
typedef struct sl_text_stats {
    size_t size;            /**< sizeof(sl_text_stats_t) */
    int64_t sequences;      /**< rows handed out */
    int64_t batches;        /**< batches handed out */
    int64_t tokens;         /**< sum of the batches' tokens */
    int64_t tokens_encoded; /**< tokens the workers produced */
    int64_t bytes_read;     /**< text bytes the workers tokenized */
    int64_t errors_skipped; /**< bad documents (each counted once) */
    int64_t wait_ns;        /**< time the consumer spent blocked in next */
    /* Appended (the struct's size tells which fields a caller has). */
    int64_t tokens_dropped; /**< lm: tokens of the chunks' tails shorter
                                 than a window (seq_len + 1), which no
                                 sequence holds; counted per chunk
                                 tokenized, so a resumed epoch's passed-over
                                 chunks count again */
} sl_text_stats_t;

/** Zeroes *st and sets st->size. */
SL_API void sl_text_stats_init(sl_text_stats_t *st);
SL_API void sl_text_stats_init_sized(sl_text_stats_t *st, size_t size);
#define sl_text_stats_init(o) sl_text_stats_init_sized((o), sizeof *(o))

typedef struct sl_text_loader sl_text_loader_t;

/**
 * Opens text sources (plain text, JSON Lines, text shards, or directories
 * of them; docs/TEXT.md), loads the tokenizer and prepares a loader (no
 * thread runs before sl_text_loader_start). `opt` may be NULL.
 * @return 0 and *out, or SL_E*; the message is in
 *         sl_text_loader_last_error(NULL) of the calling thread.
 */
SL_API int sl_text_loader_create(const char *const *sources, int nsources,
                                 const sl_text_options_t *opt,
                                 sl_text_loader_t **out);
/** Stops the workers and frees everything, batches not yet released
 *  included. NULL does nothing. */
SL_API void sl_text_loader_destroy(sl_text_loader_t *l);
/** As sl_loader_last_error: the last call on l that failed on this
 *  thread; for NULL, the last failed sl_text_loader_create on this thread.
 *  Never NULL. Any thread. */
SL_API const char *sl_text_loader_last_error(const sl_text_loader_t *l);
/** The options in force, every default resolved (out->size set by
 *  sl_text_options_init). Any thread. */
SL_API int sl_text_loader_options(const sl_text_loader_t *l,
                                  sl_text_options_t *out);
/** Knobs, as sl_loader_set / get / param_range: SL_PARAM_DECODE_THREADS
 *  (tokenizing workers) while running or not. Any thread. */
SL_API int sl_text_loader_set(sl_text_loader_t *l, sl_param_t p, int64_t value);
SL_API int sl_text_loader_get(const sl_text_loader_t *l, sl_param_t p,
                              int64_t *value);
SL_API int sl_text_loader_param_range(const sl_text_loader_t *l, sl_param_t p,
                                      int64_t *min, int64_t *max);
/**
 * Starts (or restarts) at `pos` (NULL: epoch 0, batch 0) for opt.epochs
 * epochs from pos->epoch. Batches still held stay valid until released
 * (as with sl_loader_start). Resuming from a
 * position yields exactly the batches an uninterrupted run yields from
 * there; reaching batch b of an epoch tokenizes that epoch's first b
 * batches again (they are not handed out). An epoch's batch count is
 * known once it is tokenized, so a batch past its end fails the first
 * next (SL_ERANGE, naming it), not start.
 * @return 0; SL_ERANGE for a negative position or one whose numbers
 *         overflow (as sl_loader_start); SL_EINVAL for a NULL loader.
 */
SL_API int sl_text_loader_start(sl_text_loader_t *l, const sl_position_t *pos);
/**
 * Waits for the next batch, in (epoch, index) order, bit-identical for a
 * seed whatever the thread count.
 * @return 0 and *out (valid until sl_text_loader_release), SL_EEND after
 *         the last epoch, or SL_E* (sl_text_loader_last_error).
 */
SL_API int sl_text_loader_next(sl_text_loader_t *l,
                               const sl_text_batch_t **out);
/** sl_text_loader_next waiting at most timeout_ms milliseconds (< 0: as
 *  long as it takes). @return as sl_text_loader_next, or SL_ETIMEDOUT when
 *  no batch was ready by then: nothing handed out and the position
 *  unchanged (call again; rows already gathered for the batch are kept
 *  for that call). For a consumer that must stay responsive while it
 *  waits (a CLI checking for Ctrl-C). The consumer thread only, as next. */
SL_API int sl_text_loader_next_timeout(sl_text_loader_t *l,
                                       const sl_text_batch_t **out,
                                       int timeout_ms);
/** Gives a batch's buffers back to the pool. Each batch once; any thread.
 *  @return 0 (b NULL: nothing done); SL_ESTATE when b was already released,
 * SL_EINVAL when it is not a batch of l (the pool is left as it was; message in
 *  sl_text_loader_last_error). */
SL_API int sl_text_loader_release(sl_text_loader_t *l,
                                  const sl_text_batch_t *b);
/** The latest telemetry snapshot, as sl_loader_snapshot: the tokenizing
 *  workers are the decode stage (items: documents), there is no read
 *  stage, sequences are the samples. SL_ESTATE when telemetry is off
 *  (telemetry_ms < 0). Any thread. */
SL_API int sl_text_loader_snapshot(const sl_text_loader_t *l,
                                   sl_snapshot_t *out);
/** The next batch sl_text_loader_next will hand out. */
SL_API int sl_text_loader_position(const sl_text_loader_t *l,
                                   sl_position_t *pos);
/** Copies the counters (st->size bytes; sl_text_stats_init). Any thread. */
SL_API int sl_text_loader_stats(const sl_text_loader_t *l, sl_text_stats_t *st);
/** @return documents in the sources (bad ones included). */
SL_API int64_t sl_text_loader_num_documents(const sl_text_loader_t *l);
/** @return the tokenizer's vocabulary size. */
SL_API int64_t sl_text_loader_vocab_size(const sl_text_loader_t *l);
/** What decides the batch stream, as one number (xxh3-64), for a saved
 *  position to be checked against before it is resumed: the tokenizer (name,
 *  the bytes of its vocab and merges files, cased), the documents (count,
 *  and each one's stored size, which also cuts the chunks), and the
 *  resolved options that change batches: task, seq_len, batch_size, seed,
 *  no_shuffle, drop_last, world_size, eos_id, mask_prob, chunk_bytes,
 *  group_chunks, doc_per_file. Not the rank (a position is the same on
 *  every rank), the paths (a moved corpus is the same corpus), threads or
 *  prefetch. Fixed at create. 0 for NULL. Any thread. */
SL_API uint64_t sl_text_loader_fingerprint(const sl_text_loader_t *l);
/** @return bad documents met so far (each once). Any thread. */
SL_API int64_t sl_text_loader_skipped_count(const sl_text_loader_t *l);
/** @return the message of bad document i ("FILE:LINE: cause"), in the
 *  order they were met; NULL out of range (the first 10000 are kept). */
SL_API const char *sl_text_loader_skipped_message(const sl_text_loader_t *l,
                                                  int64_t i);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_TEXT_H */
