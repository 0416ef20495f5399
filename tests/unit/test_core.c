/* What both loaders share (src/core): the skip log and the batch pool,
 * alone and under concurrent use (also run under TSan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bufpool.h"
#include "core/msglog.h"
#include "testutil.h"

static void test_msglog_bounded(void **state)
{
    (void)state;
    sl__msglog_t g;
    sl__msglog_init(&g, 3);
    for (int i = 0; i < 5; i++)
        sl__msglog_add(&g, "file%d: cause", i);
    assert_int_equal(sl__msglog_count(&g), 5); /* every one counted */
    assert_string_equal(sl__msglog_get(&g, 0), "file0: cause");
    assert_string_equal(sl__msglog_get(&g, 2), "file2: cause");
    assert_null(sl__msglog_get(&g, 3)); /* beyond what is kept */
    assert_null(sl__msglog_get(&g, -1));
    sl__msglog_free(&g);
}

typedef struct {
    atomic_int allocs, frees;
} counter_t;
static void *c_alloc(size_t n, void *ctx)
{
    atomic_fetch_add(&((counter_t *)ctx)->allocs, 1);
    assert_int_equal(n % 64, 0);
    return malloc(n);
}
static void c_free(void *p, void *ctx)
{
    atomic_fetch_add(&((counter_t *)ctx)->frees, 1);
    free(p);
}

static void test_bufpool_reuse_trim(void **state)
{
    (void)state;
    counter_t c = {0, 0};
    sl__allocator_t a = {c_alloc, c_free, &c};
    sl__bufpool_t p;
    sl__bufpool_init(&p, &a, 100);
    void *x = sl__bufpool_get(&p), *y = sl__bufpool_get(&p);
    assert_true(x && y && x != y);
    sl__bufpool_put(&p, x);
    assert_ptr_equal(sl__bufpool_get(&p), x); /* reused, not made */
    assert_int_equal(atomic_load(&c.allocs), 2);
    sl__bufpool_free(&p);
    assert_int_equal(atomic_load(&c.frees), 2); /* x, never returned, too */
    /* the default allocator's returned blocks beyond `keep` are freed */
    sl__allocator_t d = {NULL, NULL, NULL};
    sl__bufpool_init(&p, &d, 100);
    x = sl__bufpool_get(&p), y = sl__bufpool_get(&p);
    sl__bufpool_put(&p, x);
    sl__bufpool_put(&p, y);
    sl__bufpool_trim(&p, 1);
    assert_int_equal(p.nall, 1);
    assert_int_equal(p.nfree, 1);
    void *z = sl__bufpool_get(&p); /* the one kept */
    assert_true(z == x || z == y);
    sl__bufpool_free(&p); /* frees z, not put back */
}

/* A lowered depth frees none of the caller's blocks (pinned memory's
 * free, cudaFreeHost, waits for the whole GPU: a stall on the trainer's
 * thread): trim parks them, get takes them back before making one, the
 * pool's free frees them; the rule the image loader's buffers follow
 * (unit.test_loader test_lowered_depth_frees_no_callers_buffer). */
static void test_bufpool_trim_parks_callers_blocks(void **state)
{
    (void)state;
    counter_t c = {0, 0};
    sl__allocator_t a = {c_alloc, c_free, &c};
    sl__bufpool_t p;
    sl__bufpool_init(&p, &a, 100);
    void *b[3];
    for (int i = 0; i < 3; i++)
        b[i] = sl__bufpool_get(&p);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sl__bufpool_put(&p, b[i]), 0);
    sl__bufpool_trim(&p, 0);
    assert_int_equal(atomic_load(&c.frees), 0);
    for (int i = 0; i < 3; i++)
        assert_non_null(sl__bufpool_get(&p)); /* the parked ones */
    assert_int_equal(atomic_load(&c.allocs), 3);
    sl__bufpool_free(&p);
    assert_int_equal(atomic_load(&c.frees), 3);
}

/* The default allocator: 64-byte aligned blocks. */
static void test_bufpool_default_aligned(void **state)
{
    (void)state;
    sl__allocator_t a = {NULL, NULL, NULL};
    sl__bufpool_t p;
    sl__bufpool_init(&p, &a, 1000);
    void *x = sl__bufpool_get(&p);
    assert_int_equal((uintptr_t)x % 64, 0);
    memset(x, 1, 1000);
    sl__bufpool_free(&p); /* frees x, never returned */
}

#define NTHREADS 8
#define ROUNDS 2000
typedef struct {
    sl__bufpool_t *pool;
    sl__msglog_t *log;
    int id;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    void *held[3];
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < 3; k++) {
            held[k] = sl__bufpool_get(w->pool);
            assert_non_null(held[k]);
            *(int *)held[k] = w->id; /* owned by this thread alone */
        }
        for (int k = 0; k < 3; k++) {
            assert_int_equal(*(int *)held[k], w->id);
            sl__bufpool_put(w->pool, held[k]);
        }
        if (r % 100 == 0) {
            sl__msglog_add(w->log, "thread %d round %d", w->id, r);
            sl__bufpool_trim(w->pool, NTHREADS);
        }
    }
    return NULL;
}

/* state: 0, the caller's (counting) allocator, whose blocks trim parks;
 * 1, the default one, whose blocks trim frees while others get and put. */
static void test_concurrent(void **state)
{
    int dflt = *state != NULL;
    counter_t c = {0, 0};
    sl__allocator_t a = {dflt ? NULL : c_alloc, dflt ? NULL : c_free, &c};
    sl__bufpool_t p;
    sl__msglog_t g;
    sl__bufpool_init(&p, &a, sizeof(int));
    sl__msglog_init(&g, 50);
    pthread_t th[NTHREADS];
    worker_t w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker_t){&p, &g, i};
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(sl__msglog_count(&g), NTHREADS * (ROUNDS / 100));
    assert_non_null(sl__msglog_get(&g, 49));
    assert_null(sl__msglog_get(&g, 50));
    sl__bufpool_free(&p);
    sl__msglog_free(&g);
    assert_int_equal(atomic_load(&c.frees), atomic_load(&c.allocs));
    assert_true(dflt || atomic_load(&c.allocs) >= 3);
}

int main(void)
{
    static int dflt = 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_msglog_bounded),
        cmocka_unit_test(test_bufpool_reuse_trim),
        cmocka_unit_test(test_bufpool_default_aligned),
        cmocka_unit_test(test_bufpool_trim_parks_callers_blocks),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test_prestate(test_concurrent, &dflt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
