/* Asynchronous reads (exec/aread, exec/loader_aread.c; issue 20): the
 * ring reads the right bytes; the emulated storage means the same per-read
 * latency and aggregate bandwidth with reads in flight as with threads
 * waiting; the stream is the same at io_depth 1, 8, 64 and with blocking
 * reads (folder and compressed shard); bad files are skipped and named; a
 * tight read budget with a deep queue neither hangs nor goes over; and
 * io_depth / read threads flipped while next() runs (watchdog; TSan in
 * make check); and a kernel that stops taking submissions mid-run (a
 * seccomp filter on io_uring_enter) costs no read and no hang. Where io_uring
 * cannot be used (built without liburing, refused by the kernel) the ring tests
 * skip with the reason and the loader tests run the inline / blocking paths. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef SL_TEST_SECCOMP
#include <seccomp.h>
#endif

#include "base/base.h"
#include "exec/aread.h"
#include "exec/loader_internal.h"
#include "sluice/sluice.h"
#include "sluice/testing.h"
#include "testutil.h"

static char *root;  /* an ImageFolder tree */
static char *shard; /* the same images in one zstd shard */

static int setup(void **state)
{
    (void)state;
    tu_tree_shard("aread", 3, 24, 40, 30, &root, &shard);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_tree_shard_remove(root, shard);
    return 0;
}

static int ring_ok(void)
{
    const char *why;
    if (sl__uring_probe(&why))
        return 1;
    printf("# io_uring cannot be used here (%s): ring checks skipped\n", why);
    return 0;
}

/* ------------------------------------------------------------ aread */

/* A file of n bytes whose byte k is k * 7 + 3. */
static char *pattern_file(size_t n)
{
    char *dir = tu_tmpdir("aread-file");
    char p[4096];
    snprintf(p, sizeof p, "%s/f", dir);
    uint8_t *b = malloc(n);
    for (size_t k = 0; k < n; k++)
        b[k] = (uint8_t)(k * 7 + 3);
    assert_int_equal(tu_write_file(p, b, n), 0);
    free(b);
    free(dir);
    return strdup(p);
}

/* 64 reads of 4 KiB at scattered offsets, 16 in flight, ring and inline:
 * every byte where it belongs, every request back once. */
static void test_reads_the_right_bytes(void **state)
{
    (void)state;
    const size_t N = 1 << 20, B = 4096;
    char *path = pattern_file(N);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    sl__throttle_t thr;
    sl__throttle_init(&thr, 0, 0);
    for (int ring = 0; ring <= 1; ring++) {
        if (ring && !ring_ok())
            break;
        sl__aread_t a;
        assert_int_equal(sl__aread_init(&a, &thr, 8, ring, NULL, 0), 0);
        assert_int_equal(sl__aread_uses_ring(&a), ring);
        sl__areq_t rq[64];
        uint8_t *buf = malloc(64 * B);
        int started = 0, back = 0, seen[64] = {0};
        while (back < 64) {
            while (started < 64 && sl__aread_in_flight(&a) < 16) {
                sl__areq_t *r = &rq[started];
                *r = (sl__areq_t){.fd = fd,
                                  .buf = buf + (size_t)started * B,
                                  .len = B,
                                  .off = (uint64_t)((started * 37) % 250) * B,
                                  .t0 = sl__now_ns(),
                                  .user = &seen[started]};
                sl__aread_start(&a, r);
                started++;
            }
            sl__areq_t *done[16];
            int n = sl__aread_reap(&a, done, 16, 1000000000, 0);
            for (int i = 0; i < n; i++) {
                assert_int_equal(done[i]->res, (int64_t)B);
                (*(int *)done[i]->user)++;
                const uint8_t *p = done[i]->buf;
                for (size_t k = 0; k < B; k++)
                    if (p[k] != (uint8_t)((done[i]->off + k) * 7 + 3))
                        fail_msg("byte %zu of read at %llu", k,
                                 (unsigned long long)done[i]->off);
            }
            back += n;
        }
        for (int i = 0; i < 64; i++)
            assert_int_equal(seen[i], 1);
        assert_int_equal(sl__aread_in_flight(&a), 0);
        sl__aread_destroy(&a);
        free(buf);
    }
    /* A read of a closed fd comes back as an error, not a hang. */
    sl__aread_t a;
    assert_int_equal(sl__aread_init(&a, &thr, 8, 1, NULL, 0), 0);
    uint8_t one[16];
    sl__areq_t r = {.fd = 1000000, .buf = one, .len = 16, .t0 = sl__now_ns()};
    sl__aread_start(&a, &r);
    sl__areq_t *done[1];
    while (sl__aread_reap(&a, done, 1, 1000000000, 0) == 0)
        ;
    assert_true(done[0]->res < 0);
    sl__aread_destroy(&a);
    sl__throttle_destroy(&thr);
    close(fd);
    unlink(path);
    free(path);
}

/* Reads of `bytes` each through aread, `depth` in flight, `n` in all;
 * seconds taken. */
static double run_async(sl__throttle_t *thr, int ring, int depth, int n,
                        size_t bytes, int fd, uint8_t *buf)
{
    sl__aread_t a;
    assert_int_equal(sl__aread_init(&a, thr, 64, ring, NULL, 0), 0);
    sl__areq_t *rq = calloc((size_t)n, sizeof *rq);
    int started = 0, back = 0;
    int64_t t0 = sl__now_ns();
    while (back < n) {
        while (started < n && sl__aread_in_flight(&a) < depth) {
            rq[started] = (sl__areq_t){
                .fd = fd, .buf = buf, .len = bytes, .t0 = sl__now_ns()};
            sl__aread_start(&a, &rq[started++]);
        }
        sl__areq_t *done[64];
        back += sl__aread_reap(&a, done, 64, 1000000000, 0);
    }
    double s = (double)(sl__now_ns() - t0) / 1e9;
    sl__aread_destroy(&a);
    free(rq);
    return s;
}

typedef struct {
    sl__throttle_t *t;
    int reads;
    uint64_t bytes;
} waiter_t;

static void *waiter(void *p)
{
    waiter_t *w = p;
    for (int i = 0; i < w->reads; i++)
        sl__throttle_wait(w->t, w->bytes, sl__now_ns());
    return NULL;
}

static double run_threads(sl__throttle_t *thr, int nthreads, int n,
                          uint64_t bytes)
{
    pthread_t th[16];
    waiter_t w = {thr, n / nthreads, bytes};
    int64_t t0 = sl__now_ns();
    for (int i = 0; i < nthreads; i++)
        assert_int_equal(pthread_create(&th[i], NULL, waiter, &w), 0);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    return (double)(sl__now_ns() - t0) / 1e9;
}

/* The emulated storage means the same with reads in flight as with
 * threads: (1) latency: 1 in flight pays L per read, 8 in flight (8
 * threads) overlap it: 32 reads take >= 4 L and far less than 32 L; (2)
 * bandwidth: the bucket caps the bytes whatever the depth: >= (bytes -
 * burst) / rate in both. Lower bounds are strict; upper bounds generous
 * (a loaded machine only makes waits longer). */
static void test_emulation_same_as_threads(void **state)
{
    (void)state;
    const size_t B = 64 << 10;
    char *path = pattern_file(B);
    int fd = open(path, O_RDONLY);
    uint8_t *buf = malloc(B);
    const int64_t L = 20000; /* us */
    for (int ring = 0; ring <= 1; ring++) {
        if (ring && !ring_ok())
            break;
        sl__throttle_t t;
        sl__throttle_init(&t, L, 0);
        double one = run_async(&t, ring, 1, 8, B, fd, buf);
        double deep = run_async(&t, ring, 8, 32, B, fd, buf);
        double thr8 = run_threads(&t, 8, 32, B);
        printf("# latency %lld us, ring %d: 8 reads depth 1 %.3f s; 32 reads "
               "depth 8 %.3f s, 8 threads %.3f s\n",
               (long long)L, ring, one, deep, thr8);
        assert_true(one >= 8 * L / 1e6 - 0.001);
        assert_true(deep >= 4 * L / 1e6 - 0.001);
        assert_true(thr8 >= 4 * L / 1e6 - 0.001);
        assert_true(deep < 16 * L / 1e6); /* overlapped, like threads */
        sl__throttle_destroy(&t);

        const int64_t rate = 4 << 20;
        sl__throttle_init(&t, 0, rate);
        double floor = (32.0 * B - SL_THROTTLE_BURST(rate)) / (double)rate;
        double a1 = run_async(&t, ring, 1, 32, B, fd, buf);
        sl__throttle_destroy(&t);
        sl__throttle_init(&t, 0, rate);
        double a16 = run_async(&t, ring, 16, 32, B, fd, buf);
        sl__throttle_destroy(&t);
        sl__throttle_init(&t, 0, rate);
        double t4 = run_threads(&t, 4, 32, B);
        sl__throttle_destroy(&t);
        printf("# bandwidth %lld B/s, ring %d: depth 1 %.3f s, depth 16 "
               "%.3f s, 4 threads %.3f s (>= %.3f)\n",
               (long long)rate, ring, a1, a16, t4, floor);
        assert_true(a1 >= floor - 0.002);
        assert_true(a16 >= floor - 0.002);
        assert_true(t4 >= floor - 0.002);
        assert_true(a16 < 3 * floor + 0.2); /* the cap, not a serial wait */
    }
    free(buf);
    close(fd);
    unlink(path);
    free(path);
}

/* ------------------------------------------------------------ loader */

static sl_loader_t *loader(const char *src, int threads, int depth,
                           int on_error)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 5;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.policy = SL_POLICY_STATIC;
    o.read_threads = threads;
    o.decode_threads = 2;
    o.io_depth = depth;
    o.seed = 11;
    o.epochs = 2;
    o.on_error = on_error;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(src, &o, &l), 0);
    return l;
}

static void test_stream_same_at_every_depth(void **state)
{
    (void)state;
    tu_watchdog(240, 0, "determinism: the loader hung");
    const char *srcs[2] = {root, shard};
    for (int s = 0; s < 2; s++) {
        int64_t n0;
        sl_loader_t *l = loader(srcs[s], 3, SL_IO_DEPTH_OFF, SL_ON_ERROR_FAIL);
        const char *why;
        assert_int_equal(sl__testing_read_path(l, &why), 0);
        uint64_t ref = tu_stream_digest(l, &n0);
        sl_loader_destroy(l);
        assert_int_equal(n0, 2 * 72);
        const int depths[3] = {1, 8, 64};
        for (int i = 0; i < 3; i++)
            for (int threads = 1; threads <= 2; threads++) {
                int64_t n;
                l = loader(srcs[s], threads, depths[i], SL_ON_ERROR_FAIL);
                int async = sl__testing_read_path(l, &why);
                uint64_t d = tu_stream_digest(l, &n);
                int64_t v;
                assert_int_equal(sl_loader_get(l, SL_PARAM_IO_DEPTH, &v), 0);
                assert_int_equal(v, depths[i]);
                printf("# %s: io_depth %d, %d read threads (%s): %016llx\n",
                       s ? "shard" : "folder", depths[i], threads,
                       async ? "io_uring" : why, (unsigned long long)d);
                assert_int_equal(n, n0);
                assert_int_equal(d, ref);
                sl_loader_destroy(l);
            }
    }
    tu_watchdog(0, 0, NULL);
}

/* A file gone after the scan and a truncated one: skipped, counted, and
 * named, with reads in flight around them. */
static void test_bad_files_are_named(void **state)
{
    (void)state;
    tu_watchdog(240, 0, "bad files: the loader hung");
    char *dir = tu_jpeg_tree("aread-bad", 2, 10, 32, 24);
    char p[4096];
    sl_loader_t *l = loader(dir, 1, 8, SL_ON_ERROR_SKIP);
    snprintf(p, sizeof p, "%s/c0/i03.jpg", dir);
    assert_int_equal(unlink(p), 0);
    snprintf(p, sizeof p, "%s/c1/i05.jpg", dir);
    assert_int_equal(truncate(p, 20), 0);
    int64_t n;
    tu_stream_digest(l, &n);
    assert_int_equal(n, 2 * 18);
    assert_int_equal(sl_loader_skipped_count(l), 4);
    int missing = 0, cut = 0;
    for (int64_t i = 0; i < sl_loader_skipped_count(l); i++) {
        const char *m = sl_loader_skipped_message(l, i);
        printf("# skipped: %s\n", m);
        missing += strstr(m, "c0/i03.jpg") && strstr(m, "cannot open");
        cut += strstr(m, "c1/i05.jpg") != NULL;
    }
    assert_int_equal(missing, 2);
    assert_int_equal(cut, 2);
    sl_loader_destroy(l);
    /* Under the fail policy the first one ends the stream, named. */
    l = loader(dir, 2, 16, SL_ON_ERROR_FAIL);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int rc;
    while ((rc = sl_loader_next(l, &b)) == 0)
        sl_loader_release(l, b);
    assert_true(rc != SL_EEND);
    const char *m = sl_loader_last_error(l);
    assert_true(strstr(m, "c0/i03.jpg") || strstr(m, "c1/i05.jpg"));
    sl_loader_destroy(l);
    tu_rmtree(dir);
    free(dir);
    tu_watchdog(0, 0, NULL);
}

/* A deep queue against a read budget that holds only a few files: the
 * stream completes (a reader never waits on charges only it holds) and
 * the budget is never exceeded. */
static void test_tight_budget_deep_queue(void **state)
{
    (void)state;
    tu_watchdog(240, 0, "tight budget: the loader hung");
    sl_loader_t *l = loader(root, 2, 64, SL_ON_ERROR_FAIL);
    const int64_t cap = 4 << 10; /* one or two of these small JPEGs */
    l->rbud.limit = cap;
    int64_t n;
    tu_stream_digest(l, &n);
    assert_int_equal(n, 2 * 72);
    printf("# read budget %lld B, peak %lld B\n", (long long)cap,
           (long long)sl__membudget_peak(&l->rbud));
    assert_true(sl__membudget_peak(&l->rbud) <= cap);
    assert_int_equal(sl__membudget_used(&l->rbud), 0);
    sl_loader_destroy(l);
    tu_watchdog(0, 0, NULL);
}

typedef struct {
    sl_loader_t *l;
    atomic_int stop;
} flipper_t;

static void *flipper(void *arg)
{
    flipper_t *f = arg;
    for (int i = 0; !atomic_load(&f->stop); i++) {
        sl_loader_set(f->l, SL_PARAM_IO_DEPTH,
                      i % 3 == 0   ? 1
                      : i % 3 == 1 ? 5
                                   : 40);
        sl_loader_set(f->l, SL_PARAM_READ_THREADS, i % 2 ? 3 : 1);
        if (i % 7 == 0)
            sl_loader_set(f->l, SL_PARAM_IO_DEPTH, SL_AUTOTUNE);
        usleep(500);
    }
    return NULL;
}

/* io_depth and read threads flipped from another thread while next()
 * runs, over restarts, with emulated latency (completions wait on the
 * clock): no hang, and the stream is the one a quiet loader gives. */
static void test_flip_depth_and_threads(void **state)
{
    (void)state;
    tu_watchdog(240, 0, "flipping io_depth: the loader hung");
    int64_t n0, n;
    sl_loader_t *l = loader(root, 2, 4, SL_ON_ERROR_FAIL);
    uint64_t ref = tu_stream_digest(l, &n0);
    assert_int_equal(
        sl__testing_storage_set(l, SL_TESTING_READ_LATENCY_US, 300), 0);
    flipper_t f = {l, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, flipper, &f), 0);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(tu_stream_digest(l, &n), ref);
        assert_int_equal(n, n0);
        /* a restart in the middle of a stream */
        sl_position_t pos = {1, 3};
        assert_int_equal(sl_loader_start(l, &pos), 0);
        const sl_batch_t *b;
        assert_int_equal(sl_loader_next(l, &b), 0);
        assert_int_equal(b->epoch, 1);
        assert_int_equal(b->index, 3);
        sl_loader_release(l, b);
    }
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);
    sl_loader_destroy(l);
    tu_watchdog(0, 0, NULL);
}

/* The knob: its range, get / set, SL_AUTOTUNE (one per read thread). */
static void test_knob(void **state)
{
    (void)state;
    sl_loader_t *l = loader(root, 3, 0, SL_ON_ERROR_FAIL);
    int64_t v, lo, hi;
    assert_int_equal(sl_loader_get(l, SL_PARAM_IO_DEPTH, &v), 0);
    assert_int_equal(v, 3); /* static: follows the read threads */
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_IO_DEPTH, &lo, &hi), 0);
    assert_int_equal(lo, 1);
    assert_true(hi >= 64);
    assert_int_equal(sl_loader_set(l, SL_PARAM_IO_DEPTH, hi + 1), SL_ERANGE);
    assert_int_equal(sl_loader_set(l, SL_PARAM_IO_DEPTH, 12), 0);
    assert_int_equal(sl_loader_get(l, SL_PARAM_IO_DEPTH, &v), 0);
    assert_int_equal(v, 12);
    assert_int_equal(sl_loader_set(l, SL_PARAM_IO_DEPTH, SL_AUTOTUNE), 0);
    assert_int_equal(sl_loader_set(l, SL_PARAM_READ_THREADS, 5), 0);
    assert_int_equal(sl_loader_get(l, SL_PARAM_IO_DEPTH, &v), 0);
    assert_int_equal(v, 5);
    sl_loader_destroy(l);
    /* Out of range in the options: refused at create, naming the field. */
    sl_options_t o;
    sl_options_init(&o);
    o.io_depth = -3;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(NULL), "io_depth"));
}

#ifdef SL_TEST_SECCOMP
/* Reads i in [from, to) of 4 KiB blocks at offset i * stride blocks. */
static void start_reads(sl__aread_t *a, sl__areq_t *rq, int from, int to,
                        int fd, uint8_t *buf, int stride)
{
    for (int i = from; i < to; i++) {
        rq[i] = (sl__areq_t){.fd = fd,
                             .buf = buf + i * 4096,
                             .len = 4096,
                             .off = (uint64_t)(i * stride) * 4096,
                             .t0 = sl__now_ns()};
        sl__aread_start(a, &rq[i]);
    }
}
#endif

/* The kernel refuses io_uring_enter after the ring was made (a seccomp
 * filter loaded mid-run): the reads queued for it are read inline at the
 * next flush, later ones too, every byte right, nothing waits forever.
 * In a child process (the filter cannot be taken back), libseccomp where
 * the build found it. */
static void test_refused_submission_reads_inline(void **state)
{
    (void)state;
#ifndef SL_TEST_SECCOMP
    printf("# skipped: built without libseccomp (libseccomp-dev)\n");
    skip();
#else
    if (!ring_ok())
        skip();
    const size_t B = 4096;
    char *path = pattern_file(64 * B);
    uint8_t *buf = malloc(32 * B);
    sl__areq_t rq[32];
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_RDONLY);
        sl__throttle_t thr;
        sl__throttle_init(&thr, 0, 0);
        sl__aread_t a;
        sl__aread_init(&a, &thr, 64, 1, NULL, 0);
        if (!sl__aread_uses_ring(&a) || fd < 0)
            _exit(10);
        start_reads(&a, rq, 0, 8, fd, buf, 5); /* these go through the ring */
        sl__aread_flush(&a);
        start_reads(&a, rq, 8, 16, fd, buf, 3); /* queued, then refused */
        scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
        if (!f ||
            seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(io_uring_enter),
                             0) ||
            seccomp_load(f))
            _exit(11);
        start_reads(&a, rq, 16, 32, fd, buf, 2); /* after the refusal: inline */
        int back = 0;
        int64_t end = sl__now_ns() + 10000000000LL;
        while (back < 32 && sl__now_ns() < end) {
            sl__areq_t *done[32];
            int n = sl__aread_reap(&a, done, 32, 100000000, 0);
            for (int i = 0; i < n; i++) {
                if (done[i]->res != (int64_t)B)
                    _exit(12);
                const uint8_t *p = done[i]->buf;
                for (size_t k = 0; k < B; k++)
                    if (p[k] != (uint8_t)((done[i]->off + k) * 7 + 3))
                        _exit(13);
            }
            back += n;
        }
        if (back != 32)
            _exit(14); /* waited on reads the kernel never took */
        if (sl__aread_uses_ring(&a) || a.refused != -EPERM)
            _exit(15);
        _exit(0);
    }
    int st = 0;
    for (int t = 0; t < 300 && waitpid(pid, &st, WNOHANG) == 0; t++)
        usleep(100000);
    if (waitpid(pid, &st, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("the reader hung after io_uring_enter was refused");
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    free(buf);
    unlink(path);
    free(path);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_the_right_bytes),
        cmocka_unit_test(test_emulation_same_as_threads),
        cmocka_unit_test(test_stream_same_at_every_depth),
        cmocka_unit_test(test_bad_files_are_named),
        cmocka_unit_test(test_tight_budget_deep_queue),
        cmocka_unit_test(test_flip_depth_and_threads),
        cmocka_unit_test(test_knob),
        cmocka_unit_test(test_refused_submission_reads_inline),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
