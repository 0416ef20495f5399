/* A simulated run under a policy (sim/run.h) and policy training in the
 * simulator (sim/train.h): the scheduler tick drives the model as it
 * drives the loader, static keeps its knobs, rl runs and stays within the
 * budgets, runs and training are deterministic, the run's JSON and the
 * --events parser. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/limits.h"
#include "sim/run.h"
#include "sim/train.h"
#include "testutil.h"

static void setup(int policy, sl__sim_profile_t *p, sl__limits_t *lim,
                  sl__knobs_t *k)
{
    sl__sim_profile_default(p);
    p->ncpu = 4;
    p->decode_ms = 4;
    p->step_ms = 20;
    sl_options_t o;
    memset(&o, 0, sizeof o);
    o.policy = policy;
    char err[128];
    assert_int_equal(sl__limits_make(&o, p->ncpu, (size_t)p->batch_bytes, lim,
                                     k, err, sizeof err),
                     0);
}

typedef struct seen {
    int n, decisions, rl_reasons, over_budget;
    int64_t last_total;
    const sl__limits_t *lim;
} seen_t;

static void on_snapshot(void *ctx, const sl_snapshot_t *s)
{
    seen_t *v = ctx;
    v->n++;
    if (s->decision_new) {
        v->decisions++;
        v->rl_reasons += !strncmp(s->decision_reason, "rl: ", 4) ||
                         !strncmp(s->decision_reason, "model: ", 7) ||
                         !strncmp(s->decision_reason, "settle: ", 8) ||
                         !strncmp(s->decision_reason, "undo: ", 6);
    }
    v->last_total = s->decisions_total;
    if (s->decode.workers > v->lim->max_decode ||
        s->read.workers > v->lim->max_read ||
        s->prefetch > v->lim->max_prefetch)
        v->over_budget++;
}

static void test_static_keeps_its_knobs(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    sl__limits_t lim;
    sl__knobs_t k;
    setup(SL_POLICY_STATIC, &p, &lim, &k);
    sl__sim_run_opts_t o = {10, 0, 1, NULL, NULL};
    sl__sim_result_t r;
    assert_int_equal(sl__sim_run(&p, &lim, &k, NULL, &o, &r), 0);
    assert_int_equal(r.decisions, 0);
    assert_memory_equal(&r.knobs, &k, sizeof k);
    assert_string_equal(r.policy, "static");
    assert_true(r.samples > 0 && r.batches * p.batch_size == r.samples);
}

static void test_heuristic_run_is_deterministic(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    sl__limits_t lim;
    sl__knobs_t k;
    setup(SL_POLICY_HEURISTIC, &p, &lim, &k);
    p.step_ms = 2; /* a fast consumer: the loader must grow */
    sl__sim_result_t r[2];
    for (int i = 0; i < 2; i++) {
        sl__policy_t *pol = sl__policy_heuristic();
        sl__sim_run_opts_t o = {20, 0, 3, NULL, NULL};
        assert_int_equal(sl__sim_run(&p, &lim, &k, pol, &o, &r[i]), 0);
        sl__policy_destroy(pol);
    }
    assert_memory_equal(&r[0], &r[1], sizeof r[0]);
    assert_true(r[0].decisions > 0);
    assert_string_equal(r[0].policy, "heuristic");
}

static void test_rl_runs_within_the_budgets(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    sl__limits_t lim;
    sl__knobs_t k;
    setup(SL_POLICY_RL, &p, &lim, &k);
    sl__rl_policy_t w;
    assert_int_equal(sl__rl_policy_init(&w, 16, 0, 5), 0);
    sl__policy_t *pol = sl__policy_rl(&w, 0, 1);
    assert_non_null(pol);
    seen_t v = {0};
    v.lim = &lim;
    sl__sim_run_opts_t o = {20, 0, 1, on_snapshot, &v};
    sl__sim_result_t r;
    assert_int_equal(sl__sim_run(&p, &lim, &k, pol, &o, &r), 0);
    sl__policy_destroy(pol);
    assert_int_equal(v.n, 200);
    /* A random network moves knobs; every decision says it is rl's (or
     * the stall model's jump rl runs first, and its judgement), and
     * the snapshots count them as the loader's do. */
    assert_true(v.decisions > 0);
    assert_int_equal(v.rl_reasons, v.decisions);
    assert_true(r.decisions >= v.decisions);
    assert_int_equal(v.over_budget, 0);
    assert_string_equal(r.policy, "rl");
    char json[1024];
    int n = sl__sim_result_json(&r, json, sizeof json);
    assert_true(n > 0 && n < (int)sizeof json);
    assert_non_null(strstr(json, "\"policy\": \"rl\""));
    assert_non_null(strstr(json, "{\"simulated\": true, \"samples\": "));
}

static void test_samples_stop_the_run(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    sl__limits_t lim;
    sl__knobs_t k;
    setup(SL_POLICY_STATIC, &p, &lim, &k);
    sl__sim_run_opts_t o = {1e6, 1000, 1, NULL, NULL};
    sl__sim_result_t r;
    assert_int_equal(sl__sim_run(&p, &lim, &k, NULL, &o, &r), 0);
    /* Whole batches, the first that reach 1000 samples. */
    int64_t nb = (1000 + p.batch_size - 1) / p.batch_size;
    assert_int_equal(r.samples, nb * p.batch_size);
    assert_true(r.seconds > 0 && r.seconds < 60);
}

static void test_events_parse(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    sl__sim_profile_default(&p);
    p.n_events = 0;
    assert_int_equal(sl__sim_events_parse(
                         "20:interfere=1,5:step_ms=30,10:storage_bw=1e8", &p),
                     0);
    assert_int_equal(p.n_events, 3);
    assert_true(p.events[0].t == 5 && p.events[0].kind == SL_SIM_EV_STEP_MS);
    assert_true(p.events[2].t == 20 && p.events[2].value == 1);
    static const char *bad[] = {"x",
                                "5:interfere",
                                "5=interfere:1",
                                "5:nope=1",
                                "-1:interfere=1",
                                "5:interfere=1e13",
                                "5:step_ms=abc"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl__sim_profile_default(&p);
        p.n_events = 0;
        assert_int_equal(sl__sim_events_parse(bad[i], &p), -1);
    }
}

static void serialize(const sl__rl_policy_t *p, uint8_t **b, size_t *n)
{
    *n = sl__rl_policy_serialize(p, NULL, 0);
    *b = malloc(*n);
    assert_non_null(*b);
    sl__rl_policy_serialize(p, *b, *n);
}

static int updates;
static void on_update(void *ctx, const sl__train_progress_t *p)
{
    (void)ctx;
    updates++;
    assert_int_equal(p->decisions, (long)p->update * 32);
}

static void test_training_is_deterministic(void **state)
{
    (void)state;
    sl__train_opts_t o;
    memset(&o, 0, sizeof o);
    o.seed = 9;
    o.steps = 64;
    o.episode_s = 5;
    o.rollout = 32;
    o.on_update = on_update;
    uint8_t *b[2];
    size_t n[2];
    for (int i = 0; i < 2; i++) {
        sl__rl_policy_t pol;
        assert_int_equal(sl__rl_policy_init(&pol, 8, 0, o.seed), 0);
        assert_int_equal(sl__train_normalise(&o, &pol, 0), 0);
        updates = 0;
        assert_int_equal(sl__train_ppo(&o, &pol), 0);
        assert_int_equal(updates, 2);
        serialize(&pol, &b[i], &n[i]);
        if (i == 1) {
            sl__eval_score_t m[SL_EVAL_NPOL];
            assert_int_equal(sl__train_evaluate(&o, &pol, 1, m, NULL, NULL), 0);
            /* Static holds prefetch 2 and its threads throughout. */
            assert_true(fabs(m[SL_EVAL_STATIC].prefetch - 2) < 1e-9);
            assert_true(m[SL_EVAL_RL].rate > 0 &&
                        m[SL_EVAL_HEURISTIC].rate > 0);
        }
        sl__rl_policy_free(&pol);
    }
    assert_int_equal(n[0], n[1]);
    assert_memory_equal(b[0], b[1], n[0]);
    free(b[0]);
    free(b[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_keeps_its_knobs),
        cmocka_unit_test(test_heuristic_run_is_deterministic),
        cmocka_unit_test(test_rl_runs_within_the_budgets),
        cmocka_unit_test(test_samples_stop_the_run),
        cmocka_unit_test(test_events_parse),
        cmocka_unit_test(test_training_is_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
