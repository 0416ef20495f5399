/* base/membudget: the byte budget read items and decode scratch are
 * charged against (issue 14 item 10). A charge over the whole limit fails
 * at once, naming both sizes; others wait their turn, first come first
 * served; a stop releases waiters. The stress test runs under TSan (make
 * check): many threads charging never hold more than the limit together,
 * and a watchdog turns a lost wake-up into a failure. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/membudget.h"
#include "testutil.h"

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "watchdog: a membudget charge hung\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_over_the_limit_fails_naming_sizes(void **state)
{
    (void)state;
    sl__membudget_t b;
    sl__membudget_init(&b, 16 << 20);
    char err[256] = "";
    assert_int_equal(sl__membudget_charge(&b, (16 << 20) + 1, "decoding it",
                                          err, sizeof err),
                     SL_ENOMEM);
    assert_string_equal(err, "decoding it needs 16.0 MB, the memory budget "
                             "allows 16.0 MB");
    assert_int_equal(sl__membudget_used(&b), 0);
    /* Exactly the limit fits; used and peak follow charges. */
    assert_int_equal(sl__membudget_charge(&b, 16 << 20, "x", err, sizeof err),
                     0);
    assert_int_equal(sl__membudget_used(&b), 16 << 20);
    sl__membudget_release(&b, 16 << 20);
    assert_int_equal(sl__membudget_used(&b), 0);
    assert_int_equal(sl__membudget_peak(&b), 16 << 20);
    sl__membudget_destroy(&b);
}

static void test_unlimited_counts_only(void **state)
{
    (void)state;
    sl__membudget_t b;
    sl__membudget_init(&b, 0);
    char err[64];
    assert_int_equal(
        sl__membudget_charge(&b, (int64_t)1 << 40, "x", err, sizeof err), 0);
    assert_int_equal(sl__membudget_used(&b), (int64_t)1 << 40);
    sl__membudget_release(&b, (int64_t)1 << 40);
    sl__membudget_destroy(&b);
}

typedef struct waiter {
    sl__membudget_t *b;
    int64_t bytes;
    atomic_int done; /* 1: charged, 2: stopped */
} waiter_t;

static void *wait_charge(void *p)
{
    waiter_t *w = p;
    char err[128];
    int rc = sl__membudget_charge(w->b, w->bytes, "w", err, sizeof err);
    atomic_store(&w->done, rc == 0 ? 1 : rc == 1 ? 2 : 3);
    return NULL;
}

/* A large charge is not starved by small ones that arrive after it: they
 * wait behind it even when they would fit. */
static void test_first_come_first_served(void **state)
{
    (void)state;
    alarm(60);
    sl__membudget_t b;
    sl__membudget_init(&b, 100);
    char err[64];
    assert_int_equal(sl__membudget_charge(&b, 60, "a", err, sizeof err), 0);
    waiter_t big = {&b, 80, 0}, small = {&b, 10, 0};
    pthread_t tb, ts;
    pthread_create(&tb, NULL, wait_charge, &big);
    for (int queued = 0; !queued; sleep_ms(1)) { /* big is in line */
        pthread_mutex_lock(&b.mu);
        queued = b.ticket >= 2; /* a's and big's */
        pthread_mutex_unlock(&b.mu);
    }
    pthread_create(&ts, NULL, wait_charge, &small);
    sleep_ms(100);
    assert_int_equal(atomic_load(&big.done), 0);
    assert_int_equal(atomic_load(&small.done), 0); /* 70 <= 100, yet waits */
    sl__membudget_release(&b, 60);
    pthread_join(tb, NULL);
    assert_int_equal(atomic_load(&big.done), 1);
    pthread_join(ts, NULL); /* 80 + 10 fit */
    assert_int_equal(atomic_load(&small.done), 1);
    assert_int_equal(sl__membudget_used(&b), 90);
    sl__membudget_release(&b, 90);
    sl__membudget_destroy(&b);
    alarm(0);
}

/* A stop releases a waiting charge (a pipeline stopping while a reader
 * waits for room); after it, charges work again. */
static void test_stop_releases_waiters(void **state)
{
    (void)state;
    alarm(60);
    sl__membudget_t b;
    sl__membudget_init(&b, 100);
    char err[64];
    assert_int_equal(sl__membudget_charge(&b, 100, "a", err, sizeof err), 0);
    waiter_t w[3] = {{&b, 50, 0}, {&b, 20, 0}, {&b, 70, 0}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, wait_charge, &w[i]);
    sleep_ms(50);
    sl__membudget_stop(&b, 1);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(atomic_load(&w[i].done), 2);
    }
    sl__membudget_release(&b, 100);
    sl__membudget_stop(&b, 0);
    assert_int_equal(sl__membudget_charge(&b, 100, "a", err, sizeof err), 0);
    sl__membudget_release(&b, 100);
    assert_int_equal(sl__membudget_used(&b), 0);
    sl__membudget_destroy(&b);
    alarm(0);
}

#define LIMIT 1000
#define THREADS 8
#define ROUNDS 3000

typedef struct shared {
    sl__membudget_t *b;
    atomic_llong held; /* what all threads hold now, by their own count */
    atomic_int over;   /* times that went past the limit */
} shared_t;

typedef struct stress {
    shared_t *sh;
    unsigned seed;
} stress_t;

static void *stress_main(void *p)
{
    stress_t *s = p;
    shared_t *sh = s->sh;
    unsigned r = s->seed;
    char err[128];
    for (int i = 0; i < ROUNDS; i++) {
        r = r * 1103515245u + 12345u;
        int64_t n = 1 + (int64_t)((r >> 8) % LIMIT);
        if (sl__membudget_charge(sh->b, n, "s", err, sizeof err))
            continue;
        if (atomic_fetch_add(&sh->held, n) + n > LIMIT)
            atomic_fetch_add(&sh->over, 1);
        atomic_fetch_sub(&sh->held, n);
        sl__membudget_release(sh->b, n);
    }
    return NULL;
}

static void test_many_threads_never_exceed(void **state)
{
    (void)state;
    alarm(240);
    sl__membudget_t b;
    sl__membudget_init(&b, LIMIT);
    shared_t sh = {&b, 0, 0};
    stress_t s[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        s[i] = (stress_t){&sh, (unsigned)i + 1};
        pthread_create(&t[i], NULL, stress_main, &s[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&sh.over), 0);
    assert_int_equal(sl__membudget_used(&b), 0);
    assert_true(sl__membudget_peak(&b) <= LIMIT);
    sl__membudget_destroy(&b);
    alarm(0);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_over_the_limit_fails_naming_sizes),
        cmocka_unit_test(test_unlimited_counts_only),
        cmocka_unit_test(test_first_come_first_served),
        cmocka_unit_test(test_stop_releases_waiters),
        cmocka_unit_test(test_many_threads_never_exceed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
