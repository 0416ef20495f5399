/* Bounded MPMC queue: FIFO order, blocking at capacity, close semantics,
 * and many producers/consumers moving every item exactly once (TSan). */
#include <pthread.h>
#include <stdlib.h>

#include "exec/queue.h"
#include "sluice/sluice.h"
#include "testutil.h"

static void test_fifo_and_capacity(void **state)
{
    (void)state;
    sl__queue_t *q = sl__queue_create(3);
    assert_non_null(q);
    for (intptr_t i = 1; i <= 3; i++)
        assert_int_equal(sl__queue_push(q, (void *)i), 0);
    assert_int_equal(sl__queue_len(q), 3);
    void *p;
    for (intptr_t i = 1; i <= 3; i++) {
        assert_int_equal(sl__queue_pop(q, &p), 0);
        assert_int_equal((intptr_t)p, i);
    }
    assert_int_equal(sl__queue_try_pop(q, &p), SL_EEND);
    sl__queue_destroy(q);
}

/* A free list: pop_newest takes the last pushed, so a loader reusing one
 * item keeps using that one (its buffer warm) instead of cycling through
 * all of them (every buffer grown: RSS that climbs over epochs). */
static void test_pop_newest_is_lifo_across_the_wrap(void **state)
{
    (void)state;
    sl__queue_t *q = sl__queue_create(3);
    void *p;
    for (intptr_t i = 1; i <= 3; i++)
        assert_int_equal(sl__queue_push(q, (void *)i), 0);
    assert_int_equal(sl__queue_pop(q, &p), 0);         /* 1: head moves */
    assert_int_equal(sl__queue_push(q, (void *)4), 0); /* wraps */
    assert_int_equal(sl__queue_pop_newest(q, &p), 0);
    assert_int_equal((intptr_t)p, 4);
    assert_int_equal(sl__queue_push(q, (void *)4), 0);
    assert_int_equal(sl__queue_pop_newest(q, &p), 0);
    assert_int_equal((intptr_t)p, 4); /* the same one again */
    assert_int_equal(sl__queue_pop_newest(q, &p), 0);
    assert_int_equal((intptr_t)p, 3);
    assert_int_equal(sl__queue_pop(q, &p), 0);
    assert_int_equal((intptr_t)p, 2);
    sl__queue_close(q);
    assert_int_equal(sl__queue_pop_newest(q, &p), SL_EEND);
    sl__queue_destroy(q);
}

static void test_close_drains_then_ends(void **state)
{
    (void)state;
    sl__queue_t *q = sl__queue_create(4);
    sl__queue_push(q, (void *)1);
    sl__queue_close(q);
    assert_int_equal(sl__queue_push(q, (void *)2), SL_ESTATE);
    void *p;
    assert_int_equal(sl__queue_pop(q, &p), 0);
    assert_int_equal((intptr_t)p, 1);
    assert_int_equal(sl__queue_pop(q, &p), SL_EEND);
    sl__queue_reopen(q);
    assert_int_equal(sl__queue_push(q, (void *)3), 0);
    sl__queue_destroy(q);
}

#define PRODUCERS 4
#define CONSUMERS 4
#define PER_PRODUCER 20000

typedef struct shared {
    sl__queue_t *q;
    int base;
    long long sum;
    int count;
    unsigned char *seen;
    pthread_mutex_t mu;
} shared_t;

typedef struct parg {
    shared_t *s;
    int id;
} parg_t;

static void *producer(void *p)
{
    parg_t *a = p;
    for (int i = 0; i < PER_PRODUCER; i++)
        sl__queue_push(a->s->q,
                       (void *)(intptr_t)(a->id * PER_PRODUCER + i + 1));
    return NULL;
}

static void *consumer(void *p)
{
    shared_t *s = p;
    void *item;
    while (sl__queue_pop(s->q, &item) == 0) {
        intptr_t v = (intptr_t)item - 1;
        pthread_mutex_lock(&s->mu);
        s->seen[v]++;
        s->count++;
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

static void test_mpmc_every_item_once(void **state)
{
    (void)state;
    shared_t s = {0};
    s.q = sl__queue_create(8); /* small: producers block often */
    s.seen = calloc(PRODUCERS * PER_PRODUCER, 1);
    pthread_mutex_init(&s.mu, NULL);
    pthread_t pt[PRODUCERS], ct[CONSUMERS];
    parg_t pa[PRODUCERS];
    for (int i = 0; i < CONSUMERS; i++)
        pthread_create(&ct[i], NULL, consumer, &s);
    for (int i = 0; i < PRODUCERS; i++) {
        pa[i].s = &s;
        pa[i].id = i;
        pthread_create(&pt[i], NULL, producer, &pa[i]);
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(pt[i], NULL);
    sl__queue_close(s.q);
    for (int i = 0; i < CONSUMERS; i++)
        pthread_join(ct[i], NULL);
    assert_int_equal(s.count, PRODUCERS * PER_PRODUCER);
    for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++)
        assert_int_equal(s.seen[i], 1);
    free(s.seen);
    pthread_mutex_destroy(&s.mu);
    sl__queue_destroy(s.q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_and_capacity),
        cmocka_unit_test(test_pop_newest_is_lifo_across_the_wrap),
        cmocka_unit_test(test_close_drains_then_ends),
        cmocka_unit_test(test_mpmc_every_item_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
