/* analysis/analysis: the data-stall analyzer behind `sluice analyze` and
 * sl_analyze, in the spirit of CoorDL's DS-Analyzer. Differential runs
 * measure
 *   demand  D: what the consumer ingests (batch / step, or a rate),
 *   prep    P(n): loader throughput with the data in the page cache, for
 *                 1..N decode threads (consumer never sleeps),
 *   fetch   F: stored bytes read without decoding, cold (the dataset's own
 *              pages evicted with POSIX_FADV_DONTNEED) and warm,
 * then the stall model (stall_model.c) predicts the stall fraction from
 *   supply S = min(P(N), F_warm if the dataset fits in memory else F_cold)
 *   stall    = max(0, 1 - S / D)
 * (the consumer holds each batch B/D s, the loader makes one every B/S s),
 * and the prediction is checked by running the job (consume.c).
 *
 * Module layout: stall_model.c (the model and the cure, pure functions),
 * fetch.c (the dataset's files, eviction, the fetch pass), consume.c (a
 * loader run with a consumer holding each batch), analyze.c (the whole
 * analysis and sl_analyze), analysis_json.c (the result as JSON),
 * calibrate*.c (calibrate.h). Depends on base, data, telemetry (procfs)
 * and the public loader API. */
#ifndef SL_ANALYSIS_H
#define SL_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "data/source.h"
#include "sluice/analysis.h"
#include "sluice/telemetry.h"

/* ------------------------------------------------------- the stall model */

/* What limits the samples/s the job gets. */
typedef enum sl__bound {
    SL__BOUND_CONSUMER, /* the loader keeps up: the consumer is the limit */
    SL__BOUND_PREP,     /* decode + transform (CPU) */
    SL__BOUND_FETCH     /* reading the stored bytes (storage or cache) */
} sl__bound_t;

/* "consumer", "prep", "fetch" (the JSON's "bound"). */
const char *sl__bound_name(sl__bound_t b);

typedef struct sl__stall_model {
    double demand, prep, fetch_cold, fetch_warm; /* samples/s, as given */
    double fetch_used; /* warm if the dataset fits in memory, else cold */
    double supply;     /* min(prep, fetch_used) */
    double predicted;  /* stall fraction 0..1 */
    sl__bound_t bound;
} sl__stall_model_t;

/* The model for a consumer demanding `demand` samples/s (> 0) of a loader
 * preparing `prep` samples/s over storage fetching `cold` / `warm`; `fits`:
 * the dataset fits in memory (stays resident after one pass). */
sl__stall_model_t sl__stall_predict(double demand, double prep, double cold,
                                    double warm, int fits);

/* The slots a snapshot's read.busy is a share of: the reads in flight
 * allowed (io_depth) with asynchronous reads, else one per read thread.
 * Read time per item = read.busy x slots x interval / items. */
int sl__stall_read_slots(const sl_snapshot_t *s);
/* The CPUs the process could use in s (ncpu_usable; ncpu in a line
 * without it): what its CPU shares and core counts are judged against. */
int sl__snapshot_cpus(const sl_snapshot_t *s);

/* Threads to reach `demand` given prep rates rate[0..n-1] for 1..n
 * threads: the first count that does, else a straight line through the
 * per-thread gain (capped at 1e15). -1 when more threads did not help. */
int64_t sl__threads_needed(const double *rate, int n, double demand);

/* What would end the stall. */
typedef enum sl__cure {
    SL__CURE_NONE,         /* consumer-bound: nothing to cure */
    SL__CURE_THREADS,      /* prep: threads_needed, within the cores */
    SL__CURE_CORES,        /* prep: more threads than cores (more cores, a
                              cheaper transform, offloaded decoding) */
    SL__CURE_CHEAPER_PREP, /* prep: more threads did not help */
    SL__CURE_STORAGE       /* fetch: faster storage, or cache the dataset */
} sl__cure_t;

sl__cure_t sl__stall_cure(sl__bound_t bound, int64_t threads_needed, int cores);

/* ------------------------------------------------------------ the parts */

/* One pass reading every sample's stored bytes (no decode). */
typedef struct sl__fetch_result {
    double secs;
    int64_t samples, stored; /* samples read, stored bytes read */
} sl__fetch_result_t;

/* The dataset's files (each image of a folder, each shard) and their
 * total size: what the page cache would hold. */
typedef struct sl__dataset_files {
    char **path;
    int64_t n;
    double bytes;
} sl__dataset_files_t;

int sl__dataset_files_list(const sl__source_t *src, sl__dataset_files_t *f);
void sl__dataset_files_free(sl__dataset_files_t *f);
/* Drops these files' pages from the page cache (the rest of the machine's
 * cache is left alone). Returns how many files could not be dropped. */
int64_t sl__dataset_files_evict(const sl__dataset_files_t *f);

/* Reads every sample of src with `threads` threads (at most 4), for at
 * most max_s seconds. 0 or the first read error (err filled). */
int sl__fetch_pass(const sl__source_t *src, int threads, double max_s,
                   sl__fetch_result_t *out, char *err, size_t errlen);

/* MemAvailable of this machine in bytes (/proc/meminfo), or -1. */
double sl__mem_available(void);

/* One loader run with a consumer that holds each batch. */
typedef struct sl__analysis_consume {
    double rate;      /* samples/s in steady state (after the first 15%) */
    double stall;     /* blocked in next / wall, after the first batch */
    double delivered; /* samples/s consumed after the first batch came */
    double secs;
    double cores_used;   /* CPU seconds of this process / wall seconds */
    double hold_over_ms; /* mean consumer time per batch beyond its step */
    int64_t batches;
} sl__analysis_consume_t;

/* Streams `source` (options o, resolved) with `threads` decode threads for
 * about o->seconds after the first batch; the consumer holds each batch
 * hold_ms (0: hands it straight back). */
int sl__analysis_consume_run(const char *source, const sl_analyze_options_t *o,
                             int threads, double hold_ms,
                             sl__analysis_consume_t *out, char *err,
                             size_t errlen);

/* ---------------------------------------------------------- the analysis */

/* One check: the job run at one demand. */
typedef struct sl__analysis_level {
    double demand, step_ms, predicted, measured;
    double delivered; /* what the loader achieved during the check */
    double cores_used, hold_over_ms;
} sl__analysis_level_t;

typedef struct sl__analysis {
    sl_analyze_options_t opt; /* resolved: every default filled in */
    int cores;
    int64_t samples;
    sl__dataset_files_t files;
    double mem_available; /* bytes, or -1 */
    int fits;             /* the dataset fits in MemAvailable */
    sl__fetch_result_t cold, warm;
    double prep[SL_ANALYZE_MAX_THREADS];       /* samples/s, 1..N threads */
    double prep_cores[SL_ANALYZE_MAX_THREADS]; /* cores used by each */
    double prep_after; /* prep at N threads measured after a sweep, or -1 */
    sl__analysis_level_t level[3];
    int nlevels, main_level; /* the sweep's 100% level, or the one check */
    double demand;           /* samples/s */
    sl__stall_model_t model;
    int64_t threads_needed;
    sl__cure_t cure;
    double cache_bytes_needed, bandwidth_needed; /* bytes, bytes/s */
} sl__analysis_t;

/* *out = *in with the caller's size honoured and every default filled in.
 * SL_EINVAL with a message for a bad size, values out of range, both
 * step_ms and rate, or neither without sweep. */
int sl__analyze_options_resolve(const sl_analyze_options_t *in,
                                sl_analyze_options_t *out, char *err,
                                size_t errlen);

/* The whole analysis. On success free *out with sl__analysis_free. */
int sl__analyze(const char *source, const sl_analyze_options_t *o,
                sl__analysis_t *out, char *err, size_t errlen);
void sl__analysis_free(sl__analysis_t *a);

static inline double sl__fetch_rate(const sl__fetch_result_t *f)
{
    return (double)f->samples / f->secs;
}
static inline double sl__fetch_bytes_per_s(const sl__fetch_result_t *f)
{
    return (double)f->stored / f->secs;
}

/* The figures as one JSON object (malloc'd, NUL-terminated), exactly what
 * `sluice analyze --json` prints; NULL when out of memory. */
char *sl__analysis_json(const sl__analysis_t *a);

#endif
