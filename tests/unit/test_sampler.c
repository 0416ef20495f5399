/* Sampler: exact epoch coverage, determinism, per-epoch reshuffle, rank
 * sharding (every sample on exactly one rank, equal batch counts), and
 * drop_last. */
#include <stdlib.h>
#include <string.h>

#include "data/sampler.h"
#include "testutil.h"

/* Collects every sample of every batch of every rank for one epoch;
 * checks batch counts equal and sizes within 1..B. */
static void cover(int64_t n, int B, int W, int drop, int64_t epoch,
                  uint64_t seed, int *seen, int64_t *nb_out)
{
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    int64_t *idx = malloc((size_t)B * sizeof *idx);
    int64_t nb = -1;
    for (int r = 0; r < W; r++) {
        sl__sampler_t s;
        char err[256];
        assert_int_equal(
            sl__sampler_init(&s, n, B, r, W, drop, 1, seed, err, sizeof err),
            0);
        if (nb < 0)
            nb = s.nbatches;
        assert_int_equal(s.nbatches, nb);
        sl__sampler_permute(&s, epoch, perm);
        for (int64_t b = 0; b < s.nbatches; b++) {
            int k = sl__sampler_batch(&s, perm, b, idx);
            assert_true(k >= 1 && k <= B);
            if (drop)
                assert_int_equal(k, B);
            for (int i = 0; i < k; i++) {
                assert_true(idx[i] >= 0 && idx[i] < n);
                seen[idx[i]]++;
            }
        }
    }
    *nb_out = nb;
    free(perm);
    free(idx);
}

static void test_exact_coverage_many_shapes(void **state)
{
    (void)state;
    int64_t ns[] = {1, 7, 64, 100, 1000, 1001, 4099};
    int Bs[] = {1, 3, 16, 64};
    int Ws[] = {1, 2, 3, 8};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof Bs / sizeof Bs[0]; b++)
            for (size_t c = 0; c < sizeof Ws / sizeof Ws[0]; c++) {
                int64_t n = ns[a];
                int B = Bs[b], W = Ws[c];
                sl__sampler_t s;
                char err[256];
                int rc =
                    sl__sampler_init(&s, n, B, 0, W, 0, 1, 1, err, sizeof err);
                if (n < W || (B == 1 && n % W)) {
                    assert_int_not_equal(rc, 0); /* refused, with reason */
                    assert_true(strlen(err) > 0);
                    continue;
                }
                int *seen = calloc((size_t)n, sizeof *seen);
                int64_t nb;
                cover(n, B, W, 0, 3, 42, seen, &nb);
                for (int64_t i = 0; i < n; i++)
                    assert_int_equal(seen[i], 1); /* exactly one rank */
                free(seen);
            }
}

static void test_drop_last(void **state)
{
    (void)state;
    int64_t n = 1001;
    int B = 16, W = 3;
    int *seen = calloc((size_t)n, sizeof *seen);
    int64_t nb;
    cover(n, B, W, 1, 0, 7, seen, &nb);
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(seen[i] <= 1);
        total += seen[i];
    }
    assert_int_equal(nb, (n / W) / B);
    assert_int_equal(total, nb * B * W);
    free(seen);
}

static void test_deterministic_and_reshuffled(void **state)
{
    (void)state;
    int64_t n = 500;
    sl__sampler_t s;
    char err[64];
    assert_int_equal(sl__sampler_init(&s, n, 8, 0, 1, 0, 1, 99, err, 64), 0);
    int64_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    sl__sampler_permute(&s, 4, a);
    sl__sampler_permute(&s, 4, b);
    assert_memory_equal(a, b, n * sizeof *a);
    sl__sampler_permute(&s, 5, b);
    assert_memory_not_equal(a, b, n * sizeof *a);
    s.seed = 100;
    sl__sampler_permute(&s, 4, b);
    assert_memory_not_equal(a, b, n * sizeof *a);
    /* A permutation: every index once. */
    int *seen = calloc(n, sizeof *seen);
    for (int64_t i = 0; i < n; i++)
        seen[a[i]]++;
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(seen[i], 1);
    s.shuffle = 0;
    sl__sampler_permute(&s, 4, b);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(b[i], i);
    free(a);
    free(b);
    free(seen);
}

static void test_short_rank_split(void **state)
{
    (void)state;
    /* n=10, W=3, B=3: ranks get 4,3,3 samples; all need 2 batches. */
    sl__sampler_t s;
    char err[64];
    int64_t perm[10], idx[3];
    assert_int_equal(sl__sampler_init(&s, 10, 3, 2, 3, 0, 0, 0, err, 64), 0);
    assert_int_equal(s.nbatches, 2);
    sl__sampler_permute(&s, 0, perm);
    assert_int_equal(sl__sampler_batch(&s, perm, 0, idx), 2);
    assert_int_equal(sl__sampler_batch(&s, perm, 1, idx), 1);
}

/* WebDataset order (sl__sampler_stream): a permutation, a function of
 * (seed, epoch); with a buffer of 1 each file's samples come contiguous
 * and in stored order; with a buffer of N no sample comes out more than N
 * places before its place in the stream (file order, stored order). */
static void test_stream_order(void **state)
{
    (void)state;
    const int64_t groups[] = {0, 5, 6, 30, 31, 60, 97, 100}; /* 7 files */
    const int ng = 7;
    const int64_t n = 100;
    int64_t *perm = malloc(n * sizeof *perm), *again = malloc(n * sizeof *perm);
    int64_t *stream = malloc(n * sizeof *perm), *pos = malloc(n * sizeof *pos);
    char err[256];
    for (int64_t epoch = 0; epoch < 4; epoch++) {
        sl__sampler_t s;
        assert_int_equal(
            sl__sampler_init(&s, n, 8, 0, 1, 0, 1, 42, err, sizeof err), 0);
        /* buffer 1: the stream itself */
        assert_int_equal(sl__sampler_stream(&s, 1, groups, ng, err, sizeof err),
                         0);
        sl__sampler_permute(&s, epoch, stream);
        int in_order = 1;
        for (int64_t i = 1; i < n; i++) {
            int64_t a = stream[i - 1], b = stream[i];
            if (b != a + 1) { /* a file boundary: a ends a file, b starts one */
                int a_end = 0, b_start = 0;
                for (int g = 0; g <= ng; g++) {
                    a_end |= groups[g] == a + 1;
                    b_start |= groups[g] == b;
                }
                assert_true(a_end && b_start);
                in_order = 0;
            }
        }
        assert_false(in_order); /* the files were shuffled */
        for (int64_t i = 0; i < n; i++)
            pos[stream[i]] = i;
        for (int buffer = 2; buffer <= 128; buffer *= 4) {
            assert_int_equal(
                sl__sampler_stream(&s, buffer, groups, ng, err, sizeof err), 0);
            sl__sampler_permute(&s, epoch, perm);
            sl__sampler_permute(&s, epoch, again);
            assert_memory_equal(perm, again, n * sizeof *perm);
            int *seen = calloc(n, sizeof *seen);
            int moved = 0;
            for (int64_t p = 0; p < n; p++) {
                assert_true(perm[p] >= 0 && perm[p] < n);
                assert_int_equal(seen[perm[p]]++, 0);
                assert_true(pos[perm[p]] < p + buffer);
                moved |= perm[p] != stream[p];
            }
            assert_true(moved);
            free(seen);
        }
        sl__sampler_free(&s);
    }
    free(perm);
    free(again);
    free(stream);
    free(pos);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_coverage_many_shapes),
        cmocka_unit_test(test_drop_last),
        cmocka_unit_test(test_deterministic_and_reshuffled),
        cmocka_unit_test(test_short_rank_split),
        cmocka_unit_test(test_stream_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
