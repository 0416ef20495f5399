/*
 * sluice/telemetry.h: what a loader measures of the machine and of itself, one
 * snapshot a period (docs/TELEMETRY.md), and its JSON form.
 */
#ifndef SLUICE_TELEMETRY_H
#define SLUICE_TELEMETRY_H

#include "sluice/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    size_t size;       /**< sizeof(sl_snapshot_t), by sl_snapshot_init */
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
    /* a GPU through NVML, when present: the GPU stage's, else GPU 0
     * (gpu_index) */
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
    double consumer_wait_ms; /**< the interval's wait per batch handed out
                                  in it; with none handed out, the whole
                                  wait (a wait in progress: 0 only when
                                  the consumer did not wait) */
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
                                 "prefetch" | "io_depth" | "gpu_share" |
                                 "cache_bytes" | "cache_codec"; "policy"
                                 for a policy event, which changes no knob
                                 (from = to = 0; docs/TELEMETRY.md) */
    int decision_from, decision_to;
    char decision_reason[160];
    /* reads in flight (after the first layout) */
    int io_async;        /**< 1: asynchronous reads (io_uring), each read
                              thread keeping its share of io_depth in
                              flight; 0: one blocking read per read thread */
    int io_depth;        /**< with io_async: reads in flight allowed (the
                              knob), and read.busy is time in flight /
                              (io_depth x interval); 0 otherwise */
    int reads_in_flight; /**< reads issued and not yet done, now */
    /* the sample cache (after the second layout; sl_options_t.cache_bytes):
     * all 0 without one */
    int64_t cache_hits_total;    /**< samples served by the cache */
    int64_t cache_misses_total;  /**< samples the cache did not hold */
    double cache_hit_rate;       /**< hits / lookups this interval, 0..1;
                                      < 0 without lookups */
    int64_t cache_bytes;         /**< bytes held now (what it costs) */
    int64_t cache_raw_bytes;     /**< the entries' bytes before their codec */
    int64_t cache_entries;       /**< samples held now */
    int64_t cache_limit_bytes;   /**< its limit (SL_PARAM_CACHE_BYTES) */
    char cache_codec[16];        /**< how new entries are stored: "none",
                                      "lz4", "zstd-N" ("" without a cache) */
    int64_t cache_codec_choices; /**< run-time codec changes so far */
    /* where samples are decoded (after the third layout;
     * sl_options_t.placement, docs/DESIGN.md "GPU stage"): the image
     * loader only */
    int placement_present;     /**< 1: the placement_* fields are set */
    char placement[8];         /**< "auto" | "cpu" | "gpu", as asked */
    int placement_gpu;         /**< 1: the GPU stage takes its share */
    int gpu_share;             /**< per mille of each batch on the GPU stage
                                    (the knob, SL_PARAM_GPU_SHARE) */
    char placement_why[256];   /**< placement_gpu 0: why not ("" when
                                    placement cpu was asked) */
    int64_t gpu_samples_total; /**< samples the GPU stage did */
    int64_t gpu_refused_total; /**< samples it handed back to the CPU
                                    path (grayscale, CMYK, progressive,
                                    PNG, refused by the decoder) */
    char gpu_refused_why[128]; /**< the last reason it gave */
    /* the GPU stage's load and the JPEG engines' (after the fourth layout),
     * what the scheduler places samples by (docs/DESIGN.md "GPU stage") */
    double gpu_samples_per_s; /**< samples the GPU stage finished per second
                                   (0 without a stage) */
    double gpu_stage_busy;    /**< 0..1: share of the interval the stage had
                                   samples in it (submitted, not yet done);
                                   < 0 without a stage */
    double gpu_jpg_util;      /**< 0..1: NVML's JPEG-decoder use of the GPU
                                   (nvmlDeviceGetJpgUtilization); < 0 where
                                   NVML cannot tell */
    /* ranged requests for samples from URLs (after the fifth layout;
     * sl_stats_t.requests, docs/DESIGN.md "Coalesced reads"): all 0 for
     * local sources and blocking reads */
    int64_t requests_total;          /**< requests made (retries not
                                          counted) */
    int64_t request_records_total;   /**< samples those requests fetched */
    int64_t request_fallbacks_total; /**< coalesced requests that failed,
                                          their records read again one by
                                          one */
    double requests_per_s;           /**< requests made this interval */
    double records_per_request;      /**< this interval's records / requests:
                                          > 1 when coalescing; < 0 without
                                          requests */
    /* the cache's disk tier (after the sixth layout;
     * sl_options_t.cache_dir) */
    int cache_disk_present;          /**< 1: the cache_disk_* fields are set */
    int cache_disk_admitting;        /**< 0 once a write failed (disk full) */
    int64_t cache_disk_hits_total;   /**< samples it served */
    int64_t cache_disk_misses_total; /**< samples neither tier held */
    int64_t cache_disk_bytes;        /**< bytes of its file */
    int64_t cache_disk_entries;      /**< samples it holds */
    int64_t cache_disk_limit_bytes;  /**< its budget (cache_disk_bytes) */
    int64_t cache_disk_errors_total; /**< as sl_stats_t's
                                          cache_disk_errors */
    /* the GPU stage's ROI decode (after the seventh layout; docs/DESIGN.md
     * "GPU stage") */
    int gpu_roi;              /**< 1: the stage decodes each image only to the
                                   region its crop reads (nvJPEG's ROI
                                   decode); 0: whole images; -1 without a
                                   stage, or a stage that cannot tell */
    double gpu_decoded_frac;  /**< pixels the stage decoded over the pixels of
                                   its images, since the start (1 without ROI
                                   decode); < 0 before its first group */
    int64_t gpu_bytes;        /**< GPU memory the loader holds now within
                                   gpu_memory_bytes: the stage's slots and
                                   the device batch buffers; < 0 without a
                                   stage the loader made */
    int64_t gpu_nvjpeg_bytes; /**< and nvJPEG's own work buffers (the
                                   process's cache, outside the budget) */
    /* which GPU the gpu_* fields describe (after the eighth layout) */
    int gpu_index; /**< NVML's index of it: the GPU stage's GPU (found by
                        its PCI bus id), else GPU 0; < 0 without NVML or
                        where NVML cannot tell */
    char placement_held[96]; /**< why the scheduler's last decision left
                                  the GPU share where it was although the
                                  trainer waited ("" when it did not wait
                                  or the share moved; sched/place.h) */
    /* the CPU the GPU path costs (after the ninth layout) */
    double gpu_cpu_busy;    /**< cores' worth of CPU the GPU path used this
                                 interval: decoders handing samples to the
                                 stage and the stage's own threads (header
                                 parse, bitstream copies, nvJPEG's host
                                 work, copies back); < 0 without a stage.
                                 Over gpu_samples_per_s: CPU seconds a GPU
                                 sample costs, which the placement rule
                                 weighs against a CPU decode's */
    double gpu_cpu_total_s; /**< the same since the start, CPU seconds
                                 (over gpu_samples_total: a GPU sample's);
                                 < 0 without a stage */
    /* of it, the decoders' part (after the tenth layout) */
    double gpu_handoff_busy;    /**< of gpu_cpu_busy, the decoders' wall time
                                     handing samples to the stage (the rest
                                     is the stage's own threads, which take
                                     cores, not decoders); < 0 without a
                                     stage */
    double gpu_handoff_total_s; /**< the same since the start, seconds;
                                     < 0 without a stage */
    /* the CPUs this process may use (after the eleventh layout) */
    int ncpu_usable; /**< its affinity mask, lowered to its cgroup's CPU
                          quota rounded up (ncpu counts the machine's);
                          0 where unknown (older lines): read as ncpu */
} sl_snapshot_t;

/** Zeroes *s and sets s->size. */
SL_API void sl_snapshot_init(sl_snapshot_t *s);
SL_API void sl_snapshot_init_sized(sl_snapshot_t *s, size_t size);
#define sl_snapshot_init(o) sl_snapshot_init_sized((o), sizeof *(o))

/** The latest snapshot (zeroed with t = 0 before the first tick), out->size
 *  bytes of it (sl_snapshot_init). SL_ESTATE when the collector is off.
 *  Any thread. */
SL_API int sl_loader_snapshot(const sl_loader_t *l, sl_snapshot_t *out);

/** Up to `max` most recent snapshots, oldest first (the ring keeps 600).
 *  out[0].size (sl_snapshot_init) is the size of every element: the array
 *  is read as elements of that size, each written with its size set.
 *  @return how many were copied, or SL_E*. Any thread. */
SL_API int sl_loader_snapshots(const sl_loader_t *l, sl_snapshot_t *out,
                               int max);

/** Writes one snapshot as a JSON object (no newline) into buf; s->size
 *  bytes of *s are read (fields past them are written as unknown).
 *  @return the length it needs (as snprintf), or SL_EINVAL. */
SL_API int sl_snapshot_json(const sl_snapshot_t *s, char *buf, size_t len);

/** Parses one JSON object, one line of a --telemetry file (the schema of
 *  docs/TELEMETRY.md, as sl_snapshot_json writes it), into *out.
 *
 *  "t" is required (a number >= 0). Every other member may be absent or
 *  null: its field is then the "cannot be read" value, -1 (gpu_present and
 *  decision_new 0, strings ""). Any negative number reads as -1, since
 *  negative means "cannot be read". Unknown members are ignored, so newer
 *  files still read. Where one field is written under several names
 *  (workers.read, stages.read.workers, knobs.read_threads), the last one
 *  present wins, in that order.
 *
 *  For any snapshot s, sl_snapshot_json(parse(sl_snapshot_json(s))) is the
 *  same text as sl_snapshot_json(s).
 *
 *  @param json  the bytes (need not be NUL-terminated); surrounding white
 *               space is allowed, anything else after the object is not.
 *  @param err   receives a message naming the member and the cause on
 *               failure ("stages.read.busy: not a number"); may be NULL.
 *  @return 0 and *out (out->size bytes of it: sl_snapshot_init);
 *          SL_ECORRUPT (out untouched) when the bytes are not such an
 *          object; SL_EINVAL when json or out is NULL or out->size is 0.
 *          Thread-safe (no shared state). */
SL_API int sl_snapshot_parse(const char *json, size_t len, sl_snapshot_t *out,
                             char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_TELEMETRY_H */
