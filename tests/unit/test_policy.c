/* The policy interface and the scheduler tick (sched/policy.h): static
 * never changes a knob; heuristic and rl through the interface decide
 * exactly as their direct calls; the tick orders changes so no budget is
 * crossed in between, decides every SL_SCHED_PERIODS periods, and reports
 * the first change that went through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/heuristic.h"
#include "sched/limits.h"
#include "sched/policy.h"
#include "testutil.h"

static sl__limits_t limits(void)
{
    sl_options_t o;
    memset(&o, 0, sizeof o);
    sl__limits_t lim;
    sl__knobs_t k;
    char err[128];
    assert_int_equal(sl__limits_make(&o, 4, 1 << 20, &lim, &k, err, 128), 0);
    return lim;
}

/* Window w of a fixed sequence of phases, 6 windows each: stalls with
 * busy decoders, stalls with busy readers on an idle CPU (storage), calm
 * with batches ready, mild bursty waits. Rates vary so steps are judged. */
static void window(int w, const sl__knobs_t *k, sl_snapshot_t *s)
{
    static const double stall[] = {0.4, 0.3, 0, 0.03};
    static const double dbusy[] = {0.95, 0.3, 0.2, 0.5};
    static const double rbusy[] = {0.2, 0.95, 0.1, 0.3};
    static const double cpu[] = {0.9, 0.1, 0.3, 0.5};
    int ph = (w / 6) % 4;
    memset(s, 0, SL_SCHED_PERIODS * sizeof *s);
    for (int i = 0; i < SL_SCHED_PERIODS; i++) {
        s[i].t = 0.1 * (w * SL_SCHED_PERIODS + i + 1);
        s[i].interval_s = 0.1;
        s[i].ncpu = 4;
        s[i].stall_fraction = stall[ph];
        s[i].samples_per_s = 400 + 37 * ((w * 7 + i) % 11);
        s[i].decode.busy = dbusy[ph];
        s[i].read.busy = rbusy[ph];
        s[i].decode.workers = k->decode_threads;
        s[i].read.workers = k->read_threads;
        s[i].prefetch = k->prefetch;
        s[i].batches_ready = stall[ph] > 0 ? 0 : k->prefetch;
        s[i].cpu_self = cpu[ph];
        s[i].cpu_other = 0.05;
        s[i].consumer_wait_ms = 40 * stall[ph];
    }
}

static void apply(const sl__sched_decision_t *d, sl__knobs_t *k)
{
    for (int i = 0; i < d->n; i++)
        *sl__knob_ref(k, d->ch[i].knob) = d->ch[i].to;
}

static void test_static_never_changes(void **state)
{
    (void)state;
    sl__sched_t s;
    sl__sched_init(&s, sl__policy_static());
    assert_non_null(s.pol);
    assert_string_equal(s.pol->name, "static");
    sl__limits_t lim = limits();
    sl__knobs_t k = {1, 4, 8, 0};
    for (int w = 0; w < 40; w++) {
        sl_snapshot_t win[SL_SCHED_PERIODS];
        window(w, &k, win);
        sl__sched_decision_t d;
        assert_int_equal(
            sl__sched_tick(&s, win, SL_SCHED_PERIODS, &lim, &k, &d), 0);
        assert_int_equal(d.n, 0);
    }
    sl__sched_free(&s);
}

static void test_heuristic_through_the_interface_equals_direct(void **state)
{
    (void)state;
    sl__heur_t h;
    sl__heur_init(&h);
    sl__sched_t s;
    sl__sched_init(&s, sl__policy_heuristic());
    sl__limits_t lim = limits();
    sl__knobs_t a = {1, 4, 8, 0}, b = a;
    int changes = 0;
    for (int w = 0; w < 60; w++) {
        sl_snapshot_t win[SL_SCHED_PERIODS];
        window(w, &a, win);
        sl__knobs_t next;
        char why[SL_SCHED_REASON];
        int k = sl__heur_step(&h, win, SL_SCHED_PERIODS, &lim, &a, &next, why,
                              sizeof why);
        sl__sched_decision_t d;
        int n = sl__sched_tick(&s, win, SL_SCHED_PERIODS, &lim, &b, &d);
        assert_int_equal(n, k != SL_KNOB_NONE);
        if (n) {
            assert_int_equal(d.ch[0].knob, k);
            assert_int_equal(d.ch[0].from, sl__knob_get(&a, k));
            assert_int_equal(d.ch[0].to, sl__knob_get(&next, k));
            assert_string_equal(d.reason, why);
            a = next;
            apply(&d, &b);
            changes++;
        }
        assert_memory_equal(&a, &b, sizeof a);
    }
    assert_true(changes >= 3); /* the sequence does make it act */
    sl__sched_free(&s);
}

static void test_rl_through_the_interface_equals_direct(void **state)
{
    (void)state;
    sl__rl_policy_t p1, p2;
    assert_int_equal(sl__rl_policy_init(&p1, 16, 0, 42), 0);
    assert_int_equal(sl__rl_policy_clone(&p2, &p1), 0);
    sl__rl_sched_t rs;
    assert_int_equal(sl__rl_sched_init(&rs, &p1, 0, 7), 0);
    sl__sched_t s;
    sl__sched_init(&s, sl__policy_rl(&p2, 0, 7));
    assert_non_null(s.pol);
    assert_string_equal(s.pol->name, "rl");
    sl__limits_t lim = limits();
    sl__knobs_t a = {1, 4, 8, 0}, b = a;
    int changes = 0;
    for (int w = 0; w < 40; w++) {
        sl_snapshot_t win[SL_SCHED_PERIODS];
        window(w, &a, win);
        sl__knobs_t next;
        char why[SL_SCHED_REASON];
        int mask = sl__rl_sched_step(&rs, win, SL_SCHED_PERIODS, &lim, &a,
                                     &next, why, sizeof why);
        sl__sched_decision_t d;
        int n = sl__sched_tick(&s, win, SL_SCHED_PERIODS, &lim, &b, &d);
        assert_int_equal(n, __builtin_popcount((unsigned)mask));
        apply(&d, &b);
        a = next;
        assert_memory_equal(&a, &b, sizeof a);
        if (n)
            assert_string_equal(d.reason, why);
        changes += n;
    }
    assert_true(changes > 0);
    sl__rl_sched_free(&rs);
    sl__sched_free(&s);
}

/* A policy that proposes a fixed move, to see the tick's ordering. */
static sl__knobs_t fixed_next;
static int fixed_step(sl__policy_t *p, const sl_snapshot_t *win, int n,
                      const sl__limits_t *lim, const sl__knobs_t *cur,
                      sl__knobs_t *next, char *reason, size_t len)
{
    (void)p, (void)win, (void)n, (void)lim;
    *next = fixed_next;
    snprintf(reason, len, "fixed");
    return (next->read_threads != cur->read_threads) << SL_KNOB_READ |
           (next->decode_threads != cur->decode_threads) << SL_KNOB_DECODE |
           (next->prefetch != cur->prefetch) << SL_KNOB_PREFETCH;
}
static void fixed_destroy(sl__policy_t *p)
{
    free(p);
}

static void test_tick_orders_decreases_first(void **state)
{
    (void)state;
    sl__policy_t *p = calloc(1, sizeof *p);
    p->name = "fixed";
    p->step = fixed_step;
    p->destroy = fixed_destroy;
    sl__sched_t s;
    sl__sched_init(&s, p);
    sl__limits_t lim = limits();
    sl__knobs_t cur = {2, 4, 8, 0};
    fixed_next = (sl__knobs_t){3, 3, 6, 0};
    sl_snapshot_t win[SL_SCHED_PERIODS];
    window(0, &cur, win);
    sl__sched_decision_t d;
    assert_int_equal(sl__sched_tick(&s, win, SL_SCHED_PERIODS, &lim, &cur, &d),
                     3);
    /* A thread moved from decode to read is given back before it is
     * taken. */
    assert_int_equal(d.ch[0].knob, SL_KNOB_DECODE);
    assert_int_equal(d.ch[0].to, 3);
    assert_int_equal(d.ch[1].knob, SL_KNOB_PREFETCH);
    assert_int_equal(d.ch[2].knob, SL_KNOB_READ);
    assert_int_equal(d.ch[2].to, 3);
    /* The report names the first change that went through. */
    char knob[24], why[SL_SCHED_REASON];
    int from = -1, to = -1;
    int applied[3] = {0, 1, 1};
    assert_int_equal(sl__sched_report(&d, applied, knob, sizeof knob, &from,
                                      &to, why, sizeof why),
                     2);
    assert_string_equal(knob, "prefetch");
    assert_int_equal(from, 8);
    assert_int_equal(to, 6);
    assert_string_equal(why, "fixed");
    int none[3] = {0, 0, 0};
    assert_int_equal(sl__sched_report(&d, none, knob, sizeof knob, &from, &to,
                                      why, sizeof why),
                     0);
    sl__sched_free(&s);
}

/* rl learning online whose reward collapses: its guard hands the knobs to
 * the heuristic in a step that changes none. The tick still has it to
 * report (an event), and the record names knob "policy" with the guard's
 * reason, so telemetry, /decisions, top and plot show it. */
static void test_rl_guard_trip_is_reported(void **state)
{
    (void)state;
    sl__policy_t *pol;
    char err[256];
    assert_int_equal(
        sl__policy_create(SL_POLICY_RL, NULL, 1, 7, &pol, err, sizeof err), 0);
    sl__sched_t s;
    sl__sched_init(&s, pol);
    sl__limits_t lim = sl__limits_plain(4, 64, 16);
    sl__knobs_t cur = {1, 2, 4, 0};
    sl_snapshot_t win[SL_SCHED_PERIODS];
    sl__sched_decision_t d;
    int events = 0, n = 0, step;
    for (step = 0; step < 200 && !events; step++) {
        int bad = step >= 25;
        for (int i = 0; i < SL_SCHED_PERIODS; i++) {
            sl_snapshot_t *w = &win[i];
            sl_snapshot_init(w);
            w->t = step * 0.5 + i * 0.1;
            w->interval_s = 0.1;
            w->ncpu = 2;
            w->stall_fraction = bad ? 0.9 : 0.0;
            w->consumer_wait_ms = bad ? 200 : 0.01;
            w->samples_per_s = bad ? 50 : 500;
            w->batch_latency_ms = 10;
            w->cpu_self = 0.5;
            w->cpu_other = 0.1;
            w->cpu_total = 0.6;
            w->decode.workers = cur.decode_threads;
            w->decode.busy = 0.5;
            w->decode.items_per_s = w->samples_per_s;
            w->read.workers = cur.read_threads;
            w->read.busy = 0.1;
            w->read.items_per_s = w->samples_per_s;
            w->prefetch = cur.prefetch;
            w->batches_total = step * 5 + i;
            w->samples_total = (step * 5 + i) * 16;
            w->mem_available_bytes = 1LL << 33;
            w->mem_total_bytes = 1LL << 34;
            w->rss_bytes = 1 << 26;
        }
        n = sl__sched_tick(&s, win, SL_SCHED_PERIODS, &lim, &cur, &d);
        events += d.event;
        apply(&d, &cur);
    }
    assert_int_equal(events, 1);
    assert_int_equal(d.n, 0);
    assert_int_equal(n, 1);
    assert_non_null(strstr(d.reason, "rl guard"));
    char knob[24], why[SL_SCHED_REASON];
    int from = -1, to = -1, applied[4] = {0};
    assert_int_equal(sl__sched_report(&d, applied, knob, sizeof knob, &from,
                                      &to, why, sizeof why),
                     1);
    assert_string_equal(knob, "policy");
    assert_int_equal(from, 0);
    assert_int_equal(to, 0);
    assert_non_null(strstr(why, "heuristic from now on"));
    sl__sched_free(&s);
}

static void test_due_every_period_count(void **state)
{
    (void)state;
    sl__sched_t s;
    sl__sched_init(&s, sl__policy_static());
    int due = 0;
    for (int i = 1; i <= 5 * SL_SCHED_PERIODS; i++) {
        int d = sl__sched_due(&s);
        /* first at SL_SCHED_FIRST (a cold start), then every PERIODS */
        assert_int_equal(d, i >= SL_SCHED_FIRST &&
                                (i - SL_SCHED_FIRST) % SL_SCHED_PERIODS == 0);
        due += d;
    }
    assert_int_equal(due, 5);
    sl__sched_free(&s);
}

static void test_create_by_id(void **state)
{
    (void)state;
    sl__policy_t *p = NULL;
    char err[512] = "";
    assert_int_equal(
        sl__policy_create(SL_POLICY_HEURISTIC, NULL, 0, 1, &p, err, 512), 0);
    assert_string_equal(p->name, "heuristic");
    sl__policy_destroy(p);
    assert_int_equal(sl__policy_create(99, NULL, 0, 1, &p, err, 512),
                     SL_EINVAL);
    assert_null(p);
    assert_int_not_equal(sl__policy_create(SL_POLICY_RL, "/nonexistent/p.bin",
                                           0, 1, &p, err, 512),
                         0);
    assert_non_null(strstr(err, "/nonexistent/p.bin"));
    sl__policy_destroy(NULL);
}

static void test_policy_only_where_there_is_a_knob_to_tune(void **state)
{
    (void)state;
    sl_options_t o;
    memset(&o, 0, sizeof o);
    sl__limits_t lim;
    sl__knobs_t k;
    sl__policy_t *p = (sl__policy_t *)1;
    char err[128];
    assert_int_equal(sl__limits_make(&o, 2, 1 << 20, &lim, &k, err, 128), 0);
    assert_int_equal(sl__policy_for(&o, &lim, &p, err, 128), 0);
    assert_string_equal(p->name, "heuristic");
    sl__policy_destroy(p);
    /* Every knob given, or a static policy: no scheduler at all. */
    o.read_threads = o.decode_threads = o.prefetch = 2;
    assert_int_equal(sl__limits_make(&o, 2, 1 << 20, &lim, &k, err, 128), 0);
    assert_int_equal(sl__policy_for(&o, &lim, &p, err, 128), 0);
    assert_null(p);
    memset(&o, 0, sizeof o);
    o.policy = SL_POLICY_STATIC;
    assert_int_equal(sl__limits_make(&o, 2, 1 << 20, &lim, &k, err, 128), 0);
    assert_int_equal(sl__policy_for(&o, &lim, &p, err, 128), 0);
    assert_null(p);
}

/* An rl policy with the share head sets gpu_share itself, through the
 * tick, and the placement rule does not run; one of the CPU knobs leaves
 * the share to the rule. */
static void test_rl_with_the_share_head_places_instead_of_the_rule(void **state)
{
    (void)state;
    sl__limits_t lim = limits();
    lim.max_gpu_share = 1000;
    lim.tune_gpu_share = 1;
    for (int places = 0; places < 2; places++) {
        sl__rl_policy_t p;
        assert_int_equal(sl__rl_policy_init(&p, 16, places, 42), 0);
        if (places) /* the share head's +1: bp[3 x 3 + 2] */
            p.net.w[p.net.n_params - (size_t)p.net.n_hid - 2] = 20;
        sl__sched_t s;
        sl__sched_init(&s, sl__policy_rl(&p, 0, 7));
        assert_int_equal(s.pol->places, places);
        sl__knobs_t k = {1, 4, 8, 0};
        int rl_moves = 0;
        for (int w = 0; w < 24; w++) {
            sl_snapshot_t win[SL_SCHED_PERIODS];
            window(w, &k, win);
            for (int i = 0; i < SL_SCHED_PERIODS; i++) {
                win[i].placement_gpu = 1;
                win[i].gpu_share = k.gpu_share;
            }
            sl__sched_decision_t d;
            int n = sl__sched_tick(&s, win, SL_SCHED_PERIODS, &lim, &k, &d);
            for (int c = 0; c < n; c++)
                if (d.ch[c].knob == SL_KNOB_GPU_SHARE) {
                    int by_rl = !strncmp(d.reason, "rl:", 3);
                    assert_int_equal(by_rl, places);
                    if (by_rl) {
                        assert_int_equal(d.ch[c].to - d.ch[c].from, 100);
                        assert_non_null(strstr(d.reason, "gpu_share +1"));
                    }
                    rl_moves += by_rl;
                }
            apply(&d, &k);
        }
        if (places) {
            assert_true(rl_moves >= 9); /* 0 -> 1000 in steps of 100 */
            assert_int_equal(k.gpu_share, 1000);
            assert_int_equal(s.place.raises + s.place.sheds, 0);
        }
        sl__sched_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_never_changes),
        cmocka_unit_test(test_heuristic_through_the_interface_equals_direct),
        cmocka_unit_test(test_rl_through_the_interface_equals_direct),
        cmocka_unit_test(test_tick_orders_decreases_first),
        cmocka_unit_test(test_rl_guard_trip_is_reported),
        cmocka_unit_test(test_due_every_period_count),
        cmocka_unit_test(test_create_by_id),
        cmocka_unit_test(test_policy_only_where_there_is_a_knob_to_tune),
        cmocka_unit_test(
            test_rl_with_the_share_head_places_instead_of_the_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
