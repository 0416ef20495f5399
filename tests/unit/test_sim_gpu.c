/* The simulator's GPU stage (sim/gpu.h): the share routes samples to it
 * and the rate follows the CPU's and the stage's capacities; its work
 * slows the consumer's step by gpu_slow; the snapshot reports it as the
 * collector reports the real one; the scheduler's placement rule (run by
 * the heuristic's tick) raises the share where the CPU is short and backs
 * off where the stage's interference costs more than it feeds; runs are
 * deterministic; a profile without a stage has none. */
#include <stdio.h>
#include <string.h>

#include "sched/limits.h"
#include "sim/gpu.h"
#include "sim/run.h"
#include "testutil.h"

/* 2 cores, 4 ms of CPU a sample (~480/s), a stage making 2,000/s. */
static void profile(sl__sim_profile_t *p, double step_ms, double gpu_slow)
{
    sl__sim_profile_default(p);
    p->ncpu = 2;
    p->batch_size = 64;
    p->read_ms = 0.1;
    p->decode_ms = 4;
    p->decode_cv = 0.3;
    p->storage_bw = 0;
    p->storage_latency_ms = 0;
    p->step_ms = step_ms;
    p->gpu_ms = 0.5;
    p->gpu_slow = gpu_slow;
}

typedef struct seen {
    int n, stage_ok, raised, placed_reasons;
    double last_share;
    int64_t gpu_total, samples_total;
    double gpu_cpu, decode_items; /* the last gpu_cpu_busy; decodes, summed */
    double gpu_cpu_total;         /* the last gpu_cpu_total_s */
} seen_t;

static void on_snapshot(void *ctx, const sl_snapshot_t *s)
{
    seen_t *v = ctx;
    v->n++;
    v->stage_ok += s->placement_present && s->placement_gpu &&
                   s->gpu_stage_busy >= 0 && s->gpu_stage_busy <= 1;
    if (s->decision_new && !strcmp(s->decision_knob, "gpu_share")) {
        v->raised += s->decision_to > s->decision_from;
        v->placed_reasons += !strncmp(s->decision_reason, "placement: ", 11);
    }
    v->last_share = s->gpu_share;
    v->gpu_total = s->gpu_samples_total;
    v->samples_total = s->samples_total;
    v->gpu_cpu = s->gpu_cpu_busy;
    v->gpu_cpu_total = s->gpu_cpu_total_s;
    v->decode_items += s->decode.items_per_s * s->interval_s;
}

/* One run: `policy`, the share fixed at `share` (>= 0) or the
 * scheduler's (-1). */
static sl__sim_result_t run(const sl__sim_profile_t *p, int policy, int share,
                            seen_t *v)
{
    sl_options_t o;
    memset(&o, 0, sizeof o);
    o.policy = policy;
    o.decode_threads = policy == SL_POLICY_STATIC ? 2 : 0;
    sl__limits_t lim;
    sl__knobs_t k;
    char err[128];
    assert_int_equal(sl__limits_make(&o, p->ncpu, (size_t)p->batch_bytes, &lim,
                                     &k, err, sizeof err),
                     0);
    sl__sim_gpu_limits(p, policy, &lim);
    if (share >= 0) {
        k.gpu_share = share;
        lim.tune_gpu_share = 0;
    }
    sl__policy_t *pol = NULL;
    assert_int_equal(sl__policy_for(&o, &lim, &pol, err, sizeof err), 0);
    memset(v, 0, sizeof *v);
    sl__sim_run_opts_t ro = {20, 0, 7, on_snapshot, v};
    sl__sim_result_t r;
    assert_int_equal(sl__sim_run(p, &lim, &k, pol, &ro, &r), 0);
    sl__policy_destroy(pol);
    return r;
}

static void test_the_share_routes_samples_to_the_stage(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    profile(&p, 0, 0);
    seen_t v0, v5, v9;
    double r0 = run(&p, SL_POLICY_STATIC, 0, &v0).samples_per_s;
    double r5 = run(&p, SL_POLICY_STATIC, 500, &v5).samples_per_s;
    double r9 = run(&p, SL_POLICY_STATIC, 900, &v9).samples_per_s;
    /* The CPU's ~480/s alone; half a batch each: twice it; 90 % on the
     * stage: the CPU's tenth bounds at ~10x, the stage's 2,000/s / 0.9
     * first. */
    assert_true(r0 > 400 && r0 < 520);
    assert_true(r5 > 1.8 * r0 && r5 < 2.2 * r0);
    assert_true(r9 > 1900 && r9 < 2300);
    assert_int_equal(v0.gpu_total, 0);
    /* every snapshot reports the stage; the GPU's samples are its share */
    assert_int_equal(v5.stage_ok, v5.n);
    double f = (double)v5.gpu_total / (double)v5.samples_total;
    assert_true(f > 0.45 && f < 0.55);
}

/* Handing a sample over costs its decoder gpu_cpu_ms: with every sample
 * on the stage the CPU's 2 cores bound the rate at 2 / gpu_cpu_ms, the
 * decoders are busy for it, and the stage still decodes them all. The
 * snapshot reports that CPU as the loader does: gpu_cpu_busy, not
 * decodes. */
static void test_the_hand_over_costs_cpu(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    profile(&p, 0, 0);
    p.gpu_ms = 0.1; /* the stage: 10,000/s */
    seen_t v;
    double free_of_it = run(&p, SL_POLICY_STATIC, 1000, &v).samples_per_s;
    p.gpu_cpu_ms = 1; /* 2 cores: 2,000/s */
    sl__sim_result_t r = run(&p, SL_POLICY_STATIC, 1000, &v);
    printf("# share 1000, gpu_ms 0.1: %.0f img/s; with gpu_cpu_ms 1: %.0f\n",
           free_of_it, r.samples_per_s);
    assert_true(free_of_it > 5000);
    assert_true(r.samples_per_s > 1700 && r.samples_per_s < 2100);
    assert_true(v.gpu_cpu > 1.7 && v.gpu_cpu <= 2.05);
    assert_true(v.decode_items == 0);
    /* 1 ms of CPU each, counted as the decoder's time (the read thread
     * shares the 2 cores: ~1.1 ms) */
    double per = v.gpu_cpu_total / (double)v.gpu_total;
    printf("# CPU per GPU sample: %.3f ms\n", 1000 * per);
    assert_true(per > 0.001 && per < 0.0012);
    /* all on the stage (it is ahead of the consumer by the batches held) */
    assert_true(v.gpu_total >= v.samples_total &&
                v.gpu_total < v.samples_total + 8 * p.batch_size);
    /* the profile key: parsed, and out of range named */
    char err[128];
    const char *js = "{\"gpu_ms\": 0.2, \"gpu_cpu_ms\": 0.15}";
    assert_int_equal(sl__sim_profile_parse(js, strlen(js), &p, err, sizeof err),
                     0);
    assert_true(p.gpu_cpu_ms == 0.15 && p.gpu_ms == 0.2);
    js = "{\"gpu_cpu_ms\": -1}";
    assert_int_not_equal(
        sl__sim_profile_parse(js, strlen(js), &p, err, sizeof err), 0);
    assert_non_null(strstr(err, "'gpu_cpu_ms'"));
    profile(&p, 0, 0); /* a parse starts from the defaults */
    p.gpu_ms = 0.1;
    p.gpu_cpu_ms = 1;
    /* half the batch on the CPU (4 ms) and half handed over (1 ms): 2
     * cores over (0.5 x 4 + 0.5 x 1) ms a sample: ~800/s */
    double half = run(&p, SL_POLICY_STATIC, 500, &v).samples_per_s;
    assert_true(half > 700 && half < 900);
}

static void test_the_stages_work_slows_the_step(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    profile(&p, 80, 0); /* the consumer wants 800/s */
    seen_t v;
    double free_of_it = run(&p, SL_POLICY_STATIC, 600, &v).samples_per_s;
    profile(&p, 80, 20); /* the step runs 21x slower while the stage works */
    double slowed = run(&p, SL_POLICY_STATIC, 600, &v).samples_per_s;
    assert_true(free_of_it > 750);
    assert_true(slowed < 0.9 * free_of_it);
}

static void test_the_scheduler_places_where_the_cpu_is_short(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    profile(&p, 0, 0); /* a benchmark: takes all it gets */
    seen_t v0, vh;
    double r0 = run(&p, SL_POLICY_STATIC, 0, &v0).samples_per_s;
    sl__sim_result_t h = run(&p, SL_POLICY_HEURISTIC, -1, &vh);
    assert_true(vh.raised >= 1);
    assert_int_equal(vh.placed_reasons, vh.raised);
    assert_true(vh.last_share > 500);
    assert_true(h.samples_per_s > 3 * r0);
    /* the same run again: the same figures */
    seen_t again;
    sl__sim_result_t h2 = run(&p, SL_POLICY_HEURISTIC, -1, &again);
    assert_int_equal(h2.samples, h.samples);
    assert_true(again.last_share == vh.last_share);
}

static void test_interference_keeps_the_share_moderate(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    profile(&p, 80, 20);
    seen_t v;
    double r0 = run(&p, SL_POLICY_STATIC, 0, &v).samples_per_s;
    double best = 0;
    for (int s = 100; s <= 900; s += 200) {
        double r = run(&p, SL_POLICY_STATIC, s, &v).samples_per_s;
        best = r > best ? r : best;
    }
    sl__sim_result_t h = run(&p, SL_POLICY_HEURISTIC, -1, &v);
    /* better than the CPU alone, near the best fixed share, and never the
     * whole batch on a stage that slows the step this much */
    assert_true(h.samples_per_s > 1.15 * r0);
    assert_true(h.samples_per_s > 0.85 * best);
    assert_true(v.last_share > 0 && v.last_share < 700);
}

static void test_no_stage_without_gpu_ms(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    profile(&p, 0, 0);
    p.gpu_ms = 0;
    sl__limits_t lim;
    memset(&lim, 0, sizeof lim);
    sl__sim_gpu_limits(&p, SL_POLICY_HEURISTIC, &lim);
    assert_int_equal(lim.max_gpu_share, 0);
    assert_int_equal(lim.tune_gpu_share, 0);
    sl__knobs_t k = {1, 2, 4, 500};
    sl__sim_t *s = sl__sim_create(&p, &k, 1);
    assert_non_null(s);
    sl_snapshot_t sn;
    sl__sim_step(s, 0.5, &sn);
    assert_int_equal(sn.placement_present, 0);
    assert_true(sn.gpu_stage_busy < 0);
    assert_true(sn.samples_per_s > 0);
    sl__sim_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_share_routes_samples_to_the_stage),
        cmocka_unit_test(test_the_stages_work_slows_the_step),
        cmocka_unit_test(test_the_scheduler_places_where_the_cpu_is_short),
        cmocka_unit_test(test_interference_keeps_the_share_moderate),
        cmocka_unit_test(test_the_hand_over_costs_cpu),
        cmocka_unit_test(test_no_stage_without_gpu_ms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
