/* cache/pick: see pick.h. */
#include "cache/pick.h"

#include <stdlib.h>

#include "base/base.h"
#include "cache/cache.h"
#include "codec/codec.h"

const sl__pick_codec_t sl__pick_codecs[SL__PICK_N] = {
    {SL_CODEC_NONE, 0, "none"},     {SL_CODEC_LZ4, 0, "lz4"},
    {SL_CODEC_ZSTD, 1, "zstd-1"},   {SL_CODEC_ZSTD, 3, "zstd-3"},
    {SL_CODEC_ZSTD, 19, "zstd-19"},
};

void sl__pick_probe_add(sl__pick_probe_t *pr, const void *p, size_t n)
{
    /* A slice stands for the entry: the strongest candidate compresses at
     * a few MB/s, and a whole decoded image per candidate would cost the
     * first epoch more than the choice is worth. */
    if (n > SL__PICK_PROBE_BYTES)
        n = SL__PICK_PROBE_BYTES;
    sl__bytes_t z = {0};
    void *back = malloc(n ? n : 1);
    if (!back)
        return;
    for (int c = 0; c < SL__PICK_N; c++) {
        const sl__pick_codec_t *k = &sl__pick_codecs[c];
        int64_t t0 = sl__now_ns();
        int bad = sl__codec_compress_level(k->codec, k->level, p, n, &z, NULL,
                                           0) != 0;
        int64_t t1 = sl__now_ns();
        bad = bad ||
              sl__codec_decompress(k->codec, z.p, z.n, back, n, NULL, 0) != 0;
        int64_t t2 = sl__now_ns();
        /* A codec that fails or does not shrink is stored as none (the
         * cache's rule), so it is measured as none. */
        int same = bad || z.n >= n;
        pr->stored[c] += same ? (double)n : (double)z.n;
        pr->comp_ns[c] += same ? 0 : (double)(t1 - t0);
        pr->dec_ns[c] += same ? 0 : (double)(t2 - t1);
    }
    pr->raw_bytes += (double)n;
    pr->n++;
    sl__bytes_free(&z);
    free(back);
}

int sl__pick_choose(const sl__pick_probe_t *pr, int64_t samples,
                    double mean_raw, double room, double miss_ns,
                    double cost_ns[SL__PICK_N])
{
    if (pr->n == 0 || pr->raw_bytes <= 0 || samples <= 0)
        return 0;
    int best = 0;
    double best_cost = 0;
    for (int c = 0; c < SL__PICK_N; c++) {
        double ratio = pr->stored[c] / pr->raw_bytes;
        double per_byte_comp = pr->comp_ns[c] / pr->raw_bytes;
        double per_byte_dec = pr->dec_ns[c] / pr->raw_bytes;
        double entry = mean_raw * ratio + SL__CACHE_ENTRY_OVERHEAD;
        double h = room > 0 ? room / ((double)samples * entry) : 0;
        if (h > 1)
            h = 1;
        double cost = h * per_byte_dec * mean_raw + (1 - h) * miss_ns +
                      h * per_byte_comp * mean_raw / 2;
        if (cost_ns)
            cost_ns[c] = cost;
        /* Ties (within 2 %) go to the weaker codec: less CPU to spend. */
        if (c == 0 || cost < best_cost * 0.98) {
            best = c;
            best_cost = cost;
        }
    }
    return best;
}
