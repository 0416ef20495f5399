/* Emulated slow storage (exec/throttle and the loader's read-latency /
 * read-bandwidth options). Timing checks are lower bounds (a wait can only
 * run long on a busy machine), except one generous bound that tells
 * overlapped per-reader latency from serialised latency. Also run under
 * TSan (make check). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "base/base.h"
#include "exec/throttle.h"
#include "ops/image.h"
#include "sluice/sluice.h"
#include "sluice/testing.h"
#include "testutil.h"

static double secs_since(int64_t t0)
{
    return (double)(sl__now_ns() - t0) / 1e9;
}

typedef struct reader_arg {
    sl__throttle_t *t;
    int reads;
    uint64_t bytes;
} reader_arg_t;

static void *reader(void *p)
{
    reader_arg_t *a = p;
    for (int i = 0; i < a->reads; i++)
        sl__throttle_wait(a->t, a->bytes, sl__now_ns());
    return NULL;
}

static double run_readers(sl__throttle_t *t, int nthreads, int reads,
                          uint64_t bytes)
{
    pthread_t th[8];
    reader_arg_t a = {t, reads, bytes};
    int64_t t0 = sl__now_ns();
    for (int i = 0; i < nthreads; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader, &a), 0);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    return secs_since(t0);
}

/* N bytes through a cap R take at least (N - burst) / R, however many
 * readers share the bucket. */
static void test_bandwidth_cap_is_shared(void **state)
{
    (void)state;
    const int64_t rate = 4 << 20; /* 4 MiB/s */
    const uint64_t item = 64 << 10;
    for (int nthreads = 1; nthreads <= 4; nthreads *= 4) {
        sl__throttle_t t;
        sl__throttle_init(&t, 0, rate);
        int reads = 32 / nthreads; /* 2 MiB in all */
        double s = run_readers(&t, nthreads, reads, item);
        double n = (double)item * reads * nthreads;
        double floor = (n - SL_THROTTLE_BURST(rate)) / (double)rate;
        printf("# bandwidth: %d readers, %.0f B at %lld B/s: %.3f s (>= %.3f)"
               "\n",
               nthreads, n, (long long)rate, s, floor);
        assert_true(s >= floor - 0.002);
        sl__throttle_destroy(&t);
    }
}

/* One reader pays the latency on every read; four readers overlap theirs
 * (outstanding reads), so 4 x 10 reads take far less than 40 latencies. */
static void test_latency_per_read_overlaps(void **state)
{
    (void)state;
    const int64_t lat_us = 20000;
    sl__throttle_t t;
    sl__throttle_init(&t, lat_us, 0);
    double one = run_readers(&t, 1, 10, 1000);
    printf("# latency: 1 reader, 10 reads of 20 ms: %.3f s (>= 0.200)\n", one);
    assert_true(one >= 10 * lat_us / 1e6 - 0.002);
    double four = run_readers(&t, 4, 10, 1000);
    printf("# latency: 4 readers, 10 reads each: %.3f s (>= 0.200, "
           "< 0.800 serialised)\n",
           four);
    assert_true(four >= 10 * lat_us / 1e6 - 0.002);
    assert_true(four < 40 * lat_us / 1e6);
    sl__throttle_destroy(&t);
}

typedef struct slow_arg {
    sl__throttle_t *t;
    int done;
    pthread_mutex_t mu;
} slow_arg_t;

static void *slow_read(void *p)
{
    slow_arg_t *a = p;
    sl__throttle_wait(a->t, 1 << 20, sl__now_ns());
    pthread_mutex_lock(&a->mu);
    a->done = 1;
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

static int is_done(slow_arg_t *a)
{
    pthread_mutex_lock(&a->mu);
    int d = a->done;
    pthread_mutex_unlock(&a->mu);
    return d;
}

/* A reader waiting for minutes is released at once when the cap is lifted,
 * when the latency is lowered, and when the pipeline stops. */
static void test_live_changes_release_waiters(void **state)
{
    (void)state;
    for (int how = 0; how < 3; how++) {
        sl__throttle_t t;
        /* 1 MiB at 1 KiB/s: ~17 minutes; or a 50 s latency. */
        sl__throttle_init(&t, how == 1 ? 50000000 : 0, how == 1 ? 0 : 1024);
        slow_arg_t a = {&t, 0, PTHREAD_MUTEX_INITIALIZER};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, slow_read, &a), 0);
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        assert_false(is_done(&a));
        int64_t t0 = sl__now_ns();
        if (how == 0)
            sl__throttle_set_rate(&t, 0);
        else if (how == 1)
            sl__throttle_set_latency(&t, 0);
        else
            sl__throttle_stop(&t, 1);
        pthread_join(th, NULL);
        printf("# change %d released the waiter in %.3f s\n", how,
               secs_since(t0));
        assert_true(is_done(&a));
        assert_true(secs_since(t0) < 10.0);
        if (how == 0)
            assert_int_equal(sl__throttle_rate(&t), 0);
        if (how == 1)
            assert_int_equal(sl__throttle_latency_us(&t), 0);
        sl__throttle_destroy(&t);
    }
}

/* ------------------------------------------------------- through the loader */

static char *root;

static int setup(void **state)
{
    (void)state;
    root = tu_tmpdir("throttle");
    char path[1024];
    enum { W = 160, H = 120 }; /* ~10 KB each: 40 of them outrun a burst */
    uint8_t *rgb = malloc(W * H * 3);
    assert_non_null(rgb);
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/c%d", root, c);
        mkdir(path, 0755);
        for (int i = 0; i < 20; i++) {
            for (size_t k = 0; k < W * H * 3; k++)
                rgb[k] = (uint8_t)((k * 7 + i * 31 + c * 101) ^ (k * k >> 5));
            sl__bytes_t out = {0};
            char err[256];
            assert_int_equal(
                sl__jpeg_encode(rgb, W, H, 85, &out, err, sizeof err), 0);
            snprintf(path, sizeof path, "%s/c%d/%02d.jpg", root, c, i);
            assert_int_equal(tu_write_file(path, out.p, out.n), 0);
            sl__bytes_free(&out);
        }
    }
    free(rgb);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

typedef struct run {
    uint64_t digest;
    double secs;
    int64_t bytes;
} run_t;

static run_t stream(int64_t lat_us, int64_t bw, int read_threads, int set_after,
                    sl_testing_storage_t p, int64_t v)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 8;
    o.image_size = 32;
    o.seed = 11;
    o.policy = SL_POLICY_STATIC;
    o.read_threads = read_threads;
    o.decode_threads = 2;
    o.telemetry_ms = -1;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(
        sl__testing_storage_set(l, SL_TESTING_READ_LATENCY_US, lat_us), 0);
    assert_int_equal(
        sl__testing_storage_set(l, SL_TESTING_READ_BYTES_PER_S, bw), 0);
    run_t r = {0, 0, 0};
    int64_t t0 = sl__now_ns();
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int k = 0;
    while (sl_loader_next(l, &b) == 0) {
        r.digest =
            XXH3_64bits_withSeed(b->data, b->n * b->sample_bytes, r.digest);
        r.digest =
            XXH3_64bits_withSeed(b->labels, b->n * sizeof(int64_t), r.digest);
        sl_loader_release(l, b);
        if (++k == set_after)
            assert_int_equal(sl__testing_storage_set(l, p, v), 0);
    }
    r.secs = secs_since(t0);
    sl_stats_t st;
    sl_stats_init(&st);
    sl_loader_stats(l, &st);
    r.bytes = st.bytes_read;
    sl_loader_destroy(l);
    return r;
}

/* 40 samples, one reader, 10 ms a read: at least 0.4 s, and the same
 * bytes as without; a bandwidth cap likewise; live changes too. */
static void test_loader_throttled_same_stream(void **state)
{
    (void)state;
    run_t base = stream(0, 0, 1, 0, 0, 0);
    run_t lat = stream(10000, 0, 1, 0, 0, 0);
    printf("# loader: plain %.3f s, 10 ms latency %.3f s (>= 0.400)\n",
           base.secs, lat.secs);
    assert_true(lat.digest == base.digest);
    assert_true(lat.secs >= 40 * 0.010 - 0.002);
    int64_t bw = base.bytes; /* the whole epoch's bytes in ~1 s */
    run_t cap = stream(0, bw, 3, 0, 0, 0);
    double floor = ((double)base.bytes - SL_THROTTLE_BURST(bw)) / (double)bw;
    printf("# loader: %lld B at %lld B/s: %.3f s (>= %.3f)\n",
           (long long)base.bytes, (long long)bw, cap.secs, floor);
    assert_true(cap.digest == base.digest);
    assert_true(cap.secs >= floor - 0.002);
    /* Throttle on after the first batch, then off after the second. */
    run_t on = stream(0, 0, 2, 1, SL_TESTING_READ_LATENCY_US, 5000);
    assert_true(on.digest == base.digest);
    run_t off = stream(50000, 0, 2, 1, SL_TESTING_READ_LATENCY_US, 0);
    assert_true(off.digest == base.digest);
}

static void test_loader_knobs(void **state)
{
    (void)state;
    sl_options_t o;
    sl_options_init(&o);
    o.telemetry_ms = -1;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    const sl_testing_storage_t LAT = SL_TESTING_READ_LATENCY_US,
                               BW = SL_TESTING_READ_BYTES_PER_S;
    int64_t v = -7;
    assert_int_equal(sl__testing_storage_get(l, LAT, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(sl__testing_storage_set(l, LAT, 1500), 0);
    assert_int_equal(sl__testing_storage_get(l, LAT, &v), 0);
    assert_int_equal(v, 1500);
    assert_int_equal(sl__testing_storage_set(l, BW, 1 << 20), 0);
    assert_int_equal(sl__testing_storage_get(l, BW, &v), 0);
    assert_int_equal(v, 1 << 20);
    assert_int_equal(sl__testing_storage_set(l, BW, -5), SL_ERANGE);
    assert_int_equal(sl__testing_storage_set(l, LAT, 61000000), SL_ERANGE);
    assert_int_equal(sl__testing_storage_set(l, LAT, 0), 0);
    assert_int_equal(sl__testing_storage_get(l, LAT, &v), 0);
    assert_int_equal(v, 0);
    /* Not knobs: the public knob calls refuse them. */
    assert_int_equal(sl_loader_set(l, (sl_param_t)99, 1000), SL_EINVAL);
    sl_loader_destroy(l);
}

/* Destroying a loader whose readers wait on a huge debt does not hang. */
static void test_destroy_while_throttled(void **state)
{
    (void)state;
    sl_options_t o;
    sl_options_init(&o);
    o.telemetry_ms = -1;
    o.read_threads = 2;
    o.epochs = 100;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    /* one byte a second, after the burst */
    sl__testing_storage_set(l, SL_TESTING_READ_BYTES_PER_S, 1);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    int64_t t0 = sl__now_ns();
    sl_loader_destroy(l);
    printf("# destroy while throttled: %.3f s\n", secs_since(t0));
    assert_true(secs_since(t0) < 10.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bandwidth_cap_is_shared),
        cmocka_unit_test(test_latency_per_read_overlaps),
        cmocka_unit_test(test_live_changes_release_waiters),
        cmocka_unit_test(test_loader_throttled_same_stream),
        cmocka_unit_test(test_loader_knobs),
        cmocka_unit_test(test_destroy_while_throttled),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
