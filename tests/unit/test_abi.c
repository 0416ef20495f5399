/* The public ABI's growth rules (base/abi.h): sized structs from older,
 * current and newer headers; the per-thread last error; knob ranges;
 * resolved options; restarting while a batch is held. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "core/options.h"
#include "ops/image.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"
#include "testutil.h"

static char *root;

static int setup(void **state)
{
    (void)state;
    root = tu_jpeg_tree("abi", 2, 12, 32, 24);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

static sl_options_t opts(void)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.decode_threads = 1;
    return o;
}

/* An init writes only the struct the caller was compiled with: an older
 * program's sl_options_t (the first layout) followed by its own bytes
 * keeps those bytes, and its size field says its size (the library's
 * init zeroed the library's sizeof: past the older struct). The header's
 * sl_X_init passes the caller's sizeof; the plain symbol, for programs
 * built before it, the library's. */
static void test_init_keeps_to_the_callers_size(void **state)
{
    (void)state;
    size_t old = SL__OPTIONS_V1_SIZE;
    union {
        sl_options_t o;
        unsigned char b[sizeof(sl_options_t) + 64];
    } u;
    memset(u.b, 0xAB, sizeof u.b);
    sl_options_init_sized(&u.o, old);
    assert_int_equal(u.o.size, old);
    for (size_t i = sizeof(size_t); i < old; i++)
        assert_int_equal(u.b[i], 0);
    for (size_t i = old; i < sizeof u.b; i++)
        assert_int_equal(u.b[i], 0xAB); /* the older program's own */
    /* that struct works: its missing tail reads as the defaults */
    u.o.batch_size = 4, u.o.image_size = 16, u.o.telemetry_ms = -1;
    u.o.decode_threads = 1;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &u.o, &l), 0);
    sl_loader_destroy(l);
    /* the macro: the caller's sizeof */
    memset(u.b, 0xAB, sizeof u.b);
    sl_options_init(&u.o);
    assert_int_equal(u.o.size, sizeof(sl_options_t));
    assert_int_equal(u.b[sizeof(sl_options_t)], 0xAB);
    /* the symbol older programs call: the library's sizeof */
    sl_options_t o;
    memset(&o, 0xAB, sizeof o);
    (sl_options_init)(&o);
    assert_int_equal(o.size, sizeof o);
    assert_int_equal(o.batch_size, 0);
    sl_snapshot_t sn;
    memset(&sn, 0xAB, sizeof sn);
    sl_snapshot_init(&sn);
    assert_int_equal(sn.size, sizeof sn);
    sl_options_init_sized(NULL, 64); /* NULL: nothing */
}

/* A struct never initialised (size 0) is refused with a message that
 * says what to do; so is one from a layout older than the first. */
static void test_uninitialised_refused(void **state)
{
    (void)state;
    sl_options_t o;
    memset(&o, 0, sizeof o);
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    assert_null(l);
    assert_non_null(strstr(sl_loader_last_error(NULL), "sl_options_init"));
    o = opts();
    o.size = offsetof(sl_options_t, learn); /* one field short */
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    sl_transform_t t;
    memset(&t, 0, sizeof t);
    uint8_t px[3];
    char err[128];
    assert_int_equal(sl_image_transform(px, 3, &t, px, err, sizeof err),
                     SL_EINVAL);
    assert_non_null(strstr(err, "sl_transform_init"));
}

/* A caller built against a newer header hands a bigger struct: the
 * library reads the fields it knows and ignores the rest; outputs are
 * written only up to the library's size, the caller's tail untouched. */
static void test_newer_caller(void **state)
{
    (void)state;
    size_t big = sizeof(sl_options_t) + 64;
    unsigned char *buf = malloc(big);
    memset(buf, 0xAB, big); /* unknown fields: garbage */
    sl_options_t o = opts();
    memcpy(buf, &o, sizeof o);
    *(size_t *)buf = big;
    sl_loader_t *l = NULL;
    assert_int_equal(sl_loader_create(root, (sl_options_t *)buf, &l), 0);
    free(buf);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    while (sl_loader_next(l, &b) == 0)
        sl_loader_release(l, b);
    size_t sbig = sizeof(sl_stats_t) + 32;
    unsigned char *st = malloc(sbig);
    memset(st, 0xCD, sbig);
    *(size_t *)st = sbig;
    assert_int_equal(sl_loader_stats(l, (sl_stats_t *)st), 0);
    assert_int_equal(((sl_stats_t *)st)->samples, 24);
    assert_int_equal(*(size_t *)st, sbig); /* the caller's size kept */
    for (size_t i = sizeof(sl_stats_t); i < sbig; i++)
        assert_int_equal(st[i], 0xCD);
    /* An output struct too small for the first layout is refused. */
    sl_stats_t small;
    sl_stats_init(&small);
    small.size = sizeof(size_t);
    assert_int_equal(sl_loader_stats(l, &small), SL_EINVAL);
    free(st);
    sl_loader_destroy(l);
}

/* Snapshots of a newer (bigger) layout: every element at the caller's
 * stride, each with its size set. */
static void test_snapshot_stride(void **state)
{
    (void)state;
    sl_options_t o = opts();
    o.telemetry_ms = 10;
    o.policy = SL_POLICY_STATIC;
    o.epochs = 3;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    while (sl_loader_next(l, &b) == 0) {
        struct timespec ts = {0, 15000000};
        nanosleep(&ts, NULL);
        sl_loader_release(l, b);
    }
    size_t stride = sizeof(sl_snapshot_t) + 40;
    unsigned char *arr = calloc(4, stride);
    *(size_t *)arr = stride;
    int n = sl_loader_snapshots(l, (sl_snapshot_t *)arr, 4);
    assert_true(n >= 2);
    sl_snapshot_t same[4];
    sl_snapshot_init(&same[0]);
    assert_int_equal(sl_loader_snapshots(l, same, 4), n);
    for (int i = 0; i < n; i++) {
        const sl_snapshot_t *s = (const sl_snapshot_t *)(arr + i * stride);
        assert_int_equal(s->size, stride);
        assert_int_equal(same[i].size, sizeof(sl_snapshot_t));
        assert_true(s->t == same[i].t && s->t > 0);
    }
    free(arr);
    sl_loader_destroy(l);
}

typedef struct {
    sl_loader_t *l;
    const char *msg_after; /* the other thread's last error, after */
    char mine[256];
} other_t;

static void *other_thread(void *arg)
{
    other_t *o = arg;
    /* This thread's own failure... */
    assert_int_equal(sl_loader_set(o->l, SL_PARAM_PREFETCH, 0), SL_ERANGE);
    snprintf(o->mine, sizeof o->mine, "%s", sl_loader_last_error(o->l));
    return NULL;
}

/* The last error is the calling thread's: another thread's failures (as
 * the scheduler's refused steps on the telemetry thread) never change it. */
static void test_last_error_per_thread(void **state)
{
    (void)state;
    sl_options_t o = opts();
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_string_equal(sl_loader_last_error(l), "");
    assert_int_equal(sl_loader_set(l, SL_PARAM_READ_THREADS, 100000),
                     SL_ERANGE);
    char here[256];
    snprintf(here, sizeof here, "%s", sl_loader_last_error(l));
    assert_non_null(strstr(here, "100000"));
    other_t ot = {l, NULL, ""};
    pthread_t th;
    pthread_create(&th, NULL, other_thread, &ot);
    pthread_join(th, NULL);
    assert_non_null(strstr(ot.mine, "= 0 is outside"));
    assert_string_equal(sl_loader_last_error(l), here); /* unchanged */
    /* A failure on another handle: this one's message is not shown. */
    sl_loader_t *none = NULL;
    assert_true(sl_loader_create("/nonexistent/dir", &o, &none) < 0);
    assert_null(none);
    assert_string_equal(sl_loader_last_error(l), "");
    assert_non_null(strstr(sl_loader_last_error(NULL), "/nonexistent/dir"));
    sl_loader_destroy(l);
}

/* Knob ranges: the engine's limits narrowed by the budgets; set agrees. */
static void test_param_range(void **state)
{
    (void)state;
    sl_options_t o = opts();
    int64_t lo, hi;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_PREFETCH, &lo, &hi), 0);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, SL__PREFETCH_MAX);
    assert_int_equal(
        sl_loader_param_range(l, SL_PARAM_DECODE_THREADS, &lo, &hi), 0);
    assert_int_equal(hi, SL__THREADS_MAX);
    assert_int_equal(sl_loader_param_range(l, (sl_param_t)99, &lo, &hi),
                     SL_EINVAL);
    sl_loader_destroy(l);

    o.max_threads = 3;                                     /* decode + 1 <= 3 */
    o.max_memory_bytes = (32 << 20) + 5 * 4 * 16 * 16 * 3; /* 5 batches */
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(
        sl_loader_param_range(l, SL_PARAM_DECODE_THREADS, &lo, &hi), 0);
    assert_int_equal(hi, 2);
    assert_int_equal(sl_loader_set(l, SL_PARAM_DECODE_THREADS, 2), 0);
    assert_int_equal(sl_loader_set(l, SL_PARAM_DECODE_THREADS, 3), SL_ERANGE);
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_PREFETCH, &lo, &hi), 0);
    assert_int_equal(hi, 5);
    assert_int_equal(sl_loader_set(l, SL_PARAM_PREFETCH, 5), 0);
    assert_int_equal(sl_loader_set(l, SL_PARAM_PREFETCH, 6), SL_ERANGE);
    sl_loader_destroy(l);
}

/* sl_loader_options gives every default resolved. */
static void test_resolved_options(void **state)
{
    (void)state;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, NULL, &l), 0);
    sl_options_t r;
    sl_options_init(&r);
    assert_int_equal(sl_loader_options(l, &r), 0);
    assert_int_equal(r.size, sizeof r);
    assert_int_equal(r.batch_size, 64);
    assert_int_equal(r.image_size, 224);
    assert_int_equal(r.resize_size, 256);
    assert_int_equal(r.read_threads, 1);
    assert_int_equal(r.decode_threads, sl__ncpu());
    assert_int_equal(r.prefetch, 2 * sl__ncpu() < 2 ? 2 : 2 * sl__ncpu());
    assert_int_equal(r.world_size, 1);
    assert_int_equal(r.epochs, 1);
    assert_true(r.scale_min == 0.08 && r.scale_max == 1.0);
    assert_true(r.mean[0] > 0.48f && r.std[2] > 0.22f);
    sl_loader_destroy(l);
}

/* Restarting while a batch is held: the held batch stays valid (its bytes
 * unchanged while the new run fills other buffers) until released. */
static void test_restart_while_held(void **state)
{
    (void)state;
    sl_options_t o = opts();
    o.prefetch = 3;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *held, *b;
    assert_int_equal(sl_loader_next(l, &held), 0);
    size_t nbytes = (size_t)held->n * held->sample_bytes;
    unsigned char *copy = malloc(nbytes);
    memcpy(copy, held->data, nbytes);
    sl_position_t pos = {1, 0};
    assert_int_equal(sl_loader_start(l, &pos), 0);
    int k = 0;
    while (sl_loader_next(l, &b) == 0) {
        assert_true(b != held);
        assert_int_equal(b->epoch, 1);
        sl_loader_release(l, b);
        k++;
    }
    assert_int_equal(k, 6);
    assert_memory_equal(held->data, copy, nbytes);
    sl_loader_release(l, held);
    free(copy);
    sl_loader_destroy(l);
}

/* sl_plan_t grows like the others: a newer caller's bigger plan (garbage
 * past the known fields) works; one a field short of the first layout is
 * refused. */
static void test_plan_sizes(void **state)
{
    (void)state;
    sl_options_t o = opts();
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    size_t big = sizeof(sl_plan_t) + 48;
    unsigned char *buf = malloc(big);
    memset(buf, 0xEF, big);
    sl_plan_t p;
    sl_plan_init(&p);
    p.first = (sl_position_t){1, 2};
    p.count = 2;
    memcpy(buf, &p, sizeof p);
    *(size_t *)buf = big;
    assert_int_equal(sl_loader_start_plan(l, (sl_plan_t *)buf), 0);
    free(buf);
    const sl_batch_t *b;
    int n = 0;
    while (sl_loader_next(l, &b) == 0) {
        assert_true(b->epoch == 1 && b->index == 2 + n);
        sl_loader_release(l, b);
        n++;
    }
    assert_int_equal(n, 2);
    p.size = offsetof(sl_plan_t, step); /* one field short */
    assert_int_equal(sl_loader_start_plan(l, &p), SL_EINVAL);
    assert_non_null(strstr(sl_loader_last_error(l), "sl_plan_init"));
    sl_loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_keeps_to_the_callers_size),
        cmocka_unit_test(test_uninitialised_refused),
        cmocka_unit_test(test_newer_caller),
        cmocka_unit_test(test_snapshot_stride),
        cmocka_unit_test(test_last_error_per_thread),
        cmocka_unit_test(test_param_range),
        cmocka_unit_test(test_resolved_options),
        cmocka_unit_test(test_restart_while_held),
        cmocka_unit_test(test_plan_sizes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
