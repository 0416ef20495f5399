/* The heuristic scheduler as a pure function of telemetry windows: which
 * knob it moves, that it judges its own steps and undoes useless ones,
 * sheds CPU when calm, and never leaves its limits (budgets). */
#include <string.h>

#include "sched/heuristic.h"
#include "testutil.h"

static sl_snapshot_t snaps[5];

static void window(double stall, double rate, double dbusy, double rbusy,
                   double ready)
{
    memset(snaps, 0, sizeof snaps);
    for (int i = 0; i < 5; i++) {
        snaps[i].interval_s = 0.1;
        snaps[i].stall_fraction = stall;
        snaps[i].samples_per_s = rate;
        snaps[i].decode.busy = dbusy;
        snaps[i].read.busy = rbusy;
        snaps[i].batches_ready = (int)ready;
    }
}

static sl__limits_t limits(void)
{
    sl__limits_t l = {1, 1, 1, 4, 3, 8, 16};
    return l;
}

static void test_stall_with_busy_decoders_adds_a_decoder(void **state)
{
    (void)state;
    sl__heur_t h;
    sl__heur_init(&h);
    sl__limits_t lim = limits();
    sl__knobs_t cur = {1, 2, 4}, next;
    char why[160];
    window(0.4, 500, 0.95, 0.1, 0);
    assert_int_equal(sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160),
                     SL_KNOB_DECODE);
    assert_int_equal(next.decode_threads, 3);
    assert_non_null(strstr(why, "decode_threads +1"));
    /* It paid: throughput rose. The step stays; cooldown-free next step
     * hits the thread budget (1 + 3 = 4): nothing more to give. */
    cur = next;
    window(0.3, 700, 0.95, 0.1, 0);
    int k = sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160);
    assert_true(k == SL_KNOB_NONE || next.decode_threads <= 3);
    assert_true(next.read_threads + next.decode_threads <= lim.max_threads);
}

static void test_useless_step_is_undone_with_backoff(void **state)
{
    (void)state;
    sl__heur_t h;
    sl__heur_init(&h);
    sl__limits_t lim = limits();
    sl__knobs_t cur = {1, 1, 4}, next;
    char why[160];
    window(0.4, 500, 0.95, 0.1, 0);
    assert_int_equal(sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160),
                     SL_KNOB_DECODE);
    cur = next; /* 2 decoders, and nothing got better */
    window(0.4, 505, 0.95, 0.1, 0);
    assert_int_equal(sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160),
                     SL_KNOB_DECODE);
    assert_int_equal(next.decode_threads, 1);
    assert_non_null(strstr(why, "undo"));
    cur = next;
    /* Held: the next windows do not try decode again right away. */
    for (int i = 0; i < 2; i++) {
        int k = sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160);
        assert_int_not_equal(k, SL_KNOB_DECODE);
        cur = next;
    }
}

static void test_user_fixed_knobs_are_left_alone(void **state)
{
    (void)state;
    sl__heur_t h;
    sl__heur_init(&h);
    sl__limits_t lim = limits();
    lim.tune_decode = 0;
    lim.tune_read = 0;
    lim.tune_prefetch = 0;
    sl__knobs_t cur = {1, 1, 4}, next;
    char why[160];
    window(0.6, 300, 0.99, 0.99, 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(
            sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160),
            SL_KNOB_NONE);
}

static void test_bursty_stall_raises_prefetch_within_budget(void **state)
{
    (void)state;
    sl__heur_t h;
    sl__heur_init(&h);
    sl__limits_t lim = limits();
    lim.max_prefetch = 5; /* the memory budget's cap */
    sl__knobs_t cur = {1, 2, 4}, next;
    char why[160];
    double rate = 500;
    for (int i = 0; i < 12; i++) {
        window(0.2, rate, 0.5, 0.1, 0); /* stages have slack */
        int k = sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160);
        assert_true(k == SL_KNOB_NONE || k == SL_KNOB_PREFETCH);
        assert_true(next.prefetch <= 5);
        cur = next;
        rate *= 1.1; /* each step pays */
    }
    assert_int_equal(cur.prefetch, 5);
}

static void test_saturated_decoders_do_not_grow_prefetch(void **state)
{
    (void)state;
    sl__heur_t h;
    sl__heur_init(&h);
    sl__limits_t lim = limits();
    lim.max_decode = 2;
    sl__knobs_t cur = {1, 2, 4}, next;
    char why[160];
    window(0.5, 400, 0.97, 0.1, 0);
    for (int i = 0; i < 10; i++) {
        sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160);
        cur = next;
    }
    assert_int_equal(cur.prefetch, 4);
    assert_int_equal(cur.decode_threads, 2);
}

static void test_calm_sheds_an_idle_decoder(void **state)
{
    (void)state;
    sl__heur_t h;
    sl__heur_init(&h);
    sl__limits_t lim = limits();
    sl__knobs_t cur = {1, 3, 4}, next;
    char why[160];
    window(0.0, 400, 0.3, 0.05, 4);
    int k = SL_KNOB_NONE;
    for (int i = 0; i < 6 && k == SL_KNOB_NONE; i++)
        k = sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160);
    assert_int_equal(k, SL_KNOB_DECODE);
    assert_int_equal(next.decode_threads, 2);
    assert_non_null(strstr(why, "frees CPU"));
    /* If shedding makes the consumer wait, it is given back. */
    cur = next;
    window(0.3, 300, 0.9, 0.05, 0);
    assert_int_equal(sl__heur_step(&h, snaps, 5, &lim, &cur, &next, why, 160),
                     SL_KNOB_DECODE);
    assert_int_equal(next.decode_threads, 3);
    assert_non_null(strstr(why, "undo"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stall_with_busy_decoders_adds_a_decoder),
        cmocka_unit_test(test_useless_step_is_undone_with_backoff),
        cmocka_unit_test(test_user_fixed_knobs_are_left_alone),
        cmocka_unit_test(test_bursty_stall_raises_prefetch_within_budget),
        cmocka_unit_test(test_saturated_decoders_do_not_grow_prefetch),
        cmocka_unit_test(test_calm_sheds_an_idle_decoder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
