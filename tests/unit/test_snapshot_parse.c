/* sl_snapshot_parse: the inverse of sl_snapshot_json (round trips with every
 * field set and with the nulls), absent members, and bad lines refused with
 * a message that names the member. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"
#include "sluice/telemetry.h"
#include "testutil.h"

static void full_snapshot(sl_snapshot_t *s)
{
    sl_snapshot_init(s);
    s->t = 12.345;
    s->interval_s = 0.25;
    s->ncpu = 4;
    s->cpu_total = 0.75;
    s->cpu_self = 0.5;
    s->cpu_other = 0.25;
    for (int i = 0; i < 4; i++)
        s->cpu_core[i] = 0.125f * (float)(i + 1);
    s->run_queue = 3;
    s->psi_cpu_some = 1.5;
    s->psi_io_some = 2.25;
    s->psi_io_full = 0.5;
    s->psi_mem_some = 0.125;
    s->psi_mem_full = 0.0625;
    s->mem_total_bytes = 16000000000LL;
    s->mem_available_bytes = 8000000000LL;
    s->rss_bytes = 123456000;
    s->read_bytes_per_s = 1.5e8;
    s->disk_read_bytes_per_s = 1.25e8;
    s->disk_busy = 0.4;
    s->self_read_bytes_per_s = 1.2e8;
    s->net_rx_bytes_per_s = 1000;
    s->net_tx_bytes_per_s = 2000;
    s->gpu_present = 1;
    s->gpu_count = 2;
    s->gpu_index = 1;
    snprintf(s->placement_held, sizeof s->placement_held,
             "NVML: the GPU ran kernels 97 %% of the time");
    s->gpu_util = 0.9;
    s->gpu_mem_used_bytes = 4000000000LL;
    s->gpu_mem_total_bytes = 80000000000LL;
    s->gpu_power_w = 350.5;
    s->gpu_pcie_rx_bytes_per_s = 1e9;
    s->gpu_pcie_tx_bytes_per_s = 2e9;
    s->energy_j = 4321.5;
    s->samples_per_s = 2500.25;
    s->stall_fraction = 0.125;
    s->batch_latency_ms = 12.5;
    s->consumer_wait_ms = 1.25;
    s->samples_total = 9007199254740993LL; /* not exact as a double */
    s->batches_total = 1000;
    s->errors_skipped = 7;
    s->bytes_read_total = 987654321012LL;
    s->read = (sl_stage_stats_t){3, 0.5, 2600.5, 50000, 17, 32};
    s->decode = (sl_stage_stats_t){6, 0.875, 2500.75, 49000, 5, 64};
    s->prefetch = 8;
    s->batches_ready = 2;
    s->batches_filling = 3;
    s->decisions_total = 11;
    s->decision_new = 1;
    snprintf(s->decision_knob, sizeof s->decision_knob, "decode_threads");
    snprintf(s->decision_reason, sizeof s->decision_reason,
             "stall 12%% \"quoted\" \\ and\ttab, caf\xc3\xa9");
    s->decision_from = 5;
    s->decision_to = 6;
    s->requests_total = 123;
    s->request_records_total = 984;
    s->request_fallbacks_total = 2;
    s->requests_per_s = 40.5;
    s->records_per_request = 7.75;
    s->cache_disk_present = 1;
    s->cache_disk_admitting = 1;
    s->cache_disk_hits_total = 70;
    s->cache_disk_misses_total = 30;
    s->cache_disk_bytes = 123456789012LL;
    s->cache_disk_entries = 70;
    s->cache_disk_limit_bytes = 200000000000LL;
    s->cache_disk_errors_total = 1;
    s->placement_present = 1;
    snprintf(s->placement, sizeof s->placement, "auto");
    s->placement_gpu = 1;
    s->gpu_share = 550;
    s->gpu_samples_total = 4400;
    s->gpu_refused_total = 3;
    snprintf(s->gpu_refused_why, sizeof s->gpu_refused_why, "progressive JPEG");
    s->gpu_samples_per_s = 812.5;
    s->gpu_stage_busy = 0.625;
    s->gpu_cpu_busy = 1.25;
    s->gpu_cpu_total_s = 37.5;
    s->gpu_handoff_busy = 0.5;
    s->gpu_handoff_total_s = 12.25;
    s->gpu_roi = 1;
    s->gpu_decoded_frac = 0.4375;
    s->gpu_bytes = 268435456;
    s->gpu_nvjpeg_bytes = 12582912;
}

/* json(s) -> parse -> json gives the same text; returns the parsed one. */
static sl_snapshot_t round_trip(const sl_snapshot_t *s)
{
    static char a[16384], b[16384];
    char err[256] = "";
    int na = sl_snapshot_json(s, a, sizeof a);
    assert_true(na > 0 && (size_t)na < sizeof a);
    sl_snapshot_t p;
    sl_snapshot_init(&p);
    if (sl_snapshot_parse(a, (size_t)na, &p, err, sizeof err))
        fail_msg("parse: %s in %s", err, a);
    int nb = sl_snapshot_json(&p, b, sizeof b);
    assert_int_equal(na, nb);
    assert_string_equal(a, b);
    return p;
}

static void test_round_trip_every_field(void **state)
{
    (void)state;
    sl_snapshot_t s;
    full_snapshot(&s);
    sl_snapshot_t p = round_trip(&s);
    assert_int_equal(p.ncpu, 4);
    assert_true(p.cpu_core[3] == 0.5f);
    assert_true(p.cpu_core[4] == -1.0f); /* beyond the array: unreadable */
    assert_int_equal(p.gpu_present, 1);
    assert_int_equal(p.gpu_count, 2);
    assert_int_equal(p.gpu_index, 1);
    assert_string_equal(p.placement_held,
                        "NVML: the GPU ran kernels 97 % of the time");
    assert_true(p.gpu_mem_total_bytes == 80000000000LL);
    assert_true(p.samples_total == 9007199254740993LL); /* integers exact */
    assert_int_equal(p.read.queue_capacity, 32);
    assert_int_equal(p.decode.workers, 6);
    assert_int_equal(p.batches_ready, 2);
    assert_int_equal(p.decision_new, 1);
    assert_string_equal(p.decision_knob, "decode_threads");
    assert_string_equal(p.decision_reason, s.decision_reason);
    assert_int_equal(p.decision_to, 6);
    assert_true(p.requests_total == 123 && p.request_records_total == 984);
    assert_true(p.request_fallbacks_total == 2);
    assert_true(p.requests_per_s == 40.5 && p.records_per_request == 7.75);
    assert_int_equal(p.cache_disk_present, 1);
    assert_int_equal(p.cache_disk_admitting, 1);
    assert_true(p.cache_disk_bytes == 123456789012LL);
    assert_true(p.cache_disk_limit_bytes == 200000000000LL);
    assert_true(p.cache_disk_hits_total == 70 &&
                p.cache_disk_errors_total == 1);
    assert_string_equal(p.placement, "auto");
    assert_int_equal(p.gpu_share, 550);
    assert_true(p.gpu_stage_busy == 0.625);
    assert_true(p.gpu_cpu_busy == 1.25);
    assert_true(p.gpu_cpu_total_s == 37.5);
    assert_true(p.gpu_handoff_busy == 0.5);
    assert_true(p.gpu_handoff_total_s == 12.25);
    assert_int_equal(p.gpu_roi, 1);
    assert_true(p.gpu_decoded_frac == 0.4375);
    assert_true(p.gpu_bytes == 268435456 && p.gpu_nvjpeg_bytes == 12582912);
}

static void test_round_trip_unreadable(void **state)
{
    (void)state;
    sl_snapshot_t s;
    full_snapshot(&s);
    s.gpu_present = 0; /* written as "gpu": null */
    s.decision_new = 0;
    s.psi_io_full = -1;
    s.mem_available_bytes = -1;
    s.energy_j = -1;
    s.records_per_request = -1; /* no requests this interval: null */
    s.cache_disk_present = 0;   /* written as "disk": null */
    s.ncpu = 300;               /* more cores than the array holds */
    for (int i = 0; i < SL_SNAPSHOT_MAX_CORES; i++)
        s.cpu_core[i] = (float)(i % 8) / 8;
    sl_snapshot_t p = round_trip(&s);
    assert_int_equal(p.gpu_present, 0);
    assert_true(p.gpu_util < 0 && p.gpu_mem_used_bytes < 0);
    assert_int_equal(p.gpu_index, -1);
    assert_int_equal(p.decision_new, 0);
    assert_true(p.psi_io_full < 0 && p.energy_j < 0);
    assert_true(p.records_per_request < 0);
    assert_int_equal(p.cache_disk_present, 0);
    assert_true(p.cache_disk_hits_total < 0);
    assert_true(p.mem_available_bytes == -1);
    assert_int_equal(p.ncpu, 300);
    assert_true(p.cpu_core[255] == 7.0f / 8);
}

/* Values the writer cannot put in JSON as they are (NaN, infinity), other
 * negatives than -1 (parse reads any negative as -1) and a string that is
 * not UTF-8: still JSON, and still a round trip (the C API review). */
static void test_round_trip_odd_values(void **state)
{
    (void)state;
    sl_snapshot_t s;
    full_snapshot(&s);
    s.cpu_total = NAN;          /* F-kind */
    s.samples_per_s = INFINITY; /* F-kind */
    s.energy_j = -INFINITY;     /* a number or null */
    s.psi_io_full = NAN;
    s.run_queue = -7;        /* an integer */
    s.stall_fraction = -0.5; /* F-kind */
    s.cpu_core[1] = NAN;     /* a core */
    snprintf(s.decision_reason, sizeof s.decision_reason, "caf\xe9 (latin-1)");
    sl_snapshot_t p = round_trip(&s);
    assert_true(p.cpu_total == -1 && p.samples_per_s == -1);
    assert_true(p.energy_j == -1 && p.psi_io_full == -1);
    assert_true(p.run_queue == -1 && p.stall_fraction == -1);
    assert_true(p.cpu_core[1] == -1.0f);
    assert_string_equal(p.decision_reason, "caf\\xe9 (latin-1)");
}

/* A hand-written line: absent members, nulls, a null core, and the knob
 * written under several names (knobs wins, being last). */
static void test_absent_and_null_members(void **state)
{
    (void)state;
    const char *line =
        " {\"t\": 0.4, \"samples_per_s\": 250e0, \"stall_fraction\": 0,"
        " \"cpu_self\": null, \"cpu_core\": [0.5, null], \"gpu\": null,"
        " \"workers\": {\"read\": 9}, \"future_key\": {\"x\": [1]},"
        " \"knobs\": {\"read_threads\": 2, \"decode_threads\": 1.0,"
        " \"prefetch\": 2}}\n";
    sl_snapshot_t p;
    sl_snapshot_init(&p);
    char err[256];
    assert_int_equal(sl_snapshot_parse(line, strlen(line), &p, err, 256), 0);
    assert_true(p.t == 0.4 && p.samples_per_s == 250 && p.stall_fraction == 0);
    assert_true(p.cpu_self == -1 && p.cpu_total == -1 && p.interval_s == -1);
    assert_true(p.cpu_core[0] == 0.5f && p.cpu_core[1] == -1.0f);
    assert_int_equal(p.ncpu, -1);
    assert_int_equal(p.read.workers, 2);
    assert_int_equal(p.decode.workers, 1);
    assert_int_equal(p.prefetch, 2);
    assert_int_equal(p.read.queue_depth, -1);
    assert_true(p.samples_total == -1);
    assert_int_equal(p.gpu_present, 0);
    assert_int_equal(p.decision_new, 0);
    assert_string_equal(p.decision_knob, "");
    /* Negative means unreadable: any negative number reads as -1. */
    const char *neg = "{\"t\": 1, \"cpu_total\": -0.00001, \"ncpu\": -7}";
    assert_int_equal(sl_snapshot_parse(neg, strlen(neg), &p, err, 256), 0);
    assert_true(p.cpu_total == -1);
    assert_int_equal(p.ncpu, -1);
}

/* A caller built against the first layout: sl_snapshot_json reads its
 * s->size bytes only (an allocation of exactly that size: ASan sees any
 * read past it) and writes the later fields as unknown. */
static void test_json_of_a_smaller_layout(void **state)
{
    (void)state;
    sl_snapshot_t s;
    full_snapshot(&s);
    size_t v1 = offsetof(sl_snapshot_t, decision_reason) + 160;
    unsigned char *small = malloc(v1);
    assert_non_null(small);
    s.size = v1; /* the caller's layout */
    memcpy(small, &s, v1);
    s.size = sizeof s;
    char whole[16384], part[16384];
    assert_true(sl_snapshot_json(&s, whole, sizeof whole) > 0);
    assert_true(sl_snapshot_json((const sl_snapshot_t *)(void *)small, part,
                                 sizeof part) > 0);
    /* the first layout's fields as written, the later ones unknown */
    assert_non_null(strstr(part, "\"samples_per_s\": "));
    assert_non_null(strstr(whole, "\"placement\": {"));
    assert_non_null(strstr(part, "\"placement\": null"));
    assert_null(strstr(part, "\"gpu_roi\""));
    sl_snapshot_t back;
    sl_snapshot_init(&back);
    char err[256];
    assert_int_equal(
        sl_snapshot_parse(part, strlen(part), &back, err, sizeof err), 0);
    assert_true(back.samples_per_s == s.samples_per_s);
    assert_int_equal(back.placement_present, 0);
    free(small);
}

static void test_bad_lines_name_the_cause(void **state)
{
    (void)state;
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"", "not JSON"},
        {"{\"t\": 0.3, \"samples_per_s\": 300, \"stall_fra", "not JSON"},
        {"[1, 2]", "not a JSON object"},
        {"{\"t\": 1} {\"t\": 2}", "not JSON"},
        {"{\"samples_per_s\": 1}", "t: missing"},
        {"{\"t\": null}", "t: missing"},
        {"{\"t\": \"1\"}", "t: not a number"},
        {"{\"t\": -1}", "t: not a number >= 0"},
        {"{\"t\": 1, \"stages\": {\"read\": {\"busy\": \"x\"}}}",
         "stages.read.busy: not a number"},
        {"{\"t\": 1, \"stages\": [1]}", "stages: not an object"},
        {"{\"t\": 1, \"queue_depth\": {\"read\": 2.5}}",
         "queue_depth.read: not a whole number"},
        {"{\"t\": 1, \"ncpu\": 3000000000}", "ncpu: out of range"},
        {"{\"t\": 1, \"samples_total\": 1e19}", "samples_total: out of range"},
        {"{\"t\": 1, \"cpu_core\": {}}", "cpu_core: not an array"},
        {"{\"t\": 1, \"cpu_core\": [0, true]}", "cpu_core[1]: not a number"},
        {"{\"t\": 1, \"cpu_core\": [1e39]}", "cpu_core[0]: out of range"},
        {"{\"t\": 1, \"decision\": {\"knob\": 3}}",
         "decision.knob: not a string"},
        {"{\"t\": 1, \"decision\": {\"knob\": \"a_knob_name_far_too_long\"}}",
         "decision.knob: longer than 23 bytes"},
        {"{\"t\": 1, \"decision\": {\"knob\": \"a\\u0000b\"}}", "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl_snapshot_t p;
        memset(&p, 0x5a, sizeof p);
        p.size = sizeof p;
        char err[256] = "";
        int rc = sl_snapshot_parse(bad[i].line, strlen(bad[i].line), &p, err,
                                   sizeof err);
        if (rc != SL_ECORRUPT || !strstr(err, bad[i].msg))
            fail_msg("%s: rc %d, message '%s', want '%s'", bad[i].line, rc, err,
                     bad[i].msg);
        assert_int_equal(p.ncpu, 0x5a5a5a5a); /* out untouched */
    }
    /* The length is honoured: bytes after it are not read. */
    const char *two = "{\"t\": 5}garbage";
    sl_snapshot_t p;
    sl_snapshot_init(&p);
    assert_int_equal(sl_snapshot_parse(two, 8, &p, NULL, 0), 0);
    assert_true(p.t == 5);
    assert_int_equal(sl_snapshot_parse(NULL, 0, &p, NULL, 0), SL_EINVAL);
    assert_int_equal(sl_snapshot_parse("{}", 2, NULL, NULL, 0), SL_EINVAL);
    p.size = 0; /* never initialised */
    assert_int_equal(sl_snapshot_parse("{\"t\": 1}", 8, &p, NULL, 0),
                     SL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_field),
        cmocka_unit_test(test_round_trip_unreadable),
        cmocka_unit_test(test_round_trip_odd_values),
        cmocka_unit_test(test_absent_and_null_members),
        cmocka_unit_test(test_json_of_a_smaller_layout),
        cmocka_unit_test(test_bad_lines_name_the_cause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
