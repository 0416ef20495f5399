/* Plans (sl_loader_start_plan): given batches in a given order, byte for
 * byte the sequential stream's; bad plans refused with a clear message. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "sluice/sluice.h"
#include "testutil.h"

#define EPOCHS 3

static char *root;
static int64_t nb;                /* batches per epoch */
static uint64_t seq[EPOCHS * 16]; /* digest of global batch g */
static int64_t seq_samples[EPOCHS * 16];

static sl_options_t opts(int decode_threads, int unordered)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.decode_threads = decode_threads;
    o.unordered = unordered;
    o.epochs = EPOCHS;
    o.seed = 7;
    return o;
}

static uint64_t digest(const sl_batch_t *b)
{
    uint64_t h = XXH3_64bits(b->data, (size_t)b->n * b->sample_bytes);
    h = XXH3_64bits_withSeed(b->labels, (size_t)b->n * sizeof(int64_t), h);
    return XXH3_64bits_withSeed(b->indices, (size_t)b->n * sizeof(int64_t), h);
}

/* The sequential stream: a digest per global batch number. */
static int setup(void **state)
{
    (void)state;
    root = tu_jpeg_tree("plan", 3, 10, 40, 30); /* 30 samples: 8 batches */
    sl_options_t o = opts(2, 0);
    sl_loader_t *l;
    if (sl_loader_create(root, &o, &l))
        return -1;
    nb = sl_loader_batches_per_epoch(l);
    if (nb != 8 || sl_loader_start(l, NULL))
        return -1;
    const sl_batch_t *b;
    int64_t g = 0;
    while (sl_loader_next(l, &b) == 0) {
        if (b->epoch * nb + b->index != g)
            return -1;
        seq_samples[g] = b->n;
        seq[g++] = digest(b);
        sl_loader_release(l, b);
    }
    sl_loader_destroy(l);
    return g == EPOCHS * nb ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

/* Runs a started loader to its end: the global numbers and digests seen. */
static int drain(sl_loader_t *l, int64_t *gs, uint64_t *ds, int max)
{
    const sl_batch_t *b;
    int n = 0, rc;
    while ((rc = sl_loader_next(l, &b)) == 0) {
        assert_true(n < max);
        gs[n] = b->epoch * nb + b->index;
        ds[n++] = digest(b);
        assert_int_equal(sl_loader_release(l, b), 0);
    }
    assert_int_equal(rc, SL_EEND);
    return n;
}

/* A list across epochs, out of order and with a repeat: each batch is the
 * sequential stream's at its (epoch, batch), delivered in the list's
 * order, whatever the thread count. */
static void test_list_equals_sequential(void **state)
{
    (void)state;
    sl_position_t want[] = {{2, 7}, {0, 3}, {1, 0}, {0, 3}, {2, 0}, {0, 7}};
    int n = (int)(sizeof want / sizeof want[0]);
    for (int threads = 1; threads <= 3; threads += 2) {
        sl_options_t o = opts(threads, 0);
        sl_loader_t *l;
        assert_int_equal(sl_loader_create(root, &o, &l), 0);
        sl_plan_t p;
        sl_plan_init(&p);
        p.batches = want;
        p.count = n;
        assert_int_equal(sl_loader_start_plan(l, &p), 0);
        sl_position_t pos;
        assert_int_equal(sl_loader_position(l, &pos), 0);
        assert_true(pos.epoch == 2 && pos.batch == 7);
        int64_t gs[16];
        uint64_t ds[16];
        assert_int_equal(drain(l, gs, ds, 16), n);
        for (int i = 0; i < n; i++) {
            assert_int_equal(gs[i], want[i].epoch * nb + want[i].batch);
            assert_true(ds[i] == seq[gs[i]]);
        }
        /* After the last: the batch that follows it. */
        assert_int_equal(sl_loader_position(l, &pos), 0);
        assert_true(pos.epoch == 1 && pos.batch == 0);
        /* A plain start afterwards streams sequentially again. */
        sl_position_t at = {1, 6};
        assert_int_equal(sl_loader_start(l, &at), 0);
        const sl_batch_t *b;
        assert_int_equal(sl_loader_next(l, &b), 0);
        assert_true(b->epoch == 1 && b->index == 6 && digest(b) == seq[14]);
        sl_loader_release(l, b);
        sl_loader_destroy(l);
    }
}

/* Strided ranges, as actor k of K gets them: together they cover the
 * epochs, each batch once, equal to the sequential stream; a range goes
 * on into the next epoch. */
static void test_strided_ranges_cover(void **state)
{
    (void)state;
    const int K = 3;
    int seen[EPOCHS * 16] = {0};
    sl_options_t o = opts(2, 0);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    for (int k = 0; k < K; k++) {
        sl_plan_t p;
        sl_plan_init(&p);
        p.first = (sl_position_t){0, k};
        p.step = K;
        p.count = (EPOCHS * nb - k + K - 1) / K;
        assert_int_equal(sl_loader_start_plan(l, &p), 0);
        int64_t gs[16];
        uint64_t ds[16];
        int n = drain(l, gs, ds, 16);
        assert_int_equal(n, p.count);
        for (int i = 0; i < n; i++) {
            assert_int_equal(gs[i], k + (int64_t)i * K);
            assert_true(ds[i] == seq[gs[i]]);
            seen[gs[i]]++;
        }
    }
    for (int g = 0; g < EPOCHS * nb; g++)
        assert_int_equal(seen[g], 1);
    /* Step 0 is the default, 1: the batches that follow. */
    sl_plan_t p;
    sl_plan_init(&p);
    p.first = (sl_position_t){1, 6};
    p.count = 4;
    assert_int_equal(sl_loader_start_plan(l, &p), 0);
    int64_t gs[8];
    uint64_t ds[8];
    assert_int_equal(drain(l, gs, ds, 8), 4);
    for (int i = 0; i < 4; i++)
        assert_true(gs[i] == 14 + i && ds[i] == seq[14 + i]);
    sl_loader_destroy(l);
}

/* Unordered: the plan's batches, each once, in any order. */
static void test_unordered_plan(void **state)
{
    (void)state;
    sl_options_t o = opts(3, 1);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    sl_position_t want[] = {{1, 5}, {0, 1}, {2, 2}, {1, 7}};
    sl_plan_t p;
    sl_plan_init(&p);
    p.batches = want;
    p.count = 4;
    assert_int_equal(sl_loader_start_plan(l, &p), 0);
    int64_t gs[8];
    uint64_t ds[8];
    assert_int_equal(drain(l, gs, ds, 8), 4);
    int found = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            if (gs[i] == want[j].epoch * nb + want[j].batch) {
                found |= 1 << j;
                assert_true(ds[i] == seq[gs[i]]);
            }
    assert_int_equal(found, 15);
    sl_loader_destroy(l);
}

/* Bad plans: refused with the code and a message naming the cause (and
 * the entry); the loader stays usable. */
static void test_bad_plans(void **state)
{
    (void)state;
    sl_options_t o = opts(1, 0);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    sl_plan_t p;
    memset(&p, 0, sizeof p); /* never initialised */
    assert_int_equal(sl_loader_start_plan(l, &p), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(l), "sl_plan_init"));
    assert_int_equal(sl_loader_start_plan(l, NULL), SL_EINVAL);

    sl_plan_init(&p); /* empty */
    assert_int_equal(sl_loader_start_plan(l, &p), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(l), "at least one batch"));

    sl_position_t bad[] = {{0, 1}, {1, 8}};
    p.batches = bad;
    p.count = 2;
    assert_int_equal(sl_loader_start_plan(l, &p), SL_ERANGE);
    assert_non_null(strstr(sl_loader_last_error(l), "entry 1"));
    assert_non_null(strstr(sl_loader_last_error(l), "batch 8"));
    bad[1] = (sl_position_t){-1, 0};
    assert_int_equal(sl_loader_start_plan(l, &p), SL_ERANGE);
    bad[1] = (sl_position_t){INT64_MAX / 4, 0};
    assert_int_equal(sl_loader_start_plan(l, &p), SL_ERANGE);

    sl_plan_init(&p); /* ranges */
    p.count = 3;
    p.step = -2;
    assert_int_equal(sl_loader_start_plan(l, &p), SL_ERANGE);
    assert_non_null(strstr(sl_loader_last_error(l), "step -2"));
    p.step = 1;
    p.first = (sl_position_t){0, nb};
    assert_int_equal(sl_loader_start_plan(l, &p), SL_ERANGE);
    assert_non_null(strstr(sl_loader_last_error(l), "range first"));
    p.first = (sl_position_t){INT64_MAX / nb - 1, 0};
    p.step = INT64_MAX / 2;
    assert_int_equal(sl_loader_start_plan(l, &p), SL_ERANGE);
    assert_non_null(strstr(sl_loader_last_error(l), "overflow"));

    /* Still usable. */
    sl_plan_init(&p);
    p.first = (sl_position_t){2, 7};
    p.count = 1;
    assert_int_equal(sl_loader_start_plan(l, &p), 0);
    int64_t gs[2];
    uint64_t ds[2];
    assert_int_equal(drain(l, gs, ds, 2), 1);
    assert_true(gs[0] == 23 && ds[0] == seq[23]);
    sl_loader_destroy(l);
}

/* A restart (a plain start or another plan) while a plan's batches are
 * in flight and one is held: the held one stays valid, the new plan's
 * batches are right. */
static void test_replan_while_running(void **state)
{
    (void)state;
    sl_options_t o = opts(2, 0);
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    sl_plan_t p;
    sl_plan_init(&p);
    p.first = (sl_position_t){0, 0};
    p.count = EPOCHS * nb;
    assert_int_equal(sl_loader_start_plan(l, &p), 0);
    const sl_batch_t *held;
    assert_int_equal(sl_loader_next(l, &held), 0);
    uint64_t d0 = digest(held);
    sl_position_t one[] = {{1, 3}};
    p.batches = one;
    p.count = 1;
    assert_int_equal(sl_loader_start_plan(l, &p), 0);
    int64_t gs[2];
    uint64_t ds[2];
    assert_int_equal(drain(l, gs, ds, 2), 1);
    assert_true(gs[0] == 11 && ds[0] == seq[11]);
    assert_true(digest(held) == d0 && d0 == seq[0]);
    assert_int_equal(sl_loader_release(l, held), 0);
    sl_loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_equals_sequential),
        cmocka_unit_test(test_strided_ranges_cover),
        cmocka_unit_test(test_unordered_plan),
        cmocka_unit_test(test_bad_plans),
        cmocka_unit_test(test_replan_while_running),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
