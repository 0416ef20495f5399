/* The loader with its sample cache (exec/loader_cache.c): the stream is
 * the same with and without a cache (folder and zstd shard, MinIO and LRU,
 * half and whole, 1 and several threads, blocking and in-flight reads,
 * 3 epochs), a whole MinIO cache reads storage once, the decoded tier's
 * stream is the no_dct_scale one, bad files are skipped alike, the cache
 * is carved out of the memory budget, and its knob changes (with read
 * threads and the I/O depth) while fills and hits run neither hang nor
 * change the stream (TSan in make check). */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <xxhash.h>

#include "sluice/sluice.h"
#include "sluice/testing.h"
#include "testutil.h"

static char *root;  /* an ImageFolder tree */
static char *shard; /* the same images in one zstd shard */
#define NS 60       /* samples */
#define EPOCHS 3
/* A sample in flight at an epoch's end may be asked for again by the next
 * epoch before its first read (or decode) has filled the cache: a second
 * miss, not a second copy. At most the batches in flight. */
#define SLACK 28

static int setup(void **state)
{
    (void)state;
    tu_tree_shard("lcache", 3, 20, 48, 36, &root, &shard);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_tree_shard_remove(root, shard);
    return 0;
}

typedef struct cfg {
    int threads, depth, on_error;
    int64_t cache;
    int policy, decoded, no_dct, codec;
} cfg_t;

/* With a disk tier of `disk` bytes in dir (NULL: none). */
static sl_loader_t *loader_disk(const char *src, cfg_t c, const char *dir,
                                int64_t disk)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 7;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.policy = SL_POLICY_STATIC;
    o.read_threads = c.threads;
    o.decode_threads = c.threads > 1 ? 2 : 1;
    o.io_depth = c.depth;
    o.seed = 5;
    o.epochs = EPOCHS;
    o.on_error = c.on_error;
    o.cache_bytes = c.cache;
    o.cache_policy = c.policy;
    o.cache_decoded = c.decoded;
    o.no_dct_scale = c.no_dct;
    o.cache_codec = c.codec;
    o.cache_dir = dir;
    o.cache_disk_bytes = disk;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(src, &o, &l), 0);
    return l;
}

static sl_loader_t *loader(const char *src, cfg_t c)
{
    return loader_disk(src, c, NULL, 0);
}

static sl_stats_t stats(sl_loader_t *l)
{
    sl_stats_t st;
    sl_stats_init(&st);
    assert_int_equal(sl_loader_stats(l, &st), 0);
    return st;
}

/* Bytes a cache needs to hold every sample of src (encoded or decoded). */
static int64_t whole(const char *src, int decoded)
{
    cfg_t c = {1, SL_IO_DEPTH_OFF,    0, 1 << 30, SL_CACHE_MINIO, decoded,
               0, SL_CACHE_CODEC_NONE};
    sl_loader_t *l = loader(src, c);
    int64_t n;
    tu_stream_digest(l, &n);
    sl_stats_t st = stats(l);
    assert_int_equal(st.cache_entries, NS);
    sl_loader_destroy(l);
    return st.cache_bytes;
}

static void test_stream_same_with_cache(void **state)
{
    (void)state;
    tu_watchdog(300, 0, "cache determinism: the loader hung");
    const char *srcs[2] = {root, shard};
    for (int s = 0; s < 2; s++) {
        int64_t n0, n;
        cfg_t plain = {1, SL_IO_DEPTH_OFF, 0, 0, 0, 0, 0, 0};
        sl_loader_t *l = loader(srcs[s], plain);
        uint64_t ref = tu_stream_digest(l, &n0);
        int64_t once = stats(l).bytes_read / EPOCHS; /* one epoch's bytes */
        sl_loader_destroy(l);
        assert_int_equal(n0, EPOCHS * NS);
        int64_t all = whole(srcs[s], 0);
        const int64_t sizes[2] = {all / 2, all};
        for (int k = 0; k < 2; k++)
            for (int policy = 0; policy < 2; policy++)
                for (int t = 1; t <= 3; t += 2)
                    for (int async = 0; async < 2; async++) {
                        cfg_t c = {t,      async ? 8 : SL_IO_DEPTH_OFF,
                                   0,      sizes[k],
                                   policy, 0,
                                   0,      0};
                        l = loader(srcs[s], c);
                        uint64_t d = tu_stream_digest(l, &n);
                        sl_stats_t st = stats(l);
                        printf("# %s: cache %lld B %s, %d threads, depth %d: "
                               "%lld hits, %lld misses, read %lld B\n",
                               s ? "shard" : "folder", (long long)sizes[k],
                               policy ? "lru" : "minio", t, c.depth,
                               (long long)st.cache_hits,
                               (long long)st.cache_misses,
                               (long long)st.bytes_read);
                        assert_int_equal(n, n0);
                        assert_int_equal(d, ref);
                        assert_int_equal(st.cache_hits + st.cache_misses,
                                         EPOCHS * NS);
                        assert_true(st.cache_bytes <= sizes[k]);
                        if (k == 1) { /* whole: storage read once */
                            assert_true(st.cache_misses - NS <= SLACK);
                            assert_true(st.bytes_read <=
                                        once + once * SLACK / NS * 2);
                        }
                        sl_loader_destroy(l);
                    }
    }
    tu_watchdog(0, 0, NULL);
}

/* The decoded tier: the no_dct_scale stream, whole or half, either
 * policy; later epochs hit. */
static void test_decoded_tier_is_the_no_dct_stream(void **state)
{
    (void)state;
    tu_watchdog(300, 0, "decoded tier: the loader hung");
    int64_t n0, n;
    cfg_t nodct = {1, SL_IO_DEPTH_OFF, 0, 0, 0, 0, 1, 0};
    sl_loader_t *l = loader(shard, nodct);
    uint64_t ref = tu_stream_digest(l, &n0);
    sl_loader_destroy(l);
    int64_t all = whole(shard, 1);
    for (int half = 0; half < 2; half++)
        for (int policy = 0; policy < 2; policy++) {
            cfg_t c = {3, 8, 0, half ? all / 2 : all, policy, 1, 0, 0};
            l = loader(shard, c);
            sl_options_t used;
            sl_options_init(&used);
            sl_loader_options(l, &used);
            assert_int_equal(used.no_dct_scale, 1);
            assert_int_equal(tu_stream_digest(l, &n), ref);
            assert_int_equal(n, n0);
            sl_stats_t st = stats(l);
            printf("# decoded %s %s: %lld hits\n", half ? "half" : "whole",
                   policy ? "lru" : "minio", (long long)st.cache_hits);
            if (!half)
                assert_true(st.cache_misses - NS <= SLACK);
            else
                assert_true(st.cache_hits > 0);
            sl_loader_destroy(l);
        }
    /* Every codec, and auto, half the raw size: the same stream. */
    for (int codec = SL_CACHE_CODEC_AUTO; codec <= SL_CACHE_CODEC_ZSTD19;
         codec++) {
        cfg_t c = {2, 8, 0, all / 2, SL_CACHE_MINIO, 1, 0, codec};
        l = loader(shard, c);
        assert_int_equal(tu_stream_digest(l, &n), ref);
        sl_stats_t st = stats(l);
        printf("# decoded half, codec %d: %lld hits, %lld B held for %lld "
               "raw, codec in force %lld\n",
               codec, (long long)st.cache_hits, (long long)st.cache_bytes,
               (long long)st.cache_raw_bytes, (long long)st.cache_codec);
        if (codec != SL_CACHE_CODEC_AUTO)
            assert_int_equal(st.cache_codec, codec);
        if (codec >= SL_CACHE_CODEC_ZSTD1) /* smooth synthetic pixels */
            assert_true(st.cache_raw_bytes > st.cache_bytes);
        assert_int_equal(sl_loader_set(l, SL_PARAM_CACHE_CODEC, 9), SL_ERANGE);
        assert_int_equal(sl_loader_set(l, SL_PARAM_CACHE_CODEC, SL_AUTOTUNE),
                         0);
        int64_t v;
        assert_int_equal(sl_loader_get(l, SL_PARAM_CACHE_CODEC, &v), 0);
        assert_int_equal(v, SL_CACHE_CODEC_AUTO);
        sl_loader_destroy(l);
    }
    tu_watchdog(0, 0, NULL);
}

/* A truncated file and one that is not an image: skipped every epoch, as
 * without a cache (the truncated one is cached encoded and fails its
 * decode each time; the decoded tier never holds a failed decode). */
static void test_skip_alike(void **state)
{
    (void)state;
    tu_watchdog(300, 0, "cache skip: the loader hung");
    char *dir = tu_jpeg_tree("lcache-bad", 2, 10, 32, 24);
    char p[4096];
    snprintf(p, sizeof p, "%s/c1/i05.jpg", dir);
    assert_int_equal(truncate(p, 30), 0);
    snprintf(p, sizeof p, "%s/c0/i02.jpg", dir);
    assert_int_equal(tu_write_file(p, "not an image", 12), 0);
    for (int decoded = 0; decoded < 2; decoded++) {
        int64_t n0, n;
        cfg_t plain = {2, 8, SL_ON_ERROR_SKIP, 0, 0, 0, decoded, 0};
        sl_loader_t *l = loader(dir, plain);
        uint64_t ref = tu_stream_digest(l, &n0);
        int64_t skipped0 = sl_loader_skipped_count(l);
        sl_loader_destroy(l);
        assert_int_equal(n0, EPOCHS * 18);
        assert_int_equal(skipped0, EPOCHS * 2);
        for (int policy = 0; policy < 2; policy++) {
            cfg_t c = {2, 8, SL_ON_ERROR_SKIP, 1 << 20, policy, decoded, 0, 0};
            l = loader(dir, c);
            assert_int_equal(tu_stream_digest(l, &n), ref);
            assert_int_equal(n, n0);
            assert_int_equal(sl_loader_skipped_count(l), skipped0);
            for (int64_t i = 0; i < skipped0; i++) {
                const char *m = sl_loader_skipped_message(l, i);
                assert_true(strstr(m, "c1/i05.jpg") || strstr(m, "c0/i02.jpg"));
            }
            sl_loader_destroy(l);
        }
    }
    tu_rmtree(dir);
    free(dir);
    tu_watchdog(0, 0, NULL);
}

/* The memory budget: the cache comes off the top; a cache that leaves no
 * room for a batch is refused at create, naming it; the knob's range is
 * the share set aside; lowering it evicts, raising it fills again. */
static void test_budget_and_knob(void **state)
{
    (void)state;
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 7;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.max_memory_bytes = 64 << 20;
    o.cache_bytes = 63 << 20;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_ERANGE);
    assert_non_null(strstr(sl_loader_last_error(NULL), "cache"));
    o.cache_bytes = 1 << 20;
    o.epochs = 2;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    int64_t lo, hi, v;
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_CACHE_BYTES, &lo, &hi),
                     0);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 1 << 20);
    assert_int_equal(sl_loader_set(l, SL_PARAM_CACHE_BYTES, hi + 1), SL_ERANGE);
    int64_t n;
    tu_stream_digest(l, &n);
    sl_stats_t st = stats(l);
    assert_int_equal(st.cache_entries, NS);
    assert_int_equal(sl_loader_set(l, SL_PARAM_CACHE_BYTES, 0), 0);
    assert_int_equal(sl_loader_get(l, SL_PARAM_CACHE_BYTES, &v), 0);
    assert_int_equal(v, 0);
    st = stats(l);
    assert_int_equal(st.cache_entries, 0);
    assert_int_equal(st.cache_bytes, 0);
    assert_int_equal(sl_loader_set(l, SL_PARAM_CACHE_BYTES, SL_AUTOTUNE), 0);
    assert_int_equal(sl_loader_get(l, SL_PARAM_CACHE_BYTES, &v), 0);
    assert_int_equal(v, 1 << 20);
    tu_stream_digest(l, &n);
    assert_int_equal(stats(l).cache_entries, NS);
    sl_loader_destroy(l);
    o.cache_policy = 7;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(NULL), "cache_policy"));
}

typedef struct {
    sl_loader_t *l;
    int64_t all;
    atomic_int stop;
} flipper_t;

static void *flipper(void *arg)
{
    flipper_t *f = arg;
    for (int i = 0; !atomic_load(&f->stop); i++) {
        int64_t sizes[4] = {f->all, f->all / 3, 0, f->all / 2};
        sl_loader_set(f->l, SL_PARAM_CACHE_BYTES, sizes[i % 4]);
        sl_loader_set(f->l, SL_PARAM_READ_THREADS, i % 2 ? 3 : 1);
        sl_loader_set(f->l, SL_PARAM_IO_DEPTH, i % 3 ? 6 : 1);
        usleep(300);
    }
    return NULL;
}

/* Fills, hits and evictions of pinned entries (a small LRU) while the
 * cache's size, the read threads and the depth flip, over restarts: no
 * hang, the stream unchanged. */
static void test_stress_knobs(void **state)
{
    (void)state;
    tu_watchdog(300, 0, "cache stress: the loader hung");
    int64_t all = whole(root, 0);
    for (int decoded = 0; decoded < 2; decoded++) {
        int64_t n0, n;
        cfg_t plain = {2, 4, 0, 0, 0, 0, decoded, 0};
        sl_loader_t *l = loader(root, plain);
        uint64_t ref = tu_stream_digest(l, &n0);
        sl_loader_destroy(l);
        for (int policy = 0; policy < 2; policy++) {
            cfg_t c = {2, 4, 0, all / 3, policy, decoded, 0, 0};
            l = loader(root, c);
            sl__testing_storage_set(l, SL_TESTING_READ_LATENCY_US, 200);
            flipper_t f = {l, decoded ? all * 40 : all, 0};
            pthread_t th;
            assert_int_equal(pthread_create(&th, NULL, flipper, &f), 0);
            for (int round = 0; round < 2; round++) {
                assert_int_equal(tu_stream_digest(l, &n), ref);
                assert_int_equal(n, n0);
                sl_position_t pos = {1, 2}; /* a restart mid-stream */
                assert_int_equal(sl_loader_start(l, &pos), 0);
                const sl_batch_t *b;
                assert_int_equal(sl_loader_next(l, &b), 0);
                sl_loader_release(l, b);
            }
            atomic_store(&f.stop, 1);
            pthread_join(th, NULL);
            sl_stats_t st = stats(l);
            printf("# stress %s%s: %lld hits, %lld misses\n",
                   policy ? "lru" : "minio", decoded ? " decoded" : "",
                   (long long)st.cache_hits, (long long)st.cache_misses);
            sl_loader_destroy(l);
        }
    }
    tu_watchdog(0, 0, NULL);
}

/* The partitioned cache's engine side: an owner serves samples from other
 * threads (sl_loader_read_sample: hits, or reads filling its cache) while
 * its own stream runs; a preparer lends them (sl_loader_cache_lend) and
 * its stream reads nothing from storage and equals a plain loader's. */
typedef struct {
    sl_loader_t *owner, *prep;
    const int64_t *ids;
    int n, hits;
} server_t;

static void *server(void *arg)
{
    server_t *s = arg;
    for (int k = 0; k < s->n; k++) {
        void *p;
        size_t n;
        int hit;
        char err[256];
        assert_int_equal(sl_loader_read_sample(s->owner, s->ids[k], 1, &p, &n,
                                               &hit, err, sizeof err),
                         0);
        s->hits += hit;
        assert_int_equal(sl_loader_cache_lend(s->prep, s->ids[k], p, n), 1);
        sl_free(p);
    }
    return NULL;
}

static void test_lent_samples(void **state)
{
    (void)state;
    tu_watchdog(300, 0, "lent samples: the loader hung");
    int64_t all = whole(root, 0);
    cfg_t plain = {1, SL_IO_DEPTH_OFF, 0, 0, 0, 0, 0, 0};
    cfg_t own = {2, SL_IO_DEPTH_OFF, 0, all, SL_CACHE_MINIO, 0, 0, 0};
    cfg_t one = {2, 4, 0, 1, SL_CACHE_MINIO, 0, 0, 0};
    sl_loader_t *ref = loader(root, plain), *owner = loader(root, own),
                *prep = loader(root, one);
    int64_t nb = sl_loader_batches_per_epoch(prep), hits = 0;
    for (int64_t g = 0; g < 2 * nb; g++) {
        sl_position_t pos = {g / nb, g % nb};
        int64_t ids[7];
        int n = sl_loader_batch_samples(prep, pos.epoch, pos.batch, ids);
        assert_true(n > 0 && n <= 7);
        /* Two servers; the owner streams meanwhile (fills, hits). */
        server_t sv[2] = {{owner, prep, ids, n / 2, 0},
                          {owner, prep, ids + n / 2, n - n / 2, 0}};
        pthread_t th[2];
        for (int k = 0; k < 2; k++)
            assert_int_equal(pthread_create(&th[k], NULL, server, &sv[k]), 0);
        sl_plan_t plan;
        sl_plan_init(&plan);
        plan.batches = &pos;
        plan.count = 1;
        assert_int_equal(sl_loader_start_plan(owner, &plan), 0);
        const sl_batch_t *b;
        assert_int_equal(sl_loader_next(owner, &b), 0);
        sl_loader_release(owner, b);
        for (int k = 0; k < 2; k++) {
            pthread_join(th[k], NULL);
            hits += sv[k].hits;
        }
        uint64_t d[2];
        for (int k = 0; k < 2; k++) {
            sl_loader_t *l = k ? prep : ref;
            assert_int_equal(sl_loader_start_plan(l, &plan), 0);
            assert_int_equal(sl_loader_next(l, &b), 0);
            d[k] = XXH3_64bits(b->data, (size_t)b->n * b->sample_bytes) ^
                   XXH3_64bits(b->labels, (size_t)b->n * sizeof(int64_t));
            sl_loader_release(l, b);
        }
        assert_int_equal(d[0], d[1]);
        assert_int_equal(sl_loader_cache_lend_clear(prep), 0); /* all taken */
    }
    assert_int_equal(stats(prep).bytes_read, 0);
    assert_int_equal(stats(prep).cache_entries, 0);
    assert_true(hits >= NS); /* the second epoch: every sample cached */
    /* Not lent: a sample the cache holds; nothing without a cache. */
    assert_int_equal(sl_loader_cache_lend(owner, 0, "x", 1), 0);
    assert_int_equal(sl_loader_cache_lend(ref, 0, "x", 1), 0);
    void *p;
    size_t n;
    char err[256];
    assert_int_equal(
        sl_loader_read_sample(owner, NS, 1, &p, &n, NULL, err, sizeof err),
        SL_ERANGE);
    sl_loader_destroy(ref);
    sl_loader_destroy(owner);
    sl_loader_destroy(prep);
    tu_watchdog(0, 0, NULL);
}

/* Subdirectories of dir (the disk tiers made there). */
static int subdirs(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int k = 0;
    for (struct dirent *e; (e = readdir(d));)
        k += !strncmp(e->d_name, "sluice-cache-", 13);
    closedir(d);
    return k;
}

/* The disk tier: the stream is the same with it (memory tier a quarter,
 * none; folder and shard; blocking and in-flight reads; 1 and 3
 * threads); with room for what the memory tier lacks, storage is read
 * about once over 3 epochs, the rest served from disk; a tier of half the
 * set under MinIO halves what later epochs read; its directory is made
 * per loader and removed with it. */
static void test_disk_tier_stream(void **state)
{
    (void)state;
    tu_watchdog(300, 0, "disk tier: the loader hung");
    char *dir = tu_tmpdir("lcache-disk");
    const char *srcs[2] = {root, shard};
    for (int s = 0; s < 2; s++) {
        int64_t n0, n;
        cfg_t plain = {1, SL_IO_DEPTH_OFF, 0, 0, 0, 0, 0, 0};
        sl_loader_t *l = loader(srcs[s], plain);
        uint64_t ref = tu_stream_digest(l, &n0);
        int64_t once = stats(l).bytes_read / EPOCHS;
        sl_loader_destroy(l);
        int64_t all = whole(srcs[s], 0);
        const int64_t mem[2] = {all / 4, 0};
        for (int m = 0; m < 2; m++)
            for (int t = 1; t <= 3; t += 2)
                for (int async = 0; async < 2; async++) {
                    cfg_t c = {
                        t, async ? 8 : SL_IO_DEPTH_OFF, 0, mem[m], 0, 0, 0, 0};
                    l = loader_disk(srcs[s], c, dir, 4 * all);
                    assert_int_equal(subdirs(dir), 1);
                    uint64_t d = tu_stream_digest(l, &n);
                    sl_stats_t st = stats(l);
                    printf("# %s: memory %lld B + disk, %d threads, depth %d: "
                           "memory %lld hits, disk %lld hits %lld misses "
                           "(%lld held), read %lld B of %lld an epoch\n",
                           s ? "shard" : "folder", (long long)mem[m], t,
                           c.depth, (long long)st.cache_hits,
                           (long long)st.cache_disk_hits,
                           (long long)st.cache_disk_misses,
                           (long long)st.cache_disk_entries,
                           (long long)st.bytes_read, (long long)once);
                    assert_int_equal(n, n0);
                    assert_int_equal(d, ref);
                    assert_int_equal(st.cache_hits + st.cache_disk_hits +
                                         st.cache_disk_misses,
                                     EPOCHS * NS);
                    assert_int_equal(st.cache_entries + st.cache_disk_entries,
                                     NS);
                    assert_true(st.cache_disk_hits >=
                                2 * (NS - st.cache_entries) - SLACK);
                    assert_true(st.cache_disk_misses - NS <= SLACK);
                    assert_true(st.bytes_read <= once + once * SLACK / NS * 2);
                    assert_int_equal(st.cache_disk_errors, 0);
                    sl_loader_destroy(l);
                    assert_int_equal(subdirs(dir), 0);
                }
        /* Half the set on disk, none in memory: later epochs read about
         * the other half (MinIO). */
        cfg_t half = {2, 8, 0, 0, 0, 0, 0, 0};
        l = loader_disk(srcs[s], half, dir, all / 2);
        assert_int_equal(tu_stream_digest(l, &n), ref);
        sl_stats_t st = stats(l);
        printf("# %s: disk half: %lld held, read %lld B of %lld an epoch\n",
               s ? "shard" : "folder", (long long)st.cache_disk_entries,
               (long long)st.bytes_read, (long long)once);
        assert_true(st.cache_disk_entries >= NS / 3 &&
                    st.cache_disk_entries < NS);
        assert_true(st.bytes_read < once * 2.5); /* without: 3 epochs */
        sl_loader_destroy(l);
    }
    tu_rmtree(dir);
    free(dir);
    tu_watchdog(0, 0, NULL);
}

/* Refused at create, naming what is wrong: a directory that cannot be
 * used, the tier's options apart, with the decoded tier or LRU. And the
 * disk full mid-run (the file size limit standing in for it): the stream
 * unchanged, nothing skipped, the tier stops admitting, counted and
 * listed as a warning. */
static void test_disk_tier_refusals_and_full(void **state)
{
    (void)state;
    tu_watchdog(300, 0, "disk tier full: the loader hung");
    char *dir = tu_tmpdir("lcache-diskfull");
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 7;
    o.image_size = 16;
    o.telemetry_ms = -1;
    sl_loader_t *l = NULL;
    o.cache_dir = "/nonexistent/cache";
    o.cache_disk_bytes = 1 << 20;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EIO);
    assert_non_null(strstr(sl_loader_last_error(NULL), "/nonexistent/cache"));
    o.cache_dir = dir;
    o.cache_disk_bytes = 0;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(NULL), "needs both"));
    o.cache_dir = NULL;
    o.cache_disk_bytes = 1 << 20;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    o.cache_dir = dir;
    o.cache_policy = SL_CACHE_LRU;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(NULL), "lru"));
    o.cache_policy = SL_CACHE_MINIO;
    o.cache_decoded = 1;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(NULL), "cache_decoded"));
    assert_int_equal(subdirs(dir), 0);

    int64_t n0, n;
    cfg_t plain = {2, 8, 0, 0, 0, 0, 0, 0};
    l = loader(root, plain);
    uint64_t ref = tu_stream_digest(l, &n0);
    int64_t all = whole(root, 0);
    sl_loader_destroy(l);
    l = loader_disk(root, plain, dir, 4 * all);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)(all / 3);
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    uint64_t d = tu_stream_digest(l, &n);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, was);
    assert_int_equal(d, ref);
    assert_int_equal(n, n0);
    sl_stats_t st = stats(l);
    printf("# disk full at %lld B: %lld held, %lld errors, %lld hits\n",
           (long long)lim.rlim_cur, (long long)st.cache_disk_entries,
           (long long)st.cache_disk_errors, (long long)st.cache_disk_hits);
    assert_int_equal(st.errors_skipped, 0);
    /* One error however the 2 decode threads' writes interleave: the one
     * that stopped admitting (disk_tier.h); a write of the other thread
     * under way then that fails too is not counted again. */
    assert_int_equal(st.cache_disk_errors, 1);
    assert_true(st.cache_disk_entries > 0 && st.cache_disk_entries < NS);
    assert_true(st.cache_disk_hits > 0);
    assert_int_equal(sl_loader_skipped_count(l), 1);
    const char *m = sl_loader_skipped_message(l, 0);
    printf("# %s\n", m);
    assert_non_null(strstr(m, "warning: cache "));
    assert_non_null(strstr(m, "stops admitting"));
    sl_loader_destroy(l);
    assert_int_equal(subdirs(dir), 0);
    tu_rmtree(dir);
    free(dir);
    tu_watchdog(0, 0, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_same_with_cache),
        cmocka_unit_test(test_decoded_tier_is_the_no_dct_stream),
        cmocka_unit_test(test_skip_alike),
        cmocka_unit_test(test_budget_and_knob),
        cmocka_unit_test(test_stress_knobs),
        cmocka_unit_test(test_lent_samples),
        cmocka_unit_test(test_disk_tier_stream),
        cmocka_unit_test(test_disk_tier_refusals_and_full),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
