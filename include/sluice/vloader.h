/*
 * sluice/vloader.h: batches of 3-D U-Net training patches from a volume
 * dataset (sluice/volume.h: a KiTS19 folder or a list file), prepared by a
 * pool of threads: the offline stage once per case (load, resample to the
 * target spacing, clip + z-score, pad; kept in a memory cache), the online
 * stage per sample and epoch (sluice/volops.h: balanced crop, flips,
 * brightness, noise).
 *
 * Determinism: a patch is a function of (seed, epoch, case), the epoch's
 * case order of (seed, epoch); threads, the cache and the balancer change
 * when a patch is made, never what.
 *
 * The balancer: a sample's cost varies by orders of magnitude (a cache
 * miss reloads and resamples the volume; a foreground crop labels the
 * components of the whole label volume; noise draws a normal per voxel).
 * Each is predicted before the work starts — from the volume's header
 * (sizes), the cache, and the label-free draws (sl_vol_predict) — with
 * per-voxel rates refined from measured times; within the prefetch window
 * threads take the sample with the least slack (its batch's due time less
 * its predicted cost), so that no batch waits behind one slow sample
 * started last; a thread with nothing left in the window makes the next
 * window's uncached cases ahead (look-ahead). The stream's order being
 * known, the cache gives back the case used again last.
 *
 * Memory: the offline stage streams a volume a slice at a time (never
 * held whole); memory_bytes bounds all the loader holds (by default half
 * the cgroup's memory limit, where one is set: sched/limits.h's rule).
 *
 * Layout: a volume's array is used in its storage order, x fastest, so a
 * patch is C-order (z, y, x) — the transpose of the reference's (x, y, z)
 * NumPy patch; target_spacing is given in the reference's (x, y, z) order.
 */
#ifndef SLUICE_VLOADER_H
#define SLUICE_VLOADER_H

#include "sluice/sluice.h"
#include "sluice/volops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_vloader sl_vloader_t;

/** Options; a zero field takes the default in brackets (a negative one,
 *  or threads over 256 or prefetch over 4096, fails create). no_balance,
 *  image_bf16 and unlabeled are booleans, as sl_options_t's flags: where
 *  they say 1, any nonzero value is true, a negative one too. aug.patch
 *  has no default: each dimension 1..2^28 and the patch at most 2^28
 *  voxels, else create fails naming it. */
typedef struct sl_vloader_options {
    size_t size;              /**< sizeof, set by _init */
    int batch_size;           /**< patches per batch, 1..4096 [2] */
    uint64_t seed;            /**< [0] */
    int threads;              /**< preparing threads [usable CPUs] */
    int prefetch;             /**< batches prepared ahead [threads, >= 2] */
    int no_balance;           /**< 1: samples in order (FIFO) [0: balanced] */
    double target_spacing[3]; /**< mm, (x, y, z) [1.6, 1.2, 1.2] */
    int64_t cache_bytes;      /**< offline results kept [2 GiB] */
    sl_vol_aug_t aug;         /**< online ops [sl_vol_aug_init] */
    /** The most bytes the loader holds at once [0: half the cgroup's
     *  memory limit where one is set (a container's: past it the OOM
     *  killer ends the process), its messages saying so; else no bound
     *  but cache_bytes]: its batch buffers (fixed at create: more than this
     *  fails there), the cached offline results, and every offline stage
     *  in flight, charged what it will hold before it allocates (the padded
     *  outputs, the components, slices and read buffers: the stage streams
     *  a volume a slice at a time, so a case needs about 5.3 bytes per
     *  padded voxel, never the stored volume whole; a pack's case
     *  streams its record: about 37 MB more; docs/DESIGN.md), and the
     *  access points kept into large cases' .nii.gz files (about 0.8 % of
     *  their uncompressed bytes: what lets their stages split). The cache gives
     *  back what nobody uses to make room, then those access points; a
     *  stage waits for others to finish; a case that cannot fit alone
     *  fails, naming the case and the sizes. */
    int64_t memory_bytes;
    /** 1: image patches as bfloat16 (sl_vbatch_t.image_bf16; image NULL),
     *  rounded to nearest even from the float32 patch (sl_vol_to_bf16)
     *  [0: float32] */
    int image_bf16;
    /** sl_on_error_t [SL_ON_ERROR_FAIL]: a case that cannot be made (a
     *  damaged file, a label that is not class indices, one that does not
     *  fit memory_bytes) fails its batch (next() returns the error), or
     *  with SL_ON_ERROR_SKIP is left out of it (but for one memory_bytes
     *  cannot hold beside the batch buffers, whose size follows prefetch
     *  and threads: that fails its batch whatever the policy): the batch
     *  comes with the rest (n smaller, the slots in order), a batch left
     *  empty is passed over, and each skip is counted and listed
     *  (sl_vloader_stats, sl_vloader_skipped_message) as its batch is
     *  handed out. A case bad at create (its header) is left out of every
     *  epoch. Which cases fail does not depend on threads or timing, so
     *  the stream stays a function of (seed, epoch, index). Failures of
     *  the machine (SL_ESYSTEM) are never skipped. */
    int on_error;
    /** 1: a case without a label volume is accepted (an all-zero label:
     *  uniform crops) [0: an error naming it] */
    int unlabeled;
    /** The stream position the first batch is at (epoch x
     *  batches_per_epoch + index; sl_vloader_position of a loader with the
     *  same dataset and options) [0]: a resumed run yields exactly the
     *  batches an uninterrupted one would from there (appended: an
     *  earlier layout starts at 0). */
    int64_t start;
} sl_vloader_options_t;

SL_API void sl_vloader_options_init(sl_vloader_options_t *o);
SL_API void sl_vloader_options_init_sized(sl_vloader_options_t *o, size_t size);
#define sl_vloader_options_init(o)                                             \
    sl_vloader_options_init_sized((o), sizeof *(o))

/** One batch: n patches (n < batch_size for an epoch's last, or with
 *  cases skipped: SL_ON_ERROR_SKIP). */
typedef struct sl_vbatch {
    int64_t epoch, index; /**< position in the stream */
    int n;
    int64_t dims[3];      /**< patch shape, C order (z, y, x) */
    float *image;         /**< n x dims, float32 (NULL with image_bf16) */
    uint8_t *label;       /**< n x dims */
    int64_t *cases;       /**< dataset case of each patch */
    uint16_t *image_bf16; /**< n x dims, bfloat16 bits, with image_bf16
                               set (image NULL then) */
} sl_vbatch_t;

/** Counters since create. Times in ns. Make one with
 *  sl_vloader_stats_init() (it sets size). */
typedef struct sl_vloader_stats {
    size_t size;
    int64_t batches, samples; /**< handed out: batches and their patches */
    int64_t offline_runs;     /**< offline stages computed (cache misses) */
    int64_t cache_hits;
    int64_t cache_bytes;    /**< held now */
    int64_t wait_ns;        /**< the consumer's time blocked in next() */
    int64_t predicted_ns;   /**< sum of predicted sample costs */
    int64_t actual_ns;      /**< sum of measured sample costs */
    int64_t latency_p50_ns; /**< batch-ready latency (window entry to
                                 ready), over the last 256 batches */
    int64_t latency_p99_ns;
    int64_t memory_bytes;   /**< held now: buffers, cache, stages in flight,
                                 gzip access points (counted with or
                                 without a budget) */
    int64_t memory_peak;    /**< the most held since create */
    int64_t offline_ahead;  /**< offline stages an idle thread ran ahead of
                                 their batch (look-ahead, balanced) */
    int64_t offline_split;  /**< offline stages made in slabs by several
                                 threads (a large case, balanced) */
    int64_t offline_helped; /**< slabs of those made by a thread other than
                                 the stage's own */
    int64_t skipped;        /**< cases left out under SL_ON_ERROR_SKIP: of
                                 the batches handed out (counted as each is
                                 handed out), plus those left out at create */
} sl_vloader_stats_t;

/** Opens the dataset (every case's header read and checked: a bad file is
 *  an error naming it) and starts the threads on epoch 0. */
SL_API int sl_vloader_create(const char *dataset,
                             const sl_vloader_options_t *opt,
                             sl_vloader_t **out, char *err, size_t errlen);
/** The next batch in order (epochs follow each other); hold it until
 *  sl_vloader_release. SL_E* with a message naming the case on failure. */
SL_API int sl_vloader_next(sl_vloader_t *l, sl_vbatch_t **b, char *err,
                           size_t errlen);
SL_API void sl_vloader_release(sl_vloader_t *l, sl_vbatch_t *b);
/** @return how many cases were skipped so far (SL_ON_ERROR_SKIP): at
 *  create, and in batches handed out. Any thread. */
SL_API int64_t sl_vloader_skipped_count(sl_vloader_t *l);
/** @return skip i's message (0-based, in the order they were counted:
 *  "create: FILE: cause" or "epoch E: case NAME: cause"), valid for the
 *  loader's life; NULL if out of range. At most the first 10000 are
 *  kept. Any thread. */
SL_API const char *sl_vloader_skipped_message(sl_vloader_t *l, int64_t i);
/** Batches per epoch (ceil(cases / batch_size)), cases (those used: less
 *  any left out at create under SL_ON_ERROR_SKIP). */
SL_API int64_t sl_vloader_batches_per_epoch(const sl_vloader_t *l);
SL_API int64_t sl_vloader_cases(const sl_vloader_t *l);
/** The stream position of the batch sl_vloader_next hands out next:
 *  epoch x batches_per_epoch + index (after an error too: batches passed
 *  over, skipped or failed, are behind it). Any thread. */
SL_API int64_t sl_vloader_position(sl_vloader_t *l);
/** Zeroes *s and sets s->size. */
SL_API void sl_vloader_stats_init(sl_vloader_stats_t *s);
SL_API void sl_vloader_stats_init_sized(sl_vloader_stats_t *s, size_t size);
#define sl_vloader_stats_init(o) sl_vloader_stats_init_sized((o), sizeof *(o))
/** @return 0, or SL_EINVAL (l or s NULL, s->size 0: not from
 *  sl_vloader_stats_init). */
SL_API int sl_vloader_stats(sl_vloader_t *l, sl_vloader_stats_t *s);
/** Zeroes the counters and the latency window (e.g. after a warm-up). */
SL_API void sl_vloader_stats_reset(sl_vloader_t *l);
SL_API void sl_vloader_destroy(sl_vloader_t *l);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_VLOADER_H */
