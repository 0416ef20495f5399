/* cache/pick: the codec a cache stores new entries with, chosen at run time
 * (issue 15 item 5) from what was measured: each candidate's ratio and its
 * compress / decompress time per raw byte on the first entries offered
 * (a probe), the mean entry, how many samples there are, the cache's
 * limit, and what a miss costs now (the loader's decode + read time per
 * sample, from its own counters).
 *
 * The rule: with candidate c the cache holds a share h(c) = min(1,
 * room / (samples x stored size(c))) of the samples (MinIO keeps what it
 * admits, so that is also the later epochs' hit rate); a later-epoch
 * sample then costs
 *     h(c) x decompress(c) + (1 - h(c)) x miss + h(c) x compress(c) / 2
 * (the fill's compression spread over two later epochs), and the cheapest
 * wins. So when memory is the bound (h(none) < 1) compression buys hits,
 * each saving a miss, and wins while its CPU is cheaper than the misses it
 * saves; when all fits anyway, or a miss is cheap (CPU is the bound and
 * decompression would cost more than it saves), less compression wins.
 * Pure functions: tests feed them numbers. Depends on base, codec. */
#ifndef SL_CACHE_PICK_H
#define SL_CACHE_PICK_H

#include <stddef.h>
#include <stdint.h>

/* The candidates, weakest first: a public sl_cache_codec_t value - 1. */
#define SL__PICK_N 5
typedef struct sl__pick_codec {
    int codec, level; /* sl__codec_t and zstd level */
    const char *name; /* "none", "lz4", "zstd-1", "zstd-3", "zstd-19" */
} sl__pick_codec_t;
extern const sl__pick_codec_t sl__pick_codecs[SL__PICK_N];

/* What the probe measured per candidate (sums over the probed entries). */
typedef struct sl__pick_probe {
    int n;            /* entries probed */
    double raw_bytes; /* their raw bytes */
    double stored[SL__PICK_N], comp_ns[SL__PICK_N], dec_ns[SL__PICK_N];
} sl__pick_probe_t;

/* Compresses and decompresses (the first SL__PICK_PROBE_BYTES of) p with
 * every candidate, adding to *pr: ratios and times per byte. */
#define SL__PICK_PROBE_BYTES (64 << 10)
void sl__pick_probe_add(sl__pick_probe_t *pr, const void *p, size_t n);

/* The candidate to use (index into sl__pick_codecs) for `samples` samples
 * of mean raw size mean_raw, a cache of `room` bytes (its limit less the
 * index), and a miss costing miss_ns. *cost_ns (may be NULL) gets each
 * candidate's modelled cost per sample. A probe with no entries: 0. */
int sl__pick_choose(const sl__pick_probe_t *pr, int64_t samples,
                    double mean_raw, double room, double miss_ns,
                    double cost_ns[SL__PICK_N]);

#endif
