/* The simulator against cases with known answers (queueing and processor
 * sharing worked out by hand), determinism, knob changes, and the profile
 * JSON (round trip, errors that name the key). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "testutil.h"

/* A plain profile: no read cost, fixed decode cost, no storage limit. */
static sl__sim_profile_t plain(int ncpu, double decode_ms)
{
    sl__sim_profile_t p;
    sl__sim_profile_default(&p);
    p.ncpu = ncpu;
    p.batch_size = 10;
    p.read_ms = 0;
    p.read_cv = 0;
    p.decode_ms = decode_ms;
    p.decode_cv = 0;
    p.step_ms = 0;
    p.consumer_cpu = 0;
    p.interfere = 0;
    p.storage_bw = 0;
    p.storage_latency_ms = 0;
    return p;
}

typedef struct avg {
    double samples, decode_items, stall, cpu_self, cpu_other, read_bytes,
        decode_busy, psi;
} avg_t;

/* Runs `warm` s, then averages `secs` s of 100 ms snapshots. */
static avg_t run_avg(sl__sim_t *s, double warm, double secs)
{
    sl_snapshot_t sn;
    for (int i = 0; i < (int)lround(warm / 0.1); i++)
        sl__sim_step(s, 0.1, &sn);
    avg_t a = {0};
    int n = (int)lround(secs / 0.1);
    for (int i = 0; i < n; i++) {
        sl__sim_step(s, 0.1, &sn);
        a.samples += sn.samples_per_s / n;
        a.decode_items += sn.decode.items_per_s / n;
        a.stall += sn.stall_fraction / n;
        a.cpu_self += sn.cpu_self / n;
        a.cpu_other += sn.cpu_other / n;
        a.read_bytes += sn.read_bytes_per_s / n;
        a.decode_busy += sn.decode.busy / n;
        a.psi = sn.psi_cpu_some;
    }
    return a;
}

static avg_t run_config(const sl__sim_profile_t *p, int r, int d, int pf,
                        double secs)
{
    sl__knobs_t k = {r, d, pf, 0};
    sl__sim_t *s = sl__sim_create(p, &k, 1);
    assert_non_null(s);
    avg_t a = run_avg(s, 2.0, secs);
    sl__sim_destroy(s);
    return a;
}

static void test_same_seed_same_snapshots(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    sl__sim_profile_random(7, NULL, 30, &p);
    sl__knobs_t k = {2, 3, 4, 0};
    sl__sim_t *a = sl__sim_create(&p, &k, 42), *b = sl__sim_create(&p, &k, 42),
              *c = sl__sim_create(&p, &k, 43);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    int differ = 0;
    for (int i = 0; i < 300; i++) {
        sl_snapshot_t x, y, z;
        if (i == 100) {
            sl__knobs_t k2 = {1, 5, 2, 0};
            sl__sim_set_knobs(a, &k2);
            sl__sim_set_knobs(b, &k2);
            sl__sim_set_knobs(c, &k2);
        }
        sl__sim_step(a, 0.1, &x);
        sl__sim_step(b, 0.1, &y);
        sl__sim_step(c, 0.1, &z);
        assert_memory_equal(&x, &y, sizeof x);
        differ |= memcmp(&x, &z, sizeof x) != 0;
    }
    assert_true(differ); /* the seed matters */
    sl__sim_destroy(a);
    sl__sim_destroy(b);
    sl__sim_destroy(c);
    sl__sim_destroy(NULL);
}

static void test_one_decoder_idle_core(void **state)
{
    (void)state;
    sl__sim_profile_t p = plain(2, 10);
    avg_t a = run_config(&p, 1, 1, 4, 10);
    assert_float_equal(a.decode_items, 100, 2);
    assert_float_equal(a.samples, 100, 2);
    assert_float_equal(a.decode_busy, 1.0, 0.02);
    /* One of two cores busy. */
    assert_float_equal(a.cpu_self, 0.5, 0.02);
    assert_float_equal(a.psi, 0, 1e-9);
}

static void test_lognormal_keeps_the_mean(void **state)
{
    (void)state;
    sl__sim_profile_t p = plain(2, 10);
    p.decode_cv = 0.8;
    avg_t a = run_config(&p, 1, 1, 4, 60);
    assert_float_equal(a.decode_items, 100, 4);
}

static void test_two_decoders_one_core(void **state)
{
    (void)state;
    sl__sim_profile_t p = plain(1, 10);
    avg_t a = run_config(&p, 1, 2, 4, 10);
    assert_float_equal(a.decode_items, 100, 2);
    /* Each decoder is busy all the time, at half speed. */
    assert_float_equal(a.decode_busy, 1.0, 0.02);
    assert_true(a.psi > 5); /* threads wait for the core */
    sl__sim_profile_t p2 = plain(2, 10);
    avg_t b = run_config(&p2, 1, 2, 4, 10);
    assert_float_equal(b.decode_items, 200, 3);
}

static void test_interference_shares_the_cores(void **state)
{
    (void)state;
    /* 2 decoders + 1 busy foreign thread on 2 cores: each gets 2/3. */
    sl__sim_profile_t p = plain(2, 10);
    p.interfere = 1;
    avg_t a = run_config(&p, 1, 2, 4, 10);
    assert_float_equal(a.decode_items, 200.0 * 2 / 3, 3);
    assert_float_equal(a.cpu_other, 1.0 / 3, 0.02);
    assert_float_equal(a.cpu_self + a.cpu_other, 1.0, 0.02);
    /* Half a core of interference: 2 + 0.5 > 2, water-filling gives the
     * partial thread its 0.5 only if 0.5 < 2/2.5: r = 1.5 / 2 = 0.75. */
    p.interfere = 0.5;
    avg_t b = run_config(&p, 1, 2, 4, 10);
    assert_float_equal(b.decode_items, 200 * 0.75, 3);
}

static void test_interference_event(void **state)
{
    (void)state;
    sl__sim_profile_t p = plain(2, 10);
    p.n_events = 2;
    p.events[0] = (sl__sim_event_t){5.0, SL_SIM_EV_INTERFERE, 1.0};
    p.events[1] = (sl__sim_event_t){10.0, SL_SIM_EV_INTERFERE, 0.0};
    sl__knobs_t k = {1, 2, 4, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 3);
    avg_t before = run_avg(s, 1, 4);   /* 0..5 s */
    avg_t during = run_avg(s, 0.5, 4); /* 5.5..9.5 */
    avg_t after = run_avg(s, 1.0, 4);  /* 10.5.. */
    assert_float_equal(before.decode_items, 200, 4);
    assert_float_equal(during.decode_items, 133.3, 4);
    assert_float_equal(after.decode_items, 200, 4);
    sl__sim_destroy(s);
}

static void test_storage_bandwidth_binds(void **state)
{
    (void)state;
    sl__sim_profile_t p = plain(4, 1);
    p.item_bytes = 100e3;
    p.storage_bw = 2e6; /* 20 items/s, whatever the threads */
    avg_t a = run_config(&p, 4, 4, 4, 10);
    assert_float_equal(a.decode_items, 20, 1);
    assert_float_equal(a.read_bytes, 2e6, 1e5);
    /* Latency alone: 1 reader, 5 ms per read, nothing else -> 200/s; two
     * readers overlap their latencies -> 400/s. */
    p.storage_bw = 0;
    p.storage_latency_ms = 5;
    avg_t b = run_config(&p, 1, 4, 4, 10);
    assert_float_equal(b.decode_items, 200, 4);
    avg_t c = run_config(&p, 2, 4, 4, 10);
    assert_float_equal(c.decode_items, 400, 8);
}

static void test_prefetch_one_stalls_slow_consumer(void **state)
{
    (void)state;
    /* Batches of 10 at 1 ms each take 10 ms to fill; the consumer holds a
     * batch 100 ms. With one buffer nothing fills while it is held: each
     * batch costs 110 ms, 10 of them waited. With two, filling overlaps. */
    sl__sim_profile_t p = plain(2, 1);
    p.step_ms = 100;
    avg_t one = run_config(&p, 1, 1, 1, 22);
    assert_float_equal(one.samples, 10 / 0.110, 2);
    assert_float_equal(one.stall, 10.0 / 110, 0.02);
    avg_t two = run_config(&p, 1, 1, 2, 22);
    assert_float_equal(two.samples, 100, 2);
    assert_true(two.stall < 0.005);
}

static void test_cpu_consumer_competes(void **state)
{
    (void)state;
    /* A consumer that computes (consumer_cpu 1) on 1 core with one decoder:
     * while it steps they share the core. */
    sl__sim_profile_t p = plain(1, 1);
    p.step_ms = 50;
    p.consumer_cpu = 1;
    avg_t a = run_config(&p, 1, 1, 2, 20);
    /* Uncontended a batch would take 50 ms of step and 10 ms of decode on
     * separate cores; on one core the work adds up to 60 ms per batch. */
    assert_float_equal(a.samples, 10 / 0.060, 5);
    assert_float_equal(a.cpu_self, 1.0, 0.02);
}

static void test_storage_and_step_events(void **state)
{
    (void)state;
    /* Fast decoders, unlimited storage: consumer-bound at 10 samples per
     * 20 ms = 500/s. At 5 s storage drops to 1 MB/s of 10 KB items (100/s);
     * at 10 s it is unlimited again and the step doubles (250/s). */
    sl__sim_profile_t p = plain(2, 0.5);
    p.item_bytes = 10e3;
    p.step_ms = 20;
    p.n_events = 3;
    p.events[0] = (sl__sim_event_t){5.0, SL_SIM_EV_STORAGE_BW, 1e6};
    p.events[1] = (sl__sim_event_t){10.0, SL_SIM_EV_STORAGE_BW, 0};
    p.events[2] = (sl__sim_event_t){10.0, SL_SIM_EV_STEP_MS, 40};
    sl__knobs_t k = {2, 2, 4, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 4);
    avg_t a = run_avg(s, 1, 4);
    avg_t b = run_avg(s, 1, 4);
    avg_t c = run_avg(s, 1, 4);
    assert_float_equal(a.samples, 500, 10);
    assert_true(a.stall < 0.05);
    assert_float_equal(b.samples, 100, 4);
    assert_float_equal(b.read_bytes, 1e6, 5e4);
    assert_true(b.stall > 0.7);
    assert_float_equal(c.samples, 250, 6);
    sl__sim_destroy(s);
}

static void test_consumer_cpu_event(void **state)
{
    (void)state;
    /* One core, one decoder (1 ms/item, batch 10), step 50 ms. A sleeping
     * consumer: 10 items take 10 ms alongside the step: 200/s. Once it
     * computes (consumer_cpu 1 at 5 s) the core is shared: 60 ms/batch. */
    sl__sim_profile_t p = plain(1, 1);
    p.step_ms = 50;
    p.n_events = 1;
    p.events[0] = (sl__sim_event_t){5.0, SL_SIM_EV_CONSUMER_CPU, 1.0};
    sl__knobs_t k = {1, 1, 2, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 4);
    avg_t a = run_avg(s, 1, 4);
    avg_t b = run_avg(s, 1, 4);
    assert_float_equal(a.samples, 200, 6);
    assert_float_equal(b.samples, 10 / 0.060, 6);
    sl__sim_destroy(s);
}

static void test_fewer_threads_finish_their_items(void **state)
{
    (void)state;
    /* 4 decoders on 4 cores at 100 ms per item; cut to 1 just after they
     * all started: the 4 items in hand still finish (no work dropped), and
     * from then on one decoder does 10 items/s. */
    sl__sim_profile_t p = plain(4, 100);
    sl__knobs_t k = {1, 4, 4, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 4);
    sl_snapshot_t sn;
    sl__sim_step(s, 0.05, &sn);
    k.decode_threads = 1;
    sl__sim_set_knobs(s, &k);
    sl__sim_step(s, 0.1, &sn); /* 0.05 .. 0.15: the first four finish */
    assert_int_equal(sn.decode.items_total, 4);
    assert_int_equal(sn.decode.workers, 1);
    avg_t a = run_avg(s, 0.5, 10);
    assert_float_equal(a.decode_items, 10, 0.5);
    sl__sim_destroy(s);
}

static void test_memory_follows_the_buffers(void **state)
{
    (void)state;
    /* A slow consumer: every buffer fills and waits. RSS = base + buffers
     * x batch bytes; a lower prefetch gives memory back as the consumer
     * returns buffers. The read-ahead never exceeds its capacity. */
    sl__sim_profile_t p = plain(2, 1);
    p.step_ms = 200;
    p.base_rss = 10e6;
    p.batch_bytes = 1e6;
    p.read_ahead = 8;
    sl__knobs_t k = {1, 2, 6, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 4);
    sl_snapshot_t sn;
    for (int i = 0; i < 30; i++) {
        sl__sim_step(s, 0.1, &sn);
        assert_true(sn.read.queue_depth <= 8);
        assert_true(sn.decode.queue_depth <= 8);
    }
    assert_int_equal(sn.rss_bytes, 16000000);
    assert_true(sn.batches_ready >= 4);
    k.prefetch = 2;
    sl__sim_set_knobs(s, &k);
    for (int i = 0; i < 20; i++)
        sl__sim_step(s, 0.1, &sn);
    assert_int_equal(sn.rss_bytes, 12000000);
    assert_int_equal(sn.prefetch, 2);
    sl__sim_destroy(s);
}

static void test_knob_change_takes_effect(void **state)
{
    (void)state;
    sl__sim_profile_t p = plain(4, 10);
    sl__knobs_t k = {1, 1, 4, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 9);
    avg_t a = run_avg(s, 1, 3);
    assert_float_equal(a.decode_items, 100, 3);
    k.decode_threads = 4;
    sl__sim_set_knobs(s, &k);
    sl_snapshot_t sn;
    sl__sim_step(s, 0.1, &sn);
    assert_int_equal(sn.decode.workers, 4);
    avg_t b = run_avg(s, 0.5, 3);
    assert_float_equal(b.decode_items, 400, 8);
    k.decode_threads = 2;
    k.prefetch = 1;
    sl__sim_set_knobs(s, &k);
    avg_t c = run_avg(s, 0.5, 3);
    assert_float_equal(c.decode_items, 200, 6);
    sl__sim_step(s, 0.1, &sn);
    assert_int_equal(sn.prefetch, 1);
    assert_true(sn.batches_ready + sn.batches_filling <= 1);
    sl__sim_destroy(s);
}

static void test_snapshot_fields(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    sl__sim_profile_default(&p);
    sl__knobs_t k = {1, 2, 3, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 5);
    sl_snapshot_t sn;
    double lat = 0;
    for (int i = 0; i < 50; i++) {
        sl__sim_step(s, 0.1, &sn);
        lat = sn.batch_latency_ms > lat ? sn.batch_latency_ms : lat;
    }
    /* A batch of 64 by 2 decoders at 1.37 ms: ~44 ms from claim to ready,
     * more with 2 batches filling at once. */
    assert_true(lat > 40 && lat < 200);
    assert_float_equal(sn.t, 5.0, 1e-9);
    assert_float_equal(sn.interval_s, 0.1, 1e-12);
    assert_int_equal(sn.ncpu, 2);
    assert_int_equal(sn.read.workers, 1);
    assert_int_equal(sn.decode.workers, 2);
    /* the engine's read-ahead: 2 cores: I/O depth 64, + 32 */
    assert_int_equal(sn.read.queue_capacity, 96);
    assert_int_equal(sn.prefetch, 3);
    assert_true(sn.samples_total > 0);
    assert_int_equal(sn.samples_total, sn.batches_total * 64);
    assert_true(sn.bytes_read_total > 0);
    assert_true(sn.gpu_util < 0 && sn.energy_j < 0 && sn.psi_io_some < 0);
    assert_true(sn.rss_bytes >= (int64_t)p.base_rss);
    assert_true(sn.mem_available_bytes < sn.mem_total_bytes);
    sl__sim_destroy(s);
}

static void test_random_profiles(void **state)
{
    (void)state;
    int lo = 1000, hi = 0;
    for (uint64_t seed = 0; seed < 200; seed++) {
        sl__sim_profile_t p, q;
        sl__sim_profile_random(seed, NULL, 60, &p);
        sl__sim_profile_random(seed, NULL, 60, &q);
        assert_int_equal(p.ncpu, q.ncpu);
        assert_true(p.decode_ms == q.decode_ms);
        assert_true(p.ncpu >= 2 && p.ncpu <= 64);
        lo = p.ncpu < lo ? p.ncpu : lo;
        hi = p.ncpu > hi ? p.ncpu : hi;
        assert_true(p.decode_ms > 0 && p.step_ms > 0);
        for (int i = 1; i < p.n_events; i++)
            assert_true(p.events[i - 1].t <= p.events[i].t);
        if (seed < 20) {
            sl__knobs_t k = {1, p.ncpu, 2, 0};
            sl__sim_t *s = sl__sim_create(&p, &k, seed);
            sl_snapshot_t sn;
            for (int i = 0; i < 100; i++)
                sl__sim_step(s, 0.1, &sn);
            assert_true(sn.samples_total > 0);
            sl__sim_destroy(s);
        }
    }
    assert_true(lo <= 3 && hi >= 40);
}

static char *tmp_path(const char *name)
{
    char *dir = tu_tmpdir("sim");
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    free(dir);
    return p;
}

static void test_profile_round_trip(void **state)
{
    (void)state;
    sl__sim_profile_t p, q;
    sl__sim_profile_random(11, NULL, 100, &p);
    p.n_events = 2;
    p.events[0] = (sl__sim_event_t){1.25, SL_SIM_EV_STORAGE_BW, 3e7};
    p.events[1] = (sl__sim_event_t){7.5, SL_SIM_EV_CONSUMER_CPU, 0.3};
    char *path = tmp_path("p.json");
    char err[256];
    assert_int_equal(sl__sim_profile_save(path, &p, err, sizeof err), 0);
    memset(&q, 0xff, sizeof q);
    assert_int_equal(sl__sim_profile_load(path, &q, err, sizeof err), 0);
    assert_int_equal(q.ncpu, p.ncpu);
    assert_int_equal(q.batch_size, p.batch_size);
    assert_int_equal(q.read_ahead, p.read_ahead);
    double *pd[] = {&p.read_ms,           &p.read_cv,      &p.decode_ms,
                    &p.decode_cv,         &p.item_bytes,   &p.storage_bw,
                    &p.step_ms,           &p.consumer_cpu, &p.batch_bytes,
                    &p.base_rss,          &p.mem_total,    &p.interfere,
                    &p.storage_latency_ms};
    double *qd[] = {&q.read_ms,           &q.read_cv,      &q.decode_ms,
                    &q.decode_cv,         &q.item_bytes,   &q.storage_bw,
                    &q.step_ms,           &q.consumer_cpu, &q.batch_bytes,
                    &q.base_rss,          &q.mem_total,    &q.interfere,
                    &q.storage_latency_ms};
    for (size_t i = 0; i < sizeof pd / sizeof pd[0]; i++)
        assert_true(*pd[i] == *qd[i]); /* exact: %.17g */
    assert_int_equal(q.n_events, 2);
    assert_int_equal(q.events[0].kind, SL_SIM_EV_STORAGE_BW);
    assert_true(q.events[0].t == 1.25 && q.events[0].value == 3e7);
    assert_int_equal(q.events[1].kind, SL_SIM_EV_CONSUMER_CPU);
    /* Missing keys keep the defaults. */
    sl__sim_profile_t d;
    sl__sim_profile_default(&d);
    const char *part = "{\"ncpu\": 8, \"decode_ms\": 3.5}";
    assert_int_equal(sl__sim_profile_parse(part, strlen(part), &q, err, 256),
                     0);
    assert_int_equal(q.ncpu, 8);
    assert_true(q.decode_ms == 3.5 && q.read_ms == d.read_ms);
    assert_int_equal(q.n_events, 0);
    free(path);
}

static void expect_error(const char *json, const char *needle)
{
    sl__sim_profile_t p;
    sl__sim_profile_default(&p);
    p.ncpu = 77;
    char err[256] = "";
    int rc = sl__sim_profile_parse(json, strlen(json), &p, err, sizeof err);
    if (rc == 0 || !strstr(err, needle))
        fail_msg("'%s': rc %d, err '%s', wanted '%s'", json, rc, err, needle);
    assert_int_equal(p.ncpu, 77); /* untouched on failure */
}

static void test_profile_errors_name_the_key(void **state)
{
    (void)state;
    expect_error("{\"ncpu\": 2, \"decode_msec\": 3}", "'decode_msec'");
    expect_error("{\"ncpu\": \"two\"}", "'ncpu'");
    expect_error("{\"ncpu\": 2.5}", "'ncpu'");
    expect_error("{\"decode_ms\": true}", "'decode_ms'");
    expect_error("{\"consumer_cpu\": 1.5}", "'consumer_cpu'");
    expect_error("{\"decode_ms\": 0}", "'decode_ms'");
    expect_error(
        "{\"events\": [{\"t\": 1, \"kind\": \"flood\", \"value\": 1}]}",
        "flood");
    expect_error("{\"events\": [{\"t\": 1, \"kind\": \"interfere\"}]}",
                 "events[0]");
    expect_error("{\"events\": {}}", "'events'");
    expect_error("[1, 2]", "object");
    expect_error("{\"ncpu\": 2", "profile");
    expect_error("{\"ncpu\": 2, \"ncpu\": 3}", "profile");
    char err[128];
    sl__sim_profile_t p;
    assert_int_not_equal(
        sl__sim_profile_load("/nonexistent/p.json", &p, err, sizeof err), 0);
    assert_non_null(strstr(err, "/nonexistent/p.json"));
    /* A directory is refused, named (base/file's rule for small files). */
    assert_int_not_equal(sl__sim_profile_load("/", &p, err, sizeof err), 0);
    assert_non_null(strstr(err, "directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_snapshots),
        cmocka_unit_test(test_one_decoder_idle_core),
        cmocka_unit_test(test_lognormal_keeps_the_mean),
        cmocka_unit_test(test_two_decoders_one_core),
        cmocka_unit_test(test_interference_shares_the_cores),
        cmocka_unit_test(test_interference_event),
        cmocka_unit_test(test_storage_bandwidth_binds),
        cmocka_unit_test(test_prefetch_one_stalls_slow_consumer),
        cmocka_unit_test(test_cpu_consumer_competes),
        cmocka_unit_test(test_knob_change_takes_effect),
        cmocka_unit_test(test_storage_and_step_events),
        cmocka_unit_test(test_consumer_cpu_event),
        cmocka_unit_test(test_fewer_threads_finish_their_items),
        cmocka_unit_test(test_memory_follows_the_buffers),
        cmocka_unit_test(test_snapshot_fields),
        cmocka_unit_test(test_random_profiles),
        cmocka_unit_test(test_profile_round_trip),
        cmocka_unit_test(test_profile_errors_name_the_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
