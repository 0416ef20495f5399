/* The two worker stages of the loader: readers claim (batch, slot) pairs
 * and read bytes; decoders transform them into their slots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "data/remote.h"
#include "loader_internal.h"

/* The epoch's permutation, computed once per epoch (two cached: batches of
 * adjacent epochs are in flight together). Called under mu. */
static const int64_t *perm_for(sl_loader_t *l, int64_t epoch)
{
    for (int k = 0; k < 2; k++)
        if (l->perm_epoch[k] == epoch)
            return l->perm[k];
    int k = l->perm_epoch[0] < l->perm_epoch[1] ? 0 : 1;
    sl__sampler_permute(&l->smp, epoch, l->perm[k]);
    l->perm_epoch[k] = epoch;
    return l->perm[k];
}

/* A new batch buffer, made outside the loader lock: a caller's allocator
 * (cudaHostAlloc, a Python callback) may be slow or need other locks. */
static bbuf_t *buf_make(const sl_loader_t *l)
{
    bbuf_t *bb = calloc(1, sizeof *bb);
    size_t bytes = l->batch_bytes;
    int B = l->batch_cap;
    if (bb) {
        bb->host = sl__alloc_block(&l->alloc, bytes);
        bb->pub.labels = malloc((size_t)B * sizeof(int64_t));
        bb->pub.indices = malloc((size_t)B * sizeof(int64_t));
        bb->bad = malloc((size_t)B);
        if (l->devb) {
            bb->dev = l->stage->dev_alloc(l->stage, bytes);
            bb->on_dev = calloc((size_t)B, 1);
        }
    }
    if (!bb || !bb->host || !bb->pub.labels || !bb->pub.indices || !bb->bad ||
        (l->devb && (!bb->dev || !bb->on_dev))) {
        if (bb)
            sl__buf_destroy(l, bb);
        return NULL;
    }
    bb->pub.data = l->devb ? (void *)bb->dev : (void *)bb->host;
    bb->pub.device = l->devb ? l->opt.gpu_device : -1;
    bb->state = BB_FREE;
    return bb;
}

/* Adds a made buffer to the pool (under the lock); 0 when out of memory. */
static int buf_insert(sl_loader_t *l, bbuf_t *bb)
{
    if (l->nbufs == l->cap_bufs) {
        int cap = l->cap_bufs ? l->cap_bufs * 2 : 8;
        bbuf_t **v = realloc(l->bufs, (size_t)cap * sizeof *v);
        if (!v)
            return 0;
        l->bufs = v;
        l->cap_bufs = cap;
    }
    l->bufs[l->nbufs++] = bb;
    return 1;
}

bbuf_t *sl__buf_drop(sl_loader_t *l, bbuf_t *bb)
{
    if (!bb->dev && !sl__allocator_parks(&l->alloc))
        return bb;
    bb->state = BB_FREE;
    bb->parked_next = l->parked;
    l->parked = bb;
    return NULL;
}

/* Under mu: a parked buffer back into the pool; 0 when none is parked
 * (or the pool cannot grow: it stays parked). Its fence, if a consumer
 * released it last, still guards it (gpu/devbuf.h). */
static int buf_unpark(sl_loader_t *l)
{
    bbuf_t *bb = l->parked;
    if (!bb || !buf_insert(l, bb))
        return 0;
    l->parked = bb->parked_next;
    bb->parked_next = NULL;
    return 1;
}

int sl__loader_in_flight(const sl_loader_t *l)
{
    for (int i = 0; i < l->nbufs; i++)
        if (l->bufs[i]->state == BB_FILLING || l->bufs[i]->state == BB_READY)
            return 1;
    return 0;
}

/* Next (batch, slot) to read; waits for a free batch buffer when the
 * prefetch depth is reached (block = 0: returns SL__CLAIM_LATER instead).
 * Returns 0, or 1 when the pipeline stops. */
int sl__loader_peek(sl_loader_t *l, int64_t *sample)
{
    pthread_mutex_lock(&l->mu);
    int ok = !l->stopping && l->cur;
    if (ok)
        *sample = l->cur->pub.indices[l->cur_slot];
    pthread_mutex_unlock(&l->mu);
    return ok;
}

int sl__loader_claim(sl_loader_t *l, int block, bbuf_t **bb_out, int *slot,
                     int64_t *sample)
{
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->stopping) {
            pthread_mutex_unlock(&l->mu);
            return 1;
        }
        if (l->cur) {
            *bb_out = l->cur;
            *slot = l->cur_slot;
            *sample = l->cur->pub.indices[l->cur_slot];
            if (++l->cur_slot == l->cur->count)
                l->cur = NULL;
            pthread_mutex_unlock(&l->mu);
            return 0;
        }
        if (l->claim_g < l->end_g) {
            bbuf_t *bb = NULL;
            for (int i = 0; i < l->nbufs && !bb; i++)
                if (l->bufs[i]->state == BB_FREE)
                    bb = l->bufs[i];
            if (!bb && l->nbufs + l->allocating < l->prefetch &&
                buf_unpark(l)) {
                pthread_cond_broadcast(&l->cv_work);
                continue; /* take it (or another) from the pool */
            }
            if (!bb && l->nbufs + l->allocating < l->prefetch) {
                l->allocating++;
                pthread_mutex_unlock(&l->mu);
                bbuf_t *made = buf_make(l);
                pthread_mutex_lock(&l->mu);
                l->allocating--;
                if (made && buf_insert(l, made)) {
                    l->alloc_failed = 0;
                    pthread_cond_broadcast(&l->cv_work);
                    continue; /* take it (or another) from the pool */
                }
                if (made)
                    sl__buf_destroy(l, made);
                /* The consumer's next() fails the stream if nothing else
                 * is on its way (sl__loader_starved). */
                l->alloc_failed = 1;
                pthread_cond_broadcast(&l->cv_ready);
            }
            if (bb) {
                /* g: the run position (the delivery order); a plan maps
                 * it to the batch number. */
                bb->g = l->claim_g++;
                int64_t nb = l->smp.nbatches, g = sl__loader_planned(l, bb->g);
                bb->pub.epoch = g / nb;
                bb->pub.index = g % nb;
                bb->count =
                    sl__sampler_batch(&l->smp, perm_for(l, bb->pub.epoch),
                                      bb->pub.index, bb->pub.indices);
                for (int i = 0; i < bb->count; i++)
                    bb->pub.labels[i] =
                        sl__source_label(l->src, bb->pub.indices[i]);
                memset(bb->bad, 0, (size_t)bb->count);
                if (bb->on_dev)
                    memset(bb->on_dev, 0, (size_t)bb->count);
                bb->pending = bb->count;
                bb->nfailed = 0;
                bb->rc = 0;
                bb->err[0] = 0;
                bb->state = BB_FILLING;
                bb->t_claim = sl__now_ns();
                l->cur = bb;
                l->cur_slot = 0;
                continue;
            }
        }
        if (!block) {
            pthread_mutex_unlock(&l->mu);
            return SL__CLAIM_LATER;
        }
        pthread_cond_wait(&l->cv_work, &l->mu);
    }
}

/* A read's or a decode's charge against one of the loader's budgets. */
int sl__loader_admit_charge(void *ctx, int64_t bytes, char *err, size_t errlen)
{
    charge_t *c = ctx;
    int rc = c->try_only
                 ? sl__membudget_try_charge(c->bud, bytes, c->what, err, errlen)
                 : sl__membudget_charge(c->bud, bytes, c->what, err, errlen);
    if (rc == SL__MEMBUDGET_LATER)
        return rc;
    if (rc == 1) {
        c->stopped = 1;
        return sl__fail(err, errlen, SL_ESTATE, "stopping");
    }
    if (!rc)
        c->bytes += bytes;
    return rc;
}

void sl__loader_reader_main(void *arg, int id)
{
    sl_loader_t *l = arg;
    if (l->async)
        sl__loader_reader_async(l, id);
    else
        sl__loader_reader_sync(l, id);
}

void sl__loader_reader_sync(sl_loader_t *l, int id)
{
    sl__remote_stop_on(&l->halt); /* a stop ends a slow remote read */
    while (sl__workers_checkpoint(l->readers, id)) {
        bbuf_t *bb;
        int slot;
        int64_t sample;
        if (sl__loader_claim(l, 1, &bb, &slot, &sample))
            return;
        item_t *it;
        if (sl__queue_pop_newest(l->free_items, (void **)&it))
            return; /* stopping: the restart rebuilds the item queues */
        int64_t t0 = sl__now_ns();
        atomic_fetch_add(&l->reads_in_flight, 1);
        it->bb = bb;
        it->slot = slot;
        it->sample = sample;
        uint64_t stored = 0;
        it->err[0] = 0;
        it->rc = 0;
        charge_t ch = {&l->rbud, "reading it", 0, 0, 0};
        sl__admit_t adm = {sl__loader_admit_charge, &ch};
        int hit = sl__loader_cache_hit(l, it, &adm); /* no read, no wait */
        if (!hit && !ch.stopped) {
            it->rc = sl__source_read_admit(l->src, sample, &it->data,
                                           &l->rscratch[id], &adm, &stored,
                                           it->err, sizeof it->err);
            sl__loader_cache_fill(l, it);
        }
        it->charged = ch.bytes; /* given back when the sample is decoded */
        if (l->rscratch[id].cap > l->item_keep)
            sl__bytes_free(&l->rscratch[id]);
        if (ch.stopped) {
            atomic_fetch_sub(&l->reads_in_flight, 1);
            return; /* the stop gives back the charge and rebuilds items */
        }
        /* Emulated storage: the wait counts as read time, as a slow
         * read would. */
        if (!hit)
            sl__throttle_wait(&l->thr, stored, t0);
        atomic_fetch_sub(&l->reads_in_flight, 1);
        atomic_fetch_add(&l->bytes_read, (long long)stored);
        atomic_fetch_add(&l->read_busy_ns, sl__now_ns() - t0);
        atomic_fetch_add(&l->read_items, 1);
        if (sl__queue_push(l->decode_q, it))
            return;
    }
}

/* A device batch complete: the slots the CPU path wrote (in host memory)
 * copied into the device's, run by run. Only the thread that finished the
 * batch's last slot owns it here. 0, or SL_ESYSTEM with the cause. */
static int upload(sl_loader_t *l, bbuf_t *bb, char *why, size_t wl)
{
    size_t sb = l->sample_bytes;
    for (int i = 0; i < bb->count;) {
        if (bb->bad[i] || bb->on_dev[i]) {
            i++;
            continue;
        }
        int j = i;
        while (j < bb->count && !bb->bad[j] && !bb->on_dev[j])
            j++;
        int rc = l->stage->copy(l->stage, bb->dev + (size_t)i * sb,
                                bb->host + (size_t)i * sb, (size_t)(j - i) * sb,
                                SL__GPU_COPY_H2D, why, wl);
        if (rc)
            return rc;
        i = j;
    }
    return 0;
}

/* Moves the good samples of a batch with skipped slots to its front (in
 * device memory for a device batch). Only the thread that finished the
 * batch's last slot owns it here. 0, or the device copy's failure. */
static int compact(sl_loader_t *l, bbuf_t *bb, char *why, size_t wl)
{
    int n = 0;
    size_t sb = l->sample_bytes;
    for (int i = 0; i < bb->count; i++) {
        if (bb->bad[i])
            continue;
        if (n != i) {
            /* slots n < i: the two never overlap */
            if (bb->dev) {
                int rc = l->stage->copy(l->stage, bb->dev + (size_t)n * sb,
                                        bb->dev + (size_t)i * sb, sb,
                                        SL__GPU_COPY_D2D, why, wl);
                if (rc)
                    return rc;
            } else {
                memmove(bb->host + (size_t)n * sb, bb->host + (size_t)i * sb,
                        sb);
            }
            bb->pub.labels[n] = bb->pub.labels[i];
            bb->pub.indices[n] = bb->pub.indices[i];
        }
        n++;
    }
    bb->pub.n = n;
    return 0;
}

static void finish_slot(sl_loader_t *l, bbuf_t *bb, int slot, int rc,
                        const char *msg)
{
    pthread_mutex_lock(&l->mu);
    if (rc) {
        /* Only a bad sample is skipped: a failure of the system (no file
         * descriptor, the disk's EIO) would drop good data silently. */
        if (l->opt.on_error == SL_ON_ERROR_SKIP && sl__err_is_data(rc)) {
            bb->bad[slot] = 1;
            bb->nfailed++;
            sl__loader_skip_defer(l, bb, slot, msg);
        } else if (!bb->rc) {
            bb->rc = rc;
            snprintf(bb->err, sizeof bb->err, "%s", msg);
        }
    }
    int last = --bb->pending == 0;
    pthread_mutex_unlock(&l->mu);
    if (!last)
        return;
    bb->pub.n = bb->count;
    char why[SL_MSG] = "";
    int drc = 0;
    if (bb->dev && !bb->rc)
        drc = upload(l, bb, why, sizeof why);
    if (!drc && bb->nfailed && !bb->rc)
        drc = compact(l, bb, why, sizeof why);
    pthread_mutex_lock(&l->mu);
    if (drc && !bb->rc) { /* the device's failure fails the batch */
        bb->rc = drc;
        snprintf(bb->err, sizeof bb->err, "%s", why);
    }
    bb->state = BB_READY;
    l->lat_sum_ns += sl__now_ns() - bb->t_claim;
    l->lat_count++;
    pthread_cond_broadcast(&l->cv_ready);
    pthread_mutex_unlock(&l->mu);
}

static void decode_loop(sl_loader_t *l, int id, charge_t *ch);

/* What every finished sample does, on whichever thread finished it: its
 * item back to the pool, its budgets released, its slot done. */
static void item_done(sl_loader_t *l, item_t *it, int rc, const char *msg)
{
    bbuf_t *bb = it->bb;
    int slot = it->slot;
    sl__loader_cache_unpin(l, it); /* a hit not processed */
    if (it->data.cap > l->item_keep)
        sl__bytes_free(&it->data);
    if (it->scratch.cap > l->item_keep)
        sl__bytes_free(&it->scratch);
    sl__membudget_release(&l->rbud, it->charged);
    it->charged = 0;
    sl__queue_push(l->free_items, it); /* never full: holds every item */
    finish_slot(l, bb, slot, rc, msg);
}

/* The GPU stage's completion (any thread): done or failed finishes the
 * slot; refused goes back to the decoders, counted. During a stop the
 * queues are closed: the item is dropped with the rest. */
static void gpu_done(void *ctx, sl__gpu_job_t *job, int status, const char *why)
{
    sl_loader_t *l = ctx;
    item_t *it = job->tag;
    sl__busy_leave(&l->gpu_busy, 1, sl__now_ns());
    if (status == SL__GPU_REFUSED) {
        atomic_fetch_add(&l->gpu_refused, 1);
        pthread_mutex_lock(&l->mu);
        snprintf(l->gpu_refused_why, sizeof l->gpu_refused_why, "%s", why);
        pthread_mutex_unlock(&l->mu);
        it->cpu_only = 1;
        sl__queue_push(l->decode_q, it);
        return;
    }
    char msg[SL_MSG] = "";
    if (status != SL__GPU_DONE) {
        char name[SL_MSG / 2 - 8];
        sl__source_describe(l->src, it->sample, name, sizeof name);
        snprintf(msg, sizeof msg, "%s: GPU stage: %.*s", name,
                 (int)(SL_MSG / 2 - 24), why);
    }
    atomic_fetch_add(&l->gpu_items, 1);
    if (status == SL__GPU_DONE && job->out_dev)
        it->bb->on_dev[it->slot] = 1; /* its slot's owner: no lock */
    item_done(l, it, status == SL__GPU_DONE ? 0 : SL_EDECODE, msg);
}

/* Hands the sample to the GPU stage when its slot is in the stage's share
 * (gpu/placement.h); 1 when it did (the stage finishes it). Its box and
 * flip are the CPU path's (sl__image_geometry); a sample whose header
 * fails stays on the CPU, which names the error. A hit of the sample
 * cache's encoded tier goes as a read would: its bytes in place (the
 * entry pinned until the item is done) or copied out into the item's
 * buffer, so whether it hit never moves its path (the decoded tier keeps
 * the stage out: sl__loader_budgets). */
static int to_gpu(sl_loader_t *l, item_t *it)
{
    bbuf_t *bb = it->bb;
    if (!l->stage || it->cpu_only || l->opt.cache_decoded ||
        !sl__gpu_route(it->slot, bb->count, atomic_load(&l->gpu_share)))
        return 0;
    const uint8_t *bytes = it->data.p;
    size_t nbytes = it->data.n;
    if (it->hit.e) {
        char cause[64];
        nbytes = it->hit.raw_n;
        if (sl__loader_cache_bytes(it, &it->data, &bytes, cause, sizeof cause))
            return 0; /* the CPU path tries again and names it */
    }
    int64_t t0 = sl__now_ns();
    sl__rng_t crop, flip;
    uint64_t e = (uint64_t)bb->pub.epoch, s = (uint64_t)it->sample;
    sl__rng_init(&crop, l->opt.seed, e, s, SL_RNG_CROP);
    sl__rng_init(&flip, l->opt.seed, e, s, SL_RNG_FLIP);
    sl__gpu_job_t *j = &it->job;
    memset(j, 0, sizeof *j);
    char err[64];
    if (sl__image_geometry(bytes, nbytes, &l->xf, &crop, &flip, j->box,
                           &j->flip, err, sizeof err))
        return 0;
    j->bytes = bytes;
    j->n = nbytes;
    j->out_dev = bb->dev != NULL;
    j->out =
        (bb->dev ? bb->dev : bb->host) + (size_t)it->slot * l->sample_bytes;
    j->tag = it;
    it->jobp = j;
    sl__busy_enter(&l->gpu_busy, 1, sl__now_ns());
    if (l->stage->submit(l->stage, &it->jobp, 1, gpu_done, l) == 0) {
        atomic_fetch_add(&l->gpu_handoff_ns, sl__now_ns() - t0);
        return 1;
    }
    sl__busy_leave(&l->gpu_busy, 1, sl__now_ns());
    return 0;
}

void sl__loader_decoder_main(void *arg, int id)
{
    sl_loader_t *l = arg;
    if (!l->dscratch[id])
        l->dscratch[id] = sl__scratch_create();
    charge_t ch = {&l->dbud, "decoding it", 0, 0, 0};
    sl__admit_t adm = {sl__loader_admit_charge, &ch};
    if (l->dscratch[id])
        sl__scratch_set_admit(l->dscratch[id], &adm);
    decode_loop(l, id, &ch);
    if (l->dscratch[id]) /* adm dies with this frame */
        sl__scratch_set_admit(l->dscratch[id], NULL);
}

static void decode_loop(sl_loader_t *l, int id, charge_t *ch)
{
    while (sl__workers_checkpoint(l->decoders, id)) {
        item_t *it;
        if (sl__queue_pop(l->decode_q, (void **)&it))
            return;
        if (!it->rc && to_gpu(l, it))
            continue;
        int64_t t0 = sl__now_ns();
        int rc = it->rc;
        char msg[SL_MSG];
        if (rc) {
            snprintf(msg, sizeof msg, "%s", it->err);
        } else if (!l->dscratch[id]) {
            rc = sl__fail(msg, sizeof msg, SL_ESYSTEM,
                          "decoder scratch: out of memory");
        } else {
            sl__rng_t crop, flip;
            uint64_t e = (uint64_t)it->bb->pub.epoch, s = (uint64_t)it->sample;
            sl__rng_init(&crop, l->opt.seed, e, s, SL_RNG_CROP);
            sl__rng_init(&flip, l->opt.seed, e, s, SL_RNG_FLIP);
            char cause[SL_MSG / 2];
            void *out = it->bb->host + (size_t)it->slot * l->sample_bytes;
            rc = sl__loader_cache_process(l, id, it, &crop, &flip, out, cause,
                                          sizeof cause);
            sl__membudget_release(&l->dbud, ch->bytes);
            ch->bytes = 0;
            if (ch->stopped)
                return; /* the stop rebuilds items and batches */
            if (rc) {
                char name[SL_MSG / 2 - 8];
                sl__source_describe(l->src, it->sample, name, sizeof name);
                snprintf(msg, sizeof msg, "%s: %s", name, cause);
            }
        }
        it->cpu_only = 0;
        item_done(l, it, rc, msg);
        atomic_fetch_add(&l->decode_busy_ns, sl__now_ns() - t0);
        atomic_fetch_add(&l->decode_items, 1);
    }
}
