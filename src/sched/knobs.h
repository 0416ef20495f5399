/* sched/knobs: the words every part of the scheduler shares.
 *
 * Knobs are what the scheduler may change while the pipeline runs (read
 * threads, decode threads, batch buffers = prefetch); limits are the
 * budgets they must stay within and which knobs the scheduler may touch
 * at all. The budget rule that fills sl__limits_t is in sched/limits.h.
 * Depends on nothing. */
#ifndef SL_KNOBS_H
#define SL_KNOBS_H

#include <stdint.h>

typedef struct sl__knobs {
    int read_threads, decode_threads, prefetch;
    int gpu_share; /* per mille of a batch on the GPU stage (sched/place.h) */
} sl__knobs_t;

/* Budgets. CPU threads: decode threads + 1 (the read stage's CPU counts as
 * one thread) <= max_threads, so max_decode = max_threads - 1. Read
 * threads beyond the first are outstanding reads (I/O depth): a reader
 * mostly waits on storage, so they are bounded by max_read, not by
 * max_threads. */
typedef struct sl__limits {
    int tune_read, tune_decode, tune_prefetch; /* 0: the user fixed it */
    int max_threads;                           /* CPU: decode + 1 */
    int max_decode, max_read, max_prefetch;    /* max_read: I/O depth */
    int min_decode; /* calm sheds stop here (0: at 1) */
    /* Budgets that bind everyone, the user's own sl_loader_set included:
     * a thread budget the user gave (max_threads) and a memory budget
     * (max_prefetch then comes from it). Otherwise they bind only the
     * scheduler. */
    int hard_threads, hard_prefetch;
    /* The batch buffers the memory budgets hold (SL_KNOB_MAX_PREFETCH
     * without one): under hard_prefetch, the user's range; max_prefetch,
     * at most this, is the scheduler's search bound (4 x its start). */
    int fit_prefetch;
    /* Working memory, outside the batch buffers: what read-ahead items
     * may hold at once (mem_read) and decode scratch (mem_decode), from
     * the memory budget or the defaults. One sample needing more than
     * either is an error. */
    int64_t mem_read, mem_decode;
    /* Asynchronous reads (sl__limits_io_depth): the most reads in flight
     * anyone may set (SL_KNOB_DEPTH's range), and read_depth = 1 when the
     * scheduler's read knob is that depth rather than read threads (its
     * max_read is then max_depth). */
    int max_depth, read_depth;
    /* The sample cache (exec/loader_cache.c): its bytes at the start
     * (sl_options_t.cache_bytes), and the most anyone may set
     * (SL_KNOB_CACHE's range): with a memory budget, the share carved out
     * of it for the cache at create; without, no bound. */
    int64_t mem_cache, max_cache;
    /* With a memory budget: the bytes the batch buffers may hold (what is
     * left of it after working memory and the cache); 0 without one. */
    int64_t mem_batches;
    /* The GPU stage's share of each batch, per mille (SL_KNOB_GPU_SHARE):
     * the most anyone may set, 1000 when the loader uses the GPU stage
     * (sl_options_t.placement), 0 when it runs on the CPU. */
    int max_gpu_share;
    /* 1: the scheduler places samples (sched/place.h): the loader has a
     * GPU stage, placement auto, no gpu_share given, a policy that tunes. */
    int tune_gpu_share;
} sl__limits_t;

/* SL_KNOB_DEPTH is not one of the scheduler's three knobs: it names the
 * I/O depth for its range (sl__limits_range) and for what a decision on
 * SL_KNOB_READ reports when lim->read_depth (sl__knob_label). */
enum {
    SL_KNOB_NONE = 0,
    SL_KNOB_READ,
    SL_KNOB_DECODE,
    SL_KNOB_PREFETCH,
    SL_KNOB_DEPTH,
    SL_KNOB_CACHE,       /* the cache's bytes: never the scheduler's */
    SL_KNOB_CACHE_CODEC, /* its codec (0: auto, 1..5: fixed) */
    SL_KNOB_GPU_SHARE    /* per mille of a batch on the GPU stage */
};

/* A policy step's mask bit (sched/policy.h) for a step that changes no
 * knob but whose reason the record must show (a policy event). */
#define SL__POLICY_EVENT (1 << 16)

/* SL_KNOB_GPU_SHARE's unit: per mille of a batch's samples (the share's
 * whole range is 0..SL_KNOB_SHARE_UNIT). */
#define SL_KNOB_SHARE_UNIT 1000

/* The engine's worker limit per stage (exec/workers.h SL_WORKERS_MAX,
 * checked there) and the most batch buffers anyone may ask for. */
#define SL_KNOB_MAX_THREADS 256
#define SL_KNOB_MAX_PREFETCH 4096

/* "read_threads", "decode_threads", "prefetch", "io_depth",
 * "gpu_share", "cache_bytes", "cache_codec" ("" for none). */
const char *sl__knob_name(int knob);
/* The name a decision on `knob` reports: "io_depth" for SL_KNOB_READ when
 * read_depth (the read knob is the I/O depth), else sl__knob_name. */
const char *sl__knob_label(int knob, int read_depth);
/* The knob's value in k (SL_KNOB_READ..PREFETCH, SL_KNOB_GPU_SHARE), or
 * its address. */
int sl__knob_get(const sl__knobs_t *k, int knob);
int *sl__knob_ref(sl__knobs_t *k, int knob);

#endif
