/* exec/text_loader: the text pipeline and the public sl_text_loader_* API.
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
 * Lock order: `mu`, then `pool_mu`; workers never hold `mu` while
 * tokenizing. The workers' pool lock is never taken while holding `mu`. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/rng.h"
#include "exec/workers.h"
#include "text/textbatch.h"
#include "text/textsrc.h"
#include "text/tokenizer.h"

#define TL_MSG 1024
#define TL_SKIP_KEEP 10000

static _Thread_local char tl_create_err[TL_MSG];

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

typedef struct wscratch {
    sl__tok_scratch_t *tok;
    sl__bytes_t buf, scratch;
    sl__ids_t stream; /* mlm: the chunk's tokens */
    size_t *doc_end;
    size_t cap_doc_end;
} wscratch_t;

typedef struct tbuf {
    sl_text_batch_t pub;
    struct tbuf *next_free, *next_all;
} tbuf_t;

struct sl_text_loader {
    sl_text_options_t opt;
    sl__text_spec_t spec;
    size_t width;
    sl__textsrc_t *src;
    sl__tok_t *tok;
    int nthreads;
    wscratch_t *ws;
    sl__workers_t *workers;

    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    slot_t *slots;
    int nslots;
    int running, stopping, failed;
    /* claim cursor (workers) */
    int64_t next_seq, claim_epoch, claim_chunk, end_epoch;
    sl__text_plan_t plan; /* of claim_epoch */
    /* consumer */
    int64_t cons_seq; /* first slot of the current group */
    int64_t ce, cb;   /* position: epoch, next batch index */
    int64_t skip;     /* samples still to pass over (resume) */
    int64_t epoch_rows;
    int have_group, group_last;
    int64_t gslots;        /* slots in the current group */
    int64_t gn, gk, gkmax; /* samples, next rank row, rows for this rank */
    int64_t *gperm, gperm_cap;
    int64_t gstart[SL_WORKERS_MAX + 4096];
    /* bad documents */
    uint8_t *bad;
    char **skipmsg;
    int64_t nskipped;
    sl_text_stats_t st;
    char err[TL_MSG];

    pthread_mutex_t pool_mu;
    tbuf_t *free_bufs, *all_bufs;
};

static int set_err(sl_text_loader_t *l, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_err(sl_text_loader_t *l, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, sizeof l->err, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---------------------------------------------------------------- workers */

/* Under mu: a document went bad; count it once, keep its message. */
static void note_bad(sl_text_loader_t *l, int64_t doc, const char *msg)
{
    if (l->bad[doc])
        return;
    l->bad[doc] = 1;
    if (l->nskipped < TL_SKIP_KEEP) {
        l->skipmsg[l->nskipped] = strdup(msg);
        if (!l->skipmsg[l->nskipped])
            return; /* not counted: the index must have a message */
    }
    l->nskipped++;
    l->st.errors_skipped = l->nskipped;
}

/* Reads and tokenizes slot's documents; builds its samples. Without mu. */
static void build_chunk(sl_text_loader_t *l, wscratch_t *w, slot_t *s)
{
    const sl__text_spec_t *sp = &l->spec;
    int lm = sp->task == SL__TEXT_LM;
    sl__ids_t *ids = lm ? &s->samples : &w->stream;
    ids->n = 0;
    size_t nd = 0, bytes = 0;
    char err[TL_MSG];
    s->rc = 0;
    s->nsamples = 0;
    for (int64_t k = 0; k < s->ndocs; k++) {
        int64_t d = s->docs[k];
        const char *p;
        size_t n;
        size_t before = ids->n;
        int rc = sl__textsrc_get(l->src, d, &w->buf, &w->scratch, &p, &n, err,
                                 sizeof err);
        if (!rc && n)
            rc = sl__tok_encode(l->tok, p, n, 0, w->tok, ids, err, sizeof err);
        if (rc) {
            ids->n = before;
            pthread_mutex_lock(&l->mu);
            note_bad(l, d, err);
            pthread_mutex_unlock(&l->mu);
            if (l->opt.fail_on_error) {
                s->rc = rc;
                snprintf(s->msg, sizeof s->msg, "%s", err);
                return;
            }
            continue;
        }
        if (!n)
            continue;
        bytes += n;
        if (lm) {
            if (sl__ids_push(ids, sp->eos))
                goto nomem;
        } else {
            if (nd == w->cap_doc_end) {
                size_t cap = w->cap_doc_end ? 2 * w->cap_doc_end : 1024;
                size_t *e = realloc(w->doc_end, cap * sizeof *e);
                if (!e)
                    goto nomem;
                w->doc_end = e, w->cap_doc_end = cap;
            }
            w->doc_end[nd++] = ids->n;
        }
    }
    if (lm) {
        s->nsamples = (int64_t)(ids->n / l->width);
    } else {
        s->samples.n = 0;
        int64_t m = sl__text_mlm_build(sp, w->stream.v, w->doc_end, nd,
                                       s->epoch, s->chunk, &s->samples);
        if (m < 0)
            goto nomem;
        s->nsamples = m;
    }
    pthread_mutex_lock(&l->mu);
    l->st.tokens_encoded += (int64_t)ids->n;
    l->st.bytes_read += (int64_t)bytes;
    pthread_mutex_unlock(&l->mu);
    return;
nomem:
    s->rc = SL_ENOMEM;
    snprintf(s->msg, sizeof s->msg, "epoch %lld chunk %lld: out of memory",
             (long long)s->epoch, (long long)s->chunk);
}

/* Under mu: claims the next chunk into a slot; NULL when none may be. */
static slot_t *claim(sl_text_loader_t *l, int *rc)
{
    if (l->next_seq - l->cons_seq >= l->nslots ||
        l->claim_epoch >= l->end_epoch)
        return NULL;
    if (l->plan.epoch != l->claim_epoch) {
        *rc = sl__text_plan_make(&l->plan, l->src, l->opt.seed, l->claim_epoch,
                                 !l->opt.no_shuffle,
                                 (uint64_t)l->opt.chunk_bytes);
        if (*rc)
            return NULL;
    }
    slot_t *s = &l->slots[l->next_seq % l->nslots];
    int64_t c = l->claim_chunk;
    int64_t b = l->plan.chunk_start[c], e = l->plan.chunk_start[c + 1];
    if (e - b > s->capdocs) {
        int64_t *d = realloc(s->docs, (size_t)(e - b) * sizeof *d);
        if (!d) {
            *rc = SL_ENOMEM;
            return NULL;
        }
        s->docs = d, s->capdocs = e - b;
    }
    memcpy(s->docs, l->plan.order + b, (size_t)(e - b) * sizeof *s->docs);
    s->ndocs = e - b;
    s->epoch = l->claim_epoch;
    s->chunk = c;
    s->nchunks = l->plan.nchunks;
    s->state = SLOT_WORK;
    l->next_seq++;
    if (++l->claim_chunk >= l->plan.nchunks) {
        l->claim_epoch++;
        l->claim_chunk = 0;
    }
    return s;
}

static void worker_main(void *arg, int id)
{
    sl_text_loader_t *l = arg;
    wscratch_t *w = &l->ws[id];
    while (sl__workers_checkpoint(l->workers, id)) {
        pthread_mutex_lock(&l->mu);
        slot_t *s = NULL;
        int rc = 0;
        while (!l->stopping && !(s = claim(l, &rc)) && !rc)
            pthread_cond_wait(&l->work_cv, &l->mu);
        if (rc && !l->failed) { /* no plan: out of memory */
            l->failed = rc;
            set_err(l, rc, "text loader: out of memory");
            pthread_cond_broadcast(&l->done_cv);
        }
        pthread_mutex_unlock(&l->mu);
        if (!s)
            return; /* stopping, or failed */
        build_chunk(l, w, s);
        pthread_mutex_lock(&l->mu);
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&l->done_cv);
        pthread_mutex_unlock(&l->mu);
    }
}

/* --------------------------------------------------------------- consumer */

static void stop_workers(sl_text_loader_t *l)
{
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    sl__workers_stop(l->workers);
    sl__workers_join(l->workers);
    sl__workers_reset(l->workers);
    pthread_mutex_lock(&l->mu);
    l->stopping = 0;
    l->running = 0;
    pthread_mutex_unlock(&l->mu);
}

/* Under mu: waits (timed as consumer wait) for the group starting at
 * cons_seq to be tokenized, then shuffles it. */
static int open_group(sl_text_loader_t *l)
{
    int64_t t0 = sl__now_ns();
    slot_t *first = &l->slots[l->cons_seq % l->nslots];
    while (!l->failed &&
           (l->next_seq <= l->cons_seq || first->state != SLOT_DONE))
        pthread_cond_wait(&l->done_cv, &l->mu);
    int G = l->opt.group_chunks;
    int64_t g = first->chunk / G;
    int64_t last = (g + 1) * G < first->nchunks ? (g + 1) * G : first->nchunks;
    int64_t cnt = last - g * G;
    for (int64_t i = 1; !l->failed && i < cnt; i++) {
        slot_t *s = &l->slots[(l->cons_seq + i) % l->nslots];
        while (!l->failed &&
               (l->next_seq <= l->cons_seq + i || s->state != SLOT_DONE))
            pthread_cond_wait(&l->done_cv, &l->mu);
    }
    l->st.wait_ns += sl__now_ns() - t0;
    if (l->failed)
        return l->failed;
    int64_t n = 0;
    for (int64_t i = 0; i < cnt; i++) {
        slot_t *s = &l->slots[(l->cons_seq + i) % l->nslots];
        if (s->rc) {
            l->failed = s->rc;
            return set_err(l, s->rc, "%s", s->msg);
        }
        l->gstart[i] = n;
        n += s->nsamples;
    }
    l->gstart[cnt] = n;
    if (n > l->gperm_cap) {
        int64_t *p = realloc(l->gperm, (size_t)n * sizeof *p);
        if (!p) {
            l->failed = SL_ENOMEM;
            return set_err(l, SL_ENOMEM, "text loader: out of memory");
        }
        l->gperm = p, l->gperm_cap = n;
    }
    if (l->opt.no_shuffle)
        for (int64_t i = 0; i < n; i++)
            l->gperm[i] = i;
    else
        sl__text_permute(l->gperm, n, l->opt.seed, l->ce, (uint64_t)g,
                         SL_RNG_TEXT_SHUFFLE);
    l->gslots = cnt;
    l->gn = n;
    l->gk = 0;
    l->gkmax = n / l->opt.world_size; /* every rank the same count */
    l->group_last = last == first->nchunks;
    l->have_group = 1;
    return 0;
}

static void close_group(sl_text_loader_t *l)
{
    for (int64_t i = 0; i < l->gslots; i++)
        l->slots[(l->cons_seq + i) % l->nslots].state = SLOT_FREE;
    l->cons_seq += l->gslots;
    l->have_group = 0;
    pthread_cond_broadcast(&l->work_cv);
}

/* Sample gperm[q] of the current group. */
static const int32_t *group_sample(sl_text_loader_t *l, int64_t q)
{
    int64_t j = l->gperm[q], i = 0;
    while (l->gstart[i + 1] <= j)
        i++;
    const slot_t *s = &l->slots[(l->cons_seq + i) % l->nslots];
    return s->samples.v + (size_t)(j - l->gstart[i]) * l->width;
}

static void put_row(sl_text_loader_t *l, sl_text_batch_t *b, const int32_t *x)
{
    int L = l->spec.seq_len;
    size_t off = (size_t)b->n * (size_t)L;
    if (l->spec.task == SL__TEXT_LM) {
        memcpy(b->input_ids + off, x, (size_t)L * sizeof *x);
        memcpy(b->labels + off, x + 1, (size_t)L * sizeof *x);
        b->tokens += L;
    } else {
        memcpy(b->input_ids + off, x, (size_t)L * sizeof *x);
        memcpy(b->labels + off, x + L, (size_t)L * sizeof *x);
        memcpy(b->attention_mask + off, x + 2 * L, (size_t)L * sizeof *x);
        memcpy(b->token_type_ids + off, x + 3 * L, (size_t)L * sizeof *x);
        for (int i = 0; i < L; i++)
            b->tokens += x[2 * L + i];
    }
    b->n++;
}

static tbuf_t *get_buf(sl_text_loader_t *l)
{
    pthread_mutex_lock(&l->pool_mu);
    tbuf_t *t = l->free_bufs;
    if (t)
        l->free_bufs = t->next_free;
    pthread_mutex_unlock(&l->pool_mu);
    if (t)
        return t;
    int arrays = l->spec.task == SL__TEXT_LM ? 2 : 4;
    size_t row = (size_t)l->spec.seq_len * sizeof(int32_t);
    size_t bytes = (size_t)l->opt.batch_size * row;
    t = calloc(1, sizeof *t);
    int32_t *mem = t ? malloc(bytes * (size_t)arrays) : NULL;
    if (!mem) {
        free(t);
        return NULL;
    }
    t->pub.input_ids = mem;
    t->pub.labels = (int32_t *)((char *)mem + bytes);
    if (arrays == 4) {
        t->pub.attention_mask = (int32_t *)((char *)mem + 2 * bytes);
        t->pub.token_type_ids = (int32_t *)((char *)mem + 3 * bytes);
    }
    pthread_mutex_lock(&l->pool_mu);
    t->next_all = l->all_bufs;
    l->all_bufs = t;
    pthread_mutex_unlock(&l->pool_mu);
    return t;
}

static void put_buf(sl_text_loader_t *l, tbuf_t *t)
{
    pthread_mutex_lock(&l->pool_mu);
    t->next_free = l->free_bufs;
    l->free_bufs = t;
    pthread_mutex_unlock(&l->pool_mu);
}

/* Under mu: fills b with the next batch of epoch ce; 1 when a batch is
 * ready, 0 at the end of the run, < 0 on failure. */
static int fill(sl_text_loader_t *l, sl_text_batch_t *b)
{
    int B = l->opt.batch_size, W = l->opt.world_size, r = l->opt.rank;
    for (;;) {
        if (l->ce >= l->end_epoch)
            return 0;
        if (!l->have_group) {
            int rc = open_group(l);
            if (rc)
                return rc;
        }
        while (b->n < B && l->gk < l->gkmax) {
            int64_t q = r + l->gk * W;
            l->gk++;
            if (l->skip > 0) {
                l->skip--;
                continue;
            }
            put_row(l, b, group_sample(l, q));
        }
        if (l->gk == l->gkmax) {
            int epoch_end = l->group_last;
            close_group(l);
            if (epoch_end) {
                int64_t e = l->ce;
                l->epoch_rows += b->n;
                int64_t rows = l->epoch_rows, bi = l->cb;
                l->ce++, l->cb = 0, l->epoch_rows = 0, l->skip = 0;
                if (rows == 0 && bi == 0) {
                    l->failed = SL_ERANGE;
                    return set_err(
                        l, SL_ERANGE,
                        "epoch %lld has no sequence for rank %d of %d: the "
                        "source yields fewer than %d sequences of %d tokens "
                        "(%lld bad documents)",
                        (long long)e, r, W, W, l->spec.seq_len,
                        (long long)l->nskipped);
                }
                if (b->n == B || (b->n > 0 && !l->opt.drop_last)) {
                    b->epoch = e;
                    b->index = bi;
                    return 1;
                }
                b->n = 0, b->tokens = 0;
                continue;
            }
        }
        if (b->n == B) {
            l->epoch_rows += b->n;
            b->epoch = l->ce;
            b->index = l->cb++;
            return 1;
        }
    }
}

/* ------------------------------------------------------------ public API */

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
    int lm = o->task == SL_TEXT_LM;
    if (o->task != SL_TEXT_LM && o->task != SL_TEXT_MLM)
        return sl__fail(err, errlen, SL_EINVAL, "unknown text task %d",
                        o->task);
    if (!o->tokenizer)
        o->tokenizer = lm ? "gpt2" : "wordpiece";
    if (!o->seq_len)
        o->seq_len = lm ? 1024 : 512;
    if (!o->batch_size)
        o->batch_size = 8;
    if (!o->world_size)
        o->world_size = 1;
    if (!o->epochs)
        o->epochs = 1;
    if (!o->threads)
        o->threads = sl__ncpu();
    if (o->mask_prob == 0)
        o->mask_prob = 0.15;
    if (!o->chunk_bytes)
        o->chunk_bytes = 256 << 10;
    if (!o->group_chunks)
        o->group_chunks = 16;
    if (!o->prefetch_chunks)
        o->prefetch_chunks = 2 * o->group_chunks;
    if (o->seq_len < (lm ? 1 : 4) || o->seq_len > (1 << 24) ||
        o->batch_size < 1 || o->batch_size > (1 << 20) || o->rank < 0 ||
        o->world_size < 1 || o->rank >= o->world_size || o->epochs < 1 ||
        o->threads < 1 || o->threads > SL_WORKERS_MAX ||
        !(o->mask_prob > 0 && o->mask_prob <= 1) || o->chunk_bytes < 1 ||
        o->group_chunks < 1 || o->group_chunks > 4096 ||
        o->prefetch_chunks < o->group_chunks || o->prefetch_chunks > 65536)
        return sl__fail(err, errlen, SL_EINVAL,
                        "invalid text options (seq_len %d, batch %d, rank %d "
                        "of %d, threads %d, group %d, prefetch %d)",
                        o->seq_len, o->batch_size, o->rank, o->world_size,
                        o->threads, o->group_chunks, o->prefetch_chunks);
    int rc = sl__tok_open(o->tokenizer, o->vocab, o->merges, o->cased, &l->tok,
                          err, errlen);
    if (rc)
        return rc;
    sl__text_spec_t *sp = &l->spec;
    sp->task = lm ? SL__TEXT_LM : SL__TEXT_MLM;
    sp->seq_len = o->seq_len;
    sp->vocab_size = (int32_t)sl__tok_vocab_size(l->tok);
    sp->mask_prob = o->mask_prob;
    sp->seed = o->seed;
    int wp = !strcmp(o->tokenizer, "wordpiece");
    if (lm) {
        sp->eos = o->eos_id;
        if (!sp->eos && (rc = special_id(l->tok, wp ? "[SEP]" : "<|endoftext|>",
                                         &sp->eos, err, errlen)))
            return rc;
    } else if ((rc = special_id(l->tok, "[CLS]", &sp->cls, err, errlen)) ||
               (rc = special_id(l->tok, "[SEP]", &sp->sep, err, errlen)) ||
               (rc = special_id(l->tok, "[MASK]", &sp->mask, err, errlen)) ||
               (rc = special_id(l->tok, "[PAD]", &sp->pad, err, errlen)))
        return rc;
    l->width = sl__text_sample_width(sp);
    l->nslots = o->prefetch_chunks;
    int64_t nd = sl__textsrc_count(l->src);
    if (nd == 0)
        return sl__fail(err, errlen, SL_ENOTFOUND,
                        "the text sources hold no document");
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->ws = calloc((size_t)o->threads, sizeof *l->ws);
    l->bad = calloc((size_t)nd, 1);
    l->skipmsg = calloc(TL_SKIP_KEEP, sizeof *l->skipmsg);
    l->workers = sl__workers_create(worker_main, l);
    if (!l->slots || !l->ws || !l->bad || !l->skipmsg || !l->workers)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    l->nthreads = o->threads;
    for (int i = 0; i < o->threads; i++)
        if (!(l->ws[i].tok = sl__tok_scratch_create()))
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    return 0;
}

int sl_text_loader_create(const char *const *sources, int nsources,
                          const sl_text_options_t *opt, sl_text_loader_t **out)
{
    *out = NULL;
    sl_text_loader_t *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(tl_create_err, sizeof tl_create_err, "out of memory");
        return SL_ENOMEM;
    }
    if (opt)
        l->opt = *opt;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->pool_mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->done_cv, NULL);
    l->plan.epoch = -1;
    int rc = sl__textsrc_open(sources, nsources, l->opt.doc_per_file, &l->src,
                              tl_create_err, sizeof tl_create_err);
    if (!rc)
        rc = setup(l, tl_create_err, sizeof tl_create_err);
    if (rc) {
        sl_text_loader_destroy(l);
        return rc;
    }
    *out = l;
    return 0;
}

void sl_text_loader_destroy(sl_text_loader_t *l)
{
    if (!l)
        return;
    if (l->workers) {
        stop_workers(l);
        sl__workers_destroy(l->workers);
    }
    for (int i = 0; l->slots && i < l->nslots; i++) {
        free(l->slots[i].docs);
        sl__ids_free(&l->slots[i].samples);
    }
    free(l->slots);
    for (int i = 0; l->ws && i < l->nthreads; i++) {
        sl__tok_scratch_destroy(l->ws[i].tok);
        sl__bytes_free(&l->ws[i].buf);
        sl__bytes_free(&l->ws[i].scratch);
        sl__ids_free(&l->ws[i].stream);
        free(l->ws[i].doc_end);
    }
    free(l->ws);
    for (tbuf_t *t = l->all_bufs, *n; t; t = n) {
        n = t->next_all;
        free(t->pub.input_ids);
        free(t);
    }
    for (int64_t i = 0; l->skipmsg && i < l->nskipped && i < TL_SKIP_KEEP; i++)
        free(l->skipmsg[i]);
    free(l->skipmsg);
    free(l->bad);
    free(l->gperm);
    sl__text_plan_free(&l->plan);
    sl__tok_free(l->tok);
    sl__textsrc_close(l->src);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->pool_mu);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
    free(l);
}

const char *sl_text_loader_last_error(const sl_text_loader_t *l)
{
    return l ? l->err : tl_create_err;
}

int sl_text_loader_start(sl_text_loader_t *l, const sl_position_t *pos)
{
    sl_position_t p = pos ? *pos : (sl_position_t){0, 0};
    if (p.epoch < 0 || p.batch < 0)
        return set_err(l, SL_EINVAL, "invalid position (%lld, %lld)",
                       (long long)p.epoch, (long long)p.batch);
    stop_workers(l);
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nslots; i++)
        l->slots[i].state = SLOT_FREE;
    l->next_seq = l->cons_seq = 0;
    l->claim_epoch = p.epoch;
    l->claim_chunk = 0;
    l->end_epoch = p.epoch + l->opt.epochs;
    l->ce = p.epoch;
    l->cb = p.batch;
    l->skip = p.batch * l->opt.batch_size;
    l->epoch_rows = p.batch * l->opt.batch_size;
    l->have_group = 0;
    l->failed = 0;
    l->running = 1;
    pthread_mutex_unlock(&l->mu);
    int rc = sl__workers_set(l->workers, l->nthreads);
    if (rc)
        return set_err(l, rc, "cannot start %d tokenizer threads", l->nthreads);
    return 0;
}

int sl_text_loader_next(sl_text_loader_t *l, const sl_text_batch_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&l->mu);
    if (!l->running) {
        pthread_mutex_unlock(&l->mu);
        return set_err(l, SL_ESTATE, "sl_text_loader_start was not called");
    }
    if (l->failed) {
        int rc = l->failed;
        pthread_mutex_unlock(&l->mu);
        return rc;
    }
    tbuf_t *t = get_buf(l);
    if (!t) {
        pthread_mutex_unlock(&l->mu);
        return set_err(l, SL_ENOMEM, "text loader: out of memory");
    }
    t->pub.n = 0;
    t->pub.tokens = 0;
    t->pub.seq_len = l->spec.seq_len;
    int rc = fill(l, &t->pub);
    if (rc == 1) {
        l->st.batches++;
        l->st.sequences += t->pub.n;
        l->st.tokens += t->pub.tokens;
        *out = &t->pub;
        rc = 0;
    } else {
        put_buf(l, t);
        if (rc == 0)
            rc = SL_EEND;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void sl_text_loader_release(sl_text_loader_t *l, const sl_text_batch_t *b)
{
    if (l && b)
        put_buf(l, (tbuf_t *)(void *)b); /* pub is the first member */
}

int sl_text_loader_position(const sl_text_loader_t *l, sl_position_t *pos)
{
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    pos->epoch = l->ce;
    pos->batch = l->cb;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    return 0;
}

int sl_text_loader_stats(const sl_text_loader_t *l, sl_text_stats_t *st)
{
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    *st = l->st;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    return 0;
}

int64_t sl_text_loader_num_documents(const sl_text_loader_t *l)
{
    return sl__textsrc_count(l->src);
}

int64_t sl_text_loader_vocab_size(const sl_text_loader_t *l)
{
    return (int64_t)sl__tok_vocab_size(l->tok);
}

int64_t sl_text_loader_skipped_count(const sl_text_loader_t *l)
{
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    int64_t n = l->nskipped;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    return n;
}

const char *sl_text_loader_skipped_message(const sl_text_loader_t *l, int64_t i)
{
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    const char *m =
        i >= 0 && i < l->nskipped && i < TL_SKIP_KEEP ? l->skipmsg[i] : NULL;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    return m;
}
