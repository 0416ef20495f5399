/* The image loader's options: defaults, checks, the transform they make,
 * and the public sl_options_init / sl_loader_options. */
#include <stdio.h>
#include <string.h>

#include "base/abi.h"
#include "core/options.h"
#include "loader_internal.h"
#include "sched/limits.h"
#include "telemetry/machine.h"

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

SL__ABI_INIT_PAIR(sl_options_init, sl_options_t)

int sl__knob_default(sl_param_t p, int decode_threads)
{
    return sl__limits_knob_default(p == SL_PARAM_READ_THREADS ? SL_KNOB_READ
                                   : p == SL_PARAM_DECODE_THREADS
                                       ? SL_KNOB_DECODE
                                       : SL_KNOB_PREFETCH,
                                   sl__cpus_usable(), decode_threads);
}
void sl__loader_default_memory(sl_options_t *o, char *why, size_t cap,
                               char *warn, size_t wcap)
{
    why[0] = warn[0] = 0;
    if (o->max_memory_bytes < 0)
        return; /* refused by sl__loader_resolve */
    uint64_t lim = sl__read_cgroup_memory("/");
    if (o->max_memory_bytes > 0) {
        /* The user's budget stands, but past the limit the OOM killer
         * ends the process (exit 137, no message) before the budget
         * refuses anything: said, since the default would have held. */
        if (lim > 0 && (uint64_t)o->max_memory_bytes > lim)
            snprintf(warn, wcap,
                     "max_memory_bytes %.0f MB is more than the cgroup's "
                     "memory limit of %.0f MB: past the limit the OOM "
                     "killer ends the process before the budget refuses "
                     "a sample (without a budget given: 1/%d of the limit)",
                     (double)o->max_memory_bytes / (1 << 20),
                     (double)lim / (1 << 20), SL_LIMITS_CGROUP_SHARE);
        return;
    }
    o->max_memory_bytes = sl__limits_default_memory(
        lim, o->cache_bytes, "max_memory_bytes (--max-memory)", why, cap);
}

int sl__loader_resolve(sl_options_t *o, char *err, size_t errlen)
{
    sl__common_opts_t c = {&o->world_size, &o->rank, &o->epochs, &o->on_error,
                           &o->policy};
    int rc = sl__opts_common(&c, err, errlen);
    if (rc)
        return rc;
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
    if (o->read_threads == 0 || o->read_threads == SL_AUTOTUNE)
        o->read_threads = sl__knob_default(SL_PARAM_READ_THREADS, 0);
    if (o->decode_threads == 0 || o->decode_threads == SL_AUTOTUNE)
        o->decode_threads = sl__knob_default(SL_PARAM_DECODE_THREADS, 0);
    if (o->prefetch == 0 || o->prefetch == SL_AUTOTUNE)
        o->prefetch = sl__knob_default(SL_PARAM_PREFETCH, o->decode_threads);
    if (o->telemetry_ms == 0)
        o->telemetry_ms = 100;
    if (!o->mean[0] && !o->mean[1] && !o->mean[2])
        memcpy(o->mean, imagenet_mean, sizeof o->mean);
    if (!o->std[0] && !o->std[1] && !o->std[2])
        memcpy(o->std, imagenet_std, sizeof o->std);
    if (o->batch_size < 1 || o->image_size < 1 || o->image_size > 8192 ||
        o->resize_size < o->image_size)
        return sl__fail(err, errlen, SL_EINVAL,
                        "bad sizes: batch %d, image %d, resize %d",
                        o->batch_size, o->image_size, o->resize_size);
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
    if (o->io_depth < SL_IO_DEPTH_OFF || o->io_depth > 65536)
        return sl__fail(err, errlen, SL_EINVAL,
                        "io_depth %d: 1..65536, 0 / SL_AUTOTUNE or "
                        "SL_IO_DEPTH_OFF",
                        o->io_depth);
    if (o->unordered != 0 && o->unordered != 1)
        return sl__fail(err, errlen, SL_EINVAL, "unordered %d: 0 or 1",
                        o->unordered);
    if (o->max_threads < 0 || o->max_memory_bytes < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "max_threads %d, max_memory_bytes %lld: >= 0 (0: no "
                        "budget)",
                        o->max_threads, (long long)o->max_memory_bytes);
    if (!o->buffer_alloc != !o->buffer_free)
        return sl__fail(err, errlen, SL_EINVAL,
                        "buffer_alloc and buffer_free: both or neither (the "
                        "buffers an allocator made need its free)");
    if (o->metrics_port < 0 || o->metrics_port > 65535)
        return sl__fail(err, errlen, SL_EINVAL, "metrics_port %d: 1..65535",
                        o->metrics_port);
    if (o->metrics_port && o->telemetry_ms < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "metrics_port %d needs the collector: telemetry_ms "
                        "%d < 0 turns it off",
                        o->metrics_port, o->telemetry_ms);
    if (o->gpu_device < 0)
        return sl__fail(err, errlen, SL_EINVAL, "gpu_device %d < 0",
                        o->gpu_device);
    if (o->device_batches != 0 && o->device_batches != 1)
        return sl__fail(err, errlen, SL_EINVAL, "device_batches %d: 0 or 1",
                        o->device_batches);
    if (o->gpu_memory_bytes < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "gpu_memory_bytes %lld < 0 (0: the default)",
                        (long long)o->gpu_memory_bytes);
    if (o->coalesce_bytes == 0)
        o->coalesce_bytes = SL_COALESCE_DEFAULT;
    else if (o->coalesce_bytes < 0)
        o->coalesce_bytes = -1; /* off */
    else if (o->coalesce_bytes > (1LL << 30))
        return sl__fail(err, errlen, SL_EINVAL,
                        "coalesce_bytes %lld: at most 1 GiB (< 0: off)",
                        (long long)o->coalesce_bytes);
    if (o->cache_bytes < 0 ||
        (o->cache_policy != SL_CACHE_MINIO && o->cache_policy != SL_CACHE_LRU))
        return sl__fail(err, errlen, SL_EINVAL,
                        "cache_bytes %lld < 0 or unknown cache_policy %d",
                        (long long)o->cache_bytes, o->cache_policy);
    if (o->cache_codec < SL_CACHE_CODEC_AUTO ||
        o->cache_codec > SL_CACHE_CODEC_ZSTD19)
        return sl__fail(err, errlen, SL_EINVAL, "unknown cache_codec %d",
                        o->cache_codec);
    int dir = o->cache_dir && o->cache_dir[0];
    if (o->cache_disk_bytes < 0 || dir != (o->cache_disk_bytes > 0))
        return sl__fail(err, errlen, SL_EINVAL,
                        "cache_dir %s with cache_disk_bytes %lld: the disk "
                        "tier needs both (a directory and bytes > 0)",
                        dir ? o->cache_dir : "(none)",
                        (long long)o->cache_disk_bytes);
    if (dir && (o->cache_decoded || o->cache_policy != SL_CACHE_MINIO))
        return sl__fail(err, errlen, SL_EINVAL,
                        "cache_dir %s: the disk tier holds encoded samples "
                        "under the MinIO policy: not with %s",
                        o->cache_dir,
                        o->cache_decoded ? "cache_decoded"
                                         : "cache_policy lru");
    /* The decoded tier's pixels are the full-size decode: every sample,
     * hit or not, takes the no-DCT-scale path (ops/decoded.c). */
    if (o->cache_decoded)
        o->no_dct_scale = 1;
    if (o->read_threads < 1 || o->read_threads > SL__THREADS_MAX ||
        o->decode_threads < 1 || o->decode_threads > SL__THREADS_MAX ||
        o->prefetch < 1 || o->prefetch > SL__PREFETCH_MAX)
        return sl__fail(err, errlen, SL_EINVAL,
                        "bad read %d / decode %d threads / prefetch %d",
                        o->read_threads, o->decode_threads, o->prefetch);
    return 0;
}

void sl__loader_xform(const sl_options_t *o, sl__xform_t *x)
{
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

int sl_loader_options(const sl_loader_t *l, sl_options_t *out)
{
    if (!l || !out)
        return SL_EINVAL;
    return sl__abi_out(out, &l->opt, sizeof l->opt, SL__OPTIONS_V1_SIZE);
}
