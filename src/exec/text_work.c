/* The text pipeline's workers (read and tokenize chunks) and its consumer
 * (shuffle groups, rows into batches); see text_internal.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "text_internal.h"

int sl__text_fail(sl_text_loader_t *l, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->fatal_msg, sizeof l->fatal_msg, fmt, ap);
    va_end(ap);
    l->failed = rc;
    return rc;
}

/* Under mu: a document went bad; count it once, keep its message. */
static void note_bad(sl_text_loader_t *l, int64_t doc, const char *msg)
{
    if (l->bad[doc])
        return;
    l->bad[doc] = 1;
    sl__msglog_add(&l->skips, "%s", msg);
    l->st.errors_skipped++;
}

/* A worker's buffers past this are freed after the document that grew
 * them (an outlier does not pin its memory for the thread's life), as the
 * image decoders' scratch is (ops/image.h SL__SCRATCH_KEEP). */
#define TEXT_KEEP_BYTES ((int64_t)8 << 20)

/* What reading and tokenizing document d costs (its stored bytes x
 * SL_TEXT_MEM_PER_BYTE), saturated: a sparse file of an exabyte (a
 * document per file, its size taken as is) wrapped past INT64_MAX to a
 * negative charge, which took nothing, and the read then failed with a
 * bare "out of memory" instead of naming both sizes. */
static int64_t doc_cost(const sl_text_loader_t *l, int64_t d)
{
    uint64_t n = sl__textsrc_size(l->src, d);
    return n > (uint64_t)INT64_MAX / SL_TEXT_MEM_PER_BYTE
               ? INT64_MAX
               : (int64_t)n * SL_TEXT_MEM_PER_BYTE;
}

/* Reads and tokenizes document d into ids, its memory charged to the
 * tokenizing budget for the span (opt.max_memory_bytes). @return 0, 1
 * when the loader is stopping, or an SL_E* code with msg naming the
 * document. Without mu. */
static int tokenize_doc(sl_text_loader_t *l, wscratch_t *w, int64_t d,
                        sl__ids_t *ids, size_t *n, char *msg, size_t len)
{
    /* without a budget nothing waits: no lock taken per document */
    int64_t cost = doc_cost(l, d);
    int64_t need = l->opt.max_memory_bytes > 0 ? cost : 0;
    char why[TL_MSG / 2], where[TL_MSG / 2];
    int rc =
        sl__membudget_charge(&l->tbud, need, "tokenizing it", why, sizeof why);
    if (rc == 1)
        return 1;
    if (rc) {
        snprintf(msg, len, "%s: %s",
                 sl__textsrc_describe(l->src, d, where, sizeof where), why);
        return rc;
    }
    const char *p;
    rc = sl__textsrc_get(l->src, d, &w->buf, &w->scratch, &p, n, msg, len);
    if (!rc && *n)
        rc = sl__tok_encode(l->tok, p, *n, 0, w->tok, ids, msg, len);
    if (cost > TEXT_KEEP_BYTES) {
        sl__bytes_free(&w->buf);
        sl__bytes_free(&w->scratch);
        sl__tok_scratch_destroy(w->tok);
        w->tok = sl__tok_scratch_create();
        if (!w->tok && !rc)
            rc = sl__fail(msg, len, SL_ESYSTEM, "text loader: out of memory");
    }
    sl__membudget_release(&l->tbud, need);
    return rc;
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
        size_t n = 0;
        size_t before = ids->n;
        int rc = tokenize_doc(l, w, d, ids, &n, err, sizeof err);
        if (rc == 1) { /* stopping: the slot is not handed out */
            s->rc = SL_ESTATE;
            snprintf(s->msg, sizeof s->msg, "stopping");
            return;
        }
        if (rc && !sl__err_is_data(rc)) { /* not the document's fault */
            s->rc = rc;
            snprintf(s->msg, sizeof s->msg, "%s", err);
            return;
        }
        if (rc && l->opt.on_error == SL_ON_ERROR_FAIL) { /* not a skip */
            s->rc = rc;
            snprintf(s->msg, sizeof s->msg, "%s", err);
            return;
        }
        if (rc) {
            ids->n = before;
            pthread_mutex_lock(&l->mu);
            note_bad(l, d, err);
            pthread_mutex_unlock(&l->mu);
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
    int64_t dropped = 0;
    if (lm) {
        s->nsamples = (int64_t)(ids->n / l->width);
        dropped = (int64_t)(ids->n % l->width); /* the tail: no window */
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
    l->st.tokens_dropped += dropped;
    l->st.bytes_read += (int64_t)bytes;
    pthread_mutex_unlock(&l->mu);
    atomic_fetch_add(&l->docs_done, s->ndocs);
    if ((int64_t)(w->stream.cap * sizeof *w->stream.v) > TEXT_KEEP_BYTES)
        sl__ids_free(&w->stream);
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

void sl__text_worker_main(void *arg, int id)
{
    sl_text_loader_t *l = arg;
    wscratch_t *w = &l->ws[id];
    if (!w->tok && !(w->tok = sl__tok_scratch_create())) {
        pthread_mutex_lock(&l->mu);
        if (!l->failed)
            sl__text_fail(l, SL_ENOMEM, "text loader: out of memory");
        pthread_cond_broadcast(&l->done_cv);
        pthread_mutex_unlock(&l->mu);
        return;
    }
    while (sl__workers_checkpoint(l->workers, id)) {
        pthread_mutex_lock(&l->mu);
        slot_t *s = NULL;
        int rc = 0;
        while (!l->stopping && !(s = claim(l, &rc)) && !rc)
            pthread_cond_wait(&l->work_cv, &l->mu);
        if (rc && !l->failed) { /* no plan: out of memory */
            sl__text_fail(l, rc, "text loader: out of memory");
            pthread_cond_broadcast(&l->done_cv);
        }
        pthread_mutex_unlock(&l->mu);
        if (!s)
            return; /* stopping, or failed */
        int64_t t0 = sl__now_ns();
        build_chunk(l, w, s);
        atomic_fetch_add(&l->busy_ns, sl__now_ns() - t0);
        pthread_mutex_lock(&l->mu);
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&l->done_cv);
        pthread_mutex_unlock(&l->mu);
    }
}

/* --------------------------------------------------------------- consumer */

void sl__text_stop_workers(sl_text_loader_t *l)
{
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    sl__membudget_stop(&l->tbud, 1); /* a worker waiting on it returns */
    sl__workers_stop(l->workers);
    sl__workers_join(l->workers);
    sl__workers_reset(l->workers);
    sl__membudget_stop(&l->tbud, 0);
    pthread_mutex_lock(&l->mu);
    l->stopping = 0;
    l->running = 0;
    pthread_mutex_unlock(&l->mu);
}

/* Under mu: waits on done_cv until `until` (NULL: no limit). @return 0,
 * or SL_ETIMEDOUT. */
static int wait_done(sl_text_loader_t *l, const struct timespec *until)
{
    if (!until) {
        pthread_cond_wait(&l->done_cv, &l->mu);
        return 0;
    }
    return pthread_cond_timedwait(&l->done_cv, &l->mu, until) == ETIMEDOUT
               ? SL_ETIMEDOUT
               : 0;
}

/* Under mu: waits (timed as consumer wait; until `until`, when not NULL)
 * for the group starting at cons_seq to be tokenized, then shuffles it.
 * A timed-out wait changes nothing but the wait time: call again. */
static int open_group(sl_text_loader_t *l, const struct timespec *until)
{
    int64_t t0 = sl__now_ns();
    int late = 0;
    l->wait_since_ns = t0;
    slot_t *first = &l->slots[l->cons_seq % l->nslots];
    while (!l->failed && !late &&
           (l->next_seq <= l->cons_seq || first->state != SLOT_DONE))
        late = wait_done(l, until);
    int G = l->opt.group_chunks;
    int ready = !l->failed && !late; /* first's fields are its chunk's */
    int64_t g = ready ? first->chunk / G : 0;
    int64_t last = (g + 1) * G < first->nchunks ? (g + 1) * G : first->nchunks;
    int64_t cnt = ready ? last - g * G : 0;
    for (int64_t i = 1; !l->failed && !late && i < cnt; i++) {
        slot_t *s = &l->slots[(l->cons_seq + i) % l->nslots];
        while (!l->failed && !late &&
               (l->next_seq <= l->cons_seq + i || s->state != SLOT_DONE))
            late = wait_done(l, until);
    }
    l->st.wait_ns += sl__now_ns() - t0;
    l->wait_since_ns = 0;
    if (l->failed)
        return l->failed;
    if (late)
        return SL_ETIMEDOUT;
    int64_t n = 0;
    for (int64_t i = 0; i < cnt; i++) {
        slot_t *s = &l->slots[(l->cons_seq + i) % l->nslots];
        if (s->rc) {
            return sl__text_fail(l, s->rc, "%s", s->msg);
        }
        l->gstart[i] = n;
        n += s->nsamples;
    }
    l->gstart[cnt] = n;
    if (n > l->gperm_cap) {
        int64_t *p = realloc(l->gperm, (size_t)n * sizeof *p);
        if (!p) {
            return sl__text_fail(l, SL_ENOMEM, "text loader: out of memory");
        }
        l->gperm = p, l->gperm_cap = n;
    }
    if (l->opt.no_shuffle)
        for (int64_t i = 0; i < n; i++)
            l->gperm[i] = i;
    else
        sl__text_permute(l->gperm, n, l->opt.seed, l->pos_epoch, (uint64_t)g,
                         SL_RNG_TEXT_SHUFFLE);
    l->group_slots = cnt;
    l->group_samples = n;
    l->group_next = 0;
    l->group_rows = n / l->opt.world_size; /* every rank the same count */
    l->group_last = last == first->nchunks;
    l->have_group = 1;
    return 0;
}

static void close_group(sl_text_loader_t *l)
{
    for (int64_t i = 0; i < l->group_slots; i++) {
        slot_t *s = &l->slots[(l->cons_seq + i) % l->nslots];
        s->state = SLOT_FREE;
        if ((int64_t)(s->samples.cap * sizeof *s->samples.v) > TEXT_KEEP_BYTES)
            sl__ids_free(&s->samples); /* a giant document's tokens */
    }
    l->cons_seq += l->group_slots;
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

/* Under mu: fills b with the next batch of epoch pos_epoch; 1 when a batch is
 * ready, 0 at the end of the run, < 0 on failure. */
int sl__text_fill(sl_text_loader_t *l, sl_text_batch_t *b,
                  const struct timespec *until)
{
    int B = l->opt.batch_size, W = l->opt.world_size, r = l->opt.rank;
    for (;;) {
        if (l->pos_epoch >= l->end_epoch)
            return 0;
        if (!l->have_group) {
            int rc = open_group(l, until);
            if (rc)
                return rc;
        }
        while (b->n < B && l->group_next < l->group_rows) {
            int64_t q = r + l->group_next * W;
            l->group_next++;
            if (l->skip > 0) {
                l->skip--;
                continue;
            }
            put_row(l, b, group_sample(l, q));
        }
        if (l->group_next == l->group_rows) {
            int epoch_end = l->group_last;
            close_group(l);
            if (epoch_end) {
                int64_t e = l->pos_epoch;
                if (l->skip > 0) /* a resume past the epoch's last batch */
                    return sl__text_fail(
                        l, SL_ERANGE,
                        "position epoch %lld batch %lld is past the end of "
                        "the epoch (%lld sequences for this rank, %d a "
                        "batch)",
                        (long long)e, (long long)l->pos_batch,
                        (long long)(l->epoch_rows - l->skip), B);
                l->epoch_rows += b->n;
                int64_t rows = l->epoch_rows, bi = l->pos_batch;
                l->pos_epoch++, l->pos_batch = 0, l->epoch_rows = 0,
                                l->skip = 0;
                if (rows == 0 && bi == 0) {
                    return sl__text_fail(
                        l, SL_ERANGE,
                        "epoch %lld has no sequence for rank %d of %d: the "
                        "source yields fewer than %d sequences of %d tokens "
                        "(%lld bad documents)",
                        (long long)e, r, W, W, l->spec.seq_len,
                        (long long)l->st.errors_skipped);
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
            b->epoch = l->pos_epoch;
            b->index = l->pos_batch++;
            return 1;
        }
    }
}
