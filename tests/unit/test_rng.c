/* Counter-based RNG: a pure function of (seed, epoch, item, purpose);
 * streams differ;
 * uniform draws look uniform. */
#include <math.h>

#include "base/rng.h"
#include "testutil.h"

static void test_pure_function_of_key(void **state)
{
    (void)state;
    sl__rng_t a, b;
    sl__rng_init(&a, 7, 3, 12345, SL_RNG_CROP);
    sl__rng_init(&b, 7, 3, 12345, SL_RNG_CROP);
    for (int i = 0; i < 100; i++)
        assert_int_equal(sl__rng_u32(&a), sl__rng_u32(&b));
    uint32_t base[4];
    sl__rng_init(&a, 7, 3, 12345, SL_RNG_CROP);
    for (int i = 0; i < 4; i++)
        base[i] = sl__rng_u32(&a);
    const uint64_t keys[][4] = {{8, 3, 12345, SL_RNG_CROP},
                                {7, 4, 12345, SL_RNG_CROP},
                                {7, 3, 12346, SL_RNG_CROP},
                                {7, 3, 12345, SL_RNG_FLIP}};
    for (int k = 0; k < 4; k++) {
        sl__rng_init(&b, keys[k][0], keys[k][1], keys[k][2],
                     (uint32_t)keys[k][3]);
        int same = 1;
        for (int i = 0; i < 4; i++)
            same &= sl__rng_u32(&b) == base[i];
        assert_false(same);
    }
}

/* Random123's known-answer vector for philox4x32-10, counter 0, key 0. */
static void test_philox_known_answer(void **state)
{
    (void)state;
    sl__rng_t r;
    sl__rng_init(&r, 0, 0, 0, 0);
    assert_int_equal(sl__rng_u32(&r), 0x6627e8d5u);
    assert_int_equal(sl__rng_u32(&r), 0xe169c58du);
    assert_int_equal(sl__rng_u32(&r), 0xbc57ac4cu);
    assert_int_equal(sl__rng_u32(&r), 0x9b00dbd8u);
}

static void test_uniform_and_below(void **state)
{
    (void)state;
    sl__rng_t r;
    sl__rng_init(&r, 1, 0, 0, SL_RNG_SHUFFLE);
    int bins[10] = {0};
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = sl__rng_double(&r);
        assert_true(u >= 0 && u < 1);
        sum += u;
        uint64_t k = sl__rng_below(&r, 10);
        assert_true(k < 10);
        bins[k]++;
    }
    assert_true(fabs(sum / 100000 - 0.5) < 0.01);
    for (int i = 0; i < 10; i++)
        assert_true(bins[i] > 9500 && bins[i] < 10500);
    double v = sl__rng_uniform(&r, 2.0, 3.0);
    assert_true(v >= 2.0 && v < 3.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pure_function_of_key),
        cmocka_unit_test(test_uniform_and_below),
        cmocka_unit_test(test_philox_known_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
