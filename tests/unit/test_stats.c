/* base/stats: the nearest-rank percentile (the rule `run`, `bench` and
 * `simulate` print their wait p50/p99 by) and the sorts. */
#include <string.h>

#include "base/stats.h"
#include "testutil.h"

static void test_nearest_rank(void **state)
{
    (void)state;
    int64_t v[100];
    for (int i = 0; i < 100; i++)
        v[i] = 100 - i; /* 100..1, sorted below */
    sl__sort_i64(v, 100);
    assert_int_equal(v[0], 1);
    assert_int_equal(sl__percentile_i64(v, 100, 0.5), 50); /* 50 at or below */
    assert_int_equal(sl__percentile_i64(v, 100, 0.99), 99);
    assert_int_equal(sl__percentile_i64(v, 100, 1.0), 100);
    assert_int_equal(sl__percentile_i64(v, 100, 0.001), 1); /* clamped low */
    assert_int_equal(sl__percentile_i64(v, 1, 0.99), 1);
    assert_int_equal(sl__percentile_i64(v, 0, 0.5), 0); /* no samples */
    assert_int_equal(sl__percentile_i64(v, 3, 0.5), 2); /* ceil(1.5) = 2nd */
    assert_int_equal(sl__percentile_i64(v, 4, 0.5), 2); /* 2 of 4 */
    assert_int_equal(sl__rank_index(10, 0.0), 0);
    assert_int_equal(sl__rank_index(10, 2.0), 9); /* clamped high */
}

static void test_doubles(void **state)
{
    (void)state;
    double d[5] = {0.5, -1, 3, 2, 0};
    sl__sort_double(d, 5);
    assert_true(d[0] == -1 && d[4] == 3);
    assert_true(sl__percentile_double(d, 5, 0.5) == 0.5);
    assert_true(sl__percentile_double(d, 5, 0.99) == 3);
    assert_true(sl__percentile_double(d, 0, 0.99) == 0);
    sl__sort_double(d, 0); /* nothing to do, no crash */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_rank),
        cmocka_unit_test(test_doubles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
