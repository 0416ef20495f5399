/* Soak (issue 14): many epochs over a small generated ImageFolder while the
 * knobs keep changing, from a second thread (as the scheduler does, every
 * ~2 ms) and from the consumer between batches (every 3 batches): read
 * threads 1..3, decode threads 1..3, prefetch 1..6. Checks:
 *   - the stream is bit-identical to a run with fixed knobs (one xxh3 over
 *     every batch's pixels, labels and indices, in order);
 *   - memory is flat: VmRSS after the last epoch is within
 *     SOAK_RSS_SLACK_MB (8 MiB) or 10 % of VmRSS after epoch 2, whichever
 *     is larger. Measured on a 2-core VM: +1 to +2 MiB after 10 epochs,
 *     +3.8 after 60, +4.6 after 200, +2.8 after 500 (89 s); with
 *     MALLOC_ARENA_MAX=1, +0.9 after 200: glibc's per-thread arenas as
 *     pool threads come and go, not a leak (a batch buffer lost per batch
 *     would be +26 MiB by epoch 10);
 *   - nothing hangs (a watchdog: 10 s a epoch, at least 60 s).
 * Short by default (label `soak`, in `make check`: 10 epochs of 256
 * images, a training step of 1 ms a batch: a few seconds on 2 cores). The
 * longer variant scales with SL_SOAK_EPOCHS=N   (default 10; e.g. 2000 for ~6
 * minutes) SL_SOAK_IMAGES=N   (default 256 images, 8 classes) e.g.
 * `SL_SOAK_EPOCHS=2000 build/tests/test_soak` (README.md, "Soak test"). Under a
 * sanitizer (ASan's quarantine, TSan's shadow) RSS is not a measure of leaks:
 * the RSS check is skipped there (the stream check stays). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "sluice/sluice.h"
#include "testutil.h"

#define SOAK_RSS_SLACK_MB 8.0

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_SANITIZED 1
#endif
#endif
#ifndef SOAK_SANITIZED
#define SOAK_SANITIZED 0
#endif

static char *root;
static int64_t epochs = 10;
static int images = 256;

static int64_t env_int(const char *name, int64_t def, int64_t lo, int64_t hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x < lo || x > hi) {
        fprintf(stderr, "%s=%s: want %lld..%lld\n", name, v, (long long)lo,
                (long long)hi);
        exit(2);
    }
    return x;
}

static int setup(void **state)
{
    (void)state;
    epochs = env_int("SL_SOAK_EPOCHS", 10, 3, 1000000);
    images = (int)env_int("SL_SOAK_IMAGES", 256, 16, 1 << 20);
    root = tu_jpeg_tree("soak", 8, images / 8, 128, 96);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

/* VmRSS of this process, MiB. */
static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (double)kb / 1024.0;
}

typedef struct {
    sl_loader_t *l;
    atomic_int stop;
    int64_t sets, failed;
} knobber_t;

/* A small LCG: the knob and value to set next. @return sl_loader_set's. */
static int turn(sl_loader_t *l, unsigned *st)
{
    *st = *st * 1103515245u + 12345u;
    unsigned r = *st >> 16;
    sl_param_t p = r % 3 == 0   ? SL_PARAM_READ_THREADS
                   : r % 3 == 1 ? SL_PARAM_DECODE_THREADS
                                : SL_PARAM_PREFETCH;
    return sl_loader_set(l, p, 1 + r / 3 % (p == SL_PARAM_PREFETCH ? 6 : 3));
}

/* From a second thread (no cmocka asserts here: they jump to the test's
 * thread); failures are counted and checked by the test. */
static void *knobber(void *arg)
{
    knobber_t *k = arg;
    unsigned st = 99;
    while (!atomic_load(&k->stop)) {
        k->failed += turn(k->l, &st) != 0;
        k->sets++;
        usleep(2000);
    }
    return NULL;
}

static sl_options_t soak_opts(void)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 12; /* 256 images: 22 batches, the last of 4 */
    o.image_size = 64;
    o.epochs = epochs;
    o.seed = 17;
    o.read_threads = 1;
    o.decode_threads = 2;
    o.prefetch = 4;
    o.policy = SL_POLICY_STATIC; /* the knobs are this test's */
    o.telemetry_ms = -1;
    return o;
}

/* One run: the digest of the stream; with `turning`, knobs change from a
 * second thread and between batches, and RSS is taken after epoch 2 and
 * after the last. */
static uint64_t run(int turning, double *rss2, double *rss_end, int64_t *sets)
{
    sl_options_t o = soak_opts();
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    int64_t nb = sl_loader_batches_per_epoch(l);
    knobber_t k = {l, 0, 0, 0};
    pthread_t th;
    if (turning)
        assert_int_equal(pthread_create(&th, NULL, knobber, &k), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    uint64_t h = 0;
    unsigned st = 7;
    const sl_batch_t *b;
    int64_t n = 0, samples = 0;
    int rc;
    while ((rc = sl_loader_next(l, &b)) == 0) {
        assert_int_equal(b->epoch * nb + b->index, n); /* ordered */
        h = XXH3_64bits_withSeed(b->data, (size_t)b->n * b->sample_bytes, h);
        h = XXH3_64bits_withSeed(b->labels, (size_t)b->n * sizeof(int64_t), h);
        h = XXH3_64bits_withSeed(b->indices, (size_t)b->n * sizeof(int64_t), h);
        samples += b->n;
        if (turning)
            usleep(1000); /* a training step: the knobber gets its turns */
        sl_loader_release(l, b);
        n++;
        if (turning && n % 3 == 0)
            assert_int_equal(turn(l, &st), 0);
        if (n == 2 * nb && rss2)
            *rss2 = rss_mb();
    }
    assert_int_equal(rc, SL_EEND);
    if (rss_end)
        *rss_end = rss_mb();
    if (turning) {
        atomic_store(&k.stop, 1);
        pthread_join(th, NULL);
        assert_int_equal(k.failed, 0);
        *sets = k.sets + n / 3;
    }
    assert_int_equal(n, epochs * nb);
    assert_int_equal(samples, epochs * images / 8 * 8);
    sl_loader_destroy(l);
    return h;
}

static void test_soak(void **state)
{
    (void)state;
    tu_watchdog((unsigned)(epochs * 10 < 60 ? 60 : epochs * 10), 0,
                "the soak run hung");
    uint64_t fixed = run(0, NULL, NULL, NULL);
    double r2 = 0, r_end = 0;
    int64_t sets = 0;
    uint64_t turned = run(1, &r2, &r_end, &sets);
    tu_watchdog(0, 0, NULL);
    printf("soak: %lld epochs of %d images, %lld knob changes; digest "
           "%016llx (fixed knobs %016llx); VmRSS after epoch 2 %.1f MiB, "
           "after epoch %lld %.1f MiB\n",
           (long long)epochs, images / 8 * 8, (long long)sets,
           (unsigned long long)turned, (unsigned long long)fixed, r2,
           (long long)epochs, r_end);
    assert_true(sets >= epochs);
    assert_true(turned == fixed);
    if (SOAK_SANITIZED) {
        printf("soak: sanitizer build, RSS check skipped\n");
        return;
    }
    double slack =
        r2 * 0.10 > SOAK_RSS_SLACK_MB ? r2 * 0.10 : SOAK_RSS_SLACK_MB;
    assert_true(r2 > 0);
    assert_true(r_end <= r2 + slack);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_soak),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
