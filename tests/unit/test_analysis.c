/* The analysis module on fixed inputs: the stall model names the bound and
 * the cure from rates, options resolve with the caller's size, the fetch
 * side lists and reads a dataset's files, and the calibration fit recovers
 * the parameters that synthetic telemetry periods were made from. Nothing
 * here depends on timing. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/analysis.h"
#include "analysis/calibrate.h"
#include "testutil.h"

/* ------------------------------------------------------------ the model */

static void test_bound_consumer(void **state)
{
    (void)state;
    /* demand 100/s, prep 200/s, fetch 1000 cold: the loader keeps up. */
    sl__stall_model_t m = sl__stall_predict(100, 200, 1000, 5000, 0);
    assert_int_equal(m.bound, SL__BOUND_CONSUMER);
    assert_true(m.predicted == 0);
    assert_true(m.supply == 200);
    assert_string_equal(sl__bound_name(m.bound), "consumer");
    /* demand exactly equal to the supply: still no stall */
    m = sl__stall_predict(200, 200, 1000, 5000, 0);
    assert_int_equal(m.bound, SL__BOUND_CONSUMER);
}

static void test_bound_prep(void **state)
{
    (void)state;
    /* demand 150, prep 100 < fetch: a third of the time stalled. */
    sl__stall_model_t m = sl__stall_predict(150, 100, 1000, 5000, 1);
    assert_int_equal(m.bound, SL__BOUND_PREP);
    assert_true(fabs(m.predicted - 1.0 / 3) < 1e-12);
    assert_string_equal(sl__bound_name(m.bound), "prep");
    /* prep == fetch: prep is named (the cheaper cure is threads) */
    m = sl__stall_predict(500, 100, 100, 100, 0);
    assert_int_equal(m.bound, SL__BOUND_PREP);
}

static void test_bound_fetch_fits(void **state)
{
    (void)state;
    /* Cold storage 50/s, warm 5000/s, prep 400/s, demand 1000/s: a dataset
     * that does not fit is read cold (fetch-bound), one that fits warm. */
    sl__stall_model_t m = sl__stall_predict(1000, 400, 50, 5000, 0);
    assert_int_equal(m.bound, SL__BOUND_FETCH);
    assert_true(m.fetch_used == 50);
    assert_true(fabs(m.predicted - 0.95) < 1e-12);
    assert_string_equal(sl__bound_name(m.bound), "fetch");
    m = sl__stall_predict(1000, 400, 50, 5000, 1);
    assert_int_equal(m.bound, SL__BOUND_PREP);
    assert_true(m.fetch_used == 5000);
    assert_true(fabs(m.predicted - 0.6) < 1e-12);
}

static void test_threads_needed(void **state)
{
    (void)state;
    const double rate[4] = {100, 190, 280, 370};
    assert_int_equal(sl__threads_needed(rate, 4, 50), 1);
    assert_int_equal(sl__threads_needed(rate, 4, 250), 3);
    /* beyond: 90/s per thread from 370 → 1000 needs ceil(630/90) = 7 more */
    assert_int_equal(sl__threads_needed(rate, 4, 1000), 11);
    /* one measurement: its rate is the slope */
    assert_int_equal(sl__threads_needed(rate, 1, 450), 5);
    const double flat[3] = {100, 100, 90};
    assert_int_equal(sl__threads_needed(flat, 3, 500), -1);
    assert_int_equal(sl__threads_needed(rate, 4, 1e30), (int64_t)1e15);
}

static void test_cure(void **state)
{
    (void)state;
    assert_int_equal(sl__stall_cure(SL__BOUND_CONSUMER, 1, 2), SL__CURE_NONE);
    assert_int_equal(sl__stall_cure(SL__BOUND_PREP, 2, 2), SL__CURE_THREADS);
    assert_int_equal(sl__stall_cure(SL__BOUND_PREP, 3, 2), SL__CURE_CORES);
    assert_int_equal(sl__stall_cure(SL__BOUND_PREP, -1, 2),
                     SL__CURE_CHEAPER_PREP);
    assert_int_equal(sl__stall_cure(SL__BOUND_FETCH, 1, 2), SL__CURE_STORAGE);
}

/* -------------------------------------------------------------- options */

static void test_analyze_options(void **state)
{
    (void)state;
    sl_analyze_options_t o, r;
    char err[256];
    sl_analyze_options_init(&o);
    assert_int_equal(o.size, sizeof o);
    /* no demand */
    assert_int_equal(sl__analyze_options_resolve(&o, &r, err, sizeof err),
                     SL_EINVAL);
    assert_non_null(strstr(err, "demand"));
    o.rate = 100;
    o.step_ms = 10;
    assert_int_equal(sl__analyze_options_resolve(&o, &r, err, sizeof err),
                     SL_EINVAL);
    o.step_ms = 0;
    assert_int_equal(sl__analyze_options_resolve(&o, &r, err, sizeof err), 0);
    assert_int_equal(r.batch_size, 64);
    assert_int_equal(r.image_size, 224);
    assert_true(r.seconds == 10);
    assert_true(r.decode_threads >= 1);
    assert_int_equal(r.prefetch,
                     r.decode_threads * 2 > 8 ? r.decode_threads * 2 : 8);
    o.decode_threads = SL_ANALYZE_MAX_THREADS + 1;
    assert_int_equal(sl__analyze_options_resolve(&o, &r, err, sizeof err),
                     SL_EINVAL);
    assert_non_null(strstr(err, "decode_threads"));
    /* An older caller's smaller struct: fields past its size are defaults
     * (here: its garbage past `size` is not read). */
    sl_analyze_options_t old;
    memset(&old, 0x7f, sizeof old);
    old.size = offsetof(sl_analyze_options_t, batch_size);
    old.step_ms = 0;
    old.rate = 0;
    old.sweep = 1;
    assert_int_equal(sl__analyze_options_resolve(&old, &r, err, sizeof err), 0);
    assert_int_equal(r.batch_size, 64);
    assert_null(r.progress);
    old.size = 0;
    assert_int_equal(sl__analyze_options_resolve(&old, &r, err, sizeof err),
                     SL_EINVAL);
    /* the public call refuses before any work, json_out untouched */
    char *json = (char *)"untouched";
    sl_analyze_options_init(&o);
    assert_int_equal(sl_analyze("/nonexistent", &o, &json, err, sizeof err),
                     SL_EINVAL);
    assert_string_equal(json, "untouched");
}

static void test_calibrate_options(void **state)
{
    (void)state;
    sl_calibrate_options_t o, r;
    char err[256];
    sl_calibrate_options_init(&o);
    assert_int_equal(sl__calibrate_options_resolve(&o, &r, err, sizeof err), 0);
    assert_true(r.skip_s == 1);
    o.skip_s = -1;
    assert_int_equal(sl__calibrate_options_resolve(&o, &r, err, sizeof err), 0);
    assert_true(r.skip_s == 0);
    o.consumer_cpu = 1.5;
    assert_int_equal(sl__calibrate_options_resolve(&o, &r, err, sizeof err),
                     SL_EINVAL);
    assert_non_null(strstr(err, "consumer_cpu"));
    o.consumer_cpu = 0;
    o.size = 0;
    assert_int_equal(sl__calibrate_options_resolve(&o, &r, err, sizeof err),
                     SL_EINVAL);
}

/* ----------------------------------------------------------- fetch side */

static void test_dataset_files(void **state)
{
    (void)state;
    char *root = tu_tmpdir("analysis");
    assert_non_null(root);
    char path[4096];
    snprintf(path, sizeof path, "%s/a", root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/b", root);
    assert_int_equal(mkdir(path, 0755), 0);
    /* Names only matter to the scan: the bytes are not decoded here. The
     * name holds ": record " (the old path recovery tripped on that). */
    char body[300];
    memset(body, 7, sizeof body);
    snprintf(path, sizeof path, "%s/a/x: record 1.jpg", root);
    assert_int_equal(tu_write_file(path, body, 100), 0);
    snprintf(path, sizeof path, "%s/b/y.jpg", root);
    assert_int_equal(tu_write_file(path, body, 300), 0);
    sl__source_t *src;
    char err[512];
    assert_int_equal(sl__source_open(root, 0, &src, err, sizeof err), 0);
    assert_int_equal(sl__source_file_count(src), 2);
    char buf[4096];
    snprintf(path, sizeof path, "%s/a/x: record 1.jpg", root);
    assert_string_equal(sl__source_file_path(src, 0, buf, sizeof buf), path);
    assert_null(sl__source_file_path(src, 2, buf, sizeof buf));
    assert_null(sl__source_file_path(src, 0, buf, 8)); /* does not fit */
    sl__dataset_files_t files;
    assert_int_equal(sl__dataset_files_list(src, &files), 0);
    assert_int_equal(files.n, 2);
    assert_true(files.bytes == 400);
    assert_int_equal(sl__dataset_files_evict(&files), 0);
    sl__fetch_result_t r;
    assert_int_equal(sl__fetch_pass(src, 2, 60, &r, err, sizeof err), 0);
    assert_int_equal(r.samples, 2);
    assert_int_equal(r.stored, 400);
    sl__dataset_files_free(&files);
    sl__source_close(src);
    assert_true(sl__mem_available() > 0);
    tu_rmtree(root);
    free(root);
}

/* ---------------------------------------------------------- calibration */

/* Periods of 0.1 s made from known parameters: 2 cores, 2 decoders at
 * decode_ms per item (wall), the process getting `share` of a core per
 * busy thread, batches of 32, 3 batches a period with 10 ms waits,
 * 40,000 stored bytes per item, foreign load cpu_other. Odd periods cost
 * (1 + wobble) x, even ones (1 - wobble) x, for the CV. */
static void make_periods(sl__calib_period_t *p, int n, double decode_ms,
                         double share, double wobble, double cpu_other)
{
    const double dt = 0.1, items_per_s = 960; /* 96 items = 3 batches */
    for (int i = 0; i < n; i++) {
        sl__calib_period_t *r = &p[i];
        memset(r, 0, sizeof *r);
        double ms = decode_ms * (i % 2 ? 1 + wobble : 1 - wobble);
        r->t = (i + 1) * dt;
        r->interval_s = dt;
        r->ncpu = 2;
        r->decode_workers = 2;
        r->read_slots = 1;
        r->decode_items_per_s = items_per_s;
        r->decode_busy = items_per_s * ms / 1000 / r->decode_workers;
        r->read_items_per_s = items_per_s;
        r->read_busy = items_per_s * 0.1 / 1000; /* 0.1 ms per read */
        r->read_bytes_per_s = items_per_s * 40000;
        double busy = r->decode_busy * 2 + r->read_busy;
        r->cpu_self = busy * share / r->ncpu;
        r->cpu_other = cpu_other;
        r->samples_per_s = items_per_s;
        r->consumer_wait_ms = 10;
        r->stall_fraction = 0.3; /* 3 waits of 10 ms in 100 ms */
        r->batches_total = 3 * (i + 1);
        r->samples_total = 32 * r->batches_total;
        r->prefetch = 4;
        r->rss = 1e8;
        r->mem_total = 8e9;
    }
}

/* Storage seen in the reads' waits: periods 0..29 read at 10 ms each (one
 * reader, a latency), 30..59 with 8 readers queued behind a 10 MB/s link
 * (40 kB a read: 250 reads/s, so each of the 8 waits 32 ms a read). The
 * fit gives both back with nothing given; page-cache reads give neither. */
static void test_storage_fit(void **state)
{
    (void)state;
    enum { N = 60 };
    sl__calib_period_t p[N];
    make_periods(p, N, 2.5, 1.0, 0, 0);
    for (int i = 0; i < N; i++) {
        sl__calib_period_t *r = &p[i];
        int sat = i >= 30;
        r->read_slots = sat ? 8 : 1;
        r->read_items_per_s = sat ? 10e6 / 40000 : 100;
        r->read_bytes_per_s = r->read_items_per_s * 40000;
        /* every reader busy: alone 10 ms a read, queued 8 / 250 s */
        r->read_busy = 1.0;
        if (!sat)
            r->read_busy = 100 * 10.0 / 1000;
    }
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    sl__calib_fit_t f;
    assert_int_equal(sl__calib_fit(p, N, &o, &f), 0);
    assert_true(fabs(f.storage_latency_ms - (10 - SL_CALIB_READ_CPU_MS)) <
                1e-6);
    assert_true(fabs(f.storage_bw - 10e6) < 1);
    assert_true(f.storage_saturated >= 3);
    sl__calibration_t c;
    char err[512];
    assert_int_equal(
        sl__calibrate_periods(p, N, &o, "synthetic", &c, err, sizeof err), 0);
    assert_true(fabs(c.profile.storage_bw - 10e6) < 1);
    assert_true(fabs(c.profile.storage_latency_ms - 9.95) < 1e-6);
    /* Given storage wins over the fit. */
    o.storage_latency_ms = 3;
    assert_int_equal(
        sl__calibrate_periods(p, N, &o, "synthetic", &c, err, sizeof err), 0);
    assert_true(fabs(c.profile.storage_latency_ms - 3) < 1e-9);
    assert_true(c.profile.storage_bw == 0);
    /* Page-cache reads (0.1 ms): no storage. */
    make_periods(p, N, 2.5, 1.0, 0, 0);
    sl_calibrate_options_init(&o);
    assert_int_equal(sl__calib_fit(p, N, &o, &f), 0);
    assert_true(f.storage_latency_ms == 0 && f.storage_bw == 0);
}

/* Periods in which the consumer waited the whole time and got no batch
 * (consumer_wait_ms, the mean per batch, is 0 there): the waits are the
 * stall fraction's share of each period, so the step and the stall are
 * the run's. */
static void test_fit_counts_total_stalls(void **state)
{
    (void)state;
    enum { N = 40 };
    sl__calib_period_t p[N];
    make_periods(p, N, 2.5, 1.0, 0, 0);
    long long b = 0;
    for (int i = 0; i < N; i++) {
        int stalled = i % 4 == 3;
        if (stalled) {
            p[i].stall_fraction = 1;
            p[i].consumer_wait_ms = 0;
            p[i].samples_per_s = 0;
        }
        b += stalled ? 0 : 3;
        p[i].batches_total = b;
        p[i].samples_total = 32 * b;
    }
    double span = 0, waited = 0, batches = 0;
    for (int i = 1; i + 2 < N; i++) { /* the periods the fit uses */
        span += p[i].interval_s;
        waited += p[i].stall_fraction * p[i].interval_s;
        batches += (double)(p[i].batches_total - p[i - 1].batches_total);
    }
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    o.skip_s = 0;
    sl__calib_fit_t f;
    assert_int_equal(sl__calib_fit(p, N, &o, &f), 0);
    assert_true(fabs(f.stall - waited / span) < 1e-9);
    assert_true(fabs(f.step_ms - (span - waited) * 1000 / batches) < 1e-9);
    assert_true(f.stall > 0.45); /* 3/4 x 0.3 + 1/4 x 1 */
}

static void test_fit_recovers(void **state)
{
    (void)state;
    enum { N = 40 };
    sl__calib_period_t p[N];
    make_periods(p, N, 2.5, 1.0, 0, 0.25);
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    sl__calibration_t c;
    char err[512];
    assert_int_equal(
        sl__calibrate_periods(p, N, &o, "synthetic", &c, err, sizeof err), 0);
    /* skip 1 s leaves out t <= 0.9 (9 periods); the first and the last two
     * are left out too */
    assert_int_equal(c.fit.periods, N);
    assert_int_equal(c.fit.used, N - 9 - 2);
    assert_true(fabs(c.profile.decode_ms - 2.5) < 1e-9);
    assert_true(fabs(c.profile.read_ms - 0.1) < 1e-9);
    assert_true(c.profile.decode_cv == 0.05); /* no spread: the floor */
    assert_true(fabs(c.fit.core_share - 1) < 1e-12);
    assert_int_equal(c.profile.batch_size, 32);
    assert_int_equal(c.profile.ncpu, 2);
    assert_true(fabs(c.profile.item_bytes - 40000) < 1e-6);
    /* (100 ms - 3 x 10 ms waits) / 3 batches */
    assert_true(fabs(c.profile.step_ms - 70.0 / 3) < 1e-9);
    assert_true(fabs(c.fit.stall - 0.3) < 1e-12);
    assert_true(fabs(c.foreign_cores - 0.5) < 1e-12);
    assert_true(fabs(c.foreign_demand - 0.5) < 1e-12);
    assert_true(c.profile.mem_total == 8e9);
    /* base RSS = RSS - prefetch x batch buffer (32 x 224 x 224 x 3) */
    assert_true(fabs(c.profile.base_rss - (1e8 - 4 * 32 * 224 * 224 * 3.0)) <
                1);
    assert_non_null(strstr(c.note, "synthetic"));
    char *json = sl__calibration_fit_json(&c);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"decode_ms\": 2.5000"));
    assert_non_null(strstr(json, "\"batch_size\": 32"));
    free(json);
}

/* A run with a GPU stage: 500 samples/s finished, busy half of each
 * period (1 ms a sample), 0.1 cores of CPU for it (0.2 ms a sample) —
 * counted in cpu_self like the decoders' — gives the profile's gpu_ms and
 * gpu_cpu_ms, and leaves the decode fit as it was; a CPU run gives no
 * stage. */
static void test_fit_gpu_stage(void **state)
{
    (void)state;
    enum { N = 40 };
    sl__calib_period_t p[N];
    make_periods(p, N, 2.5, 1.0, 0, 0);
    for (int i = 0; i < N; i++) {
        sl__calib_period_t *r = &p[i];
        r->gpu_samples_per_s = 500;
        r->gpu_stage_busy = 0.5;
        r->gpu_cpu_busy = 0.1;
        r->cpu_self += 0.1 / r->ncpu;
    }
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    sl__calibration_t c;
    char err[512];
    assert_int_equal(
        sl__calibrate_periods(p, N, &o, "synthetic", &c, err, sizeof err), 0);
    assert_true(fabs(c.fit.core_share - 1) < 1e-12);
    assert_true(fabs(c.profile.decode_ms - 2.5) < 1e-9);
    assert_true(fabs(c.profile.gpu_ms - 1) < 1e-9);
    assert_true(fabs(c.profile.gpu_cpu_ms - 0.2) < 1e-9);
    assert_int_equal(c.fit.gpu_periods, N - 9 - 2);
    char *json = sl__calibration_fit_json(&c);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"gpu_ms\": 1.0000"));
    assert_non_null(strstr(json, "\"gpu_cpu_ms\": 0.2000"));
    free(json);
    /* Without a stage (the snapshots' -1): none in the profile. */
    make_periods(p, N, 2.5, 1.0, 0, 0);
    for (int i = 0; i < N; i++)
        p[i].gpu_samples_per_s = p[i].gpu_stage_busy = p[i].gpu_cpu_busy = -1;
    assert_int_equal(
        sl__calibrate_periods(p, N, &o, "synthetic", &c, err, sizeof err), 0);
    assert_true(c.profile.gpu_ms == 0 && c.profile.gpu_cpu_ms == 0);
}

static void test_fit_share_and_spread(void **state)
{
    (void)state;
    enum { N = 60 };
    sl__calib_period_t p[N];
    /* Our threads got half a core each: the CPU cost is half the wall
     * cost, and foreign threads count double in demand. */
    make_periods(p, N, 4.0, 0.5, 0.02, 0.25);
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    o.skip_s = -1;    /* keep everything */
    o.step_ms = 50;   /* given, not inferred */
    o.storage_bw = 0; /* page cache */
    sl__calibration_t c;
    char err[512];
    assert_int_equal(
        sl__calibrate_periods(p, N, &o, "synthetic", &c, err, sizeof err), 0);
    assert_int_equal(c.fit.used, N - 3);
    assert_true(fabs(c.fit.core_share - 0.5) < 1e-12);
    /* mean wall cost is 4 ms (the wobble cancels over pairs of periods;
     * 57 periods used: the unpaired one moves it by 2% / 57) */
    assert_true(fabs(c.profile.decode_ms - 2.0) < 0.01);
    /* per-period means of 96 items at +-2%: per-item CV ~ 0.02 x sqrt(96) */
    double want = 0.02 * sqrt(96.0);
    assert_true(fabs(c.profile.decode_cv - want) < 0.05 * want + 1e-9);
    assert_true(c.profile.step_ms == 50);
    assert_true(fabs(c.foreign_demand - 1.0) < 1e-12);
    /* a consumer that never slept: step 0 */
    o.step_ms = -1;
    assert_int_equal(
        sl__calibrate_periods(p, N, &o, "synthetic", &c, err, sizeof err), 0);
    assert_true(c.profile.step_ms == 0);
}

static void test_fit_too_few(void **state)
{
    (void)state;
    sl__calib_period_t p[12];
    make_periods(p, 12, 2.5, 1, 0, 0);
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    sl__calibration_t c;
    char err[512];
    /* skip 1 s: 12 periods of 0.1 s leave nothing steady */
    assert_int_equal(
        sl__calibrate_periods(p, 12, &o, "short.jsonl", &c, err, sizeof err),
        SL_ECORRUPT);
    assert_non_null(strstr(err, "short.jsonl"));
    assert_non_null(strstr(err, "too few steady periods"));
    assert_int_equal(
        sl__calibrate_periods(p, 0, &o, "none", &c, err, sizeof err),
        SL_ECORRUPT);
}

/* One line as calibration reads it: sl_snapshot_parse, then the period. */
static int period_of_line(const char *line, size_t len, sl__calib_period_t *p)
{
    sl_snapshot_t s;
    sl_snapshot_init(&s);
    int rc = sl_snapshot_parse(line, len, &s, NULL, 0);
    return rc ? rc : sl__calib_period_of(&s, p);
}

static void test_period_parse(void **state)
{
    (void)state;
    const char *line =
        "{\"t\": 1.5, \"interval_s\": 0.1, \"ncpu\": 2, \"cpu_self\": 0.8, "
        "\"cpu_other\": 0.1, \"samples_per_s\": 900, \"stall_fraction\": 0.2,"
        " \"consumer_wait_ms\": 3, \"read_bytes_per_s\": 1e6, "
        "\"mem_total_bytes\": 8e9, \"rss_bytes\": 1e8, \"samples_total\": "
        "640, \"batches_total\": 20, \"knobs\": {\"prefetch\": 4}, "
        "\"stages\": {\"read\": {\"workers\": 1, \"busy\": 0.1, "
        "\"items_per_s\": 900}, \"decode\": {\"workers\": 2, \"busy\": 0.9, "
        "\"items_per_s\": 900}}}\n";
    sl__calib_period_t p;
    assert_int_equal(period_of_line(line, strlen(line), &p), 0);
    assert_true(p.t == 1.5);
    assert_int_equal(p.ncpu, 2);
    assert_int_equal(p.decode_workers, 2);
    assert_true(p.decode_busy == 0.9);
    assert_int_equal(p.prefetch, 4);
    assert_int_equal(p.batches_total, 20);
    assert_true(p.mem_total == 8e9 && p.read_bytes_per_s == 1e6);
    assert_int_equal(p.read_slots, 1);
    /* With asynchronous reads read.busy is a share of the I/O depth: one
     * thread keeping 16 reads in flight has 16 slots. */
    const char *uring =
        "{\"t\": 1.5, \"interval_s\": 0.1, \"ncpu\": 2, "
        "\"io\": {\"async\": 1, \"depth\": 16}, \"stages\": {\"read\": "
        "{\"workers\": 1, \"busy\": 0.5, \"items_per_s\": 400}}}";
    assert_int_equal(period_of_line(uring, strlen(uring), &p), 0);
    assert_int_equal(p.read_slots, 16);
    /* the parser never reads past len: cut the line short */
    assert_int_equal(period_of_line(line, 40, &p), SL_ECORRUPT);
    /* unknown figures (null, or absent) are NaN, unknown counts 0, as the
     * fit expects */
    const char *nulls = "{\"t\": 1, \"interval_s\": 0.1, \"ncpu\": 1, "
                        "\"read_bytes_per_s\": null, \"rss_bytes\": null, "
                        "\"samples_total\": -1}";
    assert_int_equal(period_of_line(nulls, strlen(nulls), &p), 0);
    assert_true(isnan(p.read_bytes_per_s) && isnan(p.rss) &&
                isnan(p.mem_total));
    assert_int_equal(p.samples_total, 0);
    assert_int_equal(p.decode_workers, 0);
    assert_int_equal(p.prefetch, 0);
    const char *junk[] = {
        "not json",
        "[1, 2]",
        "{}",
        "{\"t\": 1, \"interval_s\": 0.1, \"ncpu\": 1e300}",
        "{\"t\": 1, \"interval_s\": 0, \"ncpu\": 2}",
        "{\"t\": 1, \"interval_s\": 0.1}",
    };
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++)
        assert_int_equal(period_of_line(junk[i], strlen(junk[i]), &p),
                         SL_ECORRUPT);
}

/* sl_calibrate on a file of lines: the profile loads back in the simulator,
 * and unreadable lines are left out. */
static void test_sl_calibrate_file(void **state)
{
    (void)state;
    enum { N = 30 };
    sl__calib_period_t p[N];
    make_periods(p, N, 3.0, 1.0, 0, 0);
    char *dir = tu_tmpdir("calibrate");
    char path[4096];
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "garbage line\n");
    for (int i = 0; i < N; i++)
        fprintf(f,
                "{\"t\": %.3f, \"interval_s\": %g, \"ncpu\": %d, \"cpu_self\":"
                " %.17g, \"cpu_other\": 0, \"samples_per_s\": %g, "
                "\"consumer_wait_ms\": 10, \"read_bytes_per_s\": %g, "
                "\"samples_total\": %lld, \"batches_total\": %lld, "
                "\"stages\": {\"read\": {\"workers\": 1, \"busy\": %.17g, "
                "\"items_per_s\": %g}, \"decode\": {\"workers\": 2, \"busy\":"
                " %.17g, \"items_per_s\": %g}}}\n",
                p[i].t, p[i].interval_s, p[i].ncpu, p[i].cpu_self,
                p[i].samples_per_s, p[i].read_bytes_per_s, p[i].samples_total,
                p[i].batches_total, p[i].read_busy, p[i].read_items_per_s,
                p[i].decode_busy, p[i].decode_items_per_s);
    fclose(f);
    sl_calibrate_options_t o;
    sl_calibrate_options_init(&o);
    char *out = NULL, err[512];
    assert_int_equal(sl_calibrate(path, &o, &out, err, sizeof err), 0);
    json_t *root = json_loads(out, 0, NULL);
    assert_non_null(root);
    json_t *prof = json_object_get(root, "profile");
    json_t *fit = json_object_get(root, "fit");
    assert_true(json_is_object(prof) && json_is_object(fit));
    assert_true(fabs(json_number_value(json_object_get(prof, "decode_ms")) -
                     3.0) < 1e-6);
    assert_int_equal(json_integer_value(json_object_get(fit, "batch_size")),
                     32);
    /* the profile part is what simulate --profile loads */
    char *text = json_dumps(prof, 0);
    sl__sim_profile_t back;
    sl__sim_profile_default(&back);
    assert_int_equal(
        sl__sim_profile_parse(text, strlen(text), &back, err, sizeof err), 0);
    assert_int_equal(back.batch_size, 32);
    free(text);
    json_decref(root);
    sl_analysis_free(out);
    /* errors: a missing file, unset options */
    out = NULL;
    assert_int_equal(
        sl_calibrate("/nonexistent/t.jsonl", &o, &out, err, sizeof err),
        SL_EIO);
    assert_null(out);
    /* a device is refused, not read without end; a read error is one,
     * named with its line, not the end of the snapshots */
    assert_int_equal(sl_calibrate("/dev/zero", &o, &out, err, sizeof err),
                     SL_EIO);
    assert_non_null(strstr(err, "/dev/zero: not a regular file"));
    FILE *d = fopen(dir, "r"); /* a folder: reads fail with EISDIR */
    assert_non_null(d);
    sl__calibration_t cal;
    assert_int_equal(sl__calibrate_stream(d, "D", &o, &cal, err, sizeof err),
                     SL_EIO);
    assert_non_null(strstr(err, "D:1: read error"));
    fclose(d);
    o.size = 0;
    assert_int_equal(sl_calibrate(path, &o, &out, err, sizeof err), SL_EINVAL);
    assert_null(out);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_consumer),
        cmocka_unit_test(test_bound_prep),
        cmocka_unit_test(test_bound_fetch_fits),
        cmocka_unit_test(test_threads_needed),
        cmocka_unit_test(test_cure),
        cmocka_unit_test(test_analyze_options),
        cmocka_unit_test(test_calibrate_options),
        cmocka_unit_test(test_dataset_files),
        cmocka_unit_test(test_fit_recovers),
        cmocka_unit_test(test_fit_counts_total_stalls),
        cmocka_unit_test(test_fit_gpu_stage),
        cmocka_unit_test(test_fit_share_and_spread),
        cmocka_unit_test(test_fit_too_few),
        cmocka_unit_test(test_storage_fit),
        cmocka_unit_test(test_period_parse),
        cmocka_unit_test(test_sl_calibrate_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
