/*
 * sluice: a resource-aware, adaptive data-loading engine for neural-network
 * training. This is the core header of libsluice: errors, the image loader,
 * the image transform. Other concerns have their own headers, each
 * including this one: sluice/telemetry.h (snapshots, JSON), sluice/text.h
 * (the text loader), sluice/tokenizer.h, sluice/analysis.h.
 *
 * Conventions (see docs/DESIGN.md):
 *   - Every object is an opaque handle made by sl_X_create and freed by
 *     sl_X_destroy; destroying NULL does nothing.
 *   - Functions return int: 0 on success, a negative SL_E* code otherwise.
 *     sl_strerror() names the code; sl_X_last_error(h) gives the human
 *     message (file, record, cause) of the last call on h that failed on
 *     the calling thread (like errno: per thread, so a scheduler or another
 *     thread never overwrites it).
 *   - Structs the caller allocates start with `size_t size` and are made
 *     ready by their sl_X_init(), which zeroes them and sets size to the
 *     header's sizeof. The library reads and writes only the first `size`
 *     bytes, so a program built against an older header keeps working with
 *     a newer library (fields are only ever added at the end); size 0 (a
 *     struct never initialised) is refused with SL_EINVAL.
 *   - Option structs: all-zero (after sl_X_init) means "default" for every
 *     field; the resolved values are read back with sl_X_options().
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

/** Loader options; a zero field takes the default in brackets. Make one
 *  with sl_options_init(). */
typedef struct sl_options {
    size_t size;                 /**< sizeof(sl_options_t), by sl_options_init */
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

/** Zeroes *o (every field its default) and sets o->size. */
SL_API void sl_options_init(sl_options_t *o);

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

/** Runtime knobs; each may change while batches flow. The text loader
 *  has SL_PARAM_DECODE_THREADS (its tokenizing workers) only. */
typedef enum sl_param {
    SL_PARAM_READ_THREADS = 1,   /**< read stage workers (I/O depth) */
    SL_PARAM_DECODE_THREADS = 2, /**< decode+transform (text: tokenize)
                                      workers */
    SL_PARAM_PREFETCH = 3        /**< batch buffers in flight (memory) */
} sl_param_t;

/** Where a loader stands: the next batch it will hand out. */
typedef struct sl_position {
    int64_t epoch;
    int64_t batch;
} sl_position_t;

/** Counters since the loader was created. Make one with sl_stats_init(). */
typedef struct sl_stats {
    size_t size;            /**< sizeof(sl_stats_t), by sl_stats_init */
    int64_t samples;        /**< samples handed out */
    int64_t batches;        /**< batches handed out */
    int64_t errors_skipped; /**< samples left out under SL_ON_ERROR_SKIP */
    int64_t bytes_read;     /**< stored bytes read from the source */
    int64_t wait_ns;        /**< time the consumer spent blocked in next */
} sl_stats_t;

/** Zeroes *st and sets st->size. */
SL_API void sl_stats_init(sl_stats_t *st);

/**
 * Opens a source and prepares a loader (no thread runs before
 * sl_loader_start). `opt` may be NULL (all defaults); else it must come
 * from sl_options_init().
 * @return 0 and *out, or SL_E*; the message is in sl_loader_last_error(NULL)
 *         of the calling thread.
 */
SL_API int sl_loader_create(const char *source, const sl_options_t *opt,
                            sl_loader_t **out);

/** Stops every worker and frees everything, batches not yet released
 *  included. NULL does nothing. */
SL_API void sl_loader_destroy(sl_loader_t *l);

/** @return the message of the last call on l that failed on this thread
 *  ("" when the last failure on this thread was on another handle); for
 *  l == NULL, of the last failed sl_loader_create on this thread. Never
 *  NULL; valid until the next failing sluice call on this thread. Failures
 *  on other threads (the scheduler's refused steps, another thread's
 *  calls) never change it. Any thread. */
SL_API const char *sl_loader_last_error(const sl_loader_t *l);

/** The options in force, every default resolved (thread counts, prefetch,
 *  mean/std, crop ranges...): what the loader was created with, not the
 *  knobs' live values (sl_loader_get). out->size must be set
 *  (sl_options_init). Any thread. */
SL_API int sl_loader_options(const sl_loader_t *l, sl_options_t *out);

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
 * that are still held stay valid until released (they count against the
 * prefetch depth until then). Resuming from a saved position yields
 * exactly the batches the first run had not yet handed out (ordered mode).
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

/** Gives a batch's buffer back for reuse. Each batch exactly once. Any
 *  thread. */
SL_API void sl_loader_release(sl_loader_t *l, const sl_batch_t *b);

/** Sets a knob while running or not (SL_AUTOTUNE: its default value).
 *  SL_ERANGE outside sl_loader_param_range (the budgets: decode threads +
 *  1 > max_threads when given, prefetch beyond max_memory_bytes; read
 *  threads are I/O depth, not counted in max_threads).
 *  The scheduler changes knobs through this same call. Any thread. */
SL_API int sl_loader_set(sl_loader_t *l, sl_param_t p, int64_t value);
/** Reads a knob's value in force. Any thread. */
SL_API int sl_loader_get(const sl_loader_t *l, sl_param_t p, int64_t *value);
/** The values sl_loader_set accepts for p on this loader, [*min, *max]
 *  (the engine's limits narrowed by the budgets given). Any thread. */
SL_API int sl_loader_param_range(const sl_loader_t *l, sl_param_t p,
                                 int64_t *min, int64_t *max);

/** The next batch that sl_loader_next will hand out (ordered mode). */
SL_API int sl_loader_position(const sl_loader_t *l, sl_position_t *pos);

/** Copies the counters (st->size bytes; sl_stats_init). Any thread. */
SL_API int sl_loader_stats(const sl_loader_t *l, sl_stats_t *st);

/** @return how many samples were skipped so far (SL_ON_ERROR_SKIP). Any
 *  thread. */
SL_API int64_t sl_loader_skipped_count(const sl_loader_t *l);
/** @return the message for skip i (0-based, in the order they happened,
 *  "epoch E: FILE: cause"), valid for the loader's life; NULL if out of
 *  range. At most the first 10000 are kept. */
SL_API const char *sl_loader_skipped_message(const sl_loader_t *l, int64_t i);

/* ----------------------------------------------------------------- image */

/** One image transform, as the loader applies it to one sample. Make one
 *  with sl_transform_init(). */
typedef struct sl_transform {
    size_t size; /**< sizeof(sl_transform_t), by sl_transform_init */
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

/** Zeroes *t (whole image, no flip, uint8 CHW, ImageNet mean/std) and sets
 *  t->size. */
SL_API void sl_transform_init(sl_transform_t *t);

/** Reads an encoded image's size without decoding it (JPEG or PNG). */
SL_API int sl_image_info(const void *bytes, size_t len, int *width,
                         int *height);

/**
 * Decodes an encoded image (JPEG or PNG; grey and CMYK become RGB), crops,
 * resizes (antialiased bilinear, as PIL), flips and converts into `out`,
 * which must hold out_w * out_h * 3 samples of t->dtype. Any thread.
 * @return 0, or SL_E* with a message written to err (may be NULL).
 */
SL_API int sl_image_transform(const void *bytes, size_t len,
                              const sl_transform_t *t, void *out, char *err,
                              size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_H */
