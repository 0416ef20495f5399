/* The budget rule (sched/limits.h), written once for the loader, the
 * simulator and training: defaults, each budget, what the user gives
 * above a budget, and the check sl_loader_set makes. */
#include <limits.h>
#include <string.h>

#include "sched/limits.h"
#include "testutil.h"

static sl_options_t opts(void)
{
    sl_options_t o;
    memset(&o, 0, sizeof o);
    return o;
}

#define BATCH ((size_t)64 * 224 * 224 * 3) /* uint8 batch of 64 */

static char err[256];

static int make(const sl_options_t *o, int ncpu, sl__limits_t *lim,
                sl__knobs_t *k)
{
    err[0] = 0;
    return sl__limits_make(o, ncpu, BATCH, lim, k, err, sizeof err);
}

static void test_defaults_on_four_cores(void **state)
{
    (void)state;
    sl_options_t o = opts();
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    /* Every knob the scheduler's; it starts where a static loader would. */
    assert_true(lim.tune_read && lim.tune_decode && lim.tune_prefetch);
    assert_int_equal(k.read_threads, 1);
    assert_int_equal(k.decode_threads, 4);
    assert_int_equal(k.prefetch, 8);
    assert_int_equal(lim.max_threads, 8); /* 2 x cores */
    assert_int_equal(lim.max_decode, 7);  /* + 1 for the read stage */
    assert_int_equal(lim.max_read, 64);   /* I/O depth: not cores */
    assert_int_equal(lim.max_prefetch, 32);
    assert_int_equal(lim.min_decode, 4); /* sheds stop at the default */
    assert_false(lim.hard_threads || lim.hard_prefetch);
    /* SL_AUTOTUNE is the same as 0. */
    o.read_threads = o.decode_threads = o.prefetch = SL_AUTOTUNE;
    sl__limits_t l2;
    sl__knobs_t k2;
    assert_int_equal(make(&o, 4, &l2, &k2), 0);
    assert_memory_equal(&lim, &l2, sizeof lim);
    assert_memory_equal(&k, &k2, sizeof k);
}

static void test_io_depth_budget(void **state)
{
    (void)state;
    /* Outstanding reads are not cores: at least 64 on any machine. */
    assert_int_equal(sl__io_depth_budget(1), 64);
    assert_int_equal(sl__io_depth_budget(2), 64);
    assert_int_equal(sl__io_depth_budget(32), 128);
    assert_int_equal(sl__io_depth_budget(64), 256);
    assert_int_equal(sl__io_depth_budget(100), 256); /* the worker limit */
    /* Read threads the user sets above it raise it: theirs is the budget. */
    sl_options_t o = opts();
    o.read_threads = 100;
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(lim.max_read, 100);
    assert_int_equal(k.read_threads, 100);
    assert_false(lim.tune_read);
}

static void test_static_policy_tunes_nothing(void **state)
{
    (void)state;
    sl_options_t o = opts();
    o.policy = SL_POLICY_STATIC;
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_false(lim.tune_read || lim.tune_decode || lim.tune_prefetch);
    assert_int_equal(lim.min_decode, 0);
    assert_int_equal(k.decode_threads, 2);
    assert_int_equal(k.prefetch, 4);
}

static void test_memory_budget_caps_prefetch(void **state)
{
    (void)state;
    sl_options_t o = opts();
    o.max_memory_bytes = SL_LIMITS_MEM_RESERVE + 3 * (int64_t)BATCH + 100;
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    assert_int_equal(lim.max_prefetch, 3);
    assert_int_equal(k.prefetch, 3); /* the default 8 lowered to fit */
    assert_true(lim.hard_prefetch);
    /* It binds everyone: sl_loader_set's check. */
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_PREFETCH, 3), 0);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_PREFETCH, 4), SL_ERANGE);
    /* A user prefetch above it is lowered too. */
    o.prefetch = 10;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    assert_int_equal(k.prefetch, 3);
    /* A budget that holds many buffers: the user's range is what it
     * holds, not the scheduler's search bound (4 x the start, >= 16). */
    o.prefetch = 2;
    o.max_memory_bytes = 2 * SL_LIMITS_MEM_RESERVE + 1000 * (int64_t)BATCH;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    assert_int_equal(lim.max_prefetch, 16);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_PREFETCH, 64), 0);
    int64_t lo, hi;
    assert_int_equal(sl__limits_range(&lim, SL_KNOB_PREFETCH, &lo, &hi), 0);
    assert_true(hi == lim.fit_prefetch && hi > 64 &&
                hi <= SL_KNOB_MAX_PREFETCH);
}

/* Memory held beside the batches (the GPU stage's pinned slots) comes off
 * their share: fewer batch buffers fit; none left is an error; without a
 * budget nothing changes. */
static void test_memory_charged_beside_the_batches(void **state)
{
    (void)state;
    sl_options_t o = opts();
    o.max_memory_bytes = SL_LIMITS_MEM_RESERVE + 3 * (int64_t)BATCH + 100;
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    assert_int_equal(lim.max_prefetch, 3);
    assert_int_equal(sl__limits_charge(&lim, BATCH, BATCH, &k), 0);
    assert_int_equal(lim.max_prefetch, 2);
    assert_int_equal(k.prefetch, 2);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_PREFETCH, 3), SL_ERANGE);
    assert_int_equal(sl__limits_charge(&lim, 2 * (int64_t)BATCH, BATCH, &k),
                     SL_ERANGE);
    assert_int_equal(lim.max_prefetch, 2); /* a refused charge leaves it */
    o.max_memory_bytes = 0;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    int before = lim.max_prefetch;
    assert_int_equal(sl__limits_charge(&lim, (int64_t)1 << 40, BATCH, &k), 0);
    assert_int_equal(lim.max_prefetch, before);
}

/* Device batches under a GPU memory budget: what the stage leaves holds
 * the buffers, for the user too; a room without one batch is refused and
 * changes nothing. */
static void test_device_batches_fit_the_gpu_budget(void **state)
{
    (void)state;
    sl_options_t o = opts();
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    assert_true(lim.max_prefetch > 5 && k.prefetch > 5);
    assert_int_equal(lim.hard_prefetch, 0);
    assert_int_equal(sl__limits_device(&lim, BATCH - 1, BATCH, &k), SL_ERANGE);
    assert_true(lim.max_prefetch > 5 && lim.hard_prefetch == 0);
    assert_int_equal(sl__limits_device(&lim, 5 * (int64_t)BATCH + 7, BATCH, &k),
                     0);
    assert_int_equal(lim.max_prefetch, 5);
    assert_int_equal(k.prefetch, 5);
    assert_int_equal(lim.hard_prefetch, 1);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_PREFETCH, 6), SL_ERANGE);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_PREFETCH, 5), 0);
}

static void test_memory_budget_without_room_is_an_error(void **state)
{
    (void)state;
    sl_options_t o = opts();
    o.max_memory_bytes = SL_LIMITS_MEM_RESERVE + (int64_t)BATCH - 1;
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 4, &lim, &k), SL_ERANGE);
    assert_non_null(strstr(err, "holds no batch"));
}

/* The one split of a memory budget: a quarter (at least the reserve) is
 * working memory, a quarter of that for read-ahead, the rest for decode
 * scratch; batch buffers get what is left (issue 14 item 10). */
static void test_memory_budget_split(void **state)
{
    (void)state;
    sl_options_t o = opts();
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    /* No budget: still bounded, far above any real image. */
    assert_int_equal(lim.mem_read, SL_LIMITS_READ_MAX);
    assert_int_equal(lim.mem_decode, SL_LIMITS_DECODE_MAX);
    o.max_memory_bytes = (int64_t)256 << 20;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    assert_int_equal(lim.mem_read, 16 << 20);
    assert_int_equal(lim.mem_decode, 48 << 20);
    assert_int_equal(lim.max_prefetch, (int)((192 << 20) / BATCH));
    /* Small budgets keep the reserve. */
    o.max_memory_bytes = SL_LIMITS_MEM_RESERVE + 3 * (int64_t)BATCH + 100;
    assert_int_equal(make(&o, 4, &lim, &k), 0);
    assert_int_equal(lim.mem_read + lim.mem_decode, SL_LIMITS_MEM_RESERVE);
    assert_int_equal(lim.mem_read, SL_LIMITS_MEM_RESERVE / 4);
}

static void test_thread_budget(void **state)
{
    (void)state;
    sl__limits_t lim;
    sl__knobs_t k;
    /* No budget given: decode threads the user sets above 2 x cores are
     * the budget; they bind only the scheduler (a soft budget). */
    sl_options_t o = opts();
    o.decode_threads = 10;
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(lim.max_threads, 11);
    assert_int_equal(lim.max_decode, 10);
    assert_false(lim.hard_threads);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_DECODE, 40), 0);
    /* A budget given: a fixed decode above it is an error ... */
    o.max_threads = 4;
    o.decode_threads = 5;
    assert_int_equal(make(&o, 8, &lim, &k), SL_ERANGE);
    assert_non_null(strstr(err, "thread budget of 4"));
    /* ... a tuned one starts at the budget, and sheds stop there. */
    o.decode_threads = 0;
    assert_int_equal(make(&o, 8, &lim, &k), 0);
    assert_int_equal(k.decode_threads, 3);
    assert_int_equal(lim.max_decode, 3);
    assert_int_equal(lim.min_decode, 3);
    assert_true(lim.hard_threads);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_DECODE, 3), 0);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_DECODE, 4), SL_ERANGE);
    /* Read threads are I/O depth: outside the CPU budget. */
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_READ, 30), 0);
    /* A budget below 2 is 2: one decoder and the read stage. */
    o.max_threads = 1;
    o.decode_threads = 1;
    assert_int_equal(make(&o, 8, &lim, &k), 0);
    assert_int_equal(lim.max_threads, 2);
    assert_int_equal(lim.max_decode, 1);
}

static void test_many_cores_stay_within_the_worker_limit(void **state)
{
    (void)state;
    sl_options_t o = opts();
    o.max_threads = 1000;
    sl__limits_t lim;
    sl__knobs_t k;
    assert_int_equal(make(&o, 200, &lim, &k), 0);
    assert_int_equal(lim.max_decode, SL_KNOB_MAX_THREADS);
    assert_int_equal(lim.max_read, 256);
}

static void test_check_ranges(void **state)
{
    (void)state;
    sl__limits_t lim;
    memset(&lim, 0, sizeof lim);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_READ, 0), SL_ERANGE);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_READ, 1), 0);
    assert_int_equal(
        sl__limits_check(&lim, SL_KNOB_READ, SL_KNOB_MAX_THREADS + 1),
        SL_ERANGE);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_DECODE, -1), SL_ERANGE);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_PREFETCH, 4096), 0);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_PREFETCH, 4097), SL_ERANGE);
    assert_int_equal(sl__limits_check(&lim, SL_KNOB_NONE, 1), SL_EINVAL);
    assert_int_equal(sl__limits_knob_default(SL_KNOB_PREFETCH, 8, 0), 2);
    assert_int_equal(sl__limits_knob_default(SL_KNOB_PREFETCH, 8, 3), 6);
    assert_string_equal(sl__knob_name(SL_KNOB_DECODE), "decode_threads");
}

/* Asynchronous reads (sl__limits_io_depth): who tunes the depth, where
 * it starts, and the read budget's bound on it. */
static void test_io_depth_with_async_reads(void **state)
{
    (void)state;
    sl_options_t o = opts();
    sl__limits_t lim;
    sl__knobs_t k;
    /* Heuristic, both left: the read knob is the depth, on one thread. */
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(sl__limits_io_depth(&o, 1, 0, &k, &lim), 1);
    assert_int_equal(lim.read_depth, 1);
    assert_true(lim.tune_read);
    assert_int_equal(lim.max_depth, SL_IO_DEPTH_MAX); /* 2 GB / 256 KiB */
    assert_int_equal(lim.max_read, lim.max_depth);
    int64_t lo, hi;
    assert_int_equal(sl__limits_range(&lim, SL_KNOB_DEPTH, &lo, &hi), 0);
    assert_int_equal(hi, SL_IO_DEPTH_MAX);
    assert_string_equal(sl__knob_label(SL_KNOB_READ, lim.read_depth),
                        "io_depth");
    /* Reads at URLs start at SL_IO_DEPTH_REMOTE_START (a round trip each:
     * depth 1 reads 1/RTT a second until the first decision). */
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(sl__limits_io_depth(&o, 1, 1, &k, &lim),
                     SL_IO_DEPTH_REMOTE_START);
    assert_int_equal(lim.read_depth, 1);
    /* rl and static on a remote source: the depth still follows. */
    o.policy = SL_POLICY_STATIC;
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(sl__limits_io_depth(&o, 1, 1, &k, &lim), 0);
    o.policy = SL_POLICY_HEURISTIC;
    /* No asynchronous reads: nothing changes, the depth follows. */
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    int max_read = lim.max_read;
    assert_int_equal(sl__limits_io_depth(&o, 0, 0, &k, &lim), 0);
    assert_int_equal(lim.read_depth, 0);
    assert_int_equal(lim.max_read, max_read);
    assert_string_equal(sl__knob_label(SL_KNOB_READ, 0), "read_threads");
    /* rl and static: read threads stay the read knob, depth follows. */
    o.policy = SL_POLICY_RL;
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(sl__limits_io_depth(&o, 1, 0, &k, &lim), 0);
    assert_int_equal(lim.read_depth, 0);
    assert_true(lim.tune_read);
    o.policy = SL_POLICY_STATIC;
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(sl__limits_io_depth(&o, 1, 0, &k, &lim), 0);
    /* Given: fixed, and so are the read threads. */
    o.policy = SL_POLICY_HEURISTIC;
    o.io_depth = 24;
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(sl__limits_io_depth(&o, 1, 0, &k, &lim), 24);
    assert_false(lim.tune_read);
    assert_int_equal(lim.read_depth, 0);
    o.io_depth = 5000; /* above the budget: what the user set */
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    assert_int_equal(sl__limits_io_depth(&o, 1, 0, &k, &lim), 5000);
    assert_int_equal(lim.max_depth, 5000);
    /* A memory budget bounds the depth by the read share's bytes. */
    o = opts();
    o.max_memory_bytes = (int64_t)1 << 30; /* work 256 MB, read 64 MB */
    assert_int_equal(make(&o, 2, &lim, &k), 0);
    sl__limits_io_depth(&o, 1, 0, &k, &lim);
    assert_int_equal(lim.max_depth, (int)(lim.mem_read / SL_IO_DEPTH_BYTES));
    assert_int_equal(lim.max_depth, 256);
}

/* Reads in flight within the open-files limit: the limit less the files
 * open less the spare, at least one; no limit is none. */
static void test_fd_reads(void **state)
{
    (void)state;
    assert_int_equal(sl__limits_fd_reads(32, 5), 32 - 5 - SL_LIMITS_FD_SPARE);
    assert_int_equal(sl__limits_fd_reads(16, 5), 1); /* never 0 */
    assert_int_equal(sl__limits_fd_reads(1024, -1), 1024 - SL_LIMITS_FD_SPARE);
    assert_int_equal(sl__limits_fd_reads(0, 5), INT_MAX);
    assert_int_equal(sl__limits_fd_reads((int64_t)1 << 40, 5), INT_MAX);
}

/* With io_uring each read thread holds its ring besides its read's file:
 * the threads get half the room, the depth what their rings leave. Reads
 * through descriptors held since open (shards) hold no file: only the
 * rings count. */
static void test_fd_reads_with_rings(void **state)
{
    (void)state;
    assert_int_equal(sl__limits_fd_threads(43, 0, 1), 43);
    assert_int_equal(sl__limits_fd_threads(43, 1, 1), 21);
    assert_int_equal(sl__limits_fd_threads(1, 1, 1), 1); /* never 0 */
    assert_int_equal(sl__limits_fd_threads(INT_MAX, 1, 1), INT_MAX);
    assert_int_equal(sl__limits_fd_threads(43, 1, 0), 43);      /* rings */
    assert_int_equal(sl__limits_fd_threads(43, 0, 0), INT_MAX); /* none */
    assert_int_equal(sl__limits_fd_depth(43, 4, 1), 39);
    assert_int_equal(sl__limits_fd_depth(3, 4, 1), 1);
    assert_int_equal(sl__limits_fd_depth(INT_MAX, 4, 1), INT_MAX);
    assert_int_equal(sl__limits_fd_depth(43, 4, 0), INT_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_on_four_cores),
        cmocka_unit_test(test_io_depth_budget),
        cmocka_unit_test(test_static_policy_tunes_nothing),
        cmocka_unit_test(test_memory_budget_caps_prefetch),
        cmocka_unit_test(test_device_batches_fit_the_gpu_budget),
        cmocka_unit_test(test_memory_budget_without_room_is_an_error),
        cmocka_unit_test(test_memory_budget_split),
        cmocka_unit_test(test_memory_charged_beside_the_batches),
        cmocka_unit_test(test_thread_budget),
        cmocka_unit_test(test_many_cores_stay_within_the_worker_limit),
        cmocka_unit_test(test_check_ranges),
        cmocka_unit_test(test_io_depth_with_async_reads),
        cmocka_unit_test(test_fd_reads),
        cmocka_unit_test(test_fd_reads_with_rings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
