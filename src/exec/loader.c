/* The public sl_loader_* API over the pipeline in loader_work.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/abi.h"
#include "base/alloc.h"
#include "base/lasterr.h"
#include "core/options.h"
#include "gpu/cuda_stage.h"
#include "loader_internal.h"
#include "sluice/testing.h"

static int create(const char *source, const sl_options_t *opt,
                  sl_loader_t **out, char *err, size_t errlen);
static void telemetry_warn(void *arg, const char *msg);

/* The owner of a failed create's message (base/lasterr.h). */
static const char create_tag;

int sl_loader_create(const char *source, const sl_options_t *opt,
                     sl_loader_t **out)
{
    char err[SL_MSG] = "";
    int rc = create(source, opt, out, err, sizeof err);
    return rc ? sl__lasterr_set(&create_tag, rc, "%s", err) : 0;
}

/* Undoes what create did before the pipeline existed (the sampler, the
 * source, the skip list); passes rc back. */
static int create_undo(sl_loader_t *l, int rc)
{
    if (l->stage && l->stage_owned)
        l->stage->destroy(l->stage); /* made by sl__loader_budgets */
    sl__sampler_free(&l->smp);
    sl__source_close(l->src);
    sl__msglog_free(&l->skips);
    free(l);
    return rc;
}

static int create(const char *source, const sl_options_t *opt,
                  sl_loader_t **out, char *err, size_t errlen)
{
    if (!source || !out)
        return sl__fail(err, errlen, SL_EINVAL, "source and out are needed");
    *out = NULL;
    sl_loader_t *l = calloc(1, sizeof *l);
    if (!l)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    sl__msglog_init(&l->skips, SL_MSGLOG_KEEP);
    if (!opt)
        sl_options_init(&l->opt);
    else if (sl__abi_in(&l->opt, sizeof l->opt, opt, SL__OPTIONS_V1_SIZE,
                        "sl_options", err, errlen))
        return create_undo(l, SL_EINVAL);
    l->alloc = (sl__allocator_t){l->opt.buffer_alloc, l->opt.buffer_free,
                                 l->opt.buffer_ctx};
    /* No budget given: the cgroup's limit sets one, as if given. */
    char over[256];
    sl__loader_default_memory(&l->opt, l->mem_why, sizeof l->mem_why, over,
                              sizeof over);
    if (over[0])
        sl__msglog_add(&l->skips, "warning: %s", over);
    /* Knobs left at 0 / SL_AUTOTUNE belong to the scheduler. */
    const sl_options_t given = l->opt;
    int rc = sl__loader_resolve(&l->opt, err, errlen);
    if (!rc)
        rc = sl__source_open(source, l->opt.on_error == SL_ON_ERROR_SKIP,
                             &l->src, err, errlen);
    if (!rc)
        rc = sl__sampler_init(&l->smp, sl__source_count(l->src),
                              l->opt.batch_size, l->opt.rank, l->opt.world_size,
                              l->opt.drop_last, !l->opt.no_shuffle, l->opt.seed,
                              err, errlen);
    if (!rc && l->opt.shuffle_buffer < 0)
        rc = sl__fail(err, errlen, SL_EINVAL, "shuffle_buffer %d < 0",
                      l->opt.shuffle_buffer);
    if (!rc && l->opt.shuffle_buffer > 0) {
        int ng = 0;
        const int64_t *g = sl__source_groups(l->src, &ng);
        l->one_group[1] = sl__source_count(l->src);
        rc = sl__sampler_stream(&l->smp, l->opt.shuffle_buffer,
                                g ? g : l->one_group, g ? ng : 1, err, errlen);
    }
    /* epochs x batches an epoch: the run's batch count, in 64 bits */
    if (!rc && l->opt.epochs > INT64_MAX / l->smp.nbatches - 1)
        rc = sl__fail(err, errlen, SL_EINVAL,
                      "epochs %lld: epochs x %lld batches an epoch must fit "
                      "64 bits (at most %lld epochs)",
                      (long long)l->opt.epochs, (long long)l->smp.nbatches,
                      (long long)(INT64_MAX / l->smp.nbatches - 1));
    if (rc)
        return create_undo(l, rc);
    sl__loader_xform(&l->opt, &l->xf);
    size_t esize = l->opt.dtype == SL_DTYPE_FLOAT32 ? 4 : 1;
    l->sample_bytes = (size_t)l->opt.image_size * l->opt.image_size * 3 * esize;
    /* A batch never holds more than the rank's samples of an epoch: "the
     * whole set in one batch" (batch_size 1e6 over 100 samples) takes
     * 100 samples' bytes a buffer, not a million's. */
    l->batch_cap = l->smp.rank_n > 0 && l->smp.rank_n < l->opt.batch_size
                       ? (int)l->smp.rank_n
                       : l->opt.batch_size;
    l->batch_bytes = l->sample_bytes * (size_t)l->batch_cap;
    rc = sl__loader_budgets(l, &given, err, errlen);
    if (rc && l->mem_why[0] && strstr(err, "memory budget")) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, "%s", l->mem_why);
    }
    if (rc)
        return create_undo(l, rc);
    rc = sl__loader_cache_open(l, err, errlen);
    if (rc)
        return create_undo(l, rc);
    sl__membudget_init(&l->rbud, l->lim.mem_read);
    sl__membudget_init(&l->dbud, l->lim.mem_decode);
    l->rbud.note = l->dbud.note = l->mem_why[0] ? l->mem_why : NULL;
    l->prefetch = l->opt.prefetch;
    l->read_threads = l->opt.read_threads;
    l->decode_threads = l->opt.decode_threads;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->ctl_mu, NULL);
    sl__busy_init(&l->gpu_busy);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_condattr_t ca; /* next's timed waits: as sl__now_ns */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv_ready, &ca);
    pthread_condattr_destroy(&ca);
    sl__throttle_init(&l->thr, 0, 0); /* off: sl__testing_storage_set */
    l->perm_epoch[0] = l->perm_epoch[1] = -1;
    int64_t n = sl__source_count(l->src);
    l->perm[0] = malloc((size_t)n * sizeof(int64_t));
    l->perm[1] = malloc((size_t)n * sizeof(int64_t));
    atomic_store(&l->readers_now, l->read_threads);
    /* An item per read in flight: threads, or the depth's budget. */
    l->nitems = sl__read_ahead_items(
        l->async && l->lim.max_depth > l->lim.max_read ? l->lim.max_depth
                                                       : l->lim.max_read);
    l->item_keep = SL_ITEM_KEEP;
    if ((size_t)(l->lim.mem_read / l->nitems) < l->item_keep)
        l->item_keep = (size_t)(l->lim.mem_read / l->nitems);
    l->items = calloc((size_t)l->nitems, sizeof *l->items);
    l->free_items = sl__queue_create((size_t)l->nitems);
    l->decode_q = sl__queue_create(SL_ITEMS_QUEUED);
    l->readers = sl__workers_create(sl__loader_reader_main, l);
    l->decoders = sl__workers_create(sl__loader_decoder_main, l);
    if (!l->perm[0] || !l->perm[1] || !l->items || !l->free_items ||
        !l->decode_q || !l->readers || !l->decoders) {
        sl_loader_destroy(l);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    for (int i = 0; i < l->nitems; i++)
        sl__queue_push(l->free_items, &l->items[i]);
    if (l->opt.telemetry_ms >= 0) {
        sl__cuda_stage_stats_t cs = {0}; /* NVML reads the stage's GPU */
        if (l->stage && l->stage_owned)
            sl__cuda_stage_stats(l->stage, &cs);
        sl__collector_opts_t co = {
            l->opt.telemetry_ms, source,        l->opt.telemetry_path,
            l->opt.metrics_port, 600,           NULL,
            cs.pci_bus_id,       telemetry_warn};
        rc = sl__loader_sched_init(l, &co, err, errlen);
        if (!rc)
            rc = sl__collector_start(&co, sl__loader_pipe_sample, l, &l->coll,
                                     err, errlen);
        if (rc) {
            sl_loader_destroy(l);
            return rc;
        }
    }
    /* What the open left out under the skip policy (shards, ImageFolder
     * entries that are not regular files), counted as skips, and its
     * warnings (folder loops), listed only. */
    for (int i = 0; i < sl__source_note_count(l->src); i++) {
        int lost = 0;
        const char *m = sl__source_note(l->src, i, &lost);
        l->stats.errors_skipped += lost;
        sl__msglog_add(&l->skips, "%s%s", lost ? "" : "warning: ", m);
    }
    *out = l;
    return 0;
}

/* A pool that could not start its threads: rc, and which and why in the
 * loader's message. */
static int threads_failed(sl_loader_t *l, int rc, sl__workers_t *pool)
{
    char why[256];
    sl__workers_why(pool, why, sizeof why);
    return sl__lasterr_set(l, rc, "could not start %s threads: %s",
                           pool == l->readers ? "read" : "decode", why);
}

/* What telemetry met that the run goes on without (a --telemetry file
 * that can no longer be written): listed with the skips, not counted. */
static void telemetry_warn(void *arg, const char *msg)
{
    sl__msglog_add(&((sl_loader_t *)arg)->skips, "warning: %s", msg);
}

void sl__loader_skip_defer(sl_loader_t *l, const bbuf_t *bb, int slot,
                           const char *msg)
{
    if (sl__array_reserve(&l->skip_wait, &l->skip_wait_cap, l->nskip_wait + 1,
                          sizeof *l->skip_wait, 16))
        return; /* still counted: bb->nfailed */
    char *m = NULL;
    if (asprintf(&m, "epoch %lld: %s", (long long)bb->pub.epoch, msg) < 0)
        m = NULL;
    l->skip_wait[l->nskip_wait++] = (sl__skip_wait_t){bb->g, slot, m};
}

static int cmp_slot(const void *a, const void *b)
{
    int x = ((const sl__skip_wait_t *)a)->slot;
    int y = ((const sl__skip_wait_t *)b)->slot;
    return (x > y) - (x < y);
}

static void skip_list(sl_loader_t *l, const bbuf_t *bb, char *msg)
{
    if (msg)
        sl__msglog_add(&l->skips, "%s", msg);
    else
        sl__msglog_add(&l->skips,
                       "epoch %lld: a sample (its message was lost: out of "
                       "memory)",
                       (long long)bb->pub.epoch);
    free(msg);
}

/* Under mu, as batch bb is handed out (or fails the stream): its skipped
 * samples counted, their messages listed in slot order (the order of the
 * batch, whichever decoder finished first). */
static void skips_hand_out(sl_loader_t *l, const bbuf_t *bb)
{
    size_t keep = 0, m = 0;
    for (size_t i = 0; i < l->nskip_wait; i++)
        m += l->skip_wait[i].g == bb->g;
    sl__skip_wait_t *mine = m ? malloc(m * sizeof *mine) : NULL;
    m = 0;
    for (size_t i = 0; i < l->nskip_wait; i++) {
        sl__skip_wait_t w = l->skip_wait[i];
        if (w.g != bb->g)
            l->skip_wait[keep++] = w;
        else if (mine)
            mine[m++] = w;
        else { /* no memory to sort in: in the order they finished */
            skip_list(l, bb, w.msg);
            m++;
        }
    }
    l->nskip_wait = keep;
    if (mine) {
        qsort(mine, m, sizeof *mine, cmp_slot);
        for (size_t i = 0; i < m; i++)
            skip_list(l, bb, mine[i].msg);
        free(mine);
    }
    for (; m < (size_t)bb->nfailed; m++) /* no room to wait in */
        skip_list(l, bb, NULL);
    l->stats.errors_skipped += bb->nfailed;
}

/* Under mu: what waits of batches never handed out (a stop, a restart,
 * read-ahead past the end the consumer took). */
static void skips_drop(sl_loader_t *l)
{
    for (size_t i = 0; i < l->nskip_wait; i++)
        free(l->skip_wait[i].msg);
    l->nskip_wait = 0;
}

/* Stops every worker and returns all buffers and items to their pools. */
static void stop_pipeline(sl_loader_t *l)
{
    if (!l->running)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    atomic_store(&l->halt, 1); /* async readers look between completions */
    pthread_cond_broadcast(&l->cv_work);
    pthread_cond_broadcast(&l->cv_ready);
    pthread_mutex_unlock(&l->mu);
    sl__workers_stop(l->readers);
    sl__workers_stop(l->decoders);
    sl__queue_close(l->free_items);
    sl__queue_close(l->decode_q);
    sl__throttle_stop(&l->thr, 1);   /* a reader may wait there for seconds */
    sl__membudget_stop(&l->rbud, 1); /* or for read-ahead room */
    sl__membudget_stop(&l->dbud, 1);
    sl__workers_join(l->readers);
    sl__workers_join(l->decoders);
    /* Samples on the GPU stage finish (or come back, into the closed
     * decode queue: dropped) before their items and buffers are reset. */
    if (l->stage)
        l->stage->drain(l->stage);
    sl__throttle_stop(&l->thr, 0);
    atomic_store(&l->reads_in_flight, 0); /* dropped with the items */
    for (int i = 0; i < l->nitems; i++) { /* samples dropped in flight */
        sl__membudget_release(&l->rbud, l->items[i].charged);
        l->items[i].charged = 0;
        l->items[i].cpu_only = 0;
        sl__loader_cache_unpin(l, &l->items[i]);
    }
    sl__membudget_stop(&l->rbud, 0);
    sl__membudget_stop(&l->dbud, 0);
    sl__workers_reset(l->readers);
    sl__workers_reset(l->decoders);
    void *p;
    while (sl__queue_try_pop(l->free_items, &p) == 0)
        ;
    while (sl__queue_try_pop(l->decode_q, &p) == 0)
        ;
    sl__queue_reopen(l->free_items);
    sl__queue_reopen(l->decode_q);
    for (int i = 0; i < l->nitems; i++)
        sl__queue_push(l->free_items, &l->items[i]);
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nbufs; i++) /* held ones stay the consumer's */
        if (l->bufs[i]->state != BB_HELD &&
            l->bufs[i]->state != BB_RELEASING) /* (its release frees it) */
            l->bufs[i]->state = BB_FREE;
    l->cur = NULL;
    l->running = 0;
    l->stopping = 0;
    atomic_store(&l->halt, 0);
    pthread_mutex_unlock(&l->mu);
}

static void buf_free(const sl_loader_t *l, bbuf_t *bb)
{
    sl__free_block(&l->alloc, bb->host);
    if (bb->dev)
        l->stage->dev_free(l->stage, bb->dev);
    free(bb->on_dev);
    free(bb->pub.labels);
    free(bb->pub.indices);
    free(bb->bad);
    free(bb);
}

void sl__buf_destroy(const sl_loader_t *l, bbuf_t *bb)
{
    buf_free(l, bb);
}

void sl_loader_destroy(sl_loader_t *l)
{
    if (!l)
        return;
    sl__lasterr_forget(l);
    sl__collector_stop(l->coll); /* first: it reads the pipeline */
    sl__loader_sched_free(l);
    if (l->readers && l->decoders && l->free_items && l->decode_q) {
        pthread_mutex_lock(&l->ctl_mu);
        stop_pipeline(l);
        pthread_mutex_unlock(&l->ctl_mu);
    }
    sl__workers_destroy(l->readers);
    sl__workers_destroy(l->decoders);
    /* The buffers before the stage: device batches are its memory. */
    for (int i = 0; i < l->nbufs; i++)
        buf_free(l, l->bufs[i]);
    while (l->parked) {
        bbuf_t *bb = l->parked;
        l->parked = bb->parked_next;
        buf_free(l, bb);
    }
    free(l->bufs);
    l->bufs = NULL;
    l->nbufs = 0;
    if (l->stage && l->stage_owned)
        l->stage->destroy(l->stage); /* drained by the stop */
    sl__queue_destroy(l->free_items);
    sl__queue_destroy(l->decode_q);
    for (int i = 0; l->items && i < l->nitems; i++) {
        sl__bytes_free(&l->items[i].data);
        sl__bytes_free(&l->items[i].scratch);
    }
    sl__loader_aread_free(l);
    free(l->items);
    for (int i = 0; i < SL_WORKERS_MAX; i++) {
        sl__bytes_free(&l->rscratch[i]);
        sl__scratch_destroy(l->dscratch[i]);
    }
    sl__msglog_free(&l->skips);
    skips_drop(l);
    free(l->skip_wait);
    free(l->perm[0]);
    free(l->perm[1]);
    free(l->plan.list);
    sl__loader_cache_close(l);
    sl__sampler_free(&l->smp);
    sl__source_close(l->src);
    sl__membudget_destroy(&l->rbud);
    sl__membudget_destroy(&l->dbud);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->ctl_mu);
    sl__busy_destroy(&l->gpu_busy);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_ready);
    sl__throttle_destroy(&l->thr);
    free(l);
}

const char *sl_loader_last_error(const sl_loader_t *l)
{
    return sl__lasterr_get(l ? (const void *)l : &create_tag);
}

int64_t sl_loader_num_samples(const sl_loader_t *l)
{
    return l ? sl__source_count(l->src) : 0;
}

int sl_loader_num_classes(const sl_loader_t *l)
{
    return l ? sl__source_num_classes(l->src) : 0;
}

const char *sl_loader_class_name(const sl_loader_t *l, int i)
{
    return l ? sl__source_class_name(l->src, i) : NULL;
}

int64_t sl_loader_batches_per_epoch(const sl_loader_t *l)
{
    return l ? l->smp.nbatches : 0;
}

size_t sl_loader_batch_bytes(const sl_loader_t *l)
{
    return l ? l->batch_bytes : 0;
}

int sl_loader_start(sl_loader_t *l, const sl_position_t *pos)
{
    if (!l)
        return SL_EINVAL;
    int64_t epoch = pos ? pos->epoch : 0, batch = pos ? pos->batch : 0;
    int64_t nb = l->smp.nbatches;
    if (epoch < 0 || batch < 0 || batch > nb)
        return sl__lasterr_set(l, SL_ERANGE,
                               "position epoch %lld batch %lld is outside "
                               "epoch >= 0, batch 0..%lld",
                               (long long)epoch, (long long)batch,
                               (long long)nb);
    /* The run's last batch number, (epoch + epochs) * nb, must fit. */
    if (epoch > INT64_MAX / nb - l->opt.epochs)
        return sl__lasterr_set(l, SL_ERANGE,
                               "position epoch %lld: epoch + epochs (%lld) "
                               "epochs of %lld batches pass the 64-bit batch "
                               "count",
                               (long long)epoch, (long long)l->opt.epochs,
                               (long long)nb);
    /* Unordered delivery hands out whichever batch is done first, so a
     * count of batches inside an epoch is not a position: resuming there
     * would repeat some batches and never deliver others. */
    if (l->opt.unordered && batch % nb != 0)
        return sl__lasterr_set(l, SL_EINVAL,
                               "position epoch %lld batch %lld: a position "
                               "inside an epoch needs ordered delivery "
                               "(unordered is set)",
                               (long long)epoch, (long long)batch);
    return sl__loader_begin(l, epoch * nb + batch, (epoch + l->opt.epochs) * nb,
                            NULL);
}

int sl__loader_begin(sl_loader_t *l, int64_t first, int64_t end,
                     const sl__plan_t *plan)
{
    pthread_mutex_lock(&l->ctl_mu); /* no knob change in between */
    stop_pipeline(l);
    pthread_mutex_lock(&l->mu);
    int64_t *old = l->plan.list;
    l->plan = plan ? *plan : (sl__plan_t){NULL, 0, 0, 0};
    l->start_g = l->claim_g = l->next_g = first;
    l->end_g = end;
    l->handed = 0;
    l->ep_epoch = sl__loader_planned(l, first) / l->smp.nbatches;
    l->ep_samples = l->run_samples = 0;
    skips_drop(l);
    l->fatal = 0;
    l->fatal_msg[0] = 0;
    l->alloc_failed = 0;
    l->running = 1;
    int readers = l->read_threads, decoders = l->decode_threads;
    pthread_mutex_unlock(&l->mu);
    free(old);
    sl__workers_t *pool = l->readers;
    int rc = sl__workers_set(pool, readers);
    if (!rc)
        rc = sl__workers_set(pool = l->decoders, decoders);
    if (rc)
        stop_pipeline(l);
    pthread_mutex_unlock(&l->ctl_mu);
    return rc ? threads_failed(l, rc, pool) : 0;
}

/* Under mu: the batch to hand out next, or NULL. */
static bbuf_t *ready_batch(sl_loader_t *l)
{
    bbuf_t *best = NULL;
    for (int i = 0; i < l->nbufs; i++) {
        bbuf_t *bb = l->bufs[i];
        if (bb->state != BB_READY)
            continue;
        if (!l->opt.unordered) {
            if (bb->g == l->next_g)
                return bb;
        } else if (!best || bb->g < best->g) {
            best = bb;
        }
    }
    return best;
}

/* Under mu, handing out the empty batch bb: did an epoch (ordered: bb is
 * its last batch) or the whole run (unordered, whose epochs interleave)
 * end without a sample? Under SL_ON_ERROR_SKIP that is a failure, not an
 * empty epoch: a trainer would silently train on nothing (issue 14). A
 * plan, whose epochs need not be whole, is judged as a whole run. */
static int nothing_delivered(const sl_loader_t *l, const bbuf_t *bb)
{
    if (!l->opt.unordered && !l->plan.n)
        return bb->pub.index == l->smp.nbatches - 1 && l->ep_samples == 0;
    return l->handed == l->end_g - l->start_g && l->run_samples == 0;
}

static int all_held(sl_loader_t *l)
{
    if (l->nbufs < l->prefetch)
        return 0;
    for (int i = 0; i < l->nbufs; i++)
        if (l->bufs[i]->state != BB_HELD)
            return 0;
    return 1;
}

int sl_loader_next(sl_loader_t *l, const sl_batch_t **out)
{
    return sl_loader_next_timeout(l, out, -1);
}

int sl_loader_next_timeout(sl_loader_t *l, const sl_batch_t **out,
                           int timeout_ms)
{
    if (!l || !out)
        return SL_EINVAL;
    *out = NULL;
    struct timespec until = /* cv_ready's clock: monotonic */
        sl__mono_timespec(sl__now_ns() + (int64_t)timeout_ms * 1000000);
    int64_t t0 = sl__now_ns();
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    l->wait_since_ns = t0;
    for (;;) {
        if (l->fatal) {
            rc = sl__lasterr_set(l, l->fatal, "%s", l->fatal_msg);
            break;
        }
        if (!l->running) {
            rc =
                sl__lasterr_set(l, SL_ESTATE, "sl_loader_start was not called");
            break;
        }
        if (l->handed >= l->end_g - l->start_g) {
            rc = SL_EEND;
            break;
        }
        bbuf_t *bb = ready_batch(l);
        if (bb) {
            skips_hand_out(l, bb);
            if (bb->rc) {
                l->fatal = bb->rc;
                snprintf(l->fatal_msg, sizeof l->fatal_msg, "%s", bb->err);
                continue; /* reported by the check above */
            }
            l->handed++;
            if (!l->opt.unordered)
                l->next_g++;
            if (bb->pub.epoch != l->ep_epoch)
                l->ep_epoch = bb->pub.epoch, l->ep_samples = 0;
            l->ep_samples += bb->pub.n;
            l->run_samples += bb->pub.n;
            if (bb->pub.n == 0) { /* every sample skipped */
                bb->state = BB_FREE;
                pthread_cond_broadcast(&l->cv_work);
                if (nothing_delivered(l, bb))
                    l->fatal =
                        sl__fail(l->fatal_msg, sizeof l->fatal_msg, SL_ECORRUPT,
                                 "epoch %lld: every sample was skipped, none "
                                 "delivered (%lld skipped; the first: %s)",
                                 (long long)bb->pub.epoch,
                                 (long long)l->stats.errors_skipped,
                                 sl__msglog_get(&l->skips, 0)
                                     ? sl__msglog_get(&l->skips, 0)
                                     : "-");
                continue; /* a failure is reported at the top */
            }
            bb->state = BB_HELD;
            l->held_since_ns = 0;
            bb->pub.channels = 3;
            bb->pub.height = bb->pub.width = l->opt.image_size;
            bb->pub.dtype = l->opt.dtype;
            bb->pub.layout = l->opt.layout;
            bb->pub.sample_bytes = l->sample_bytes;
            l->stats.batches++;
            l->stats.samples += bb->pub.n;
            *out = &bb->pub;
            break;
        }
        if (l->alloc_failed && !l->allocating && !sl__loader_in_flight(l)) {
            /* Nothing on its way and no buffer to be had: the held ones
             * are all there is, and a consumer that keeps one while it
             * asks for the next (every Python loop) would wait forever. */
            l->fatal = sl__fail(l->fatal_msg, sizeof l->fatal_msg, SL_ENOMEM,
                                "cannot allocate a batch buffer of %zu bytes",
                                l->batch_bytes);
            continue; /* reported at the top */
        }
        /* Every buffer held: only a release (another thread's) lets a
         * batch come. It is waited for SL__HELD_WAIT_MS, counted across
         * calls (a loop of short timeouts too), then the cause is named:
         * a consumer that keeps them all while it asks would wait forever. */
        int held = all_held(l);
        int64_t now = sl__now_ns();
        if (!held)
            l->held_since_ns = 0;
        else if (!l->held_since_ns)
            l->held_since_ns = now;
        int64_t held_end =
            held ? l->held_since_ns + (int64_t)SL__HELD_WAIT_MS * 1000000 : 0;
        if (held && now >= held_end) {
            rc = sl__lasterr_set(
                l, SL_ESTATE,
                "every batch buffer (%d) is held by the consumer, none "
                "released for %d s: release batches or raise the prefetch "
                "depth",
                l->nbufs, SL__HELD_WAIT_MS / 1000);
            break;
        }
        if (held &&
            (timeout_ms < 0 || held_end < t0 + (int64_t)timeout_ms * 1000000)) {
            struct timespec h = sl__mono_timespec(held_end);
            pthread_cond_timedwait(&l->cv_ready, &l->mu, &h);
        } else if (timeout_ms < 0) {
            pthread_cond_wait(&l->cv_ready, &l->mu);
        } else if (pthread_cond_timedwait(&l->cv_ready, &l->mu, &until) ==
                   ETIMEDOUT) {
            rc = SL_ETIMEDOUT;
            break;
        }
    }
    l->stats.wait_ns += sl__now_ns() - t0;
    l->wait_since_ns = 0;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int sl_loader_release(sl_loader_t *l, const sl_batch_t *b)
{
    return sl_loader_release_on(l, b, NULL);
}

/* Under mu: bb's index in the pool, or -1 (pointers compared only: a
 * batch released twice may be freed already). */
static int pool_index(const sl_loader_t *l, const bbuf_t *bb)
{
    for (int i = 0; i < l->nbufs; i++)
        if (l->bufs[i] == bb)
            return i;
    return -1;
}

int sl_loader_release_on(sl_loader_t *l, const sl_batch_t *b, void *stream)
{
    if (!b)
        return 0;
    if (!l)
        return SL_EINVAL;
    bbuf_t *bb = (bbuf_t *)b, *gone = NULL;
    pthread_mutex_lock(&l->mu);
    int i = pool_index(l, bb);
    int held = i >= 0 && bb->state == BB_HELD;
    if (held && bb->dev) {
        /* A device batch: its consumer's GPU work may still read it; the
         * stage fences that before the buffer can be claimed — out of the
         * lock, which every reader and decoder needs (a fence on another
         * GPU's stream may wait for it, and a Python trainer holds the
         * GIL meanwhile). */
        bb->state = BB_RELEASING;
        pthread_mutex_unlock(&l->mu);
        l->stage->dev_release(l->stage, bb->dev, stream);
        pthread_mutex_lock(&l->mu);
        i = pool_index(l, bb); /* (a lowered depth drops only free ones) */
    }
    if (held) {
        if (l->nbufs > l->prefetch) { /* the depth was lowered */
            l->bufs[i] = l->bufs[--l->nbufs];
            gone = sl__buf_drop(l, bb);
        } else {
            bb->state = BB_FREE;
        }
        pthread_cond_broadcast(&l->cv_work);
    }
    pthread_mutex_unlock(&l->mu);
    if (gone) /* out of the lock: an allocator's free may be slow */
        buf_free(l, gone);
    return held ? 0
                : sl__lasterr_set(l, SL_ESTATE,
                                  "batch %p is not held: released twice, or "
                                  "not this loader's",
                                  (const void *)b);
}

/* The scheduler's knob for a public one; -1: none. */
static int knob_of(sl_param_t p)
{
    return p == SL_PARAM_READ_THREADS     ? SL_KNOB_READ
           : p == SL_PARAM_DECODE_THREADS ? SL_KNOB_DECODE
           : p == SL_PARAM_PREFETCH       ? SL_KNOB_PREFETCH
           : p == SL_PARAM_IO_DEPTH       ? SL_KNOB_DEPTH
           : p == SL_PARAM_CACHE_BYTES    ? SL_KNOB_CACHE
           : p == SL_PARAM_CACHE_CODEC    ? SL_KNOB_CACHE_CODEC
           : p == SL_PARAM_GPU_SHARE      ? SL_KNOB_GPU_SHARE
                                          : -1;
}

/* Under mu (the limits are fixed at create): the budget rule's range. */
static int param_range(const sl_loader_t *l, sl_param_t p, int64_t *min,
                       int64_t *max)
{
    return sl__limits_range(&l->lim, knob_of(p), min, max);
}

int sl_loader_param_range(const sl_loader_t *l, sl_param_t p, int64_t *min,
                          int64_t *max)
{
    if (!l || !min || !max)
        return SL_EINVAL;
    sl_loader_t *m = (sl_loader_t *)l;
    pthread_mutex_lock(&m->mu);
    int rc = param_range(l, p, min, max);
    pthread_mutex_unlock(&m->mu);
    return rc ? sl__lasterr_set(l, rc, "unknown knob %d", (int)p) : 0;
}

static int set_knob(sl_loader_t *l, sl_param_t p, int64_t value);

/* One at a time with sl_loader_start (ctl_mu): the scheduler's steps come
 * from the telemetry thread while a user may restart the stream. */
int sl_loader_set(sl_loader_t *l, sl_param_t p, int64_t value)
{
    if (!l)
        return SL_EINVAL;
    pthread_mutex_lock(&l->ctl_mu);
    int rc = set_knob(l, p, value);
    pthread_mutex_unlock(&l->ctl_mu);
    return rc;
}

static int set_knob(sl_loader_t *l, sl_param_t p, int64_t value)
{
    if (value == SL_AUTOTUNE && p == SL_PARAM_IO_DEPTH) {
        /* back to one read per read thread */
        pthread_mutex_lock(&l->mu);
        atomic_store(&l->io_depth, 0);
        pthread_cond_broadcast(&l->cv_work);
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    if (value == SL_AUTOTUNE && p == SL_PARAM_CACHE_BYTES)
        value = l->lim.mem_cache; /* what it was created with */
    if (value == SL_AUTOTUNE && p == SL_PARAM_CACHE_CODEC)
        value = SL_CACHE_CODEC_AUTO;
    if (value == SL_AUTOTUNE && p == SL_PARAM_GPU_SHARE)
        value = 0;
    if (value == SL_AUTOTUNE) {
        int64_t d;
        sl_loader_get(l, SL_PARAM_DECODE_THREADS, &d);
        value = sl__knob_default(p, (int)d);
    }
    int64_t lo, hi;
    pthread_mutex_lock(&l->mu);
    int rc = param_range(l, p, &lo, &hi);
    if (!rc && (value < lo || value > hi))
        rc = SL_ERANGE;
    if (!rc && p == SL_PARAM_READ_THREADS) {
        l->read_threads = (int)value;
        atomic_store(&l->readers_now, (int)value);
        pthread_cond_broadcast(&l->cv_work); /* shares of the depth */
    }
    if (!rc && p == SL_PARAM_IO_DEPTH) {
        atomic_store(&l->io_depth, (int)value);
        pthread_cond_broadcast(&l->cv_work);
    }
    if (!rc && p == SL_PARAM_DECODE_THREADS)
        l->decode_threads = (int)value;
    if (!rc && p == SL_PARAM_CACHE_BYTES)
        sl__loader_cache_set(l, value); /* takes the cache's own lock */
    if (!rc && p == SL_PARAM_CACHE_CODEC)
        atomic_store(&l->cache_codec, (int)value);
    if (!rc && p == SL_PARAM_GPU_SHARE)
        atomic_store(&l->gpu_share, (int)value);
    /* Buffers the lowered depth drops: freed after the lock (an
     * allocator's free may be slow); device ones and the caller's parked
     * (sl__buf_drop) */
    bbuf_t **gone = NULL;
    int ngone = 0;
    if (!rc && p == SL_PARAM_PREFETCH) {
        l->prefetch = (int)value;
        gone = malloc((size_t)(l->nbufs > 0 ? l->nbufs : 1) * sizeof *gone);
        for (int i = 0; gone && i < l->nbufs && l->nbufs > l->prefetch;) {
            if (l->bufs[i]->state == BB_FREE) {
                bbuf_t *bb = sl__buf_drop(l, l->bufs[i]);
                if (bb)
                    gone[ngone++] = bb;
                l->bufs[i] = l->bufs[--l->nbufs];
            } else {
                i++;
            }
        }
        pthread_cond_broadcast(&l->cv_work);
    }
    int running = l->running;
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < ngone; i++)
        buf_free(l, gone[i]);
    free(gone);
    if (rc == SL_ERANGE && p == SL_PARAM_GPU_SHARE && !l->place.gpu)
        return sl__lasterr_set(
            l, rc,
            "gpu_share = %lld: the GPU stage is not in "
            "use (%s), so it stays 0",
            (long long)value, l->place.why[0] ? l->place.why : "placement cpu");
    if (rc == SL_ERANGE)
        return sl__lasterr_set(l, rc, "%s = %lld is outside %lld..%lld",
                               sl__knob_name(knob_of(p)), (long long)value,
                               (long long)lo, (long long)hi);
    if (rc)
        return sl__lasterr_set(l, rc, "unknown knob %d", (int)p);
    /* The pool lock is never taken under mu (lock order, loader_internal.h).
     */
    sl__workers_t *pool = p == SL_PARAM_READ_THREADS ? l->readers : l->decoders;
    if (running && (p == SL_PARAM_READ_THREADS || p == SL_PARAM_DECODE_THREADS))
        rc = sl__workers_set(pool, (int)value);
    return rc ? threads_failed(l, rc, pool) : 0;
}

int sl_loader_get(const sl_loader_t *l, sl_param_t p, int64_t *value)
{
    if (!l || !value)
        return SL_EINVAL;
    sl_loader_t *m = (sl_loader_t *)l;
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    if (p == SL_PARAM_READ_THREADS)
        *value = m->read_threads;
    else if (p == SL_PARAM_DECODE_THREADS)
        *value = m->decode_threads;
    else if (p == SL_PARAM_PREFETCH)
        *value = m->prefetch;
    else if (p == SL_PARAM_IO_DEPTH)
        *value = sl__loader_io_depth(m);
    else if (p == SL_PARAM_CACHE_BYTES)
        *value = atomic_load(&m->cache_limit);
    else if (p == SL_PARAM_CACHE_CODEC)
        *value = atomic_load(&m->cache_codec);
    else if (p == SL_PARAM_GPU_SHARE)
        *value = atomic_load(&m->gpu_share);
    else
        rc = SL_EINVAL;
    pthread_mutex_unlock(&m->mu);
    return rc ? sl__lasterr_set(l, rc, "unknown knob %d", (int)p) : 0;
}

/* Emulated storage (sluice/testing.h). Lock order: none held here; the
 * throttle takes its own. */
int sl__testing_storage_set(sl_loader_t *l, sl_testing_storage_t what,
                            int64_t value)
{
    if (!l)
        return SL_EINVAL;
    if (what == SL_TESTING_READ_LATENCY_US) {
        if (value < 0 || value > SL_THROTTLE_MAX_LATENCY_US)
            return SL_ERANGE;
        sl__throttle_set_latency(&l->thr, value);
        return 0;
    }
    if (what == SL_TESTING_READ_BYTES_PER_S) {
        if (value < 0)
            return SL_ERANGE;
        sl__throttle_set_rate(&l->thr, value);
        return 0;
    }
    return SL_EINVAL;
}

int sl__testing_storage_get(const sl_loader_t *l, sl_testing_storage_t what,
                            int64_t *value)
{
    if (!l || !value)
        return SL_EINVAL;
    sl__throttle_t *t = (sl__throttle_t *)&l->thr;
    if (what == SL_TESTING_READ_LATENCY_US)
        *value = sl__throttle_latency_us(t);
    else if (what == SL_TESTING_READ_BYTES_PER_S)
        *value = sl__throttle_rate(t);
    else
        return SL_EINVAL;
    return 0;
}

int sl__testing_read_path(const sl_loader_t *l, const char **what)
{
    if (!l)
        return SL_EINVAL;
    if (what)
        *what = !l->async                         ? l->async_why
                : sl__source_reads_remote(l->src) ? "curl multi"
                                                  : "io_uring";
    return l->async;
}

int64_t sl__testing_memory_budget(const sl_loader_t *l, const char **why)
{
    if (!l)
        return SL_EINVAL;
    if (why)
        *why = l->mem_why;
    return l->opt.max_memory_bytes;
}

int sl__testing_placement(const sl_loader_t *l, const char **why)
{
    if (!l)
        return SL_EINVAL;
    if (why)
        *why = l->place.why;
    return l->place.gpu;
}

int sl__testing_gpu_stage_set(sl_loader_t *l, struct sl__gpu_stage *st)
{
    if (!l || !st)
        return SL_EINVAL;
    pthread_mutex_lock(&l->ctl_mu);
    pthread_mutex_lock(&l->mu);
    int rc = l->running ? SL_ESTATE : 0;
    if (!rc) {
        if (l->stage && l->stage_owned)
            l->stage->destroy(l->stage);
        l->stage = st;
        l->stage_owned = 0;
        l->place.gpu = 1;
        l->place.why[0] = '\0';
        l->lim.max_gpu_share = SL__GPU_SHARE_MAX;
    }
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_unlock(&l->ctl_mu);
    return rc;
}

int sl_loader_position(const sl_loader_t *l, sl_position_t *pos)
{
    if (!l || !pos)
        return SL_EINVAL;
    sl_loader_t *m = (sl_loader_t *)l;
    pthread_mutex_lock(&m->mu);
    int64_t g = sl__loader_planned(m, m->start_g + m->handed);
    int64_t nb = m->smp.nbatches;
    pthread_mutex_unlock(&m->mu);
    pos->epoch = g / nb;
    pos->batch = g % nb;
    return 0;
}

SL__ABI_INIT_PAIR(sl_stats_init, sl_stats_t)

int sl_loader_stats(const sl_loader_t *l, sl_stats_t *st)
{
    if (!l || !st)
        return SL_EINVAL;
    sl_loader_t *m = (sl_loader_t *)l;
    pthread_mutex_lock(&m->mu);
    sl_stats_t s = m->stats;
    pthread_mutex_unlock(&m->mu);
    s.size = sizeof s;
    s.bytes_read = atomic_load(&m->bytes_read);
    sl__cache_stats_t cs;
    sl__cache_get_stats(m->cache, &cs);
    s.cache_hits = cs.hits;
    s.cache_misses = cs.misses;
    s.cache_bytes = cs.bytes;
    s.cache_entries = cs.entries;
    s.cache_raw_bytes = cs.raw_bytes;
    int knob = atomic_load(&m->cache_codec);
    s.cache_codec = knob ? knob : atomic_load(&m->cache_pick) + 1;
    s.cache_codec_choices = atomic_load(&m->cache_choices);
    s.requests = atomic_load(&m->req_n);
    s.request_records = atomic_load(&m->req_records);
    s.request_fallbacks = atomic_load(&m->req_fallbacks);
    if (m->disk) {
        sl__dtier_stats_t ds;
        sl__dtier_get_stats(m->disk, &ds);
        s.cache_disk_hits = ds.hits;
        s.cache_disk_misses = ds.misses;
        s.cache_disk_bytes = ds.bytes;
        s.cache_disk_entries = ds.entries;
        s.cache_disk_errors = ds.errors;
    }
    return sl__abi_out(st, &s, sizeof s, SL__STATS_V1_SIZE);
}

int64_t sl_loader_skipped_count(const sl_loader_t *l)
{
    return l ? sl__msglog_count(&((sl_loader_t *)l)->skips) : 0;
}

const char *sl_loader_skipped_message(const sl_loader_t *l, int64_t i)
{
    return l ? sl__msglog_get(&((sl_loader_t *)l)->skips, i) : NULL;
}
