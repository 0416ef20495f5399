/* gpu/placement: the placement option's rule and the slot routing, and a
 * loader's placement without a GPU stage (this build has none): gpu fails
 * at create naming why, auto runs on the CPU and says why, the share knob
 * stays 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/placement.h"
#include "sluice/telemetry.h"
#include "sluice/testing.h"
#include "sluice/version.h" /* SL_HAVE_PROMETHEUS */
#include "telemetry/collector.h"
#include "testutil.h"

static sl__gpu_status_t status(int available, const char *reason)
{
    sl__gpu_status_t st;
    memset(&st, 0, sizeof st);
    st.available = available;
    snprintf(st.reason, sizeof st.reason, "%s", reason);
    return st;
}

static void test_rule(void **state)
{
    (void)state;
    sl__placement_t p;
    char err[1500];
    sl__gpu_status_t none = status(0, "no CUDA device (cudaGetDeviceCount: "
                                      "no CUDA-capable device is detected)");
    sl__gpu_status_t ok = status(1, "");

    /* cpu: never the GPU, no reason needed */
    assert_int_equal(
        sl__placement_decide(SL_PLACEMENT_CPU, 1, &ok, &p, err, sizeof err), 0);
    assert_int_equal(p.gpu, 0);
    assert_string_equal(p.why, "");
    /* auto: the GPU when stage and runtime are there */
    assert_int_equal(
        sl__placement_decide(SL_PLACEMENT_AUTO, 1, &ok, &p, err, sizeof err),
        0);
    assert_int_equal(p.gpu, 1);
    /* auto without a device: the CPU, the runtime's reason kept */
    assert_int_equal(
        sl__placement_decide(SL_PLACEMENT_AUTO, 1, &none, &p, err, sizeof err),
        0);
    assert_int_equal(p.gpu, 0);
    assert_string_equal(p.why, none.reason);
    /* auto without the stage built: not probed, says so */
    assert_int_equal(
        sl__placement_decide(SL_PLACEMENT_AUTO, 0, NULL, &p, err, sizeof err),
        0);
    assert_int_equal(p.gpu, 0);
    assert_non_null(strstr(p.why, "not in this build"));
    /* gpu unavailable: an error naming why */
    assert_int_equal(
        sl__placement_decide(SL_PLACEMENT_GPU, 1, &none, &p, err, sizeof err),
        SL_EUNSUPPORTED);
    assert_non_null(strstr(err, "placement gpu: no GPU stage: no CUDA device"));
    assert_int_equal(
        sl__placement_decide(SL_PLACEMENT_GPU, 0, &ok, &p, err, sizeof err),
        SL_EUNSUPPORTED);
    assert_non_null(strstr(err, "not in this build"));
    assert_int_equal(
        sl__placement_decide(SL_PLACEMENT_GPU, 1, &ok, &p, err, sizeof err), 0);
    assert_int_equal(p.gpu, 1);
    assert_int_equal(sl__placement_decide(7, 1, &ok, &p, err, sizeof err),
                     SL_EINVAL);
    assert_non_null(strstr(err, "unknown placement 7"));

    assert_int_equal(sl__placement_parse("gpu"), SL_PLACEMENT_GPU);
    assert_int_equal(sl__placement_parse("GPU"), -1);
    assert_string_equal(sl__placement_name(SL_PLACEMENT_AUTO), "auto");
    assert_null(sl__placement_name(3));
}

static void test_routing(void **state)
{
    (void)state;
    /* the count is the share of n, rounded half up, exact at the ends */
    assert_int_equal(sl__gpu_route_count(256, 0), 0);
    assert_int_equal(sl__gpu_route_count(256, 1000), 256);
    assert_int_equal(sl__gpu_route_count(256, 500), 128);
    assert_int_equal(sl__gpu_route_count(10, 250), 3); /* 2.5 -> 3 */
    assert_int_equal(sl__gpu_route_count(10, 249), 2);
    assert_int_equal(sl__gpu_route_count(7, 1), 0);
    assert_int_equal(sl__gpu_route_count(0, 500), 0);
    /* the GPU's slots are the first ones, contiguous, and every share of
     * every batch size routes within half a sample of share x n */
    for (int n = 1; n <= 300; n++)
        for (int share = 0; share <= 1000; share += 7) {
            int k = 0, last = -1;
            for (int i = 0; i < n; i++)
                if (sl__gpu_route(i, n, share)) {
                    assert_int_equal(last, i - 1);
                    last = i;
                    k++;
                }
            assert_int_equal(k, sl__gpu_route_count(n, share));
            double want = (double)n * share / 1000.0;
            assert_true(k - want <= 0.5 + 1e-9 && want - k <= 0.5 + 1e-9);
        }
    assert_int_equal(sl__gpu_route(-1, 10, 1000), 0);
    assert_int_equal(sl__gpu_route(10, 10, 1000), 0);
    /* the least share that routes c slots: it does, one less does not */
    for (int n = 1; n <= 300; n++)
        for (int c = 1; c <= n; c++) {
            int x = sl__gpu_route_share(n, c);
            assert_true(x >= 1 && x <= 1000);
            assert_true(sl__gpu_route_count(n, x) >= c);
            assert_true(sl__gpu_route_count(n, x - 1) < c);
        }
    assert_int_equal(sl__gpu_route_share(8, 0), 0);
    assert_int_equal(sl__gpu_route_share(8, 1), 63); /* 0.504 -> 1 */
    assert_int_equal(sl__gpu_route_share(8, 9), 1000);
    assert_int_equal(sl__gpu_route_share(0, 1), 0);
}

/* Why a machine without a usable stage has none: a build without the
 * kernels, or one with them and no CUDA runtime. */
static int no_stage(const char *why)
{
    return why &&
           (strstr(why, "the GPU stage is not in this build") ||
            strstr(why, "no libcudart.so.1") ||
            strstr(why, "no libnvjpeg.so.1") || strstr(why, "no CUDA device"));
}

static void test_loader_without_a_stage(void **state)
{
    (void)state;
    char *root = tu_jpeg_tree("gpu_place", 2, 6, 40, 30);
    sl_options_t o;
    sl_options_init(&o);
    o.batch_size = 4;
    o.image_size = 16;
    o.telemetry_ms = 1;
    sl_loader_t *l = NULL;

    /* gpu: refused at create, naming why */
    o.placement = SL_PLACEMENT_GPU;
    int rc = sl_loader_create(root, &o, &l);
    if (rc == 0) { /* a GPU stage runs here: tests/gpu/ covers it */
        sl_loader_destroy(l);
        tu_rmtree(root);
        free(root);
        skip();
    }
    assert_int_equal(rc, SL_EUNSUPPORTED);
    assert_null(l);
    const char *e = sl_loader_last_error(NULL);
    assert_non_null(strstr(e, "placement gpu: no GPU stage: "));
    assert_true(no_stage(e));
    /* a share without the stage: refused, naming why */
    o.placement = SL_PLACEMENT_AUTO;
    o.gpu_share = 300;
    assert_int_equal(sl_loader_create(root, &o, &l), SL_EINVAL);
    e = sl_loader_last_error(NULL);
    assert_non_null(strstr(e, "gpu_share 300: 0..0 per mille, the GPU stage "
                              "is not in use: "));
    assert_true(no_stage(e));

    /* auto: the CPU, with the reason; the knob's range is 0..0 */
    o.gpu_share = SL_AUTOTUNE;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    const char *why = NULL;
    assert_int_equal(sl__testing_placement(l, &why), 0);
    assert_non_null(strstr(why, "auto: no GPU seen"));
    int64_t lo = -1, hi = -1, v = -1;
    assert_int_equal(sl_loader_param_range(l, SL_PARAM_GPU_SHARE, &lo, &hi), 0);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 0);
    assert_int_equal(sl_loader_set(l, SL_PARAM_GPU_SHARE, 250), SL_ERANGE);
    assert_non_null(strstr(sl_loader_last_error(l),
                           "gpu_share = 250: the GPU stage is not in use"));
    assert_int_equal(sl_loader_set(l, SL_PARAM_GPU_SHARE, SL_AUTOTUNE), 0);
    assert_int_equal(sl_loader_get(l, SL_PARAM_GPU_SHARE, &v), 0);
    assert_int_equal(v, 0);
    sl_options_t used;
    sl_options_init(&used);
    assert_int_equal(sl_loader_options(l, &used), 0);
    assert_int_equal(used.placement, SL_PLACEMENT_AUTO);
    assert_int_equal(used.gpu_share, 0);

    /* telemetry says where and why, and reads back */
    assert_int_equal(sl_loader_start(l, NULL), 0);
    const sl_batch_t *b;
    int n = 0;
    while (sl_loader_next(l, &b) == 0) {
        n += b->n;
        sl_loader_release(l, b);
    }
    assert_int_equal(n, 12);
    sl_snapshot_t s;
    sl_snapshot_init(&s);
    for (int i = 0; i < 400; i++) {
        assert_int_equal(sl_loader_snapshot(l, &s), 0);
        if (s.placement_present)
            break;
        usleep(5000);
    }
    assert_int_equal(s.placement_present, 1);
    assert_string_equal(s.placement, "auto");
    assert_int_equal(s.placement_gpu, 0);
    assert_non_null(strstr(s.placement_why, "auto: no GPU seen"));
    char json[16384];
    assert_true(sl_snapshot_json(&s, json, sizeof json) > 0);
    assert_non_null(strstr(json, "\"placement\": {\"asked\": \"auto\", "
                                 "\"gpu\": 0, \"gpu_share\": 0, \"why\": "
                                 "\"auto: no GPU seen"));
    sl_snapshot_t back;
    sl_snapshot_init(&back);
    char perr[256];
    assert_int_equal(
        sl_snapshot_parse(json, strlen(json), &back, perr, sizeof perr), 0);
    assert_string_equal(back.placement_why, s.placement_why);
    assert_int_equal(back.placement_present, 1);
#if SL_HAVE_PROMETHEUS
    /* and the metrics endpoint's text carries the share and counters */
    static char prom[65536];
    s.placement_gpu = 1, s.gpu_share = 250, s.gpu_samples_total = 7;
    assert_true(sl__prom_format(&s, NULL, prom, sizeof prom) > 0);
    assert_non_null(strstr(prom, "\nsluice_gpu_stage_share 0.25"));
    assert_non_null(strstr(prom, "\nsluice_gpu_stage_samples_total 7\n"));
    assert_non_null(strstr(prom, "\nsluice_gpu_stage_refused_total 0\n"));
#endif
    sl_loader_destroy(l);

    /* cpu: no reason */
    o.placement = SL_PLACEMENT_CPU;
    assert_int_equal(sl_loader_create(root, &o, &l), 0);
    assert_int_equal(sl__testing_placement(l, &why), 0);
    assert_string_equal(why, "");
    sl_loader_destroy(l);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_routing),
        cmocka_unit_test(test_loader_without_a_stage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
