/* The sample cache (cache/cache.c) on its own: MinIO keeps the first
 * entries that fit and never evicts, so under a fresh random order each
 * epoch its hit rate is the cached fraction; LRU of the same size does
 * worse; a pinned entry outlives its eviction; codecs round-trip; a lower
 * limit evicts. And the decoded tier's contract (ops/decoded.c): the
 * transform from the full decode writes the bytes the crop path writes
 * without DCT scaling, on every ImageNet sample image. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "cache/cache.h"
#include "cache/pick.h"
#include "codec/codec.h"
#include "ops/image.h"
#include "testutil.h"

#define N 1000
#define SZ 100

/* Hits over epochs 2..E of a fresh permutation each epoch, every sample
 * offered after a miss, as the loader does. */
static double hit_rate(int policy, int64_t limit, int epochs)
{
    sl__cache_t *c = sl__cache_create(N, limit, policy);
    assert_non_null(c);
    int64_t perm[N];
    uint8_t buf[SZ];
    int64_t hits = 0, finds = 0;
    for (int e = 0; e < epochs; e++) {
        sl__rng_t r;
        sl__rng_init(&r, 7, (uint64_t)e, 0, SL_RNG_SHUFFLE);
        for (int i = 0; i < N; i++)
            perm[i] = i;
        for (int i = N - 1; i > 0; i--) {
            int j = (int)sl__rng_below(&r, (uint64_t)i + 1);
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < N; i++) {
            sl__cache_ref_t ref;
            int hit = sl__cache_find(c, perm[i], &ref);
            if (hit) {
                memset(buf, 0, sizeof buf);
                assert_int_equal(sl__cache_copy(&ref, buf, NULL, 0), 0);
                assert_int_equal(buf[0], (uint8_t)perm[i]);
                sl__cache_unpin(c, &ref);
            } else {
                memset(buf, (int)(uint8_t)perm[i], sizeof buf);
                sl__cache_put(c, perm[i], buf, sizeof buf, 0, SL_CODEC_NONE, 0);
            }
            if (e > 0) {
                hits += hit;
                finds++;
            }
        }
        sl__cache_stats_t st;
        sl__cache_get_stats(c, &st);
        assert_true(st.bytes <= limit);
    }
    sl__cache_destroy(c);
    return (double)hits / (double)finds;
}

static void test_minio_hit_rate_is_the_fraction(void **state)
{
    (void)state;
    int64_t entry = SZ + SL__CACHE_ENTRY_OVERHEAD;
    int64_t index = N * 8;
    for (int pct = 25; pct <= 100; pct += 25) {
        int64_t limit = index + entry * N * pct / 100;
        double m = hit_rate(SL__CACHE_MINIO, limit, 4);
        double l = hit_rate(SL__CACHE_LRU, limit, 4);
        printf("# cache %d%%: MinIO hit rate %.3f, LRU %.3f\n", pct, m, l);
        /* MinIO holds exactly the first pct % it saw, for good. */
        assert_true(m > pct / 100.0 - 1e-9 && m < pct / 100.0 + 1e-9);
        if (pct < 100)
            assert_true(l < m - 0.05);
        else
            assert_true(l > 0.999);
    }
}

static void test_pinned_entry_outlives_eviction(void **state)
{
    (void)state;
    sl__cache_t *c = sl__cache_create(4, 1 << 20, SL__CACHE_LRU);
    uint8_t a[1000], b[1000];
    memset(a, 1, sizeof a);
    assert_int_equal(sl__cache_put(c, 2, a, sizeof a, 42, SL_CODEC_NONE, 0), 1);
    assert_int_equal(sl__cache_put(c, 2, a, sizeof a, 42, SL_CODEC_NONE, 0), 0);
    sl__cache_ref_t ref;
    assert_int_equal(sl__cache_find(c, 2, &ref), 1);
    assert_int_equal(ref.aux, 42);
    sl__cache_set_limit(c, 0); /* evicts everything, the pinned one too */
    sl__cache_stats_t st;
    sl__cache_get_stats(c, &st);
    assert_int_equal(st.entries, 0);
    assert_true(st.bytes > 0); /* the pinned bytes still count */
    sl__cache_ref_t gone;
    assert_int_equal(sl__cache_find(c, 2, &gone), 0);
    assert_non_null(sl__cache_view(&ref));
    assert_int_equal(sl__cache_copy(&ref, b, NULL, 0), 0);
    assert_memory_equal(a, b, sizeof a);
    sl__cache_unpin(c, &ref);
    sl__cache_get_stats(c, &st);
    assert_int_equal(st.bytes, 0);
    /* A limit of 0 keeps nothing. */
    assert_int_equal(sl__cache_put(c, 1, a, sizeof a, 0, SL_CODEC_NONE, 0), 0);
    sl__cache_destroy(c);
}

static void test_codecs_round_trip(void **state)
{
    (void)state;
    sl__cache_t *c = sl__cache_create(8, 1 << 20, SL__CACHE_MINIO);
    uint8_t p[20000], q[20000];
    for (size_t i = 0; i < sizeof p; i++)
        p[i] = (uint8_t)(i / 64); /* compressible, like smooth pixels */
    const int codecs[3] = {SL_CODEC_NONE, SL_CODEC_LZ4, SL_CODEC_ZSTD};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(sl__cache_put(c, k, p, sizeof p, k, codecs[k], 1), 1);
        sl__cache_ref_t ref;
        assert_int_equal(sl__cache_find(c, k, &ref), 1);
        assert_int_equal(ref.codec, codecs[k]);
        assert_int_equal(ref.raw_n, sizeof p);
        assert_true((sl__cache_view(&ref) != NULL) == (k == 0));
        memset(q, 0, sizeof q);
        assert_int_equal(sl__cache_copy(&ref, q, NULL, 0), 0);
        assert_memory_equal(p, q, sizeof p);
        sl__cache_unpin(c, &ref);
    }
    sl__cache_stats_t st;
    sl__cache_get_stats(c, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.raw_bytes, 3 * (int64_t)sizeof p);
    assert_true(st.bytes < 2 * (int64_t)sizeof p); /* two compressed well */
    assert_int_equal(st.by_codec[SL_CODEC_LZ4], 1);
    /* Incompressible bytes are kept as they are. */
    sl__rng_t r;
    sl__rng_init(&r, 1, 0, 0, SL_RNG_SHUFFLE);
    for (size_t i = 0; i < sizeof p; i++)
        p[i] = (uint8_t)sl__rng_below(&r, 256);
    assert_int_equal(sl__cache_put(c, 5, p, sizeof p, 0, SL_CODEC_ZSTD, 3), 1);
    sl__cache_ref_t ref;
    assert_int_equal(sl__cache_find(c, 5, &ref), 1);
    assert_int_equal(ref.codec, SL_CODEC_NONE);
    sl__cache_unpin(c, &ref);
    sl__cache_destroy(c);
    assert_int_equal(sl__cache_policy_from_name("lru"), SL__CACHE_LRU);
    assert_int_equal(sl__cache_policy_from_name("minio"), SL__CACHE_MINIO);
    assert_int_equal(sl__cache_policy_from_name("fifo"), -1);
}

/* The decoded tier's contract on real photos (4:4:4, 4:2:0, 4:2:2,
 * grayscale): process_rgb(decode_full(f)) == process(f) without DCT
 * scaling, for a random crop and an eval crop, uint8 and float. */
static void decoded_equals_no_dct(void *ctx, const tu_photo_t *p)
{
    sl__scratch_t *s = ctx;
    char err[256];
    assert_int_equal(p->rgb_n, (size_t)p->w * p->h * 3 + SL__IMAGE_SLACK);
    for (int mode = 0; mode < 2; mode++) {
        sl__xform_t x = {0};
        x.mode = mode ? SL_XF_CENTER : SL_XF_RRC;
        x.scale[0] = 0.08, x.scale[1] = 1;
        x.ratio[0] = 3.0 / 4, x.ratio[1] = 4.0 / 3;
        x.resize_size = 256;
        x.flip = 1;
        x.out_w = x.out_h = 224;
        x.dtype = mode ? SL_DTYPE_FLOAT32 : SL_DTYPE_UINT8;
        x.layout = SL_LAYOUT_CHW;
        for (int c = 0; c < 3; c++)
            x.mean[c] = 0.5f, x.std[c] = 0.25f;
        x.dct_scale = 0;
        size_t ob = 224 * 224 * 3 * (mode ? 4 : 1);
        uint8_t *o1 = malloc(ob), *o2 = malloc(ob);
        sl__rng_t c1, f1, c2, f2;
        sl__rng_init(&c1, 3, 0, (uint64_t)p->i, SL_RNG_CROP);
        sl__rng_init(&f1, 3, 0, (uint64_t)p->i, SL_RNG_FLIP);
        c2 = c1, f2 = f1;
        assert_int_equal(sl__image_process(p->bytes, p->n, &x, &c1, &f1, s, o1,
                                           err, sizeof err),
                         0);
        assert_int_equal(sl__image_process_rgb(p->rgb, p->w, p->h, &x, &c2, &f2,
                                               s, o2, err, sizeof err),
                         0);
        if (memcmp(o1, o2, ob))
            fail_msg("%s (%dx%d, mode %d): the decoded tier's pixels "
                     "differ from the no-DCT path",
                     p->path, p->w, p->h, mode);
        free(o1);
        free(o2);
    }
}

static void test_decoded_equals_no_dct(void **state)
{
    (void)state;
    sl__scratch_t *s = sl__scratch_create();
    int files = tu_photos(getenv("SL_CACHE_ALL") ? 1 << 30 : 250, 0,
                          decoded_equals_no_dct, s);
    sl__scratch_destroy(s);
    if (files < 0)
        skip();
    printf("# %d images: decoded tier == no-DCT path\n", files);
}

/* The run-time codec rule on numbers: everything fits uncompressed ->
 * none; memory the bound and misses dear -> compression, the cheapest
 * that holds the set; misses cheap (CPU the bound) -> less or none. */
/* Lent entries (a partitioned cache): one-shot, not charged, apart from
 * the cached ones; a cached key is not lent; clear frees the rest. */
static void test_lent_entries(void **state)
{
    (void)state;
    sl__cache_t *c = sl__cache_create(10, 4096, SL__CACHE_MINIO);
    assert_non_null(c);
    uint8_t a[SZ], b[SZ];
    memset(a, 'a', SZ);
    memset(b, 'b', SZ);
    assert_int_equal(sl__cache_put(c, 1, a, SZ, 0, SL_CODEC_NONE, 0), 1);
    assert_int_equal(sl__cache_lend(c, 1, b, SZ), 0); /* cached */
    assert_int_equal(sl__cache_lend(c, 2, b, SZ), 1);
    assert_int_equal(sl__cache_lend(c, 2, b, SZ), 0); /* lent already */
    assert_int_equal(sl__cache_lend(c, 3, b, SZ), 1);
    assert_int_equal(sl__cache_lend(c, 10, b, SZ), 0); /* out of range */
    sl__cache_stats_t st;
    sl__cache_get_stats(c, &st);
    int64_t charged = st.bytes;
    assert_int_equal(st.lent_entries, 2);
    assert_int_equal(st.lent_bytes, 2 * SZ);
    sl__cache_ref_t r;
    assert_int_equal(sl__cache_find(c, 2, &r), 1);
    assert_memory_equal(sl__cache_view(&r), b, SZ);
    /* Taken: a second find misses while the first is still pinned. */
    sl__cache_ref_t r2;
    assert_int_equal(sl__cache_find(c, 2, &r2), 0);
    sl__cache_unpin(c, &r);
    assert_int_equal(sl__cache_find(c, 1, &r), 1);
    assert_memory_equal(sl__cache_view(&r), a, SZ);
    sl__cache_unpin(c, &r);
    sl__cache_get_stats(c, &st);
    assert_int_equal(st.lent_hits, 1);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.bytes, charged); /* lent bytes never charged */
    assert_int_equal(st.lent_entries, 1);
    assert_int_equal(sl__cache_lend_clear(c), 1);
    assert_int_equal(sl__cache_find(c, 3, &r), 0);
    sl__cache_get_stats(c, &st);
    assert_int_equal(st.lent_entries, 0);
    assert_int_equal(st.lent_bytes, 0);
    assert_int_equal(sl__cache_lend(c, 3, b, SZ), 1); /* freed by destroy */
    sl__cache_destroy(c);
}

static void test_pick_rule(void **state)
{
    (void)state;
    sl__pick_probe_t pr = {0};
    pr.n = 1;
    pr.raw_bytes = 1e6;
    /* per candidate: stored bytes, compress ns, decompress ns for 1 MB */
    const double stored[SL__PICK_N] = {1e6, 0.8e6, 0.5e6, 0.45e6, 0.4e6};
    const double comp[SL__PICK_N] = {0, 1.5e6, 3e6, 6e6, 200e6};
    const double dec[SL__PICK_N] = {0, 0.3e6, 1e6, 1e6, 1e6};
    for (int c = 0; c < SL__PICK_N; c++) {
        pr.stored[c] = stored[c];
        pr.comp_ns[c] = comp[c];
        pr.dec_ns[c] = dec[c];
    }
    double cost[SL__PICK_N];
    /* 1000 samples of 1 MB; room for all raw: none. */
    assert_int_equal(sl__pick_choose(&pr, 1000, 1e6, 2e9, 5e6, cost), 0);
    /* Room for half raw, misses cost 10 ms: zstd-1 holds everything. */
    int c = sl__pick_choose(&pr, 1000, 1e6, 0.55e9, 10e6, cost);
    printf(
        "# half room, 10 ms misses: %s (costs %.0f %.0f %.0f %.0f %.0f us)\n",
        sl__pick_codecs[c].name, cost[0] / 1e3, cost[1] / 1e3, cost[2] / 1e3,
        cost[3] / 1e3, cost[4] / 1e3);
    assert_string_equal(sl__pick_codecs[c].name, "zstd-1");
    /* The same room, misses nearly free: nothing worth compressing. */
    assert_int_equal(sl__pick_choose(&pr, 1000, 1e6, 0.55e9, 0.2e6, cost), 0);
    /* Room for 0.85 of raw: lz4 holds it all, cheaper than zstd. */
    c = sl__pick_choose(&pr, 1000, 1e6, 0.85e9, 10e6, cost);
    assert_string_equal(sl__pick_codecs[c].name, "lz4");
    /* Nothing probed: none. */
    sl__pick_probe_t empty = {0};
    assert_int_equal(sl__pick_choose(&empty, 1000, 1e6, 1e9, 5e6, NULL), 0);
    /* A real probe: incompressible bytes measure as none everywhere. */
    uint8_t buf[4096];
    sl__rng_t r;
    sl__rng_init(&r, 9, 0, 0, SL_RNG_SHUFFLE);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)sl__rng_below(&r, 256);
    sl__pick_probe_t real = {0};
    sl__pick_probe_add(&real, buf, sizeof buf);
    for (int k = 0; k < SL__PICK_N; k++)
        assert_true(real.stored[k] == sizeof buf);
    assert_int_equal(sl__pick_choose(&real, 10, 4096, 1e3, 1e9, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minio_hit_rate_is_the_fraction),
        cmocka_unit_test(test_pinned_entry_outlives_eviction),
        cmocka_unit_test(test_codecs_round_trip),
        cmocka_unit_test(test_pick_rule),
        cmocka_unit_test(test_lent_entries),
        cmocka_unit_test(test_decoded_equals_no_dct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
