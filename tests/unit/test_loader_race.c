/* Regressions of issue 14 (hardening), items 2 and 3: sl_loader_set racing
 * sl_loader_start (the scheduler sets knobs from the telemetry thread while
 * a user restarts), and a batch buffer that cannot be allocated while the
 * consumer holds a batch. Both hung before; a watchdog turns a hang into a
 * failure. Also run under TSan (concurrency label). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "ops/image.h"
#include "sluice/sluice.h"
#include "testutil.h"

static char *root;

static int setup(void **state)
{
    (void)state;
    root = tu_jpeg_tree("race", 2, 16, 24, 20);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

typedef struct {
    sl_loader_t *l;
    atomic_int stop;
} flipper_t;

/* As the scheduler does, from another thread: readers 1 <-> 3, prefetch
 * 2 <-> 6 (a decrease frees buffers and compacts the array). */
static void *flipper(void *arg)
{
    flipper_t *f = arg;
    for (int i = 0; !atomic_load(&f->stop); i++) {
        sl_loader_set(f->l, SL_PARAM_READ_THREADS, i % 2 ? 3 : 1);
        sl_loader_set(f->l, SL_PARAM_PREFETCH, i % 3 ? 2 : 6);
        sl_loader_set(f->l, SL_PARAM_DECODE_THREADS, i % 2 ? 1 : 2);
    }
    return NULL;
}

static void test_set_races_start(void **state)
{
    (void)state;
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.policy = SL_POLICY_STATIC;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    flipper_t f = {l, 0};
    pthread_t th;
    pthread_create(&th, NULL, flipper, &f);
    tu_watchdog(120, 0, "the loader hung");
    for (int round = 0; round < 40; round++) {
        sl_position_t pos = {round % 3, round % 8};
        assert_int_equal(sl_loader_start(l, &pos), 0);
        const sl_batch_t *b;
        for (int k = 0; k < 3; k++) {
            int rc = sl_loader_next(l, &b);
            if (rc == SL_EEND)
                break;
            assert_int_equal(rc, 0);
            assert_int_equal(b->epoch, pos.epoch + (pos.batch + k) / 8);
            sl_loader_release(l, b);
        }
    }
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);
    tu_watchdog(0, 0, NULL);
    sl_loader_destroy(l);
}

/* An allocator that serves its first block only. */
static atomic_int nalloc;
static void *first_only(size_t n, void *ctx)
{
    (void)ctx;
    return atomic_fetch_add(&nalloc, 1) == 0 ? aligned_alloc(64, n) : NULL;
}
static void plain_free(void *p, void *ctx)
{
    (void)ctx;
    free(p);
}

/* Holding batch 1 (as every Python loop does) while the second buffer
 * cannot be made: next() fails with SL_ENOMEM instead of waiting. */
static void test_alloc_fails_while_held(void **state)
{
    (void)state;
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.prefetch = 3;
    o.buffer_alloc = first_only;
    o.buffer_free = plain_free;
    atomic_store(&nalloc, 0);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    tu_watchdog(60, 0, "the loader hung");
    const sl_batch_t *held, *b;
    assert_int_equal(sl_loader_next(l, &held), 0);
    assert_int_equal(sl_loader_next(l, &b), SL_ENOMEM);
    assert_non_null(strstr(sl_loader_last_error(l), "cannot allocate"));
    tu_watchdog(0, 0, NULL);
    sl_loader_release(l, held);
    sl_loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_races_start),
        cmocka_unit_test(test_alloc_fails_while_held),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
