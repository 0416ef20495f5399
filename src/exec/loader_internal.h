/* exec/loader: the pipeline behind sl_loader_t.
 *
 *   claim (reader threads, under mu) -> read bytes -> decode_q ->
 *   decode+transform (decoder threads) straight into slot (b, i) of a batch
 *   buffer -> batch READY when its last slot is done -> consumer.
 *
 * Slots make order free: sample i of batch g always lands in slot i of the
 * buffer claimed for g, whichever thread did it, so ordered delivery needs
 * no reorder buffer and the batch stream is a pure function of (seed,
 * epoch, batch). Batch buffers are the prefetch depth (memory ~ depth x
 * batch bytes); items are the read-ahead (bounded, recycled).
 *
 * Lock order: loader mu, then a queue's own lock (queues never call back).
 * The workers' pool lock is never held while taking mu. */
#ifndef SL_LOADER_INTERNAL_H
#define SL_LOADER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "base/base.h"
#include "base/busy.h"
#include "base/membudget.h"
#include "cache/cache.h"
#include "cache/disk_tier.h"
#include "cache/pick.h"
#include "core/bufpool.h"
#include "core/msglog.h"
#include "core/sched_glue.h"
#include "data/sampler.h"
#include "data/source.h"
#include "exec/aread.h"
#include "exec/queue.h"
#include "exec/throttle.h"
#include "exec/workers.h"
#include "gpu/placement.h"
#include "gpu/stage.h"
#include "ops/image.h"
#include "sched/limits.h"
#include "sched/policy.h"
#include "telemetry/collector.h"

/* Item and read-scratch buffers above this are freed after use (with a
 * memory budget: at most mem_read / nitems, so what idle items keep stays
 * within the read share). */
#define SL_ITEM_KEEP (4u << 20)
#define SL_MSG 1024
/* How long next waits, every buffer held, for another thread's release
 * before it names the cause (sl_loader_next). */
#define SL__HELD_WAIT_MS 5000

/* BB_RELEASING: a device batch's release records its fence, out of the
 * lock (sl_loader_release_on); neither the consumer's nor claimable. */
enum { BB_FREE = 0, BB_FILLING, BB_READY, BB_HELD, BB_RELEASING };

typedef struct bbuf {
    sl_batch_t pub; /* first: sl_loader_release casts back */
    int state;
    int64_t g;       /* run position: without a plan, the global batch
                      * number epoch * nbatches + index */
    int64_t t_claim; /* when a reader claimed it (telemetry: latency) */
    int count;       /* samples assigned */
    int pending;     /* slots not yet finished */
    int nfailed;
    uint8_t *bad; /* per slot: 1 = skipped */
    int rc;       /* first failure under SL_ON_ERROR_FAIL */
    char err[SL_MSG];
    /* Where samples are written: host memory (the CPU path; pub.data too
     * for host batches), and with device batches the device memory that
     * pub.data then is, with per slot 1 when the GPU stage wrote it there
     * (the rest are copied in from host when the batch completes). */
    uint8_t *host;
    uint8_t *dev, *on_dev;
    struct bbuf *parked_next; /* in sl_loader_t.parked */
} bbuf_t;

/* A plan (sl_loader_start_plan): run position k (0..n-1, what claim_g and
 * next_g count) is global batch number at(k). n == 0: no plan, k is the
 * global batch number itself. */
typedef struct sl__plan {
    int64_t *list; /* n global batch numbers; NULL: first + k * step */
    int64_t n, first, step;
} sl__plan_t;

/* A skipped sample waiting for its batch (run position g) to be handed
 * out (sl__loader_skip_defer). */
typedef struct sl__skip_wait {
    int64_t g;
    int slot;
    char *msg; /* "epoch E: FILE: cause"; NULL: out of memory */
} sl__skip_wait_t;

typedef struct item {
    bbuf_t *bb;
    int slot;
    int64_t sample;
    sl__bytes_t data;
    int64_t charged; /* bytes of the read budget this sample holds */
    /* Asynchronous reads (loader_aread.c): the read in flight, its own
     * scratch (a compressed record's stored bytes), when it was issued. */
    sl__areq_t rq;
    sl__source_rd_t rd;
    sl__bytes_t scratch;
    int64_t t0;
    int rc;
    char err[SL_MSG];
    char rwhy[SL_MSG];   /* a remote read's failure (rq.why) */
    sl__cache_ref_t hit; /* a cache hit, pinned until decoded (e: none) */
    /* On the GPU stage: its job (and the pointer submit takes); cpu_only:
     * the stage handed it back, a decoder does it (a compressed cache
     * hit's bytes are in data already: to_gpu copied them out). */
    sl__gpu_job_t job;
    sl__gpu_job_t *jobp;
    int cpu_only;
} item_t;

struct sl_loader {
    sl_options_t opt;      /* resolved: no zero defaults left */
    sl__allocator_t alloc; /* batch data: the caller's allocator */
    sl__source_t *src;
    sl__sampler_t smp;
    sl__xform_t xf;
    size_t sample_bytes, batch_bytes;
    int batch_cap; /* samples a batch can hold: batch_size, or fewer when
                      the rank has fewer samples an epoch */

    pthread_mutex_t mu;
    /* Control: sl_loader_start (and the stop inside it) and sl_loader_set
     * run one at a time. The scheduler calls set from the telemetry
     * thread, so without it a knob change could resize the pools or free
     * buffers between a stop and the restart (issue 14). Lock order:
     * ctl_mu, then mu, then a pool's lock. */
    pthread_mutex_t ctl_mu;
    pthread_cond_t cv_work;  /* readers: a batch can be claimed */
    pthread_cond_t cv_ready; /* consumer: a batch is READY */

    bbuf_t **bufs;
    int nbufs, cap_bufs;
    /* Device batch buffers a lowered depth dropped, kept until a raise
     * takes them back or destroy frees them: a cudaFree mid-run waits
     * for the whole device, the training step's work too (sl__buf_drop) */
    bbuf_t *parked;
    int allocating; /* buffers being made outside the lock */
    int prefetch;   /* target number of batch buffers */

    int running, stopping;
    int64_t start_g, claim_g, next_g, end_g, handed;
    sl__plan_t plan; /* under mu; set by a start */
    /* Samples handed out in epoch ep_epoch (ordered) and since the start:
     * an epoch of skipped samples only is a failure (nothing_delivered). */
    int64_t ep_epoch, ep_samples, run_samples;
    bbuf_t *cur; /* batch being handed out to readers */
    int cur_slot;
    int64_t perm_epoch[2];
    int64_t *perm[2];
    int64_t one_group[2]; /* the streaming order of a source of one group */

    item_t *items; /* nitems: sl__read_ahead_items(max_read) */
    int nitems;
    sl__queue_t *free_items, *decode_q;
    sl__workers_t *readers, *decoders;
    int read_threads, decode_threads;
    sl__bytes_t rscratch[SL_WORKERS_MAX];
    sl__throttle_t thr; /* emulated storage: readers wait here */
    /* Asynchronous reads (loader_aread.c; docs/DESIGN.md): async = 1 when
     * the options allow it and io_uring works here or the source is read
     * through URLs (libcurl's multi interface); then each reader keeps
     * its share of io_depth reads in flight (0: io_depth follows the read
     * threads, one read each). Both atomics are also written under mu. */
    int async;
    const char *async_why; /* why not (static string), "" when async */
    /* Where max_memory_bytes came from when the user gave none (" (the
     * default: half the cgroup's memory limit of N MB; ...)"), appended to
     * the budget's messages; "" when given or none. */
    char mem_why[224];
    /* Where samples are decoded (gpu/placement.h), fixed at create, and
     * the GPU stage's share of each batch (SL_PARAM_GPU_SHARE, per mille;
     * 0 unless place.gpu). */
    sl__placement_t place;
    atomic_int gpu_share;
    /* The GPU stage in use (NULL: none; sl__testing_gpu_stage_set puts
     * the simulated one here), samples it did, samples it handed back to
     * the CPU path, and the last reason it gave (under mu). */
    sl__gpu_stage_t *stage;
    int stage_owned; /* 1: the loader made it (sl__loader_gpu_open) */
    int devb;        /* device batches (sl_options_t.device_batches) */
    atomic_llong gpu_items, gpu_refused;
    char gpu_refused_why[128];
    sl__busy_t gpu_busy;         /* the stage's busy time (samples in it) */
    atomic_llong gpu_handoff_ns; /* decoders' time handing samples over */
    atomic_int io_depth, readers_now;
    atomic_int reads_in_flight;
    /* Coalesced reads (loader_aread.c): the most bytes one request spans
     * (0: off), and the requests made for samples, the samples they
     * fetched, the coalesced ones that failed (read again one by one). */
    uint64_t coalesce_max;
    atomic_llong req_n, req_records, req_fallbacks;
    atomic_int halt; /* the pipeline stops (l->stopping, read bare) */
    sl__aread_t *aread[SL_WORKERS_MAX]; /* per reader, made by its thread */
    sl__scratch_t *dscratch[SL_WORKERS_MAX];
    /* A memory budget's working memory (sched/limits.h: mem_read,
     * mem_decode): read items and decode scratch are charged before they
     * are allocated. Two budgets, so a decoder never waits on bytes that
     * only decoders give back. item_keep: see SL_ITEM_KEEP. */
    sl__membudget_t rbud, dbud;
    size_t item_keep;
    /* The sample cache (loader_cache.c): its limit mirrored for a bare
     * read (0: no lookups), and each decoder's full-size pixels (the
     * decoded tier). */
    sl__cache_t *cache;
    atomic_llong cache_limit;
    sl__dtier_t *disk; /* the disk tier (cache_dir), or NULL */
    sl__bytes_t dpix[SL_WORKERS_MAX];
    /* The cache's codec (cache/pick.h): the knob (0 auto, k: candidate
     * k - 1), the candidate in force, the probe (under pick_mu), offers
     * and choices made, and what misses cost (the decoder's time on
     * them). */
    atomic_int cache_codec, cache_pick;
    pthread_mutex_t pick_mu;
    sl__pick_probe_t probe;
    atomic_llong cache_offers, cache_choices, miss_ns, miss_n;

    sl_stats_t stats; /* under mu, except bytes_read */
    atomic_llong bytes_read;
    /* Telemetry: stage busy time and items (atomics), batch latency (mu). */
    atomic_llong read_busy_ns, read_items, decode_busy_ns, decode_items;
    int64_t lat_sum_ns, lat_count;
    int64_t wait_since_ns; /* under mu: the consumer's wait began; 0: none */
    int64_t held_since_ns; /* under mu: next found every buffer held since
                              (waiting for another thread's release); 0 */
    struct sl__collector *coll;
    /* Scheduler: knobs the user left to it, budgets, the last decision. */
    sl__limits_t lim;
    sl__sched_glue_t sched; /* inactive: nothing to tune */
    int alloc_failed;       /* the last batch buffer could not be made */
    int fatal;              /* the stream failed: every next() says so */
    char fatal_msg[SL_MSG]; /* its message (under mu) */
    sl__msglog_t skips;     /* skipped samples, counted and described */
    /* Under mu: the messages of samples skipped in batches not handed out
     * yet; a batch's count and messages go to stats and skips when it is
     * handed out, so read-ahead past what the consumer takes (the next
     * epoch, a stop) is never counted. */
    sl__skip_wait_t *skip_wait;
    size_t nskip_wait, skip_wait_cap;
};

/* Options (loader_opts.c): a knob's default value (one reader, a decoder
 * per core, two batch buffers per decoder, at least 2); defaults and
 * checks; the per-sample transform they make. */
int sl__knob_default(sl_param_t p, int decode_threads);
int sl__loader_resolve(sl_options_t *o, char *err, size_t errlen);
/* max_memory_bytes 0 (none given): the default budget from the cgroup's
 * memory limit (sched/limits.h), with where it came from in why ("" and
 * no change where there is no limit). A budget given above that limit is
 * kept, with a warning in warn (else ""). */
void sl__loader_default_memory(sl_options_t *o, char *why, size_t cap,
                               char *warn, size_t wcap);
void sl__loader_xform(const sl_options_t *o, sl__xform_t *x);

/* Plans (loader_plan.c): the global batch number of run position k
 * (after the last: the batch that follows it). Under mu. */
int64_t sl__loader_planned(const sl_loader_t *l, int64_t k);
/* The part of a start both sl_loader_start and sl_loader_start_plan share:
 * stops the pipeline and streams run positions first..end-1, mapped
 * through *plan (taken over, list included; NULL: none). */
int sl__loader_begin(sl_loader_t *l, int64_t first, int64_t end,
                     const sl__plan_t *plan);

/* Under mu: the sample in slot of batch bb was skipped (msg: "FILE:
 * cause"); it is counted and listed when bb is handed out (loader.c). */
void sl__loader_skip_defer(sl_loader_t *l, const bbuf_t *bb, int slot,
                           const char *msg);

/* Under mu: a batch is being filled or waits for the consumer. */
int sl__loader_in_flight(const sl_loader_t *l);

/* The collector's view of the pipeline (loader_telemetry.c). */
void sl__loader_pipe_sample(void *arg, sl__pipe_sample_t *o);

/* Frees a whole batch buffer (not in the pool). */
void sl__buf_destroy(const sl_loader_t *l, struct bbuf *bb);
/* Under mu: bb, out of the pool (a lowered depth), parked when it has
 * device memory or the caller's host memory (l->parked: a raise takes it
 * back, destroy frees it; cudaFree and cudaFreeHost wait for the whole
 * GPU, so never mid-run); else returned, for the caller to free after the
 * lock. */
struct bbuf *sl__buf_drop(sl_loader_t *l, struct bbuf *bb);
/* exec/loader_sched.c: the budgets (sched/limits.h) from the options as
 * the user gave them; sets l->lim and the start knobs in l->opt. */
int sl__loader_budgets(sl_loader_t *l, const sl_options_t *given, char *err,
                       size_t errlen);
/* The real GPU stage when placement chose the GPU (gpu/cuda_stage.h):
 * gpu fails naming why it cannot be made, auto falls back to the CPU
 * with the reason in place.why. */
int sl__loader_gpu_open(sl_loader_t *l, char *err, size_t errlen);
/* The scheduler, when the policy has knobs to tune: the policy object and
 * the collector's on_tick hook in *co. */
int sl__loader_sched_init(sl_loader_t *l, struct sl__collector_opts *co,
                          char *err, size_t errlen);
void sl__loader_sched_free(sl_loader_t *l);
void sl__loader_reader_main(void *arg, int id);
/* The read stage with reads in flight (loader_aread.c), and the pieces of
 * the thread-per-read one it shares (loader_work.c). */
void sl__loader_reader_async(sl_loader_t *l, int id);
void sl__loader_reader_sync(sl_loader_t *l, int id); /* one at a time */
void sl__loader_aread_free(sl_loader_t *l);
int sl__loader_io_depth(const sl_loader_t *l); /* in force (follows) */
#define SL__CLAIM_LATER 2
int sl__loader_claim(sl_loader_t *l, int block, bbuf_t **bb, int *slot,
                     int64_t *sample);
/* The sample the next claim would get, when it is in the batch being
 * handed out (1 and *sample; 0: a new batch would come first, or none).
 * Another reader may claim it first. */
int sl__loader_peek(sl_loader_t *l, int64_t *sample);
typedef struct charge {
    sl__membudget_t *bud;
    const char *what;
    int64_t bytes; /* charged so far */
    int stopped;   /* the pipeline stopped while it waited */
    int try_only;  /* do not wait: SL__MEMBUDGET_LATER when it does not fit */
} charge_t;
int sl__loader_admit_charge(void *ctx, int64_t bytes, char *err, size_t errlen);
void sl__loader_decoder_main(void *arg, int id);

/* The sample cache (loader_cache.c). open: the tiers (the disk tier's
 * directory refused with a message). hit: before a read, the sample from
 * the cache (1: it->hit pinned, nothing to read; a compressed entry's
 * bytes charged through adm first, SL__MEMBUDGET_LATER when they do not
 * fit now; from the disk tier, it->hit empty and it->data filled as a
 * read fills it), 0: read it. fill: after a good read, the encoded tier
 * keeps its bytes (memory first, then disk). process: the decoder's
 * transform of an item, through the cache (a hit's bytes or pixels; the
 * decoded tier's fill); unpins. */
int sl__loader_cache_open(sl_loader_t *l, char *err, size_t errlen);
void sl__loader_cache_close(sl_loader_t *l);
int sl__loader_cache_hit(sl_loader_t *l, item_t *it, const sl__admit_t *adm);
void sl__loader_cache_fill(sl_loader_t *l, const item_t *it);
void sl__loader_cache_unpin(sl_loader_t *l, item_t *it);
/* A hit's bytes (it->hit pinned) into *p: the entry's in place, or
 * copied out of a compressed one into buf. 0, or SL_E* with the cause. */
int sl__loader_cache_bytes(item_t *it, sl__bytes_t *buf, const uint8_t **p,
                           char *cause, size_t len);
int sl__loader_cache_process(sl_loader_t *l, int id, item_t *it,
                             sl__rng_t *crop, sl__rng_t *flip, void *out,
                             char *cause, size_t len);
int sl__loader_cache_set(sl_loader_t *l, int64_t bytes);
void sl__loader_cache_sample(sl_loader_t *l, sl__pipe_sample_t *o);

#endif
