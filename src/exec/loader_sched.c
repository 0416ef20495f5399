/* The image loader's side of the scheduler: its budgets at create, and
 * its knobs for the glue both loaders share (core/sched_glue.h), which
 * runs the tick every few telemetry periods and applies each change
 * through the same sl_loader_set any user has. The rules themselves live
 * in sched/: the budget rule in limits.h, the policies and the tick in
 * policy.h. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "gpu/cuda_stage.h"
#include "loader_internal.h"
#include "telemetry/machine.h"

_Static_assert(SL_WORKERS_MAX == SL_KNOB_MAX_THREADS,
               "the budget rule's worker limit is the engine's");

/* No GPU stage after all, for `why`: placement gpu fails with `code`
 * naming it; auto gives the stage up (where made) and decodes on the
 * CPU, saying why (placement.why). */
static int give_up_stage(sl_loader_t *l, int code, const char *why, char *err,
                         size_t errlen)
{
    if (l->place.asked == SL_PLACEMENT_GPU)
        return sl__fail(err, errlen, code, "placement gpu: %s", why);
    if (l->stage && l->stage_owned)
        l->stage->destroy(l->stage);
    l->stage = NULL;
    l->stage_owned = 0;
    l->place.gpu = 0;
    snprintf(l->place.why, sizeof l->place.why, "auto: %s", why);
    return 0;
}

/* A memory budget pays for the GPU stage's pinned host memory: it comes
 * off the batch buffers' share (sl__limits_charge). */
static int charge_stage(sl_loader_t *l, const sl_options_t *given,
                        sl__knobs_t *k, char *err, size_t errlen)
{
    if (!l->stage || !l->stage_owned || given->max_memory_bytes <= 0)
        return 0;
    sl__cuda_stage_stats_t st;
    sl__cuda_stage_stats(l->stage, &st);
    if (!sl__limits_charge(&l->lim, (int64_t)st.host_bytes, l->batch_bytes, k))
        return 0;
    char why[200];
    snprintf(why, sizeof why,
             "the memory budget (%lld B) holds no batch of %zu B beside the "
             "GPU stage's %zu B of pinned memory",
             (long long)given->max_memory_bytes, l->batch_bytes, st.host_bytes);
    return give_up_stage(l, SL_ERANGE, why, err, errlen);
}

/* A GPU memory budget holds the device batches beside the stage: what
 * the stage's slots leave (sl__limits_device). */
static int charge_device(sl_loader_t *l, const sl_options_t *given,
                         sl__knobs_t *k, char *err, size_t errlen)
{
    if (!l->stage || !l->stage_owned || !given->device_batches ||
        given->gpu_memory_bytes <= 0)
        return 0;
    sl__cuda_stage_stats_t st;
    sl__cuda_stage_stats(l->stage, &st);
    if (!sl__limits_device(&l->lim,
                           given->gpu_memory_bytes - (int64_t)st.dev_bytes,
                           l->batch_bytes, k))
        return 0;
    char why[200];
    snprintf(why, sizeof why,
             "gpu_memory_bytes (%lld B) holds no device batch of %zu B "
             "beside the GPU stage's %zu B",
             (long long)given->gpu_memory_bytes, l->batch_bytes, st.dev_bytes);
    return give_up_stage(l, SL_ERANGE, why, err, errlen);
}

/* The descriptors left for reads (sched/limits.h: sl__limits_fd_reads),
 * with the limit and the files open now for the warning; INT_MAX where
 * there is no limit. */
static int fd_room(unsigned long long *limit, int *open_now)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
        return INT_MAX;
    *limit = (unsigned long long)r.rlim_cur;
    *open_now = sl__fds_open();
    return sl__limits_fd_reads((int64_t)r.rlim_cur, *open_now);
}

/* Each read in flight holds a descriptor (an ImageFolder's file, a
 * connection at a URL) and, with reads in flight, each read thread its
 * ring: the read threads, an I/O depth and the
 * scheduler's bounds for both stay within `fit` (sched/limits.h). A value
 * the user gave above it is lowered, with a warning naming the limit and
 * `each` (what holds a file): the run goes on with fewer reads instead of
 * failing at its first batch on EMFILE. knob: "read_threads" or
 * "io_depth". */
static int fit_open_files(sl_loader_t *l, const char *knob, int asked,
                          int *value, int *bound, int fit, const char *each,
                          unsigned long long limit, int open_now)
{
    if (*bound > fit)
        *bound = fit;
    if (*value <= fit)
        return 0;
    if (asked)
        sl__msglog_add(&l->skips,
                       "warning: %s %d lowered to %d: the open-files limit "
                       "(ulimit -n) is %llu, %d files are open and %s (%d "
                       "kept for the run's other files)",
                       knob, *value, fit, limit, open_now, each,
                       SL_LIMITS_FD_SPARE);
    *value = fit;
    return 1;
}

int sl__loader_budgets(sl_loader_t *l, const sl_options_t *given, char *err,
                       size_t errlen)
{
    sl__knobs_t k;
    int rc = sl__limits_make(given, sl__cpus_usable(), l->batch_bytes, &l->lim,
                             &k, err, errlen);
    if (rc)
        return rc;
    const char *why = "";
    int allowed = given->io_depth != SL_IO_DEPTH_OFF;
    /* A source at URLs needs no io_uring: its reads go through libcurl's
     * multi interface (exec/aread), and local files, if any, inline. */
    int remote = sl__source_reads_remote(l->src);
    l->async = allowed && (sl__uring_probe(&why) || remote);
    unsigned long long nofile = 0;
    int open_now = 0, room = fd_room(&nofile, &open_now);
    int opens = sl__source_read_holds_fd(l->src);
    fit_open_files(l, "read_threads", given->read_threads > 0, &k.read_threads,
                   &l->lim.max_read,
                   sl__limits_fd_threads(room, l->async, opens),
                   !l->async ? "each read in flight holds one (a file, or a "
                               "connection at a URL)"
                   : opens   ? "each read thread holds two (its io_uring "
                               "ring, its read's file or connection)"
                             : "each read thread holds its io_uring ring",
                   nofile, open_now);
    l->async_why = !allowed ? "off (io_depth SL_IO_DEPTH_OFF)"
                   : remote ? ""
                            : why;
    /* Coalesced reads: only for records at URLs read in flight. */
    l->coalesce_max = l->async && remote && l->opt.coalesce_bytes > 0
                          ? (uint64_t)l->opt.coalesce_bytes
                          : 0;
    int share_asked = given->gpu_share != SL_AUTOTUNE && given->gpu_share != 0;
    /* auto without a share: the scheduler places (sched/place.h) where a
     * policy tunes and the driver sees a GPU. */
    int places = given->policy != SL_POLICY_STATIC && !share_asked &&
                 given->placement == SL_PLACEMENT_AUTO;
    rc = sl__placement_resolve(given->placement, share_asked, places,
                               places ? sl__gpu_count() : 0, &l->place, err,
                               errlen);
    /* The decoded tier of the sample cache holds the CPU path's pixels
     * and fills from its decodes: with it every sample is the CPU's (a
     * hit on the GPU's slots would change path with the timing) — asked
     * for, even of no bytes yet: cache_bytes may grow while it runs. */
    if (!rc && l->place.gpu && given->cache_decoded)
        rc = give_up_stage(l, SL_EUNSUPPORTED,
                           "no GPU stage: the decoded sample cache "
                           "(cache_decoded) keeps every sample on the CPU "
                           "path",
                           err, errlen);
    if (!rc)
        rc = sl__loader_gpu_open(l, err, errlen);
    if (!rc)
        rc = charge_stage(l, given, &k, err, errlen);
    if (!rc)
        rc = charge_device(l, given, &k, err, errlen);
    if (rc)
        return rc;
    /* Device batches: only in the GPU stage's memory. */
    l->devb = given->device_batches && l->stage && l->stage->dev_alloc;
    if (given->device_batches && !l->devb)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "device_batches: the GPU stage is not in use: %s",
                        l->stage          ? "it has no device memory"
                        : l->place.why[0] ? l->place.why
                                          : "placement cpu");
    /* With the GPU stage in use the CPU path decodes without DCT scaling:
     * the nearest it comes to the GPU's pixels, so which path a sample
     * took moves it only by the decoders' rounding (docs/DESIGN.md "GPU
     * stage": the contract of placement auto). */
    if (l->place.gpu)
        l->xf.dct_scale = 0;
    l->lim.max_gpu_share = l->place.gpu ? SL__GPU_SHARE_MAX : 0;
    l->lim.tune_gpu_share = l->place.gpu && places;
    /* Unset (0 or SL_AUTOTUNE): placement gpu puts every sample there,
     * auto none. */
    int share = share_asked ? given->gpu_share
                : l->place.gpu && given->placement == SL_PLACEMENT_GPU
                    ? SL__GPU_SHARE_MAX
                    : 0;
    if (share < 0 || share > l->lim.max_gpu_share)
        return sl__fail(err, errlen, SL_EINVAL,
                        "gpu_share %d: 0..%d per mille%s%s", given->gpu_share,
                        l->lim.max_gpu_share,
                        l->place.gpu ? "" : ", the GPU stage is not in use: ",
                        l->place.gpu      ? ""
                        : l->place.why[0] ? l->place.why
                                          : "placement cpu");
    atomic_store(&l->gpu_share, share);
    l->opt.gpu_share = share;
    int depth = sl__limits_io_depth(given, l->async, remote, &k, &l->lim);
    if (depth > 0)
        fit_open_files(l, "io_depth", given->io_depth > 0, &depth,
                       &l->lim.max_depth,
                       sl__limits_fd_depth(room, k.read_threads, opens),
                       "each read in flight holds one, besides each read "
                       "thread's io_uring ring",
                       nofile, open_now);
    if (l->lim.read_depth && l->lim.max_read > l->lim.max_depth)
        l->lim.max_read = l->lim.max_depth; /* the depth is the read knob */
    atomic_store(&l->io_depth, depth);
    l->opt.io_depth = depth;
    l->opt.read_threads = k.read_threads;
    l->opt.decode_threads = k.decode_threads;
    l->opt.prefetch = k.prefetch;
    return 0;
}

/* The stage's part of gpu_memory_bytes: all of it, or with device
 * batches half (at most the stage's default), the rest theirs; 0 (no
 * budget): the stage's default. */
static size_t stage_budget(const sl_options_t *o)
{
    int64_t g = o->gpu_memory_bytes;
    if (g <= 0 || !o->device_batches)
        return (size_t)(g > 0 ? g : 0);
    return g / 2 < (int64_t)SL__GPU_BUDGET_DEFAULT ? (size_t)(g / 2)
                                                   : SL__GPU_BUDGET_DEFAULT;
}

int sl__loader_gpu_open(sl_loader_t *l, char *err, size_t errlen)
{
    if (!l->place.gpu || l->stage)
        return 0;
    char why[sizeof l->place.why - 64], no[sizeof why + 16];
    l->stage = sl__cuda_stage_create(&l->xf, l->sample_bytes, l->opt.gpu_device,
                                     stage_budget(&l->opt), why, sizeof why);
    if (l->stage) {
        l->stage_owned = 1;
        return 0;
    }
    snprintf(no, sizeof no, "no GPU stage: %s", why);
    return give_up_stage(l, SL_EUNSUPPORTED, no, err, errlen);
}

static sl_param_t knob_param(const sl_loader_t *l, int knob)
{
    return knob == SL_KNOB_READ && l->lim.read_depth ? SL_PARAM_IO_DEPTH
           : knob == SL_KNOB_READ                    ? SL_PARAM_READ_THREADS
           : knob == SL_KNOB_DECODE                  ? SL_PARAM_DECODE_THREADS
           : knob == SL_KNOB_GPU_SHARE               ? SL_PARAM_GPU_SHARE
                                                     : SL_PARAM_PREFETCH;
}

/* Under mu: the knobs in force, and whether the pipeline runs. */
static int knobs(void *self, sl__knobs_t *cur)
{
    sl_loader_t *l = self;
    int reads = l->lim.read_depth ? sl__loader_io_depth(l) : l->read_threads;
    *cur = (sl__knobs_t){reads, l->decode_threads, l->prefetch,
                         atomic_load(&l->gpu_share)};
    return l->running && !l->stopping;
}

static int set(void *self, int knob, int value)
{
    return sl_loader_set(self, knob_param(self, knob), value);
}

static void on_tick(void *arg, struct sl__collector *c)
{
    sl__sched_glue_tick(&((sl_loader_t *)arg)->sched, c);
}

int sl__loader_sched_init(sl_loader_t *l, struct sl__collector_opts *co,
                          char *err, size_t errlen)
{
    int rc = sl__sched_glue_init(&l->sched, &l->opt, &l->lim, &l->mu, l, knobs,
                                 set, err, errlen);
    if (!rc && sl__sched_glue_active(&l->sched))
        co->on_tick = on_tick;
    return rc;
}

void sl__loader_sched_free(sl_loader_t *l)
{
    sl__sched_glue_free(&l->sched);
}
