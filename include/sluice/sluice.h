/*
 * sluice: a resource-aware, adaptive data-loading engine for neural-network
 * training. This is the one public header of libsluice.
 *
 * Conventions (see docs/DESIGN.md):
 *   - Every object is an opaque handle made by sl_X_create and freed by
 *     sl_X_destroy; destroying NULL does nothing.
 *   - Functions return int: 0 on success, a negative SL_E* code otherwise.
 *     sl_strerror() names the code; sl_X_last_error() gives the human message
 *     (file, record, cause) of the last failure on that handle.
 *   - Option structs: all-zero means "default" for every field.
 *   - Threads: unless a function says otherwise, one handle is used by one
 *     thread at a time. Functions documented "any thread" may be called
 *     concurrently with everything else on the same handle.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SL_BUILDING) && defined(__GNUC__)
#define SL_API __attribute__((visibility("default")))
#else
#define SL_API
#endif

#define SL_VERSION_MAJOR 0
#define SL_VERSION_MINOR 1
#define SL_VERSION_PATCH 0
#define SL_VERSION_NUMBER                                                      \
    (SL_VERSION_MAJOR * 10000 + SL_VERSION_MINOR * 100 + SL_VERSION_PATCH)

/** @return the library's SL_VERSION_NUMBER (may differ from the header's). */
SL_API unsigned sl_version(void);
/** @return the library version as "MAJOR.MINOR.PATCH"; static storage. */
SL_API const char *sl_version_string(void);

/* ---------------------------------------------------------------- errors */

/* One table makes both the codes and their messages. Numbers are stable. */
#define SL_ERRNO_MAP(X)                                                        \
    X(INVAL, -1, "invalid argument")                                           \
    X(NOMEM, -2, "out of memory")                                              \
    X(IO, -3, "I/O error")                                                     \
    X(CORRUPT, -4, "corrupt or truncated data")                                \
    X(CHECKSUM, -5, "checksum mismatch")                                       \
    X(UNSUPPORTED, -6, "unsupported format or feature")                        \
    X(DECODE, -7, "image decode failed")                                       \
    X(NOTFOUND, -8, "not found")                                               \
    X(END, -9, "end of data")                                                  \
    X(STATE, -10, "operation not valid in this state")                         \
    X(RANGE, -11, "value out of range")                                        \
    X(THREAD, -12, "could not start a thread")

typedef enum sl_errno {
    SL_OK = 0,
#define SL__ERRNO_ENUM(name, num, msg) SL_E##name = (num),
    SL_ERRNO_MAP(SL__ERRNO_ENUM)
#undef SL__ERRNO_ENUM
} sl_errno_t;

/** @return a static, never-NULL message for an SL_E* code (or "unknown"). */
SL_API const char *sl_strerror(int code);

/* ------------------------------------------------------------- constants */

/** In sl_options_t: leaves a knob to the scheduler (as 0 does). In
 *  sl_loader_set: sets the knob back to its default value; which knobs the
 *  scheduler tunes is decided at sl_loader_create. */
#define SL_AUTOTUNE (-1)

typedef enum sl_dtype {
    SL_DTYPE_UINT8 = 0,  /**< 0..255 pixels, as PILToTensor gives */
    SL_DTYPE_FLOAT32 = 1 /**< (x/255 - mean) / std, as ToTensor+Normalize */
} sl_dtype_t;

typedef enum sl_layout {
    SL_LAYOUT_CHW = 0, /**< batch is N x C x H x W (PyTorch) */
    SL_LAYOUT_HWC = 1  /**< batch is N x H x W x C (TF, FFCV) */
} sl_layout_t;

typedef enum sl_mode {
    SL_MODE_TRAIN = 0, /**< RandomResizedCrop(size, scale, ratio) + flip */
    SL_MODE_EVAL = 1   /**< Resize(resize_size) + CenterCrop(size) */
} sl_mode_t;

typedef enum sl_on_error {
    SL_ON_ERROR_FAIL = 0, /**< the first bad sample ends the stream */
    SL_ON_ERROR_SKIP = 1  /**< bad samples are counted, listed and left out */
} sl_on_error_t;

/* --------------------------------------------------------------- options */

/** Loader options; a zero field takes the default in brackets. */
typedef struct sl_options {
    int batch_size;              /**< samples per batch [64] */
    int image_size;              /**< output is image_size x image_size [224] */
    int mode;                    /**< sl_mode_t [SL_MODE_TRAIN] */
    int resize_size;             /**< eval: shorter side before the centre crop
                                      [image_size * 256 / 224] */
    double scale_min, scale_max; /**< RandomResizedCrop area range [0.08, 1] */
    double ratio_min, ratio_max; /**< aspect range [3/4, 4/3] */
    int no_flip;        /**< 1: no random horizontal flip in train mode */
    int dtype;          /**< sl_dtype_t [SL_DTYPE_UINT8] */
    int layout;         /**< sl_layout_t [SL_LAYOUT_CHW] */
    float mean[3];      /**< float output; all zero = ImageNet mean */
    float std[3];       /**< float output; all zero = ImageNet std */
    uint64_t seed;      /**< everything random is a function of the seed [0] */
    int no_shuffle;     /**< 1: dataset order every epoch */
    int drop_last;      /**< 1: drop the last incomplete batch of each rank */
    int rank;           /**< this process's rank [0] */
    int world_size;     /**< ranks sharing the data [1] */
    int64_t epochs;     /**< epochs streamed by one start [1] */
    int unordered;      /**< 1: hand out batches as they complete */
    int on_error;       /**< sl_on_error_t [SL_ON_ERROR_FAIL] */
    int read_threads;   /**< read stage workers [1] */
    int decode_threads; /**< decode+transform workers [online cores] */
    int prefetch;       /**< batch buffers in flight [2 * decode_threads,
                             at least 2] */
    int no_dct_scale;   /**< 1: never decode at a reduced DCT scale */
    int telemetry_ms;   /**< telemetry period [100]; < 0: no collector */
    const char *telemetry_path; /**< JSON Lines, one snapshot a period
                                     (docs/TELEMETRY.md) [none] */
    int metrics_port;           /**< serve Prometheus text on 127.0.0.1:port
                                     [none]; the loader keeps it while it lives */
    int policy;               /**< sl_policy_t [SL_POLICY_HEURISTIC]: tunes the
                                   knobs left at 0 / SL_AUTOTUNE; knobs given a
                                   value stay as given */
    int max_threads;          /**< budget: CPU threads, decode threads + 1 for
                                   the read stage [2 x cores]. Read threads
                                   are I/O depth (outstanding reads), outside
                                   it: the scheduler keeps them <= 4 x cores
                                   (>= 4, >= read_threads given) */
    int64_t max_memory_bytes; /**< budget for batch buffers + read-ahead;
                                   caps prefetch, never exceeded [none] */
    /** Allocator for batch data buffers [aligned_alloc / free]: e.g.
     *  page-locked host memory (cudaHostAlloc) so a GPU copy is a DMA with
     *  no staging copy. alloc returns NULL on failure (the batch then
     *  fails with SL_ENOMEM); free_fn and ctx must stay valid until
     *  sl_loader_destroy returns. */
    void *(*buffer_alloc)(size_t bytes, void *ctx);
    void (*buffer_free)(void *p, void *ctx);
    void *buffer_ctx;
    /** Emulated slow or remote storage, for tests and benchmarks; both
     *  change live (SL_PARAM_READ_LATENCY_US, SL_PARAM_READ_BYTES_PER_S).
     *  Waits, not CPU; digests are unchanged. read_latency_us: each read
     *  completes no sooner than this after it was issued (a request's round
     *  trip; R read threads keep R reads outstanding and hide it) [0: off].
     *  read_bytes_per_s: a token bucket shared by all readers caps the
     *  bytes read at burst + rate x time, burst = 50 ms of traffic, at
     *  least 64 KiB (a link's or a disk's bandwidth) [0: no cap]. */
    int64_t read_latency_us;
    int64_t read_bytes_per_s;
    /** SL_POLICY_RL: the weights file (docs/POLICY.md) [NULL: the default
     *  policy built into the library]. Read once by sl_loader_create, which
     *  fails with the file and the cause if it cannot be used. */
    const char *policy_file;
    /** SL_POLICY_RL: 1 = fine-tune the policy online (PPO on the rewards
     *  this run sees, sampled actions); a guard hands the knobs to the
     *  heuristic for good if the reward degrades [0: fixed policy,
     *  deterministic actions]. */
    int learn;
} sl_options_t;

typedef enum sl_policy {
    SL_POLICY_HEURISTIC = 0, /**< hill-climbing on stall and busy signals */
    SL_POLICY_STATIC = 1,    /**< knobs stay where they are set */
    SL_POLICY_RL = 2         /**< a small neural network trained by PPO in
                                  the simulator (docs/POLICY.md) */
} sl_policy_t;

/* ---------------------------------------------------------------- loader */

/** A loader streams batches from one source (an ImageFolder directory, a
 *  directory of packed shards, or one shard file). */
typedef struct sl_loader sl_loader_t;

/** One batch. Owned by the loader; valid until sl_loader_release(). */
typedef struct sl_batch {
    void *data;       /**< n samples, contiguous, dtype/layout as asked */
    int64_t *labels;  /**< n class indices */
    int64_t *indices; /**< n dataset indices (which sample is which) */
    int n;            /**< samples in this batch (<= batch_size: the last
                           batch of an epoch, or samples skipped) */
    int channels, height, width;
    int dtype, layout;
    size_t sample_bytes; /**< bytes of one sample in data */
    int64_t epoch;       /**< epoch this batch belongs to */
    int64_t index;       /**< batch index within the epoch (this rank) */
} sl_batch_t;

/** Runtime knobs; each may change while batches flow. */
typedef enum sl_param {
    SL_PARAM_READ_THREADS = 1,
    SL_PARAM_DECODE_THREADS = 2,
    SL_PARAM_PREFETCH = 3, /**< batch buffers in flight (memory) */
    /** Emulated storage (sl_options_t.read_latency_us / read_bytes_per_s):
     *  not scheduler knobs but the world's, changed by tests and benchmarks;
     *  0 (or SL_AUTOTUNE) turns that part off. */
    SL_PARAM_READ_LATENCY_US = 4, /**< microseconds per read, <= 60 s */
    SL_PARAM_READ_BYTES_PER_S = 5 /**< bandwidth cap in bytes/s */
} sl_param_t;

/** Where a loader stands: the next batch it will hand out. */
typedef struct sl_position {
    int64_t epoch;
    int64_t batch;
} sl_position_t;

/** Counters since the loader was created. */
typedef struct sl_stats {
    int64_t samples;        /**< samples handed out */
    int64_t batches;        /**< batches handed out */
    int64_t errors_skipped; /**< samples left out under SL_ON_ERROR_SKIP */
    int64_t bytes_read;     /**< stored bytes read from the source */
    int64_t wait_ns;        /**< time the consumer spent blocked in next */
} sl_stats_t;

/**
 * Opens a source and prepares a loader (no thread runs before
 * sl_loader_start). `opt` may be NULL (all defaults).
 * @return 0 and *out, or SL_E*; the message is in sl_loader_last_error(NULL)
 *         of the calling thread.
 */
SL_API int sl_loader_create(const char *source, const sl_options_t *opt,
                            sl_loader_t **out);

/** Stops every worker and frees everything, batches not yet released
 *  included. NULL does nothing. */
SL_API void sl_loader_destroy(sl_loader_t *l);

/** @return the message of the last failure on l; for l == NULL, of the last
 *  failed sl_loader_create on this thread. Valid until the next call on l. */
SL_API const char *sl_loader_last_error(const sl_loader_t *l);

/** @return samples in the whole source (all ranks). */
SL_API int64_t sl_loader_num_samples(const sl_loader_t *l);
/** @return number of classes of the source. */
SL_API int sl_loader_num_classes(const sl_loader_t *l);
/** @return the name of class i (static for the loader's life), or NULL. */
SL_API const char *sl_loader_class_name(const sl_loader_t *l, int i);
/** @return batches this rank gets each epoch. */
SL_API int64_t sl_loader_batches_per_epoch(const sl_loader_t *l);
/** @return bytes of one full batch's data buffer. */
SL_API size_t sl_loader_batch_bytes(const sl_loader_t *l);

/**
 * Starts (or restarts) streaming at `pos` (NULL: epoch 0, batch 0) for
 * opt.epochs epochs counted from pos->epoch. Batches of an earlier start
 * still held must have been released. Resuming from a saved position
 * yields exactly the batches the first run had not yet handed out (ordered
 * mode).
 */
SL_API int sl_loader_start(sl_loader_t *l, const sl_position_t *pos);

/**
 * Waits for the next batch. Ordered mode hands batches out in (epoch,
 * index) order, bit-identical for a seed whatever the thread counts;
 * unordered mode hands out whichever is complete first.
 * @return 0 and *out (valid until sl_loader_release), SL_EEND when every
 *         epoch is done, or SL_E* (message in sl_loader_last_error) when a
 *         sample failed under SL_ON_ERROR_FAIL.
 */
SL_API int sl_loader_next(sl_loader_t *l, const sl_batch_t **out);

/** Gives a batch's buffer back for reuse. Each batch exactly once. */
SL_API void sl_loader_release(sl_loader_t *l, const sl_batch_t *b);

/** Sets a knob while running or not (SL_AUTOTUNE: its default value).
 *  SL_ERANGE beyond the budgets: decode threads + 1 > max_threads when
 *  given, prefetch beyond max_memory_bytes. Read threads (I/O depth) are
 *  not counted in max_threads.
 *  The scheduler changes knobs through this same call. Any thread. */
SL_API int sl_loader_set(sl_loader_t *l, sl_param_t p, int64_t value);
/** Reads a knob's value in force. Any thread. */
SL_API int sl_loader_get(const sl_loader_t *l, sl_param_t p, int64_t *value);

/** The next batch that sl_loader_next will hand out (ordered mode). */
SL_API int sl_loader_position(const sl_loader_t *l, sl_position_t *pos);

/** Copies the counters. Any thread. */
SL_API int sl_loader_stats(const sl_loader_t *l, sl_stats_t *st);

/** @return how many samples were skipped so far (SL_ON_ERROR_SKIP). */
SL_API int64_t sl_loader_skipped_count(const sl_loader_t *l);
/** @return the message for skip i (0-based, in the order they happened,
 *  "epoch E: FILE: cause"), valid for the loader's life; NULL if out of
 *  range. At most the first 10000 are kept. */
SL_API const char *sl_loader_skipped_message(const sl_loader_t *l, int64_t i);

/* ------------------------------------------------------------- telemetry */

#define SL_SNAPSHOT_MAX_CORES 256

/** Per pipeline stage, over the last interval. */
typedef struct sl_stage_stats {
    int workers;         /**< threads set to work */
    double busy;         /**< 0..1: busy time / (workers x interval) */
    double items_per_s;  /**< samples through the stage per second */
    int64_t items_total; /**< since the loader was created */
    int queue_depth;     /**< items waiting at the stage's input */
    int queue_capacity;
} sl_stage_stats_t;

/** One telemetry sample: the machine, the GPU and the pipeline. Rates and
 *  fractions are over the interval since the previous snapshot. Fields
 *  that cannot be read on this machine are negative (never invented). */
typedef struct sl_snapshot {
    double t;          /**< seconds since the loader was created */
    double interval_s; /**< length of the interval the rates cover */
    /* machine */
    int ncpu;
    double cpu_total; /**< 0..1 of the whole machine, busy */
    double cpu_self;  /**< 0..1 of the machine, this process */
    double cpu_other; /**< 0..1 of the machine, everyone else */
    float cpu_core[SL_SNAPSHOT_MAX_CORES]; /**< 0..1 per core */
    int run_queue; /**< runnable threads (procs_running) */
    double psi_cpu_some, psi_io_some, psi_io_full, psi_mem_some,
        psi_mem_full; /**< PSI avg10 in %, < 0 when absent */
    int64_t mem_total_bytes, mem_available_bytes, rss_bytes;
    double disk_read_bytes_per_s; /**< device holding the data, < 0 unknown */
    double disk_busy;             /**< its I/O time share 0..1, < 0 unknown */
    double self_read_bytes_per_s; /**< this process, /proc/self/io */
    double net_rx_bytes_per_s, net_tx_bytes_per_s;
    /* GPU 0 through NVML, when present */
    int gpu_present; /**< 0: no driver/GPU; the gpu_* fields are < 0 */
    int gpu_count;
    double gpu_util, gpu_power_w;
    int64_t gpu_mem_used_bytes, gpu_mem_total_bytes;
    double gpu_pcie_rx_bytes_per_s, gpu_pcie_tx_bytes_per_s;
    double energy_j; /**< joules since the loader was created (RAPL package +
                          NVML), < 0 when neither is readable */
    /* pipeline */
    double samples_per_s;
    double stall_fraction;   /**< consumer time blocked in next / interval */
    double batch_latency_ms; /**< mean first claim -> ready, this interval */
    double consumer_wait_ms; /**< mean wait per batch handed out */
    int64_t samples_total, batches_total, errors_skipped, bytes_read_total;
    double read_bytes_per_s; /**< stored bytes the loader read */
    sl_stage_stats_t read, decode;
    int prefetch;      /**< batch buffers allowed (knob) */
    int batches_ready; /**< complete batches waiting for the consumer */
    int batches_filling;
    /* scheduler: the last knob change, when one happened this interval */
    int64_t decisions_total;
    int decision_new;       /**< 1: decision_* describe a change made in
                                 this interval */
    char decision_knob[24]; /**< "decode_threads" | "read_threads" |
                                 "prefetch" */
    int decision_from, decision_to;
    char decision_reason[160];
} sl_snapshot_t;

/** The latest snapshot (zeroed with t = 0 before the first tick).
 *  SL_ESTATE when the collector is off. Any thread. */
SL_API int sl_loader_snapshot(const sl_loader_t *l, sl_snapshot_t *out);

/** Up to `max` most recent snapshots, oldest first (the ring keeps 600).
 *  @return how many were copied, or SL_E*. Any thread. */
SL_API int sl_loader_snapshots(const sl_loader_t *l, sl_snapshot_t *out,
                               int max);

/** Writes one snapshot as a JSON object (no newline) into buf.
 *  @return the length it needs (as snprintf). */
SL_API int sl_snapshot_json(const sl_snapshot_t *s, char *buf, size_t len);

/* ----------------------------------------------------------------- image */

/** One image transform, as the loader applies it to one sample. */
typedef struct sl_transform {
    int crop_x, crop_y, crop_w, crop_h; /**< box in source pixels; w or h
                                             0: the whole image */
    int out_w, out_h;                   /**< output size (resize of the box) */
    int flip; /**< 1: mirror left-right after the resize */
    int dtype, layout;
    float mean[3], std[3]; /**< float output; all zero: ImageNet */
    int no_dct_scale;      /**< 1: decode at full size */
    int strict;            /**< 1: any corrupt-data warning fails the image
                                (SL_ECORRUPT); 0: up to 64 are tolerated */
} sl_transform_t;

/** Reads an encoded image's size without decoding it (JPEG or PNG). */
SL_API int sl_image_info(const void *bytes, size_t len, int *width,
                         int *height);

/**
 * Decodes an encoded image (JPEG or PNG; grey and CMYK become RGB), crops,
 * resizes (antialiased bilinear, as PIL), flips and converts into `out`,
 * which must hold out_w * out_h * 3 samples of t->dtype.
 * @return 0, or SL_E* with a message written to err (may be NULL).
 */
SL_API int sl_image_transform(const void *bytes, size_t len,
                              const sl_transform_t *t, void *out, char *err,
                              size_t errlen);

/* ------------------------------------------------------------------ text */

/** Text batch modes (docs/TEXT.md gives their exact definitions). */
typedef enum sl_text_task {
    SL_TEXT_LM = 0, /**< windows of seq_len + 1 tokens of the documents
                         joined with EOS: input_ids, labels (shifted) */
    SL_TEXT_MLM = 1 /**< BERT instances of max_len with [CLS]/[SEP], 15 %
                         masked (80/10/10) */
} sl_text_task_t;

/** Text loader options; a zero field takes the default in brackets. */
typedef struct sl_text_options {
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
    int threads;           /**< tokenizing workers [online cores] */
    int fail_on_error;     /**< 1: a bad document ends the stream [0: it is
                                skipped, counted and described] */
    int32_t eos_id;        /**< lm: token after each document [0: the
                                tokenizer's <|endoftext|>, or [SEP]] */
    double mask_prob;      /**< mlm: share of tokens predicted [0.15] */
    int64_t chunk_bytes;   /**< documents per tokenizing job, in stored
                                bytes [262144] */
    int group_chunks;      /**< chunks whose samples are shuffled together
                                [16] */
    int prefetch_chunks;   /**< chunks tokenized ahead [2 x group_chunks] */
} sl_text_options_t;

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
    int64_t tokens;          /**< lm: n x seq_len; mlm: non-padding */
    int64_t epoch;           /**< epoch this batch belongs to */
    int64_t index;           /**< batch index within the epoch (this rank) */
} sl_text_batch_t;

typedef struct sl_text_stats {
    int64_t sequences;      /**< rows handed out */
    int64_t batches;        /**< batches handed out */
    int64_t tokens;         /**< sum of the batches' tokens */
    int64_t tokens_encoded; /**< tokens the workers produced */
    int64_t bytes_read;     /**< text bytes the workers tokenized */
    int64_t errors_skipped; /**< bad documents (each counted once) */
    int64_t wait_ns;        /**< time the consumer spent blocked in next */
} sl_text_stats_t;

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
/** @return the last failure's message on l; for NULL, of the last failed
 *  sl_text_loader_create on this thread. */
SL_API const char *sl_text_loader_last_error(const sl_text_loader_t *l);
/**
 * Starts (or restarts) at `pos` (NULL: epoch 0, batch 0) for opt.epochs
 * epochs from pos->epoch. Batches still held stay valid. Resuming from a
 * position yields exactly the batches an uninterrupted run yields from
 * there; reaching batch b of an epoch tokenizes that epoch's first b
 * batches again (they are not handed out).
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
/** Gives a batch's buffers back to the pool. Each batch once; any thread. */
SL_API void sl_text_loader_release(sl_text_loader_t *l,
                                   const sl_text_batch_t *b);
/** The next batch sl_text_loader_next will hand out. */
SL_API int sl_text_loader_position(const sl_text_loader_t *l,
                                   sl_position_t *pos);
/** Copies the counters. Any thread. */
SL_API int sl_text_loader_stats(const sl_text_loader_t *l,
                                sl_text_stats_t *st);
/** @return documents in the sources (bad ones included). */
SL_API int64_t sl_text_loader_num_documents(const sl_text_loader_t *l);
/** @return the tokenizer's vocabulary size. */
SL_API int64_t sl_text_loader_vocab_size(const sl_text_loader_t *l);
/** @return bad documents met so far (each once). Any thread. */
SL_API int64_t sl_text_loader_skipped_count(const sl_text_loader_t *l);
/** @return the message of bad document i ("FILE:LINE: cause"), in the
 *  order they were met; NULL out of range (the first 10000 are kept). */
SL_API const char *sl_text_loader_skipped_message(const sl_text_loader_t *l,
                                                  int64_t i);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_H */
