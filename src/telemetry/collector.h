/* telemetry/collector: a sampling thread that turns the machine's counters
 * (telemetry/machine) and the pipeline's (through a callback, so telemetry
 * never depends on exec) into one sl_snapshot_t per period, keeps a ring of
 * recent ones, streams them as JSON Lines and serves the latest to
 * Prometheus. Depends on base and telemetry/machine. */
#ifndef SL_COLLECTOR_H
#define SL_COLLECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"
#include "sluice/telemetry.h"

/* The first versioned layout of sl_snapshot_t (base/abi.h): a caller's
 * snapshot may not be smaller. */
#define SL__SNAPSHOT_V1_SIZE                                                   \
    (offsetof(sl_snapshot_t, decision_reason) + 160 * sizeof(char))

/* Cumulative pipeline counters and current gauges, read under the
 * pipeline's own lock by its callback. */
typedef struct sl__pipe_sample {
    int64_t samples, batches, errors_skipped, bytes_read, wait_ns;
    int64_t lat_sum_ns, lat_count;
    int64_t read_busy_ns, read_items, decode_busy_ns, decode_items;
    int read_workers, decode_workers;
    int read_inflight, read_capacity; /* read-ahead items in use / all */
    int io_async, io_depth;           /* asynchronous reads: depth (read.busy's
                                         divisor instead of read_workers) */
    int reads_in_flight;
    int decode_queue, decode_capacity;
    int prefetch, batches_ready, batches_filling;
    int64_t decisions; /* knob changes made by the scheduler so far */
    char decision_knob[24];
    int decision_from, decision_to;
    char decision_reason[160];
    /* the sample cache: counters, what it holds, how it stores */
    int64_t cache_hits, cache_misses, cache_bytes, cache_raw_bytes;
    int64_t cache_entries, cache_limit;
    char cache_codec[16];
    int64_t cache_codec_choices;
    /* placement (the image loader's; placement_present 0 otherwise) */
    int placement_present, placement_gpu, gpu_share;
    char placement[8];
    char placement_why[256];
    char placement_held[96]; /* sched/place.h's held */
    int64_t gpu_samples, gpu_refused;
    char gpu_refused_why[128];
    /* the GPU stage: 1 when there is one, and the time it has had samples
     * in it (submitted, not yet done), summed */
    int gpu_stage;
    int64_t gpu_busy_ns;
    int64_t gpu_cpu_ns;     /* CPU the GPU path used so far: hand-overs and the
                               stage's threads */
    int64_t gpu_handoff_ns; /* of it, the hand-overs (decoders' wall time) */
    /* its ROI decode (-1: cannot tell), pixels of its images and decoded */
    int gpu_roi;
    double gpu_px_images, gpu_px_decoded;
    /* GPU memory: within the budget, nvJPEG's (-1: no stage made) */
    int64_t gpu_bytes, gpu_nvjpeg_bytes;
    /* ranged requests for samples (the image loader's; 0 otherwise) */
    int64_t requests, request_records, request_fallbacks;
    /* the cache's disk tier (cache_disk_present 0: none) */
    int cache_disk_present, cache_disk_admitting;
    int64_t cache_disk_hits, cache_disk_misses, cache_disk_bytes;
    int64_t cache_disk_entries, cache_disk_limit, cache_disk_errors;
} sl__pipe_sample_t;

typedef void (*sl__pipe_fn)(void *arg, sl__pipe_sample_t *out);

/* Starts a pipeline's sample: zeroes it and sets what every pipeline
 * counts on its consumer side (items handed out, batches, skips, time
 * blocked in next). The rest is the pipeline's own (stages, queues).
 * wait_since_ns: when the consumer's current wait began (sl__now_ns), 0
 * when it is not waiting. A wait in progress counts up to now, so a wait
 * longer than a period shows in every period it covers, not all at once
 * (capped at one period) in the period it ends. */
static inline void sl__pipe_sample_begin(sl__pipe_sample_t *o, int64_t samples,
                                         int64_t batches, int64_t skipped,
                                         int64_t wait_ns, int64_t wait_since_ns,
                                         int64_t now_ns)
{
    if (wait_since_ns > 0 && now_ns > wait_since_ns)
        wait_ns += now_ns - wait_since_ns;
    *o = (sl__pipe_sample_t){.samples = samples,
                             .batches = batches,
                             .errors_skipped = skipped,
                             .wait_ns = wait_ns};
}

struct sl__collector;

typedef struct sl__collector_opts {
    int period_ms;          /* > 0 */
    const char *data_path;  /* where the data lives (disk to watch) */
    const char *jsonl_path; /* NULL: none */
    int metrics_port;       /* 0: none */
    int ring;               /* snapshots kept */
    /* Called on the collector thread after each periodic snapshot (the
     * scheduler's hook); may be NULL. */
    void (*on_tick)(void *arg, struct sl__collector *c);
    /* The GPU NVML reports (cudaDeviceGetPCIBusId's form; copied): the
     * GPU stage's. NULL or "": GPU 0. */
    const char *gpu_bus_id;
    /* Called with what went wrong that the run goes on without (the
     * JSONL file's first failed write: no more lines are written), once
     * a cause, on the thread that met it (the collector's, or the one
     * stopping it), holding no collector lock; may be NULL. The loaders
     * list it with their skips as a warning. */
    void (*on_warning)(void *arg, const char *msg);
} sl__collector_opts_t;

typedef struct sl__collector sl__collector_t;

/* Takes a first reading and starts the thread. */
int sl__collector_start(const sl__collector_opts_t *o, sl__pipe_fn fn,
                        void *arg, sl__collector_t **out, char *err,
                        size_t errlen);
/* Takes one last snapshot (so short runs have one), stops, joins, closes
 * the JSONL file and the HTTP server. NULL ok. */
void sl__collector_stop(sl__collector_t *c);
int sl__collector_latest(sl__collector_t *c, sl_snapshot_t *out);
/* The public calls' copies into a caller's sized snapshots (out->size
 * bytes; for an array, out[0].size is every element's size), each written
 * with its size. SL_ESTATE when c is NULL (telemetry off), SL_EINVAL for
 * a size below the first layout. */
int sl__collector_copy_latest(sl__collector_t *c, sl_snapshot_t *out);
int sl__collector_copy_recent(sl__collector_t *c, sl_snapshot_t *out, int max);
int sl__collector_recent(sl__collector_t *c, sl_snapshot_t *out, int max);
/* What the endpoint serves beside the latest snapshot: the counters behind
 * its rates, so a scraper takes rates over its own interval (rate() in
 * PromQL, `sluice top`), and the last knob changes. A decision is kept as
 * the snapshot records it: when one tick makes several changes, the first
 * applied (sl__sched_report). */
#define SL__DECISION_LOG 16
typedef struct sl__decision_rec {
    double t;    /* the snapshot's t */
    int64_t seq; /* decisions_total after it */
    char knob[24];
    int from, to;
    char reason[160];
} sl__decision_rec_t;

typedef struct sl__collector_extra {
    double wait_s, read_busy_s, decode_busy_s; /* since the start */
    int ndec;
    sl__decision_rec_t dec[SL__DECISION_LOG]; /* oldest first */
} sl__collector_extra_t;

/* The latest snapshot and its extra, consistent with each other.
 * @return 1, or 0 before the first tick (out is then all zeros: nothing
 * read yet, not values). */
int sl__collector_latest_extra(sl__collector_t *c, sl_snapshot_t *out,
                               sl__collector_extra_t *x);

/* Takes a snapshot now (also used by tests). */
void sl__collector_tick(sl__collector_t *c);

/* Prometheus text exposition of a snapshot (and, when x is not NULL, its
 * counters) into buf; returns the length needed (as snprintf). */
int sl__prom_format(const sl_snapshot_t *s, const sl__collector_extra_t *x,
                    char *buf, size_t len);
/* The decision log as Prometheus text (the /decisions path): one sample a
 * decision, its value the t it was made at. */
int sl__prom_format_decisions(const sl__collector_extra_t *x, char *buf,
                              size_t len);

#endif
