/* The public sl_loader_* API over the pipeline in loader_work.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

static _Thread_local char tl_create_err[SL_MSG];

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

/* A knob's default value (the rule: sched/limits.h); emulated storage
 * off. */
static int knob_default(sl_param_t p, int decode_threads)
{
    if (p == SL_PARAM_READ_LATENCY_US || p == SL_PARAM_READ_BYTES_PER_S)
        return 0; /* emulated storage off */
    return sl__limits_knob_default(p == SL_PARAM_READ_THREADS ? SL_KNOB_READ
                                   : p == SL_PARAM_DECODE_THREADS
                                       ? SL_KNOB_DECODE
                                       : SL_KNOB_PREFETCH,
                                   sl__ncpu(), decode_threads);
}

static int resolve(sl_options_t *o, char *err, size_t errlen)
{
    if (o->batch_size == 0)
        o->batch_size = 64;
    if (o->image_size == 0)
        o->image_size = 224;
    if (o->resize_size == 0)
        o->resize_size = o->image_size * 256 / 224;
    if (o->scale_min == 0 && o->scale_max == 0)
        o->scale_min = 0.08, o->scale_max = 1.0;
    if (o->ratio_min == 0 && o->ratio_max == 0)
        o->ratio_min = 3.0 / 4.0, o->ratio_max = 4.0 / 3.0;
    if (o->world_size == 0)
        o->world_size = 1;
    if (o->epochs == 0)
        o->epochs = 1;
    if (o->read_threads == 0 || o->read_threads == SL_AUTOTUNE)
        o->read_threads = knob_default(SL_PARAM_READ_THREADS, 0);
    if (o->decode_threads == 0 || o->decode_threads == SL_AUTOTUNE)
        o->decode_threads = knob_default(SL_PARAM_DECODE_THREADS, 0);
    if (o->prefetch == 0 || o->prefetch == SL_AUTOTUNE)
        o->prefetch = knob_default(SL_PARAM_PREFETCH, o->decode_threads);
    if (!o->mean[0] && !o->mean[1] && !o->mean[2])
        memcpy(o->mean, imagenet_mean, sizeof o->mean);
    if (!o->std[0] && !o->std[1] && !o->std[2])
        memcpy(o->std, imagenet_std, sizeof o->std);
    if (o->batch_size < 1 || o->image_size < 1 || o->image_size > 8192 ||
        o->resize_size < o->image_size)
        return sl__fail(err, errlen, SL_EINVAL,
                        "bad sizes: batch %d, image %d, resize %d",
                        o->batch_size, o->image_size, o->resize_size);
    if (o->policy != SL_POLICY_HEURISTIC && o->policy != SL_POLICY_STATIC &&
        o->policy != SL_POLICY_RL)
        return sl__fail(err, errlen, SL_EINVAL, "unknown policy %d", o->policy);
    if (o->mode != SL_MODE_TRAIN && o->mode != SL_MODE_EVAL)
        return sl__fail(err, errlen, SL_EINVAL, "unknown mode %d", o->mode);
    if (o->dtype != SL_DTYPE_UINT8 && o->dtype != SL_DTYPE_FLOAT32)
        return sl__fail(err, errlen, SL_EINVAL, "unknown dtype %d", o->dtype);
    if (o->layout != SL_LAYOUT_CHW && o->layout != SL_LAYOUT_HWC)
        return sl__fail(err, errlen, SL_EINVAL, "unknown layout %d", o->layout);
    if (!(o->scale_min > 0 && o->scale_min <= o->scale_max &&
          o->ratio_min > 0 && o->ratio_min <= o->ratio_max))
        return sl__fail(err, errlen, SL_EINVAL,
                        "bad crop ranges: scale [%g, %g], ratio [%g, %g]",
                        o->scale_min, o->scale_max, o->ratio_min, o->ratio_max);
    for (int c = 0; c < 3; c++)
        if (!(o->std[c] > 0))
            return sl__fail(err, errlen, SL_EINVAL, "std[%d] must be > 0", c);
    if (o->epochs < 1 || o->read_threads < 1 ||
        o->read_threads > SL_WORKERS_MAX || o->decode_threads < 1 ||
        o->decode_threads > SL_WORKERS_MAX || o->prefetch < 1)
        return sl__fail(err, errlen, SL_EINVAL,
                        "bad epochs %lld / read %d / decode %d / prefetch %d",
                        (long long)o->epochs, o->read_threads,
                        o->decode_threads, o->prefetch);
    if (o->read_latency_us < 0 ||
        o->read_latency_us > SL_THROTTLE_MAX_LATENCY_US ||
        o->read_bytes_per_s < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "bad emulated storage: latency %lld us, %lld B/s",
                        (long long)o->read_latency_us,
                        (long long)o->read_bytes_per_s);
    return 0;
}

static void set_xform(sl_loader_t *l)
{
    const sl_options_t *o = &l->opt;
    sl__xform_t *x = &l->xf;
    memset(x, 0, sizeof *x);
    x->mode = o->mode == SL_MODE_EVAL ? SL_XF_CENTER : SL_XF_RRC;
    x->scale[0] = o->scale_min;
    x->scale[1] = o->scale_max;
    x->ratio[0] = o->ratio_min;
    x->ratio[1] = o->ratio_max;
    x->resize_size = o->resize_size;
    x->flip = o->mode == SL_MODE_TRAIN && !o->no_flip;
    x->out_w = x->out_h = o->image_size;
    x->dtype = o->dtype;
    x->layout = o->layout;
    memcpy(x->mean, o->mean, sizeof x->mean);
    memcpy(x->std, o->std, sizeof x->std);
    x->dct_scale = !o->no_dct_scale;
}

static void pipe_sample(void *arg, sl__pipe_sample_t *o);

int sl_loader_create(const char *source, const sl_options_t *opt,
                     sl_loader_t **out)
{
    char *err = tl_create_err;
    size_t errlen = sizeof tl_create_err;
    err[0] = 0;
    if (!source || !out)
        return sl__fail(err, errlen, SL_EINVAL, "source and out are needed");
    *out = NULL;
    sl_loader_t *l = calloc(1, sizeof *l);
    if (!l)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    if (opt)
        l->opt = *opt;
    /* Knobs left at 0 / SL_AUTOTUNE belong to the scheduler. */
    const sl_options_t given = l->opt;
    int rc = resolve(&l->opt, err, errlen);
    if (!rc)
        rc = sl__source_open(source, l->opt.on_error == SL_ON_ERROR_SKIP,
                             &l->src, err, errlen);
    if (!rc)
        rc = sl__sampler_init(&l->smp, sl__source_count(l->src),
                              l->opt.batch_size, l->opt.rank, l->opt.world_size,
                              l->opt.drop_last, !l->opt.no_shuffle, l->opt.seed,
                              err, errlen);
    if (rc) {
        sl__source_close(l->src);
        free(l);
        return rc;
    }
    set_xform(l);
    size_t esize = l->opt.dtype == SL_DTYPE_FLOAT32 ? 4 : 1;
    l->sample_bytes = (size_t)l->opt.image_size * l->opt.image_size * 3 * esize;
    l->batch_bytes = l->sample_bytes * (size_t)l->opt.batch_size;
    rc = sl__loader_budgets(l, &given, err, errlen);
    if (rc) {
        sl__source_close(l->src);
        free(l);
        return rc;
    }
    l->prefetch = l->opt.prefetch;
    l->read_threads = l->opt.read_threads;
    l->decode_threads = l->opt.decode_threads;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    sl__throttle_init(&l->thr, l->opt.read_latency_us, l->opt.read_bytes_per_s);
    l->perm_epoch[0] = l->perm_epoch[1] = -1;
    int64_t n = sl__source_count(l->src);
    l->perm[0] = malloc((size_t)n * sizeof(int64_t));
    l->perm[1] = malloc((size_t)n * sizeof(int64_t));
    l->free_items = sl__queue_create(SL_ITEMS);
    l->decode_q = sl__queue_create(SL_ITEMS);
    l->readers = sl__workers_create(sl__loader_reader_main, l);
    l->decoders = sl__workers_create(sl__loader_decoder_main, l);
    if (!l->perm[0] || !l->perm[1] || !l->free_items || !l->decode_q ||
        !l->readers || !l->decoders) {
        sl_loader_destroy(l);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    for (int i = 0; i < SL_ITEMS; i++)
        sl__queue_push(l->free_items, &l->items[i]);
    if (l->opt.telemetry_ms >= 0) {
        sl__collector_opts_t co = {l->opt.telemetry_ms ? l->opt.telemetry_ms
                                                       : 100,
                                   source,
                                   l->opt.telemetry_path,
                                   l->opt.metrics_port,
                                   600,
                                   NULL};
        rc = sl__loader_sched_init(l, &co, err, errlen);
        if (!rc)
            rc =
                sl__collector_start(&co, pipe_sample, l, &l->coll, err, errlen);
        if (rc) {
            sl_loader_destroy(l);
            return rc;
        }
    }
    /* Shards that could not be opened under the skip policy. */
    for (int i = 0; i < sl__source_bad_count(l->src); i++) {
        char msg[SL_MSG];
        snprintf(msg, sizeof msg, "%s (whole shard left out)",
                 sl__source_bad_message(l->src, i));
        l->stats.errors_skipped++;
        char **v = realloc(l->skips, (size_t)(l->nskips + 1) * sizeof *v);
        if (v) {
            l->skips = v;
            if ((l->skips[l->nskips] = strdup(msg)))
                l->nskips++;
        }
    }
    *out = l;
    return 0;
}

/* The collector's view of the pipeline (telemetry never includes exec). */
static void pipe_sample(void *arg, sl__pipe_sample_t *o)
{
    sl_loader_t *l = arg;
    memset(o, 0, sizeof *o);
    pthread_mutex_lock(&l->mu);
    o->samples = l->stats.samples;
    o->batches = l->stats.batches;
    o->errors_skipped = l->stats.errors_skipped;
    o->wait_ns = l->stats.wait_ns;
    o->lat_sum_ns = l->lat_sum_ns;
    o->lat_count = l->lat_count;
    o->read_workers = l->running ? l->read_threads : 0;
    o->decode_workers = l->running ? l->decode_threads : 0;
    o->read_capacity = SL_ITEMS;
    o->read_inflight = SL_ITEMS - (int)sl__queue_len(l->free_items);
    o->decode_queue = (int)sl__queue_len(l->decode_q);
    o->decode_capacity = SL_ITEMS;
    o->prefetch = l->prefetch;
    o->decisions = l->decisions;
    memcpy(o->decision_knob, l->decision_knob, sizeof o->decision_knob);
    o->decision_from = l->decision_from;
    o->decision_to = l->decision_to;
    memcpy(o->decision_reason, l->decision_reason, sizeof o->decision_reason);
    for (int i = 0; i < l->nbufs; i++) {
        o->batches_ready += l->bufs[i]->state == BB_READY;
        o->batches_filling += l->bufs[i]->state == BB_FILLING;
    }
    pthread_mutex_unlock(&l->mu);
    o->bytes_read = atomic_load(&l->bytes_read);
    o->read_busy_ns = atomic_load(&l->read_busy_ns);
    o->read_items = atomic_load(&l->read_items);
    o->decode_busy_ns = atomic_load(&l->decode_busy_ns);
    o->decode_items = atomic_load(&l->decode_items);
}

/* Stops every worker and returns all buffers and items to their pools. */
static void stop_pipeline(sl_loader_t *l)
{
    if (!l->running)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_cond_broadcast(&l->cv_work);
    pthread_cond_broadcast(&l->cv_ready);
    pthread_mutex_unlock(&l->mu);
    sl__workers_stop(l->readers);
    sl__workers_stop(l->decoders);
    sl__queue_close(l->free_items);
    sl__queue_close(l->decode_q);
    sl__throttle_stop(&l->thr, 1); /* a reader may wait there for seconds */
    sl__workers_join(l->readers);
    sl__workers_join(l->decoders);
    sl__throttle_stop(&l->thr, 0);
    sl__workers_reset(l->readers);
    sl__workers_reset(l->decoders);
    void *p;
    while (sl__queue_try_pop(l->free_items, &p) == 0)
        ;
    while (sl__queue_try_pop(l->decode_q, &p) == 0)
        ;
    sl__queue_reopen(l->free_items);
    sl__queue_reopen(l->decode_q);
    for (int i = 0; i < SL_ITEMS; i++)
        sl__queue_push(l->free_items, &l->items[i]);
    for (int i = 0; i < l->nbufs; i++)
        l->bufs[i]->state = BB_FREE;
    l->cur = NULL;
    l->running = 0;
    l->stopping = 0;
}

void sl__buf_data_free(const sl_loader_t *l, void *p)
{
    if (p && l->opt.buffer_free)
        l->opt.buffer_free(p, l->opt.buffer_ctx);
    else
        free(p);
}

static void buf_free(const sl_loader_t *l, bbuf_t *bb)
{
    sl__buf_data_free(l, bb->pub.data);
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
    sl__collector_stop(l->coll); /* first: it reads the pipeline */
    sl__loader_sched_free(l);
    if (l->readers && l->decoders && l->free_items && l->decode_q)
        stop_pipeline(l);
    sl__workers_destroy(l->readers);
    sl__workers_destroy(l->decoders);
    sl__queue_destroy(l->free_items);
    sl__queue_destroy(l->decode_q);
    for (int i = 0; i < SL_ITEMS; i++)
        sl__bytes_free(&l->items[i].data);
    for (int i = 0; i < SL_WORKERS_MAX; i++) {
        sl__bytes_free(&l->rscratch[i]);
        sl__scratch_destroy(l->dscratch[i]);
    }
    for (int i = 0; i < l->nbufs; i++)
        buf_free(l, l->bufs[i]);
    free(l->bufs);
    for (int64_t i = 0; i < l->nskips; i++)
        free(l->skips[i]);
    free(l->skips);
    free(l->perm[0]);
    free(l->perm[1]);
    sl__source_close(l->src);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_ready);
    sl__throttle_destroy(&l->thr);
    free(l);
}

const char *sl_loader_last_error(const sl_loader_t *l)
{
    return l ? l->errmsg : tl_create_err;
}

int64_t sl_loader_num_samples(const sl_loader_t *l)
{
    return sl__source_count(l->src);
}

int sl_loader_num_classes(const sl_loader_t *l)
{
    return sl__source_num_classes(l->src);
}

const char *sl_loader_class_name(const sl_loader_t *l, int i)
{
    return sl__source_class_name(l->src, i);
}

int64_t sl_loader_batches_per_epoch(const sl_loader_t *l)
{
    return l->smp.nbatches;
}

size_t sl_loader_batch_bytes(const sl_loader_t *l)
{
    return l->batch_bytes;
}

int sl_loader_start(sl_loader_t *l, const sl_position_t *pos)
{
    if (!l)
        return SL_EINVAL;
    int64_t epoch = pos ? pos->epoch : 0, batch = pos ? pos->batch : 0;
    if (epoch < 0 || batch < 0 || batch > l->smp.nbatches)
        return sl__fail(l->errmsg, sizeof l->errmsg, SL_ERANGE,
                        "position epoch %lld batch %lld is outside 0..%lld "
                        "batches",
                        (long long)epoch, (long long)batch,
                        (long long)l->smp.nbatches);
    for (int i = 0; i < l->nbufs; i++)
        if (l->bufs[i]->state == BB_HELD)
            return sl__fail(l->errmsg, sizeof l->errmsg, SL_ESTATE,
                            "a batch is still held: release it first");
    stop_pipeline(l);
    int64_t nb = l->smp.nbatches;
    l->start_g = l->claim_g = l->next_g = epoch * nb + batch;
    l->end_g = (epoch + l->opt.epochs) * nb;
    l->handed = 0;
    l->fatal = 0;
    l->errmsg[0] = 0;
    l->running = 1;
    int rc = sl__workers_set(l->readers, l->read_threads);
    if (!rc)
        rc = sl__workers_set(l->decoders, l->decode_threads);
    if (rc) {
        stop_pipeline(l);
        return sl__fail(l->errmsg, sizeof l->errmsg, rc,
                        "could not start worker threads");
    }
    return 0;
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
    if (!l || !out)
        return SL_EINVAL;
    *out = NULL;
    int64_t t0 = sl__now_ns();
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->fatal) {
            rc = l->fatal;
            break;
        }
        if (!l->running) {
            rc = sl__fail(l->errmsg, sizeof l->errmsg, SL_ESTATE,
                          "sl_loader_start was not called");
            break;
        }
        if (l->handed >= l->end_g - l->start_g) {
            rc = SL_EEND;
            break;
        }
        bbuf_t *bb = ready_batch(l);
        if (bb) {
            if (bb->rc) {
                rc = l->fatal = bb->rc;
                snprintf(l->errmsg, sizeof l->errmsg, "%s", bb->err);
                break;
            }
            l->handed++;
            if (!l->opt.unordered)
                l->next_g++;
            if (bb->pub.n == 0) { /* every sample skipped */
                bb->state = BB_FREE;
                pthread_cond_broadcast(&l->cv_work);
                continue;
            }
            bb->state = BB_HELD;
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
        if (all_held(l)) {
            rc = sl__fail(l->errmsg, sizeof l->errmsg, SL_ESTATE,
                          "every batch buffer (%d) is held by the consumer: "
                          "release batches or raise the prefetch depth",
                          l->nbufs);
            break;
        }
        pthread_cond_wait(&l->cv_ready, &l->mu);
    }
    l->stats.wait_ns += sl__now_ns() - t0;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void sl_loader_release(sl_loader_t *l, const sl_batch_t *b)
{
    if (!l || !b)
        return;
    bbuf_t *bb = (bbuf_t *)b;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nbufs; i++) {
        if (l->bufs[i] != bb)
            continue;
        if (bb->state == BB_HELD) {
            if (l->nbufs > l->prefetch) { /* the depth was lowered */
                l->bufs[i] = l->bufs[--l->nbufs];
                buf_free(l, bb);
            } else {
                bb->state = BB_FREE;
            }
            pthread_cond_broadcast(&l->cv_work);
        }
        break;
    }
    pthread_mutex_unlock(&l->mu);
}

int sl_loader_set(sl_loader_t *l, sl_param_t p, int64_t value)
{
    if (!l)
        return SL_EINVAL;
    if (value == SL_AUTOTUNE) {
        int64_t d;
        sl_loader_get(l, SL_PARAM_DECODE_THREADS, &d);
        value = knob_default(p, (int)d);
    }
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    switch (p) {
    case SL_PARAM_READ_THREADS:
    case SL_PARAM_DECODE_THREADS:
        rc = sl__limits_check(
            &l->lim, p == SL_PARAM_READ_THREADS ? SL_KNOB_READ : SL_KNOB_DECODE,
            value);
        if (rc)
            break;
        if (p == SL_PARAM_READ_THREADS)
            l->read_threads = (int)value;
        else
            l->decode_threads = (int)value;
        break;
    case SL_PARAM_PREFETCH:
        if ((rc = sl__limits_check(&l->lim, SL_KNOB_PREFETCH, value)))
            break;
        l->prefetch = (int)value;
        for (int i = 0; i < l->nbufs && l->nbufs > l->prefetch;) {
            if (l->bufs[i]->state == BB_FREE) {
                buf_free(l, l->bufs[i]);
                l->bufs[i] = l->bufs[--l->nbufs];
            } else {
                i++;
            }
        }
        pthread_cond_broadcast(&l->cv_work);
        break;
    case SL_PARAM_READ_LATENCY_US: /* lock order: mu, then the throttle's */
        if (value < 0 || value > SL_THROTTLE_MAX_LATENCY_US)
            rc = SL_ERANGE;
        else
            sl__throttle_set_latency(&l->thr, value);
        break;
    case SL_PARAM_READ_BYTES_PER_S:
        if (value < 0)
            rc = SL_ERANGE;
        else
            sl__throttle_set_rate(&l->thr, value);
        break;
    default:
        rc = SL_EINVAL;
    }
    int running = l->running;
    if (rc)
        sl__fail(l->errmsg, sizeof l->errmsg, rc, "bad knob %d = %lld", (int)p,
                 (long long)value);
    pthread_mutex_unlock(&l->mu);
    /* The pool lock is never taken under mu (lock order, loader_internal.h).
     */
    if (!rc && running && p == SL_PARAM_READ_THREADS)
        rc = sl__workers_set(l->readers, (int)value);
    if (!rc && running && p == SL_PARAM_DECODE_THREADS)
        rc = sl__workers_set(l->decoders, (int)value);
    return rc;
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
    else if (p == SL_PARAM_READ_LATENCY_US)
        *value = sl__throttle_latency_us(&m->thr);
    else if (p == SL_PARAM_READ_BYTES_PER_S)
        *value = sl__throttle_rate(&m->thr);
    else
        rc = SL_EINVAL;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int sl_loader_position(const sl_loader_t *l, sl_position_t *pos)
{
    if (!l || !pos)
        return SL_EINVAL;
    sl_loader_t *m = (sl_loader_t *)l;
    pthread_mutex_lock(&m->mu);
    int64_t g = m->start_g + m->handed, nb = m->smp.nbatches;
    pthread_mutex_unlock(&m->mu);
    pos->epoch = g / nb;
    pos->batch = g % nb;
    return 0;
}

int sl_loader_stats(const sl_loader_t *l, sl_stats_t *st)
{
    if (!l || !st)
        return SL_EINVAL;
    sl_loader_t *m = (sl_loader_t *)l;
    pthread_mutex_lock(&m->mu);
    *st = m->stats;
    pthread_mutex_unlock(&m->mu);
    st->bytes_read = atomic_load(&m->bytes_read);
    return 0;
}

int64_t sl_loader_skipped_count(const sl_loader_t *l)
{
    sl_loader_t *m = (sl_loader_t *)l;
    pthread_mutex_lock(&m->mu);
    int64_t n = m->stats.errors_skipped;
    pthread_mutex_unlock(&m->mu);
    return n;
}

const char *sl_loader_skipped_message(const sl_loader_t *l, int64_t i)
{
    sl_loader_t *m = (sl_loader_t *)l;
    pthread_mutex_lock(&m->mu);
    const char *s = i >= 0 && i < m->nskips ? m->skips[i] : NULL;
    pthread_mutex_unlock(&m->mu);
    return s;
}

int sl_loader_snapshot(const sl_loader_t *l, sl_snapshot_t *out)
{
    if (!l || !out)
        return SL_EINVAL;
    if (!l->coll)
        return SL_ESTATE;
    return sl__collector_latest(l->coll, out);
}

int sl_loader_snapshots(const sl_loader_t *l, sl_snapshot_t *out, int max)
{
    if (!l || !out || max < 0)
        return SL_EINVAL;
    if (!l->coll)
        return SL_ESTATE;
    return sl__collector_recent(l->coll, out, max);
}
