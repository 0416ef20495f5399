/* The image loader's telemetry: the collector's view of the pipeline and
 * the public snapshot calls. */
#include <stdio.h>
#include <string.h>

#include "base/abi.h"
#include "core/options.h"
#include "gpu/cuda_stage.h"
#include "loader_internal.h"
#include "sluice/telemetry.h"

/* The collector's view of the pipeline (telemetry never includes exec). */
void sl__loader_pipe_sample(void *arg, sl__pipe_sample_t *o)
{
    sl_loader_t *l = arg;
    pthread_mutex_lock(&l->mu);
    sl__pipe_sample_begin(o, l->stats.samples, l->stats.batches,
                          l->stats.errors_skipped, l->stats.wait_ns,
                          l->wait_since_ns, sl__now_ns());
    o->lat_sum_ns = l->lat_sum_ns;
    o->lat_count = l->lat_count;
    o->read_workers = l->running ? l->read_threads : 0;
    o->decode_workers = l->running ? l->decode_threads : 0;
    o->read_capacity = l->nitems;
    o->read_inflight = l->nitems - (int)sl__queue_len(l->free_items);
    o->decode_queue = (int)sl__queue_len(l->decode_q);
    o->decode_capacity = SL_ITEMS_QUEUED;
    o->prefetch = l->prefetch;
    o->io_async = l->async;
    o->io_depth = l->running ? sl__loader_io_depth(l) : 0;
    o->reads_in_flight = atomic_load(&l->reads_in_flight);
    sl__sched_glue_sample(&l->sched, o);
    for (int i = 0; i < l->nbufs; i++) {
        o->batches_ready += l->bufs[i]->state == BB_READY;
        o->batches_filling += l->bufs[i]->state == BB_FILLING;
    }
    /* placement (the test hook may change it before a start: under mu) */
    o->placement_present = 1;
    snprintf(o->placement, sizeof o->placement, "%s",
             sl__placement_name(l->place.asked));
    o->placement_gpu = l->place.gpu;
    memcpy(o->gpu_refused_why, l->gpu_refused_why, sizeof o->gpu_refused_why);
    o->gpu_share = atomic_load(&l->gpu_share);
    o->gpu_samples = atomic_load(&l->gpu_items);
    o->gpu_refused = atomic_load(&l->gpu_refused);
    o->gpu_stage = l->stage != NULL;
    o->gpu_busy_ns = sl__busy_ns(&l->gpu_busy, sl__now_ns());
    o->gpu_cpu_ns = o->gpu_handoff_ns = atomic_load(&l->gpu_handoff_ns);
    o->gpu_roi = -1; /* a stage the loader did not make (tests') */
    o->gpu_bytes = o->gpu_nvjpeg_bytes = -1;
    if (l->stage && l->stage_owned) {
        sl__cuda_stage_stats_t cs;
        sl__cuda_stage_stats(l->stage, &cs);
        o->gpu_roi = cs.roi;
        o->gpu_cpu_ns += (int64_t)(cs.cpu_s * 1e9);
        o->gpu_px_images = cs.px_images;
        o->gpu_px_decoded = cs.px_decoded;
        o->gpu_bytes = (int64_t)cs.dev_bytes;
        for (int i = 0; i < l->nbufs; i++)
            o->gpu_bytes += l->bufs[i]->dev ? (int64_t)l->batch_bytes : 0;
        for (const bbuf_t *bb = l->parked; bb; bb = bb->parked_next)
            o->gpu_bytes += bb->dev ? (int64_t)l->batch_bytes : 0; /* held */
        o->gpu_nvjpeg_bytes = (int64_t)sl__cuda_stage_nvjpeg_bytes();
    }
    /* the reason, cut to the snapshot's field */
    snprintf(o->placement_why, sizeof o->placement_why, "%.*s",
             (int)sizeof o->placement_why - 1, l->place.why);
    pthread_mutex_unlock(&l->mu);
    o->bytes_read = atomic_load(&l->bytes_read);
    o->read_busy_ns = atomic_load(&l->read_busy_ns);
    o->read_items = atomic_load(&l->read_items);
    o->decode_busy_ns = atomic_load(&l->decode_busy_ns);
    o->decode_items = atomic_load(&l->decode_items);
    o->requests = atomic_load(&l->req_n);
    o->request_records = atomic_load(&l->req_records);
    o->request_fallbacks = atomic_load(&l->req_fallbacks);
    sl__loader_cache_sample(l, o);
}

SL__ABI_INIT_PAIR(sl_snapshot_init, sl_snapshot_t)

int sl_loader_snapshot(const sl_loader_t *l, sl_snapshot_t *out)
{
    return l ? sl__collector_copy_latest(l->coll, out) : SL_EINVAL;
}

int sl_loader_snapshots(const sl_loader_t *l, sl_snapshot_t *out, int max)
{
    return l ? sl__collector_copy_recent(l->coll, out, max) : SL_EINVAL;
}
