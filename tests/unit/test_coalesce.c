/* exec/coalesce: the planner that groups a reader's upcoming remote
 * records into ranged requests (a pure function: given the records in the
 * order they are needed, which ranges).
 *   - neighbours of one object merge, across gaps up to max_gap, up to
 *     max_bytes from the group's first byte to its last;
 *   - records of other objects, overlapping or repeated records, and
 *     records past the gap or the span start groups of their own;
 *   - groups come in the order of their first-needed record, members by
 *     offset; every record is in exactly one group;
 *   - max_bytes 0 (or a record larger than it): one group per record, in
 *     need order; n 0: no group;
 *   - a random check: each plan is a partition and obeys the bounds. */
#include <stdio.h>
#include <stdlib.h>

#include "exec/coalesce.h"
#include "testutil.h"

#define A ((const void *)0x1000)
#define B ((const void *)0x2000)

/* The plan of rec as "g0|g1|..." with members by index, e.g. "0,1|2". */
static const char *plan(const sl__crec_t *rec, int n, uint64_t max,
                        uint64_t gap, char *buf, size_t len)
{
    int order[64], start[65];
    int ng = sl__coalesce_plan(rec, n, max, gap, order, start);
    size_t k = 0;
    buf[0] = 0;
    for (int g = 0; g < ng; g++)
        for (int j = start[g]; j < start[g + 1]; j++)
            k += (size_t)snprintf(buf + k, len - k, "%s%d",
                                  j == start[g] ? (g ? "|" : "") : ",",
                                  order[j]);
    return buf;
}

static void test_sequential(void **state)
{
    (void)state;
    char b[256];
    /* four records back to back: one request */
    sl__crec_t r[4] = {{A, 0, 100}, {A, 100, 50}, {A, 150, 10}, {A, 160, 40}};
    assert_string_equal(plan(r, 4, 1 << 20, 0, b, sizeof b), "0,1,2,3");
    /* the span bound: 200 bytes in all; at most 150 a request */
    assert_string_equal(plan(r, 4, 150, 0, b, sizeof b), "0,1|2,3");
    assert_string_equal(plan(r, 4, 200, 0, b, sizeof b), "0,1,2,3");
    assert_string_equal(plan(r, 4, 199, 0, b, sizeof b), "0,1,2|3");
    /* off: one by one, in need order */
    assert_string_equal(plan(r, 4, 0, 1 << 20, b, sizeof b), "0|1|2|3");
    int order[1], start[1] = {7};
    assert_int_equal(sl__coalesce_plan(r, 0, 1 << 20, 0, order, start), 0);
    assert_int_equal(start[0], 0);
}

static void test_gaps(void **state)
{
    (void)state;
    char b[256];
    /* a tar's images: 1536 bytes of headers and .cls between them */
    sl__crec_t r[3] = {{A, 512, 1000}, {A, 3048, 1000}, {A, 5584, 1000}};
    assert_string_equal(plan(r, 3, 1 << 20, 1536, b, sizeof b), "0,1,2");
    assert_string_equal(plan(r, 3, 1 << 20, 1535, b, sizeof b), "0|1|2");
    assert_string_equal(plan(r, 3, 1 << 20, 0, b, sizeof b), "0|1|2");
    /* the gap counts in the span: 512..4048 is 3536 bytes */
    assert_string_equal(plan(r, 3, 3536, 1536, b, sizeof b), "0,1|2");
    assert_string_equal(plan(r, 3, 3535, 1536, b, sizeof b), "0|1|2");
}

static void test_order_and_objects(void **state)
{
    (void)state;
    char b[256];
    /* needed out of offset order, two objects interleaved */
    sl__crec_t r[6] = {{B, 300, 100}, {A, 100, 100}, {B, 200, 100},
                       {A, 0, 100},   {B, 900, 100}, {A, 200, 100}};
    /* B 200..400 first (need 0), then A 0..300 (need 1), then B 900 */
    assert_string_equal(plan(r, 6, 1 << 20, 0, b, sizeof b), "2,0|3,1,5|4");
    /* a gap of 500 lets B 900 join B's group */
    assert_string_equal(plan(r, 6, 1 << 20, 500, b, sizeof b), "2,0,4|3,1,5");
    /* overlapping and repeated records are never merged */
    sl__crec_t o[4] = {{A, 0, 100}, {A, 50, 100}, {A, 0, 100}, {A, 150, 10}};
    assert_string_equal(plan(o, 4, 1 << 20, 0, b, sizeof b), "0|1,3|2");
    /* a record larger than the bound is a request of its own */
    sl__crec_t big[3] = {{A, 0, 10}, {A, 10, 500}, {A, 510, 10}};
    assert_string_equal(plan(big, 3, 100, 0, b, sizeof b), "0|1|2");
}

/* Random plans: a partition, groups in need order, members by offset and
 * non-overlapping, one object, gaps and spans within the bounds. */
static void test_random(void **state)
{
    (void)state;
    unsigned s = 12345;
    for (int t = 0; t < 2000; t++) {
        sl__crec_t r[64];
        int n = (int)(s % 64);
        for (int i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            r[i].obj = (s >> 8) % 3 ? A : B;
            r[i].off = ((s >> 4) % 40) * 100 + (s >> 20) % 3 * 10;
            r[i].len = 1 + (s >> 12) % 150;
        }
        s = s * 1103515245u + 12345u;
        uint64_t max = (s >> 6) % 2000, gap = (s >> 16) % 300;
        int order[64], start[65], seen[64] = {0};
        int ng = sl__coalesce_plan(r, n, max, gap, order, start);
        assert_true(ng >= (n > 0) && ng <= n);
        assert_int_equal(start[0], 0);
        assert_int_equal(start[ng], n);
        int prev_need = -1;
        for (int g = 0; g < ng; g++) {
            assert_true(start[g + 1] > start[g]);
            int need = n;
            const sl__crec_t *f = &r[order[start[g]]];
            for (int j = start[g]; j < start[g + 1]; j++) {
                int i = order[j];
                assert_true(i >= 0 && i < n);
                assert_int_equal(seen[i]++, 0);
                need = i < need ? i : need;
                assert_ptr_equal(r[i].obj, f->obj);
                if (j > start[g]) {
                    const sl__crec_t *p = &r[order[j - 1]];
                    assert_true(r[i].off >= p->off + p->len);
                    assert_true(r[i].off - (p->off + p->len) <= gap);
                    assert_true(r[i].off + r[i].len - f->off <= max);
                }
            }
            assert_true(need > prev_need);
            prev_need = need;
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequential),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_order_and_objects),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
