/* sluice/analysis.h: the tools that explain a run, as library calls.
 *
 *   - sl_analyze: which bound stalls a training job reading a source (fetch,
 *     prep or the consumer), by how much, and the cure; what `sluice
 *     analyze --json` prints.
 *   - sl_calibrate: a simulator profile fitted to the telemetry of one real
 *     run (`sluice run --telemetry FILE`); what `sluice calibrate` writes.
 *
 * Both return a JSON text the caller frees with sl_analysis_free. Options
 * are caller-allocated structs whose first field is their size: fill them
 * with the matching *_init first (zero means "the default" for every
 * field), so that a library with more fields still reads an older caller's
 * struct correctly. Any thread may call these; they share nothing. */
#ifndef SLUICE_ANALYSIS_H
#define SLUICE_ANALYSIS_H

#include <stddef.h>

#include "sluice/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most decode threads sl_analyze measures (one prep run per count). */
#define SL_ANALYZE_MAX_THREADS 256

/** Progress lines of a long analysis ("fetch (cold): ..."), called on the
 *  caller's thread; `line` has no trailing newline and is valid only during
 *  the call. */
typedef void (*sl_progress_fn)(void *user, const char *line);

typedef struct sl_analyze_options {
    size_t size;             /**< sizeof(sl_analyze_options_t): set by init */
    double step_ms;          /**< the consumer holds each batch T ms, or: */
    double rate;             /**< the consumer ingests R samples/s (one of the
                                  two, or sweep) */
    int sweep;               /**< check at 50%, 100%, 150% of the prep rate */
    int batch_size;          /**< samples per batch [64] */
    int image_size;          /**< output N x N [224] */
    int dtype;               /**< SL_DTYPE_* [uint8] */
    int decode_threads;      /**< threads of the job [cores]; prep is measured
                                  for 1..N (at most SL_ANALYZE_MAX_THREADS) */
    int prefetch;            /**< batch buffers in flight [max(2N, 8)] */
    double seconds;          /**< length of each measured run [10] */
    sl_progress_fn progress; /**< NULL: quiet */
    void *progress_user;
} sl_analyze_options_t;

/** Zeroes *o and sets o->size. */
SL_API void sl_analyze_options_init(sl_analyze_options_t *o);
SL_API void sl_analyze_options_init_sized(sl_analyze_options_t *o, size_t size);
#define sl_analyze_options_init(o)                                             \
    sl_analyze_options_init_sized((o), sizeof *(o))

/** Measures demand, prep (1..N threads, data in memory) and fetch (cold,
 *  then warm) of `source` (an ImageFolder, a shard folder or one shard),
 *  predicts the stall and checks it by running the job; takes about
 *  (N + 2) x seconds plus two reads of the dataset.
 *  @param json_out gets the figures as one JSON object (the keys of
 *         `sluice analyze --json`: "bound", "predicted_stall", ...); free it
 *         with sl_analysis_free. Untouched on failure.
 *  @param err gets a message on failure (may be NULL).
 *  @return 0; SL_EINVAL for bad options (o->size 0, both or neither of
 *          step_ms and rate without sweep, a value out of range) or a
 *          NULL argument; the source's open/read errors; SL_ERANGE when it
 *          holds fewer samples than one batch; SL_ENOMEM. */
SL_API int sl_analyze(const char *source, const sl_analyze_options_t *o,
                      char **json_out, char *err, size_t errlen);

typedef struct sl_calibrate_options {
    size_t size;         /**< sizeof(sl_calibrate_options_t): set by init */
    double skip_s;       /**< warm-up seconds left out [1]; < 0: none */
    double step_ms;      /**< consumer step of the run, ms [inferred from
                              the telemetry]; < 0: 0 ms (never slept) */
    double consumer_cpu; /**< 0..1: the consumer's CPU demand [0: sleeps] */
    double batch_bytes;  /**< bytes of one batch buffer [batch x 224 x 224
                              x 3] */
    double storage_bw;   /**< storage bytes/s the run had [0: both storage
                              fields 0: fitted from the reads' waits in the
                              telemetry, page cache when they show none] */
    double storage_latency_ms; /**< per-read latency the run had [0: as
                                    storage_bw] */
} sl_calibrate_options_t;

/** Zeroes *o and sets o->size. */
SL_API void sl_calibrate_options_init(sl_calibrate_options_t *o);
SL_API void sl_calibrate_options_init_sized(sl_calibrate_options_t *o,
                                            size_t size);
#define sl_calibrate_options_init(o)                                           \
    sl_calibrate_options_init_sized((o), sizeof *(o))

/** Fits a simulator profile to the telemetry JSON Lines at
 *  `telemetry_path` (unreadable lines are counted and left out).
 *  @param json_out gets {"profile": {...}, "fit": {...}}: the profile as
 *         `sluice calibrate -o` writes it (loadable by `sluice simulate
 *         --profile`), and the figures of `sluice calibrate --json`
 *         ("core_share", "foreign_demand", ...). Free it with
 *         sl_analysis_free; untouched on failure.
 *  @return 0; SL_EINVAL for bad options or a NULL argument; SL_EIO when
 *          the file cannot be read; SL_ECORRUPT when fewer than 5 steady
 *          periods with decoded items remain after skip_s; SL_ENOMEM. */
SL_API int sl_calibrate(const char *telemetry_path,
                        const sl_calibrate_options_t *o, char **json_out,
                        char *err, size_t errlen);

/** Frees a text sl_analyze or sl_calibrate returned; NULL does nothing. */
SL_API void sl_analysis_free(char *json);

#ifdef __cplusplus
}
#endif

#endif
