/* Resizable worker pool: growing and shrinking while work flows never
 * drops or repeats an item, and parked threads really stop working. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "exec/queue.h"
#include "exec/workers.h"
#include "testutil.h"

#define ITEMS 20000

typedef struct ctx {
    sl__workers_t *w;
    sl__queue_t *q;
    atomic_int done[ITEMS];
    atomic_int busy_by[8];
} ctx_t;

static void work(void *arg, int id)
{
    ctx_t *c = arg;
    while (sl__workers_checkpoint(c->w, id)) {
        void *p;
        if (sl__queue_pop(c->q, &p))
            return;
        atomic_fetch_add(&c->done[(intptr_t)p], 1);
        atomic_fetch_add(&c->busy_by[id], 1);
    }
}

static void test_resize_while_running(void **state)
{
    (void)state;
    ctx_t *c = calloc(1, sizeof *c);
    c->q = sl__queue_create(64);
    c->w = sl__workers_create(work, c);
    assert_int_equal(sl__workers_set(c->w, 1), 0);
    for (intptr_t i = 0; i < ITEMS; i++) {
        if (i == ITEMS / 4)
            assert_int_equal(sl__workers_set(c->w, 8), 0);
        if (i == ITEMS / 2)
            assert_int_equal(sl__workers_set(c->w, 2), 0);
        if (i == 3 * ITEMS / 4)
            assert_int_equal(sl__workers_set(c->w, 5), 0);
        sl__queue_push(c->q, (void *)i);
    }
    assert_int_equal(sl__workers_target(c->w), 5);
    sl__queue_close(c->q);
    /* Drain: wait until every item is done, then stop. */
    for (int tries = 0; tries < 10000; tries++) {
        int all = 1;
        for (int i = 0; i < ITEMS && all; i++)
            all = atomic_load(&c->done[i]) == 1;
        if (all)
            break;
        usleep(1000);
    }
    sl__workers_stop(c->w);
    sl__workers_join(c->w);
    for (int i = 0; i < ITEMS; i++)
        assert_int_equal(atomic_load(&c->done[i]), 1);
    sl__workers_destroy(c->w);
    sl__queue_destroy(c->q);
    free(c);
}

static atomic_int parked_work;
static sl__workers_t *gw;
static void count_work(void *arg, int id)
{
    (void)arg;
    while (sl__workers_checkpoint(gw, id)) {
        if (id >= 1)
            atomic_fetch_add(&parked_work, 1);
        usleep(100);
    }
}

static void test_parked_threads_do_nothing(void **state)
{
    (void)state;
    gw = sl__workers_create(count_work, NULL);
    sl__workers_set(gw, 3);
    usleep(20000);
    sl__workers_set(gw, 1);
    usleep(5000); /* threads 1, 2 finish the item in hand and park */
    int before = atomic_load(&parked_work);
    usleep(30000);
    assert_int_equal(atomic_load(&parked_work), before);
    sl__workers_stop(gw);
    sl__workers_join(gw);
    sl__workers_destroy(gw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_while_running),
        cmocka_unit_test(test_parked_threads_do_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
