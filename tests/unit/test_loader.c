/* The loader end to end on a generated ImageFolder: exact epoch coverage,
 * bit-identical ordered streams whatever the threads and knob changes,
 * unordered multiset, resume, and the skip/fail policies. Also run under
 * TSan (make check). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#include "ops/image.h"
#include "sluice/sluice.h"
#include "sluice/text.h"
#include "testutil.h"

#define NCLASS 3
#define PER_CLASS 23
#define N (NCLASS * PER_CLASS)

static char *root;    /* good images only */
static char *badroot; /* the same plus broken files */

static void write_jpeg(const char *path, int w, int h, int seed)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 4 + seed * 13);
            p[1] = (uint8_t)(y * 5 + seed * 7);
            p[2] = (uint8_t)((x ^ y) + seed);
        }
    sl__bytes_t out = {0};
    char err[256];
    assert_int_equal(sl__jpeg_encode(rgb, w, h, 85, &out, err, sizeof err), 0);
    assert_int_equal(tu_write_file(path, out.p, out.n), 0);
    sl__bytes_free(&out);
    free(rgb);
}

static void make_tree(const char *dir)
{
    char path[1024];
    for (int c = 0; c < NCLASS; c++) {
        snprintf(path, sizeof path, "%s/class%d", dir, c);
        mkdir(path, 0755);
        for (int i = 0; i < PER_CLASS; i++) {
            snprintf(path, sizeof path, "%s/class%d/img%03d.jpg", dir, c, i);
            write_jpeg(path, 40 + (i * 7) % 50, 30 + (i * 11) % 40,
                       c * 100 + i);
        }
    }
}

static int setup(void **state)
{
    (void)state;
    root = tu_tmpdir("loader");
    badroot = tu_tmpdir("loader-bad");
    make_tree(root);
    make_tree(badroot);
    char path[1024];
    /* Broken files: truncated JPEG, text named .jpg, empty .png. */
    snprintf(path, sizeof path, "%s/class0/img001.jpg", badroot);
    size_t n;
    uint8_t *p = tu_read_file(path, &n);
    snprintf(path, sizeof path, "%s/class0/zz_truncated.jpg", badroot);
    tu_write_file(path, p, n / 3);
    free(p);
    snprintf(path, sizeof path, "%s/class1/zz_notes.jpg", badroot);
    tu_write_file(path, "not an image\n", 13);
    snprintf(path, sizeof path, "%s/class2/zz_empty.png", badroot);
    tu_write_file(path, "", 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    tu_rmtree(badroot);
    free(root);
    free(badroot);
    return 0;
}

static sl_options_t small_opts(void)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 8;
    o.image_size = 24;
    o.seed = 1234;
    o.decode_threads = 2;
    return o;
}

typedef struct run {
    uint64_t digest;
    int64_t batches, samples;
    int seen[N + 8];
} run_t;

/* Streams every batch; optional knob changes at given batch numbers. */
static int stream(sl_loader_t *l, const sl_position_t *pos, run_t *r,
                  int change_knobs, int64_t stop_after)
{
    memset(r, 0, sizeof *r);
    int rc = sl_loader_start(l, pos);
    if (rc)
        return rc;
    const sl_batch_t *b;
    while ((rc = sl_loader_next(l, &b)) == 0) {
        if (change_knobs) {
            if (r->batches == 2)
                sl_loader_set(l, SL_PARAM_DECODE_THREADS, 5);
            if (r->batches == 3)
                sl_loader_set(l, SL_PARAM_PREFETCH, 1);
            if (r->batches == 5)
                sl_loader_set(l, SL_PARAM_READ_THREADS, 3);
            if (r->batches == 6)
                sl_loader_set(l, SL_PARAM_DECODE_THREADS, 1);
            if (r->batches == 7)
                sl_loader_set(l, SL_PARAM_PREFETCH, 6);
        }
        r->digest =
            XXH3_64bits_withSeed(b->data, b->n * b->sample_bytes, r->digest);
        r->digest =
            XXH3_64bits_withSeed(b->labels, b->n * sizeof(int64_t), r->digest);
        for (int i = 0; i < b->n; i++)
            r->seen[b->indices[i]]++;
        r->batches++;
        r->samples += b->n;
        sl_loader_release(l, b);
        if (stop_after && r->batches == stop_after)
            return 0;
    }
    return rc == SL_EEND ? 0 : rc;
}

static void test_coverage_and_labels(void **state)
{
    (void)state;
    sl_options_t o = small_opts();
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_num_samples(l), N);
    assert_int_equal(sl_loader_num_classes(l), NCLASS);
    assert_string_equal(sl_loader_class_name(l, 1), "class1");
    assert_int_equal(sl_loader_batches_per_epoch(l), (N + 7) / 8);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int seen[N] = {0};
    while (sl_loader_next(l, &b) == 0) {
        assert_int_equal(b->height, 24);
        assert_int_equal(b->channels, 3);
        for (int i = 0; i < b->n; i++) {
            seen[b->indices[i]]++;
            /* sorted classes, sorted files: index / PER_CLASS is the class */
            assert_int_equal(b->labels[i], b->indices[i] / PER_CLASS);
        }
        sl_loader_release(l, b);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);
    sl_loader_destroy(l);
}

static void test_ordered_identical_across_threads_and_knobs(void **state)
{
    (void)state;
    run_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    sl_options_t o = small_opts();
    o.epochs = 2;
    o.decode_threads = 1;
    o.prefetch = 1;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(stream(l, NULL, a, 0, 0), 0);
    sl_loader_destroy(l);
    assert_int_equal(a->samples, 2 * N);
    for (int i = 0; i < N; i++)
        assert_int_equal(a->seen[i], 2);

    o.decode_threads = 4;
    o.read_threads = 2;
    o.prefetch = 3;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(stream(l, NULL, b, 1, 0), 0);
    assert_int_equal(b->samples, 2 * N);
    assert_true(a->digest == b->digest);
    int64_t v;
    sl_loader_get(l, SL_PARAM_PREFETCH, &v);
    assert_int_equal(v, 6);
    sl_loader_get(l, SL_PARAM_DECODE_THREADS, &v);
    assert_int_equal(v, 1);
    sl_loader_destroy(l);

    /* Another seed: another stream. */
    o.seed = 99;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(stream(l, NULL, b, 0, 0), 0);
    assert_true(a->digest != b->digest);
    sl_loader_destroy(l);
    free(a);
    free(b);
}

static void test_unordered_same_multiset(void **state)
{
    (void)state;
    sl_options_t o = small_opts();
    o.unordered = 1;
    o.decode_threads = 4;
    o.epochs = 3;
    run_t *r = malloc(sizeof *r);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(stream(l, NULL, r, 1, 0), 0);
    assert_int_equal(r->samples, 3 * N);
    for (int i = 0; i < N; i++)
        assert_int_equal(r->seen[i], 3);
    sl_loader_destroy(l);
    free(r);
}

static void test_resume_yields_the_rest(void **state)
{
    (void)state;
    sl_options_t o = small_opts();
    o.epochs = 2;
    run_t *full = malloc(sizeof *full), *part = malloc(sizeof *part);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(stream(l, NULL, full, 0, 0), 0);
    sl_loader_destroy(l);

    /* Interrupt after 11 batches (inside epoch 1), then resume in a new
     * loader: digests chain to the uninterrupted one. */
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(stream(l, NULL, part, 0, 11), 0);
    sl_position_t pos;
    assert_int_equal(sl_loader_position(l, &pos), 0);
    int64_t nb = sl_loader_batches_per_epoch(l);
    assert_int_equal(pos.epoch * nb + pos.batch, 11);
    uint64_t h = part->digest;
    sl_loader_destroy(l);

    o.epochs = 2 - pos.epoch;
    o.decode_threads = 3;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    memset(part, 0, sizeof *part);
    assert_int_equal(sl_loader_start(l, &pos), 0);
    const sl_batch_t *b;
    int64_t more = 0;
    while (sl_loader_next(l, &b) == 0) {
        h = XXH3_64bits_withSeed(b->data, b->n * b->sample_bytes, h);
        h = XXH3_64bits_withSeed(b->labels, b->n * sizeof(int64_t), h);
        more++;
        sl_loader_release(l, b);
    }
    assert_int_equal(more, 2 * nb - 11);
    assert_true(h == full->digest);
    sl_loader_destroy(l);
    free(full);
    free(part);
}

static void test_skip_policy_loses_nothing(void **state)
{
    (void)state;
    sl_options_t o = small_opts();
    o.on_error = SL_ON_ERROR_SKIP;
    o.epochs = 2;
    o.decode_threads = 3;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(badroot, &o, &l), 0);
    int64_t total = sl_loader_num_samples(l);
    assert_int_equal(total, N + 3);
    run_t *r = malloc(sizeof *r);
    assert_int_equal(stream(l, NULL, r, 0, 0), 0);
    /* Every valid sample exactly once per epoch; the 3 broken ones never. */
    assert_int_equal(r->samples, 2 * N);
    assert_int_equal(sl_loader_skipped_count(l), 6);
    int named[3] = {0};
    for (int64_t i = 0; i < 6; i++) {
        const char *m = sl_loader_skipped_message(l, i);
        assert_non_null(m);
        named[0] |= strstr(m, "zz_truncated.jpg") != NULL;
        named[1] |= strstr(m, "zz_notes.jpg") != NULL;
        named[2] |= strstr(m, "zz_empty.png") != NULL;
    }
    assert_true(named[0] && named[1] && named[2]);
    int broken = 0;
    for (int64_t i = 0; i < total; i++) {
        assert_true(r->seen[i] == 2 || r->seen[i] == 0);
        broken += r->seen[i] == 0;
    }
    assert_int_equal(broken, 3);
    sl_loader_destroy(l);
    free(r);
}

static void test_fail_policy_names_file(void **state)
{
    (void)state;
    sl_options_t o = small_opts();
    o.no_shuffle = 1;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(badroot, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int rc;
    while ((rc = sl_loader_next(l, &b)) == 0)
        sl_loader_release(l, b);
    assert_int_not_equal(rc, SL_EEND);
    assert_non_null(strstr(sl_loader_last_error(l), "zz_truncated.jpg"));
    assert_int_equal(sl_loader_next(l, &b), rc); /* stays failed */
    sl_loader_destroy(l);
}

static void *test_alloc(size_t bytes, void *ctx)
{
    (void)ctx;
    return malloc(bytes);
}

static void test_bad_source_and_options(void **state)
{
    (void)state;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create("/nonexistent/dir", NULL, &l),
                     SL_ENOTFOUND);
    assert_non_null(strstr(sl_loader_last_error(NULL), "/nonexistent/dir"));
    sl_options_t o = small_opts();
    o.rank = 5;
    o.world_size = 2;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_null(l);
    sl_loader_destroy(NULL);
    /* options that were taken silently (the C API review): each refused,
     * named */
    static const struct {
        int unordered, max_threads, port, tel;
        int64_t mem, epochs;
        int alloc_only;
        const char *says;
    } bad[] = {
        {2, 0, 0, 0, 0, 0, 0, "unordered 2"},
        {0, -3, 0, 0, 0, 0, 0, "max_threads -3"},
        {0, 0, 0, 0, -1, 0, 0, "max_memory_bytes -1"},
        {0, 0, 70000, 0, 0, 0, 0, "metrics_port 70000"},
        {0, 0, 9477, -1, 0, 0, 0, "needs the collector"},
        {0, 0, 0, 0, 0, INT64_MAX, 0, "must fit 64 bits"},
        {0, 0, 0, 0, 0, 0, 1, "both or neither"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        o = small_opts();
        o.unordered = bad[i].unordered;
        o.max_threads = bad[i].max_threads;
        o.metrics_port = bad[i].port;
        o.telemetry_ms = bad[i].tel;
        o.max_memory_bytes = bad[i].mem;
        o.epochs = bad[i].epochs;
        if (bad[i].alloc_only)
            o.buffer_alloc = test_alloc;
        assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
        if (!strstr(sl_loader_last_error(NULL), bad[i].says))
            fail_msg("case %zu: '%s'", i, sl_loader_last_error(NULL));
    }
}

typedef struct counts {
    atomic_int allocs, frees;
} counts_t;

static void *count_alloc(size_t bytes, void *ctx)
{
    atomic_fetch_add(&((counts_t *)ctx)->allocs, 1);
    return malloc(bytes);
}

static void count_free(void *p, void *ctx)
{
    atomic_fetch_add(&((counts_t *)ctx)->frees, 1);
    free(p);
}

/* Takes k batches of l (started), each released. */
static void take(sl_loader_t *l, int k)
{
    const sl_batch_t *b;
    for (int i = 0; i < k; i++) {
        assert_int_equal(sl_loader_next(l, &b), 0);
        assert_int_equal(sl_loader_release(l, b), 0);
    }
}

/* A lowered depth frees none of the caller's buffers mid-run (pinned
 * memory's free, cudaFreeHost, waits for the whole GPU: on the trainer's
 * or the scheduler's thread, a stall): they are parked, a raise takes
 * them back before allocating, destroy frees them; the stream is the
 * same. */
static void test_lowered_depth_frees_no_callers_buffer(void **state)
{
    (void)state;
    counts_t c = {0, 0};
    sl_options_t o = small_opts();
    o.epochs = 2;
    int64_t n;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    uint64_t want = tu_stream_digest(l, &n);
    sl_loader_destroy(l);
    o.prefetch = 8;
    o.buffer_alloc = count_alloc;
    o.buffer_free = count_free;
    o.buffer_ctx = &c;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    take(l, 6);
    int made = atomic_load(&c.allocs);
    assert_true(made >= 2);
    assert_int_equal(sl_loader_set(l, SL_PARAM_PREFETCH, 1), 0);
    take(l, 3);
    assert_int_equal(atomic_load(&c.frees), 0);
    assert_int_equal(sl_loader_set(l, SL_PARAM_PREFETCH, 8), 0);
    take(l, 3);
    int64_t m;
    assert_int_equal(tu_stream_digest(l, &m), want);
    assert_int_equal(m, n);
    assert_int_equal(atomic_load(&c.frees), 0);
    int allocs = atomic_load(&c.allocs);
    sl_loader_destroy(l);
    assert_int_equal(atomic_load(&c.frees), allocs);
}

static sl_loader_t *held_l;
static const sl_batch_t *held_b;

static void *release_later(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 200000000}, NULL); /* 200 ms */
    assert_int_equal(sl_loader_release(held_l, held_b), 0);
    return NULL;
}

static double secs_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The last error is the handle's: a destroyed loader's message does not
 * pass to a new one (at the same address, as malloc often gives), and a
 * failed text create is not the image create's (the C API review). */
static void test_last_error_is_the_handles(void **state)
{
    (void)state;
    sl_options_t o = small_opts();
    sl_loader_t *l, *m;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_set(l, SL_PARAM_PREFETCH, -42), SL_ERANGE);
    assert_non_null(strstr(sl_loader_last_error(l), "prefetch = -42"));
    sl_loader_destroy(l);
    assert_int_equal(sl_loader_create(root, &o, &m), 0);
    assert_string_equal(sl_loader_last_error(m), "");
    sl_loader_destroy(m);
    assert_int_equal(sl_loader_create("/nonexistent/img", &o, &l),
                     SL_ENOTFOUND);
    assert_non_null(strstr(sl_loader_last_error(NULL), "/nonexistent/img"));
    sl_text_loader_t *t;
    assert_int_not_equal(sl_text_loader_create(NULL, 0, NULL, &t), 0);
    assert_non_null(strstr(sl_text_loader_last_error(NULL), "no text source"));
    /* one slot a thread, as errno: the image create's message is gone,
     * and the text create's is not read as it */
    assert_string_equal(sl_loader_last_error(NULL), "");
}

/* A batch_size past the rank's samples (the whole set in one batch): the
 * buffer holds the samples there are, not batch_size of them; and the
 * getters take a NULL loader (0 / NULL), as their siblings do. */
static void test_whole_set_in_one_batch(void **state)
{
    (void)state;
    sl_options_t o = small_opts();
    o.batch_size = 1000000;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_batches_per_epoch(l), 1);
    assert_int_equal(sl_loader_batch_bytes(l), (size_t)N * 24 * 24 * 3);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    assert_int_equal(sl_loader_next(l, &b), 0);
    assert_int_equal(b->n, N);
    assert_int_equal(sl_loader_release(l, b), 0);
    assert_int_equal(sl_loader_next(l, &b), SL_EEND);
    sl_loader_destroy(l);
    assert_int_equal(sl_loader_num_samples(NULL), 0);
    assert_int_equal(sl_loader_num_classes(NULL), 0);
    assert_null(sl_loader_class_name(NULL, 0));
    assert_int_equal(sl_loader_batches_per_epoch(NULL), 0);
    assert_int_equal(sl_loader_batch_bytes(NULL), 0);
}

/* Every buffer held: next waits for another thread's release (release is
 * "any thread"), and a consumer that keeps them all gets SL_ESTATE naming
 * the cause after SL__HELD_WAIT_MS (5 s), counted across calls, so a loop
 * of short timeouts ends too: an error, not a hang. */
static void test_all_held_is_an_error_not_a_hang(void **state)
{
    (void)state;
    sl_options_t o = small_opts();
    o.prefetch = 2;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *a, *b, *c;
    assert_int_equal(sl_loader_next(l, &a), 0);
    assert_int_equal(sl_loader_next(l, &b), 0);
    /* another thread releases b while next waits */
    held_l = l;
    held_b = b;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, NULL), 0);
    assert_int_equal(sl_loader_next(l, &c), 0);
    pthread_join(t, NULL);
    /* a and c held, nobody releases: short timeouts, then the cause */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc, calls = 0;
    const sl_batch_t *d;
    while ((rc = sl_loader_next_timeout(l, &d, 100)) == SL_ETIMEDOUT)
        calls++;
    assert_int_equal(rc, SL_ESTATE);
    double s = secs_since(&t0);
    assert_true(s > 4.5 && s < 8);
    assert_true(calls >= 40);
    assert_non_null(strstr(sl_loader_last_error(l), "is held by the consumer"));
    sl_loader_destroy(l); /* frees held batches too */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coverage_and_labels),
        cmocka_unit_test(test_ordered_identical_across_threads_and_knobs),
        cmocka_unit_test(test_unordered_same_multiset),
        cmocka_unit_test(test_resume_yields_the_rest),
        cmocka_unit_test(test_skip_policy_loses_nothing),
        cmocka_unit_test(test_fail_policy_names_file),
        cmocka_unit_test(test_bad_source_and_options),
        cmocka_unit_test(test_all_held_is_an_error_not_a_hang),
        cmocka_unit_test(test_whole_set_in_one_batch),
        cmocka_unit_test(test_last_error_is_the_handles),
        cmocka_unit_test(test_lowered_depth_frees_no_callers_buffer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
