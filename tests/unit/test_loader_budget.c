/* The image loader under a memory budget (issue 14 item 10): readers wait
 * for read-ahead room and decoders for scratch room while another thread
 * changes the knobs and the consumer restarts mid-stream (a stop while
 * charges wait). No hang (watchdog), no race (TSan, make check), every
 * byte given back; a sample over its share fails naming it. */
#include <png.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/loader_internal.h"
#include "sluice/sluice.h"
#include "testutil.h"

static char *root;

static void write_png(const char *path, int w, int h, int seed)
{
    uint8_t *px = malloc((size_t)w * h * 3);
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        px[i] = (uint8_t)((i / 3 % (size_t)w) * (size_t)seed + i / (3 * w));
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = PNG_FORMAT_RGB;
    assert_true(png_image_write_to_file(&img, path, 0, px, 0, NULL));
    free(px);
}

static int setup(void **state)
{
    (void)state;
    root = tu_tmpdir("budget");
    char p[4096];
    snprintf(p, sizeof p, "%s/c0", root);
    mkdir(p, 0755);
    for (int i = 0; i < 12; i++) {
        snprintf(p, sizeof p, "%s/c0/%02d.png", root, i);
        write_png(p, 900, 700, i + 1); /* 1.9 MB decoded */
    }
    snprintf(p, sizeof p, "%s/c0/zz_big.png", root);
    write_png(p, 1500, 1200, 3); /* 5.4 MB decoded: over the share */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

static sl_loader_t *make(int on_error)
{
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 16;
    o.telemetry_ms = -1;
    o.policy = SL_POLICY_STATIC;
    o.read_threads = 3;
    o.decode_threads = 3;
    o.on_error = on_error;
    o.max_memory_bytes = 64 << 20;
    sl_loader_t *l;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    /* Shares small enough that charges wait: a few encoded files, and one
     * decode at a time (limits are set once, before any thread runs). */
    l->rbud.limit = 64 << 10;
    l->dbud.limit = 4 << 20;
    return l;
}

typedef struct {
    sl_loader_t *l;
    atomic_int stop;
} flipper_t;

static void *flipper(void *arg)
{
    flipper_t *f = arg;
    for (int i = 0; !atomic_load(&f->stop); i++) {
        sl_loader_set(f->l, SL_PARAM_READ_THREADS, i % 2 ? 3 : 1);
        sl_loader_set(f->l, SL_PARAM_DECODE_THREADS, i % 3 ? 1 : 3);
        usleep(1000);
    }
    return NULL;
}

static void test_waits_stops_and_gives_back(void **state)
{
    (void)state;
    sl_loader_t *l = make(SL_ON_ERROR_SKIP);
    flipper_t f = {l, 0};
    pthread_t th;
    pthread_create(&th, NULL, flipper, &f);
    tu_watchdog(240, 0, "the budgeted loader hung");
    for (int round = 0; round < 8; round++) {
        sl_position_t pos = {round, 0};
        assert_int_equal(sl_loader_start(l, &pos), 0); /* stops the last */
        const sl_batch_t *b;
        assert_int_equal(sl_loader_next(l, &b), 0);
        sl_loader_release(l, b);
    }
    /* One whole epoch: the big PNG is skipped, the rest delivered. */
    sl_position_t pos = {20, 0};
    assert_int_equal(sl_loader_start(l, &pos), 0);
    int n = 0, rc;
    const sl_batch_t *b;
    while ((rc = sl_loader_next(l, &b)) == 0 && b->epoch == 20) {
        n += b->n;
        sl_loader_release(l, b);
    }
    if (rc == 0)
        sl_loader_release(l, b);
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);
    assert_int_equal(n, 12);
    assert_true(sl__membudget_peak(&l->rbud) <= 64 << 10);
    assert_true(sl__membudget_peak(&l->dbud) <= 4 << 20);
    sl_loader_destroy(l);
    tu_watchdog(0, 0, NULL);
}

static void test_over_the_share_names_the_file(void **state)
{
    (void)state;
    tu_watchdog(240, 0, "the budgeted loader hung");
    sl_loader_t *l = make(SL_ON_ERROR_FAIL);
    sl_position_t pos = {0, 0};
    assert_int_equal(sl_loader_start(l, &pos), 0);
    const sl_batch_t *b;
    int rc;
    while ((rc = sl_loader_next(l, &b)) == 0)
        sl_loader_release(l, b);
    assert_int_equal(rc, SL_ENOMEM);
    const char *m = sl_loader_last_error(l);
    assert_non_null(strstr(m, "zz_big.png: decoding it needs"));
    assert_non_null(strstr(m, "the memory budget allows 4.0 MB"));
    sl_loader_destroy(l);
    tu_watchdog(0, 0, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waits_stops_and_gives_back),
        cmocka_unit_test(test_over_the_share_names_the_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
