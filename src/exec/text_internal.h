/* exec/text_loader: the text pipeline behind sl_text_loader_t.
 *
 *  workers (T threads)                         consumer (next)
 *  claim chunk (epoch, c) -> slot s   ----->   group g = chunks of one
 *  read + validate + tokenize its docs         shuffle group, all DONE:
 *  lm: the stream is its windows               permute its samples, take
 *  mlm: pack + mask instances                  this rank's, copy rows into
 *                                              a pooled batch buffer
 *
 * Slots form a ring in claim order (seq % nslots); the consumer frees a
 * group's slots when it has taken its samples, which lets workers claim
 * further chunks: at most nslots chunks are held. What a chunk yields is a
 * function of (seed, epoch, chunk) only (text/textbatch.h), so thread
 * counts change when, never what.
 *
 * What it shares with the image loader (src/core): the option rules, the
 * batch memory (caller's allocator), the skip log, the per-thread last
 * error, the worker pool, telemetry and the scheduler.
 *
 * Lock order: `mu`, then the skip log's; workers never hold `mu` while
 * tokenizing. The workers' pool lock is never taken while holding `mu`. */
#ifndef SL_TEXT_INTERNAL_H
#define SL_TEXT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "base/base.h"
#include "base/membudget.h"
#include "core/bufpool.h"
#include "core/msglog.h"
#include "core/sched_glue.h"
#include "exec/workers.h"
#include "sluice/text.h"
#include "telemetry/collector.h"
#include "text/textbatch.h"
#include "text/textsrc.h"
#include "text/tokenizer.h"

#define TL_MSG 1024

enum { SLOT_FREE = 0, SLOT_WORK, SLOT_DONE };

typedef struct slot {
    int state;
    int64_t epoch, chunk, nchunks; /* nchunks of its epoch */
    int64_t *docs;
    int64_t ndocs, capdocs;
    sl__ids_t samples; /* nsamples x width int32 (lm: a prefix) */
    int64_t nsamples;
    int rc;
    char msg[TL_MSG];
} slot_t;

/* One worker's scratch, made by the worker on first use. */
typedef struct wscratch {
    sl__tok_scratch_t *tok;
    sl__bytes_t buf, scratch;
    sl__ids_t stream; /* mlm: the chunk's tokens */
    size_t *doc_end;
    size_t cap_doc_end;
} wscratch_t;

/* A batch: the header at the front of one pool block, its arrays after. */
typedef struct tbuf {
    sl_text_batch_t pub;
} tbuf_t;
#define TL_HEADER 64 /* bytes before the arrays: keeps them aligned */

struct sl_text_loader {
    sl_text_options_t opt; /* resolved */
    sl__text_spec_t spec;
    uint64_t fingerprint; /* sl_text_loader_fingerprint */
    size_t width;
    sl__textsrc_t *src;
    sl__tok_t *tok;
    wscratch_t ws[SL_WORKERS_MAX];
    sl__workers_t *workers;
    sl__bufpool_t pool; /* batch blocks */
    /* Tokenizing memory: each document charged while a worker reads and
     * tokenizes it (opt.max_memory_bytes; no limit without one). */
    sl__membudget_t tbud;
    int tbud_ready;
    /* Where max_memory_bytes came from when the user gave none (the
     * cgroup's limit, sched/limits.h: " (the default: ...)"), appended to
     * the budget's messages; "" when given or none. */
    char mem_why[256];

    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    slot_t *slots;
    int nslots;
    int threads; /* the knob in force (SL_PARAM_DECODE_THREADS) */
    int running, stopping, failed;
    char fatal_msg[TL_MSG]; /* why the stream failed (under mu) */
    /* claim cursor (workers) */
    int64_t next_seq, claim_epoch, claim_chunk, end_epoch;
    sl__text_plan_t plan; /* of claim_epoch */
    /* consumer: position and the shuffle group being taken */
    int64_t cons_seq;      /* first slot of the current group */
    int64_t wait_since_ns; /* under mu: the consumer's wait began; 0: none */
    int64_t pos_epoch, pos_batch; /* next batch handed out */
    int64_t skip;                 /* samples still to pass over (resume) */
    int64_t epoch_rows;
    int have_group, group_last;
    int64_t group_slots;   /* slots in the current group */
    int64_t group_samples; /* samples in it */
    int64_t group_next;    /* next rank row taken */
    int64_t group_rows;    /* rows for this rank */
    int64_t *gperm, gperm_cap;
    /* The batch a timed next gave up on, its rows so far (they are taken
     * from their groups): the next call goes on filling it. */
    struct tbuf *pending;
    int64_t gstart[SL_WORKERS_MAX + 4096];
    /* bad documents: each counted once */
    uint8_t *bad;
    sl__msglog_t skips;
    sl_text_stats_t st;
    /* telemetry and scheduler */
    atomic_llong busy_ns, docs_done;
    struct sl__collector *coll;
    sl__limits_t lim;
    sl__sched_glue_t sched; /* inactive: nothing to tune */
};

/* text_opts.c: the bytes of one pooled batch block: the header, then 2
 * (lm) or 4 (mlm) arrays of batch_size x seq_len int32. */
size_t sl__text_batch_block(const sl_text_options_t *o);
/* Defaults and checks of the text options (the shared ones in
 * core/options.c); the thread and memory budgets in lim. */
int sl__text_resolve(sl_text_options_t *o, sl__limits_t *lim, char *err,
                     size_t errlen);
/* sl_text_loader_fingerprint's number, of the resolved options, the
 * tokenizer's files and the documents' sizes: l->fingerprint. */
int sl__text_fingerprint(sl_text_loader_t *l, char *err, size_t errlen);

/* text_work.c: the workers' main loop, the consumer's fill of one batch
 * (under mu: 1 a batch, 0 the end, < 0 a failure; SL_ETIMEDOUT when a
 * group was not ready by `until`, CLOCK_MONOTONIC, NULL: no limit, with b
 * holding the rows taken so far and fill resumable), stopping the workers,
 * and a failure of the stream (under mu; returns rc). */
void sl__text_worker_main(void *arg, int id);
int sl__text_fill(sl_text_loader_t *l, sl_text_batch_t *b,
                  const struct timespec *until);
void sl__text_stop_workers(sl_text_loader_t *l);
int sl__text_fail(sl_text_loader_t *l, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
