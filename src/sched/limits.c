#include "sched/limits.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"

const char *sl__knob_name(int knob)
{
    return knob == SL_KNOB_READ          ? "read_threads"
           : knob == SL_KNOB_DECODE      ? "decode_threads"
           : knob == SL_KNOB_PREFETCH    ? "prefetch"
           : knob == SL_KNOB_DEPTH       ? "io_depth"
           : knob == SL_KNOB_GPU_SHARE   ? "gpu_share"
           : knob == SL_KNOB_CACHE       ? "cache_bytes"
           : knob == SL_KNOB_CACHE_CODEC ? "cache_codec"
                                         : "";
}

const char *sl__knob_label(int knob, int read_depth)
{
    return sl__knob_name(knob == SL_KNOB_READ && read_depth ? SL_KNOB_DEPTH
                                                            : knob);
}

int *sl__knob_ref(sl__knobs_t *k, int knob)
{
    return knob == SL_KNOB_READ        ? &k->read_threads
           : knob == SL_KNOB_DECODE    ? &k->decode_threads
           : knob == SL_KNOB_GPU_SHARE ? &k->gpu_share
                                       : &k->prefetch;
}

int sl__knob_get(const sl__knobs_t *k, int knob)
{
    return *sl__knob_ref((sl__knobs_t *)k, knob);
}

int sl__io_depth_budget(int ncpu)
{
    int d = 4 * ncpu;
    return d < SL_IO_DEPTH_MIN ? SL_IO_DEPTH_MIN : d > 256 ? 256 : d;
}

int sl__read_ahead_items(int max_read)
{
    return (max_read > 0 ? max_read : 1) + SL_ITEMS_QUEUED;
}

int sl__limits_fd_reads(int64_t nofile, int open_now)
{
    if (nofile <= 0 || nofile > INT_MAX)
        return INT_MAX;
    int64_t n = nofile - (open_now > 0 ? open_now : 0) - SL_LIMITS_FD_SPARE;
    return n < 1 ? 1 : (int)n;
}

int sl__limits_fd_threads(int room, int async, int opens)
{
    int each = (async ? 1 : 0) + (opens ? 1 : 0);
    if (room == INT_MAX || each == 0)
        return INT_MAX;
    return room / each < 1 ? 1 : room / each;
}

int sl__limits_fd_depth(int room, int threads, int opens)
{
    if (room == INT_MAX || !opens)
        return INT_MAX;
    return room - threads < 1 ? 1 : room - threads;
}

int64_t sl__limits_default_memory(uint64_t cgroup_limit, int64_t cache_bytes,
                                  const char *option, char *why, size_t cap)
{
    if (why && cap)
        why[0] = 0;
    if (cgroup_limit == 0)
        return 0;
    uint64_t b = cgroup_limit / SL_LIMITS_CGROUP_SHARE;
    if (cache_bytes > 0)
        b = (uint64_t)cache_bytes > cgroup_limit - b
                ? cgroup_limit
                : b + (uint64_t)cache_bytes;
    int64_t budget = b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
    char cache[80] = "";
    if (cache_bytes > 0)
        snprintf(cache, sizeof cache,
                 ", plus the cache's %.0f MB, at most the limit",
                 (double)cache_bytes / (1 << 20));
    if (why && cap && budget > 0)
        snprintf(why, cap,
                 " (the default: 1/%d of the cgroup's memory limit of %.0f "
                 "MB%s; %s sets another)",
                 SL_LIMITS_CGROUP_SHARE, (double)cgroup_limit / (1 << 20),
                 cache, option);
    return budget;
}

int sl__limits_knob_default(int knob, int ncpu, int decode_threads)
{
    if (knob == SL_KNOB_READ)
        return 1;
    if (knob == SL_KNOB_DECODE)
        return ncpu;
    return decode_threads * 2 < 2 ? 2 : decode_threads * 2;
}

int sl__limits_make(const sl_options_t *o, int ncpu, size_t batch_bytes,
                    sl__limits_t *lim, sl__knobs_t *start, char *err,
                    size_t errlen)
{
    return sl__limits_make_named(o, ncpu, batch_bytes, "reading and decoding",
                                 lim, start, err, errlen);
}

int sl__limits_make_named(const sl_options_t *o, int ncpu, size_t batch_bytes,
                          const char *what, sl__limits_t *lim,
                          sl__knobs_t *start, char *err, size_t errlen)
{
    memset(lim, 0, sizeof *lim);
    int tuned = o->policy != SL_POLICY_STATIC;
    lim->tune_read = tuned && o->read_threads <= 0;
    lim->tune_decode = tuned && o->decode_threads <= 0;
    lim->tune_prefetch = tuned && o->prefetch <= 0;
    sl__knobs_t *k = start;
    k->gpu_share = 0; /* the loader's placement sets it (loader_sched.c) */
    k->read_threads = o->read_threads > 0
                          ? o->read_threads
                          : sl__limits_knob_default(SL_KNOB_READ, ncpu, 0);
    k->decode_threads = o->decode_threads > 0
                            ? o->decode_threads
                            : sl__limits_knob_default(SL_KNOB_DECODE, ncpu, 0);
    k->prefetch = o->prefetch > 0
                      ? o->prefetch
                      : sl__limits_knob_default(SL_KNOB_PREFETCH, ncpu,
                                                k->decode_threads);

    lim->hard_threads = o->max_threads > 0;
    lim->max_threads = o->max_threads > 0 ? o->max_threads : 2 * ncpu;
    if (lim->max_threads < 2)
        lim->max_threads = 2;
    /* Without an explicit budget, what the user sets is the budget. */
    if (o->max_threads <= 0 && k->decode_threads + 1 > lim->max_threads)
        lim->max_threads = k->decode_threads + 1;
    lim->max_read = sl__io_depth_budget(ncpu);
    if (k->read_threads > lim->max_read)
        lim->max_read = k->read_threads;
    lim->max_decode = lim->max_threads - 1;
    if (lim->max_decode > SL_KNOB_MAX_THREADS)
        lim->max_decode = SL_KNOB_MAX_THREADS;
    lim->max_prefetch = k->prefetch * 4 > 16 ? k->prefetch * 4 : 16;
    lim->fit_prefetch = SL_KNOB_MAX_PREFETCH;
    lim->mem_read = SL_LIMITS_READ_MAX;
    lim->mem_decode = SL_LIMITS_DECODE_MAX;
    lim->mem_cache = o->cache_bytes > 0 ? o->cache_bytes : 0;
    lim->max_cache = INT64_MAX;
    if (o->max_memory_bytes > 0) {
        lim->hard_prefetch = 1;
        int64_t work = o->max_memory_bytes / 4;
        if (work < SL_LIMITS_MEM_RESERVE)
            work = SL_LIMITS_MEM_RESERVE;
        lim->mem_read = work / 4;
        lim->mem_decode = work - lim->mem_read;
        /* The cache's share comes off the top: what is left after it is
         * split as without a cache. */
        lim->max_cache = lim->mem_cache;
        int64_t room = o->max_memory_bytes - work - lim->mem_cache;
        lim->mem_batches = room > 0 ? room : 0;
        int64_t fit = room <= 0     ? 0
                      : batch_bytes ? room / (int64_t)batch_bytes
                                    : INT32_MAX;
        if (fit < 1)
            return sl__fail(err, errlen, SL_ERANGE,
                            "memory budget %lld B holds no batch of %zu B "
                            "(plus %lld MB for %s, %lld MB for the cache)",
                            (long long)o->max_memory_bytes, batch_bytes,
                            (long long)(work >> 20), what,
                            (long long)(lim->mem_cache >> 20));
        if (fit < lim->max_prefetch)
            lim->max_prefetch = (int)fit;
        if (fit < lim->fit_prefetch)
            lim->fit_prefetch = (int)fit;
        if (k->prefetch > fit)
            k->prefetch = (int)fit;
    }
    if (k->decode_threads + 1 > lim->max_threads) {
        if (!lim->tune_decode)
            return sl__fail(err, errlen, SL_ERANGE,
                            "%d decode threads + 1 for reading exceed the "
                            "thread budget of %d",
                            k->decode_threads, lim->max_threads);
        k->decode_threads = lim->max_threads - 1;
    }
    /* Calm sheds stop at the default: never below the static default. */
    lim->min_decode = lim->tune_decode ? k->decode_threads : 0;
    lim->max_depth = SL_IO_DEPTH_MAX;
    return 0;
}

/* Batch buffers within `room` bytes: lim->max_prefetch and
 * start->prefetch lowered to what fits; SL_ERANGE when not one does. */
static int fit_batches(sl__limits_t *lim, int64_t room, size_t batch_bytes,
                       sl__knobs_t *start)
{
    int64_t fit = room <= 0     ? 0
                  : batch_bytes ? room / (int64_t)batch_bytes
                                : INT32_MAX;
    if (fit < 1)
        return SL_ERANGE;
    if (fit < lim->max_prefetch)
        lim->max_prefetch = (int)fit;
    if (fit < lim->fit_prefetch)
        lim->fit_prefetch = (int)fit;
    if (start->prefetch > lim->max_prefetch)
        start->prefetch = lim->max_prefetch;
    return 0;
}

int sl__limits_charge(sl__limits_t *lim, int64_t bytes, size_t batch_bytes,
                      sl__knobs_t *start)
{
    if (lim->mem_batches <= 0 || bytes <= 0)
        return 0;
    int64_t room = lim->mem_batches - bytes;
    int rc = fit_batches(lim, room, batch_bytes, start);
    if (!rc)
        lim->mem_batches = room;
    return rc;
}

int sl__limits_device(sl__limits_t *lim, int64_t room, size_t batch_bytes,
                      sl__knobs_t *start)
{
    int rc = fit_batches(lim, room, batch_bytes, start);
    if (!rc)
        lim->hard_prefetch = 1;
    return rc;
}

_Static_assert(SL_IO_DEPTH_REMOTE_START <= SL_IO_DEPTH_MIN,
               "the remote start is within every depth budget");

int sl__limits_io_depth(const sl_options_t *o, int async, int remote,
                        const sl__knobs_t *start, sl__limits_t *lim)
{
    int64_t fit = lim->mem_read / SL_IO_DEPTH_BYTES;
    int d = fit < SL_IO_DEPTH_MAX ? (int)fit : SL_IO_DEPTH_MAX;
    if (d < lim->max_read)
        d = lim->max_read;
    if (o->io_depth > d)
        d = o->io_depth;
    lim->max_depth = d;
    lim->read_depth = 0;
    if (!async)
        return o->io_depth > 0 ? o->io_depth : 0;
    if (o->io_depth > 0) {
        lim->tune_read = 0; /* more threads would not add reads in flight */
        return o->io_depth;
    }
    if ((o->io_depth == 0 || o->io_depth == SL_AUTOTUNE) && lim->tune_read &&
        o->policy == SL_POLICY_HEURISTIC) {
        lim->read_depth = 1; /* the heuristic's read knob: the depth */
        lim->max_read = d;
        /* d >= SL_IO_DEPTH_MIN > SL_IO_DEPTH_REMOTE_START: within it. */
        return remote && start->read_threads < SL_IO_DEPTH_REMOTE_START
                   ? SL_IO_DEPTH_REMOTE_START
                   : start->read_threads;
    }
    return 0; /* follows the read threads */
}

int sl__limits_range(const sl__limits_t *lim, int knob, int64_t *min,
                     int64_t *max)
{
    *min = 1;
    switch (knob) {
    case SL_KNOB_READ:
        *max = SL_KNOB_MAX_THREADS;
        return 0;
    case SL_KNOB_DECODE:
        /* A thread budget the user gave holds for all: decode + 1 (the
         * read stage). Read threads are I/O depth: outside it. */
        *max = SL_KNOB_MAX_THREADS;
        if (lim->hard_threads && lim->max_threads - 1 < *max)
            *max = lim->max_threads - 1;
        return 0;
    case SL_KNOB_DEPTH:
        *max = lim->max_depth > 0 ? lim->max_depth : SL_IO_DEPTH_MAX;
        return 0;
    case SL_KNOB_CACHE:
        *min = 0;
        *max = lim->max_cache;
        return 0;
    case SL_KNOB_CACHE_CODEC:
        *min = SL_CACHE_CODEC_AUTO;
        *max = SL_CACHE_CODEC_ZSTD19;
        return 0;
    case SL_KNOB_GPU_SHARE:
        *min = 0;
        *max = lim->max_gpu_share;
        return 0;
    case SL_KNOB_PREFETCH:
        *max = SL_KNOB_MAX_PREFETCH;
        if (lim->hard_prefetch && lim->fit_prefetch < *max)
            *max = lim->fit_prefetch;
        return 0;
    default:
        return SL_EINVAL;
    }
}

int sl__limits_check(const sl__limits_t *lim, int knob, int64_t value)
{
    int64_t lo, hi;
    int rc = sl__limits_range(lim, knob, &lo, &hi);
    return rc ? rc : value < lo || value > hi ? SL_ERANGE : 0;
}

sl__limits_t sl__limits_plain(int max_threads, int max_read, int max_prefetch)
{
    sl__limits_t l = {.tune_read = 1,
                      .tune_decode = 1,
                      .tune_prefetch = 1,
                      .max_threads = max_threads,
                      .max_decode = max_threads - 1,
                      .max_read = max_read,
                      .max_prefetch = max_prefetch,
                      .fit_prefetch = SL_KNOB_MAX_PREFETCH};
    return l;
}
