/* The public sl_text_loader_* API over the pipeline in text_work.c:
 * create (its options in text_opts.c), knobs, streaming, telemetry and
 * the scheduler's hook. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/abi.h"
#include "base/lasterr.h"
#include "core/options.h"
#include "sluice/testing.h"
#include "sluice/text.h"
#include "telemetry/machine.h"
#include "text_internal.h"

SL__ABI_INIT_PAIR(sl_text_stats_init, sl_text_stats_t)

static int special_id(sl__tok_t *t, const char *name, int32_t *out, char *err,
                      size_t errlen)
{
    *out = sl__tok_id(t, name);
    if (*out < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "the vocabulary has no %s token", name);
    return 0;
}

static int setup(sl_text_loader_t *l, char *err, size_t errlen)
{
    sl_text_options_t *o = &l->opt;
    /* No budget given: the cgroup's limit sets one, as if given (the
     * image loader's rule and words, sched/limits.h) */
    if (o->max_memory_bytes == 0)
        o->max_memory_bytes = sl__limits_default_memory(
            sl__read_cgroup_memory("/"), 0, "max_memory_bytes (--max-memory)",
            l->mem_why, sizeof l->mem_why);
    int rc = sl__text_resolve(o, &l->lim, err, errlen);
    if (rc && l->mem_why[0] && strstr(err, "memory budget")) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, "%s", l->mem_why);
    }
    if (rc)
        return rc;
    int lm = o->task == SL_TEXT_LM;
    rc = sl__tok_open(o->tokenizer, o->vocab, o->merges, o->cased, &l->tok, err,
                      errlen);
    if (rc)
        return rc;
    sl__text_spec_t *sp = &l->spec;
    sp->task = lm ? SL__TEXT_LM : SL__TEXT_MLM;
    sp->seq_len = o->seq_len;
    sp->vocab_size = (int32_t)sl__tok_vocab_size(l->tok);
    sp->mask_prob = o->mask_prob;
    sp->seed = o->seed;
    int wp = !strcmp(o->tokenizer, "wordpiece");
    if (o->eos_id || (o->given & SL_TEXT_GIVEN_EOS_ID)) {
        if (o->eos_id >= sp->vocab_size) /* < 0: refused by sl__text_resolve */
            return sl__fail(err, errlen, SL_EINVAL,
                            "invalid text option eos_id = %d: the vocabulary "
                            "has %d tokens (ids 0..%d)",
                            (int)o->eos_id, (int)sp->vocab_size,
                            (int)sp->vocab_size - 1);
        sp->eos = o->eos_id;
    } else if (lm && (rc = special_id(l->tok, wp ? "[SEP]" : "<|endoftext|>",
                                      &sp->eos, err, errlen)))
        return rc;
    if (lm) { /* the options in force name the EOS they use */
        o->eos_id = sp->eos;
        o->given |= SL_TEXT_GIVEN_EOS_ID;
    }
    if (!lm && ((rc = special_id(l->tok, "[CLS]", &sp->cls, err, errlen)) ||
                (rc = special_id(l->tok, "[SEP]", &sp->sep, err, errlen)) ||
                (rc = special_id(l->tok, "[MASK]", &sp->mask, err, errlen)) ||
                (rc = special_id(l->tok, "[PAD]", &sp->pad, err, errlen))))
        return rc;
    l->width = sl__text_sample_width(sp);
    l->nslots = o->prefetch_chunks;
    l->threads = o->decode_threads;
    int64_t nd = sl__textsrc_count(l->src);
    if (nd == 0)
        return sl__fail(err, errlen, SL_ENOTFOUND,
                        "the text sources hold no document");
    if ((rc = sl__text_fingerprint(l, err, errlen)))
        return rc;
    sl__allocator_t a = {o->buffer_alloc, o->buffer_free, o->buffer_ctx};
    sl__bufpool_init(&l->pool, &a, sl__text_batch_block(o));
    /* The tokenizers' share of a budget (sched/limits: read + decode) */
    sl__membudget_init(&l->tbud, o->max_memory_bytes > 0
                                     ? l->lim.mem_read + l->lim.mem_decode
                                     : 0);
    l->tbud.note = l->mem_why[0] ? l->mem_why : NULL;
    l->tbud_ready = 1;
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->bad = calloc((size_t)nd, 1);
    l->workers = sl__workers_create(sl__text_worker_main, l);
    if (!l->slots || !l->bad || !l->workers)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    return 0;
}

static void text_pipe_sample(void *arg, sl__pipe_sample_t *o);
static int text_knobs(void *self, sl__knobs_t *cur);
static int text_set(void *self, int knob, int value);
static void text_tick(void *arg, struct sl__collector *c);
static void text_warn(void *arg, const char *msg);
static int threads_failed(sl_text_loader_t *l, int rc);

static int create(const char *const *sources, int nsources,
                  const sl_text_options_t *opt, sl_text_loader_t **out,
                  char *err, size_t errlen)
{
    if (!out || (!sources && nsources))
        return sl__fail(err, errlen, SL_EINVAL, "sources and out are needed");
    *out = NULL;
    sl_text_loader_t *l = calloc(1, sizeof *l);
    if (!l)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    if (!opt)
        sl_text_options_init(&l->opt);
    else if (sl__abi_in(&l->opt, sizeof l->opt, opt, SL__TEXT_OPTIONS_V1_SIZE,
                        "sl_text_options", err, errlen)) {
        free(l);
        return SL_EINVAL;
    }
    l->st.size = sizeof l->st;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_condattr_t ca; /* next's timed waits: as sl__now_ns */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    sl__msglog_init(&l->skips, SL_MSGLOG_KEEP);
    l->plan.epoch = -1;
    int rc = sl__textsrc_open(sources, nsources, l->opt.doc_per_file,
                              l->opt.on_error == SL_ON_ERROR_SKIP, &l->src, err,
                              errlen);
    /* The shards the open left out under skip: counted and listed as
     * skips, as the image loader's are. */
    for (int i = 0; !rc && i < sl__textsrc_left_out_count(l->src); i++) {
        sl__msglog_add(&l->skips, "%s", sl__textsrc_left_out(l->src, i));
        l->st.errors_skipped++;
    }
    if (!rc)
        rc = setup(l, err, errlen);
    if (!rc && l->opt.telemetry_ms > 0) {
        sl__collector_opts_t co = {l->opt.telemetry_ms,
                                   sources[0],
                                   l->opt.telemetry_path,
                                   0,
                                   600,
                                   NULL,
                                   NULL,
                                   text_warn};
        sl_options_t shape; /* what the policy reads: its id and seed */
        sl_options_init(&shape);
        shape.policy = l->opt.policy;
        shape.seed = l->opt.seed;
        rc = sl__sched_glue_init(&l->sched, &shape, &l->lim, &l->mu, l,
                                 text_knobs, text_set, err, errlen);
        if (!rc && sl__sched_glue_active(&l->sched))
            co.on_tick = text_tick;
        if (!rc)
            rc = sl__collector_start(&co, text_pipe_sample, l, &l->coll, err,
                                     errlen);
    }
    if (rc) {
        sl_text_loader_destroy(l);
        return rc;
    }
    *out = l;
    return 0;
}

/* The owner of a failed create's message (base/lasterr.h). */
static const char create_tag;

int sl_text_loader_create(const char *const *sources, int nsources,
                          const sl_text_options_t *opt, sl_text_loader_t **out)
{
    char err[TL_MSG] = "";
    int rc = create(sources, nsources, opt, out, err, sizeof err);
    return rc ? sl__lasterr_set(&create_tag, rc, "%s", err) : 0;
}

void sl_text_loader_destroy(sl_text_loader_t *l)
{
    if (!l)
        return;
    sl__lasterr_forget(l);
    sl__collector_stop(l->coll); /* first: it reads the pipeline */
    sl__sched_glue_free(&l->sched);
    if (l->workers) {
        sl__text_stop_workers(l);
        sl__workers_destroy(l->workers);
    }
    for (int i = 0; l->slots && i < l->nslots; i++) {
        free(l->slots[i].docs);
        sl__ids_free(&l->slots[i].samples);
    }
    free(l->slots);
    for (int i = 0; i < SL_WORKERS_MAX; i++) {
        sl__tok_scratch_destroy(l->ws[i].tok);
        sl__bytes_free(&l->ws[i].buf);
        sl__bytes_free(&l->ws[i].scratch);
        sl__ids_free(&l->ws[i].stream);
        free(l->ws[i].doc_end);
    }
    if (l->pool.bytes)
        sl__bufpool_free(&l->pool);
    sl__msglog_free(&l->skips);
    if (l->tbud_ready)
        sl__membudget_destroy(&l->tbud);
    free(l->bad);
    free(l->gperm);
    sl__text_plan_free(&l->plan);
    sl__tok_free(l->tok);
    sl__textsrc_close(l->src);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
    free(l);
}

const char *sl_text_loader_last_error(const sl_text_loader_t *l)
{
    return sl__lasterr_get(l ? (const void *)l : &create_tag);
}

int64_t sl__testing_text_memory_budget(const sl_text_loader_t *l,
                                       const char **why)
{
    if (!l)
        return SL_EINVAL;
    if (why)
        *why = l->mem_why;
    return l->opt.max_memory_bytes;
}

/* ------------------------------------------------------------------ knobs */

int sl_text_loader_param_range(const sl_text_loader_t *l, sl_param_t p,
                               int64_t *min, int64_t *max)
{
    if (!l || !min || !max)
        return SL_EINVAL;
    if (p != SL_PARAM_DECODE_THREADS)
        return sl__lasterr_set(l, SL_EINVAL,
                               "knob %d: the text loader has only "
                               "SL_PARAM_DECODE_THREADS",
                               (int)p);
    return sl__limits_range(&l->lim, SL_KNOB_DECODE, min, max);
}

int sl_text_loader_set(sl_text_loader_t *l, sl_param_t p, int64_t value)
{
    int64_t lo, hi;
    int rc = sl_text_loader_param_range(l, p, &lo, &hi);
    if (rc)
        return rc;
    if (value == SL_AUTOTUNE)
        value = sl__default_threads() < hi ? sl__default_threads() : hi;
    if (value < lo || value > hi)
        return sl__lasterr_set(l, SL_ERANGE,
                               "decode_threads = %lld is outside %lld..%lld",
                               (long long)value, (long long)lo, (long long)hi);
    pthread_mutex_lock(&l->mu);
    l->threads = (int)value;
    int running = l->running;
    pthread_mutex_unlock(&l->mu);
    /* The pool lock is never taken under mu. */
    if (running && (rc = sl__workers_set(l->workers, (int)value)))
        return threads_failed(l, rc);
    return 0;
}

int sl_text_loader_get(const sl_text_loader_t *l, sl_param_t p, int64_t *value)
{
    if (!l || !value)
        return SL_EINVAL;
    if (p != SL_PARAM_DECODE_THREADS)
        return sl__lasterr_set(l, SL_EINVAL, "unknown knob %d", (int)p);
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    *value = l->threads;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    return 0;
}

/* -------------------------------------------------------------- streaming */

int sl_text_loader_start(sl_text_loader_t *l, const sl_position_t *pos)
{
    if (!l)
        return SL_EINVAL;
    sl_position_t p = pos ? *pos : (sl_position_t){0, 0};
    if (p.epoch < 0 || p.batch < 0)
        return sl__lasterr_set(l, SL_ERANGE,
                               "position epoch %lld batch %lld is outside "
                               "epoch >= 0, batch >= 0",
                               (long long)p.epoch, (long long)p.batch);
    /* The rows to pass over (batch x batch_size) and the last epoch must
     * fit; a batch past the epoch's end is found when the epoch ends
     * (sl__text_fill: its count is known only once it is tokenized). */
    if (p.batch > INT64_MAX / l->opt.batch_size ||
        p.epoch > INT64_MAX - l->opt.epochs)
        return sl__lasterr_set(l, SL_ERANGE,
                               "position (%lld, %lld) is out of range",
                               (long long)p.epoch, (long long)p.batch);
    sl__text_stop_workers(l);
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nslots; i++)
        l->slots[i].state = SLOT_FREE;
    l->next_seq = l->cons_seq = 0;
    l->claim_epoch = p.epoch;
    l->claim_chunk = 0;
    l->end_epoch = p.epoch + l->opt.epochs;
    l->pos_epoch = p.epoch;
    l->pos_batch = p.batch;
    l->skip = p.batch * l->opt.batch_size;
    l->epoch_rows = p.batch * l->opt.batch_size;
    l->have_group = 0;
    if (l->pending) { /* rows of the stream before: a new stream */
        sl__bufpool_put(&l->pool, l->pending);
        l->pending = NULL;
    }
    l->failed = 0;
    l->running = 1;
    int threads = l->threads;
    pthread_mutex_unlock(&l->mu);
    int rc = sl__workers_set(l->workers, threads);
    return rc ? threads_failed(l, rc) : 0;
}

int sl_text_loader_next(sl_text_loader_t *l, const sl_text_batch_t **out)
{
    return sl_text_loader_next_timeout(l, out, -1);
}

int sl_text_loader_next_timeout(sl_text_loader_t *l,
                                const sl_text_batch_t **out, int timeout_ms)
{
    if (!l || !out)
        return SL_EINVAL;
    *out = NULL;
    struct timespec until = /* done_cv's clock: monotonic */
        sl__mono_timespec(sl__now_ns() + (int64_t)timeout_ms * 1000000);
    pthread_mutex_lock(&l->mu);
    if (!l->running) {
        pthread_mutex_unlock(&l->mu);
        return sl__lasterr_set(l, SL_ESTATE,
                               "sl_text_loader_start was not called");
    }
    int rc = l->failed;
    tbuf_t *t = l->pending; /* a timed-out call's rows: go on filling */
    l->pending = NULL;
    if (!t && !rc) {
        if (!(t = sl__bufpool_get(&l->pool))) {
            rc = sl__text_fail(l, SL_ENOMEM, "text loader: out of memory");
        } else {
            size_t bytes = (size_t)l->opt.batch_size * (size_t)l->spec.seq_len *
                           sizeof(int32_t);
            char *a = (char *)t + TL_HEADER;
            int mlm = l->spec.task == SL__TEXT_MLM;
            t->pub = (sl_text_batch_t){(int32_t *)a,
                                       (int32_t *)(a + bytes),
                                       mlm ? (int32_t *)(a + 2 * bytes) : NULL,
                                       mlm ? (int32_t *)(a + 3 * bytes) : NULL,
                                       0,
                                       l->spec.seq_len,
                                       0,
                                       0,
                                       0};
        }
    }
    if (!rc)
        rc = sl__text_fill(l, &t->pub, timeout_ms >= 0 ? &until : NULL);
    if (rc == SL_ETIMEDOUT) {
        l->pending = t; /* its rows are out of their groups already */
    } else if (rc == 1) {
        l->st.batches++;
        l->st.sequences += t->pub.n;
        l->st.tokens += t->pub.tokens;
        *out = &t->pub;
        rc = 0;
    } else {
        if (t)
            sl__bufpool_put(&l->pool, t);
        if (rc == 0)
            rc = SL_EEND;
        else
            sl__lasterr_set(l, rc, "%s", l->fatal_msg);
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int sl_text_loader_release(sl_text_loader_t *l, const sl_text_batch_t *b)
{
    if (!b)
        return 0;
    if (!l)
        return SL_EINVAL;
    /* pub is the first member of the block's header */
    int rc = sl__bufpool_put(&l->pool, (void *)b);
    if (rc == SL_ESTATE)
        return sl__lasterr_set(l, rc, "text batch %p was already released",
                               (const void *)b);
    if (rc)
        return sl__lasterr_set(l, rc, "text batch %p is not this loader's",
                               (const void *)b);
    return 0;
}

int sl_text_loader_position(const sl_text_loader_t *l, sl_position_t *pos)
{
    if (!l || !pos)
        return SL_EINVAL;
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    pos->epoch = l->pos_epoch;
    pos->batch = l->pos_batch;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    return 0;
}

int sl_text_loader_stats(const sl_text_loader_t *l, sl_text_stats_t *st)
{
    if (!l || !st)
        return SL_EINVAL;
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    sl_text_stats_t s = l->st;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    return sl__abi_out(st, &s, sizeof s, SL__TEXT_STATS_V1_SIZE);
}

int64_t sl_text_loader_num_documents(const sl_text_loader_t *l)
{
    return l ? sl__textsrc_count(l->src) : 0;
}

int64_t sl_text_loader_vocab_size(const sl_text_loader_t *l)
{
    return l ? (int64_t)sl__tok_vocab_size(l->tok) : 0;
}

uint64_t sl_text_loader_fingerprint(const sl_text_loader_t *l)
{
    return l ? l->fingerprint : 0;
}

int64_t sl_text_loader_skipped_count(const sl_text_loader_t *l)
{
    return l ? sl__msglog_count(&((sl_text_loader_t *)l)->skips) : 0;
}

const char *sl_text_loader_skipped_message(const sl_text_loader_t *l, int64_t i)
{
    return l ? sl__msglog_get(&((sl_text_loader_t *)l)->skips, i) : NULL;
}

/* ------------------------------------------------- telemetry, scheduler */

int sl_text_loader_snapshot(const sl_text_loader_t *l, sl_snapshot_t *out)
{
    return l ? sl__collector_copy_latest(l->coll, out) : SL_EINVAL;
}

/* The collector's view: one stage (tokenize) reported as the decode
 * stage; documents are its items; chunk slots its queue. */
static void text_pipe_sample(void *arg, sl__pipe_sample_t *o)
{
    sl_text_loader_t *l = arg;
    pthread_mutex_lock(&l->mu);
    sl__pipe_sample_begin(o, l->st.sequences, l->st.batches,
                          l->st.errors_skipped, l->st.wait_ns, l->wait_since_ns,
                          sl__now_ns());
    o->bytes_read = l->st.bytes_read;
    o->decode_workers = l->running ? l->threads : 0;
    o->decode_capacity = l->nslots;
    for (int i = 0; i < l->nslots; i++) {
        o->decode_queue += l->slots[i].state == SLOT_WORK;
        o->batches_ready += l->slots[i].state == SLOT_DONE;
    }
    o->prefetch = l->nslots;
    sl__sched_glue_sample(&l->sched, o);
    pthread_mutex_unlock(&l->mu);
    o->decode_busy_ns = atomic_load(&l->busy_ns);
    o->decode_items = atomic_load(&l->docs_done);
}

/* The scheduler (core/sched_glue.h): the tokenizing threads are the one
 * knob, the decode stage's. */
static int text_knobs(void *self, sl__knobs_t *cur)
{
    sl_text_loader_t *l = self;
    *cur = (sl__knobs_t){1, l->threads, l->nslots, 0};
    return l->running && !l->stopping;
}

static int text_set(void *self, int knob, int value)
{
    return knob == SL_KNOB_DECODE
               ? sl_text_loader_set(self, SL_PARAM_DECODE_THREADS, value)
               : SL_EINVAL;
}

static void text_tick(void *arg, struct sl__collector *c)
{
    sl__sched_glue_tick(&((sl_text_loader_t *)arg)->sched, c);
}

/* The tokenizer pool could not start its threads: rc, and why in the
 * loader's message. */
static int threads_failed(sl_text_loader_t *l, int rc)
{
    char why[256];
    sl__workers_why(l->workers, why, sizeof why);
    return sl__lasterr_set(l, rc, "could not start tokenizer threads: %s", why);
}

/* As the image loader's: a --telemetry file that can no longer be
 * written, listed with the skips, not counted. */
static void text_warn(void *arg, const char *msg)
{
    sl__msglog_add(&((sl_text_loader_t *)arg)->skips, "warning: %s", msg);
}
