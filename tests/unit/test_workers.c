/* Resizable worker pool: growing and shrinking while work flows never
 * drops or repeats an item, and parked threads really stop working. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
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

/* This process's address space (VmSize), bytes; 0 when unknown. */
static long long vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

/* Threads refused for lack of address space (ulimit -v) for their stacks:
 * SL_ETHREAD, and sl__workers_why says which thread, the cause and the
 * limits to look at (was: "could not start worker threads", no cause). In
 * a child, whose limit dies with it; not under a sanitizer (its shadow
 * memory does not fit a limit). */
static void test_refused_threads_say_why(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    skip();
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    skip();
#endif
#endif
    long long vm = vm_size();
    if (vm <= 0)
        skip();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit r;
        getrlimit(RLIMIT_AS, &r);
        r.rlim_cur = (rlim_t)(vm + (32 << 20)); /* 64 stacks do not fit */
        if (setrlimit(RLIMIT_AS, &r))
            _exit(3);
        sl__workers_t *w = sl__workers_create(count_work, NULL);
        if (!w)
            _exit(4);
        gw = w;
        int rc = sl__workers_set(w, 64);
        char why[256];
        sl__workers_why(w, why, sizeof why);
        fprintf(stderr, "64 threads under a %lld MB limit: %d, %s\n",
                (vm >> 20) + 32, rc, why);
        int ok = rc == SL_ETHREAD && strstr(why, " of 64: ") &&
                 strstr(why, "ulimit -v");
        sl__workers_stop(w);
        sl__workers_join(w);
        sl__workers_destroy(w);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_while_running),
        cmocka_unit_test(test_parked_threads_do_nothing),
        cmocka_unit_test(test_refused_threads_say_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
