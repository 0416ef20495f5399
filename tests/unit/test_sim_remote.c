/* Remote preparers in the simulator (sim/remote.h) against rates worked
 * out by hand: one preparer's rate, preparers adding up until the link
 * binds at link_bw / batch_bytes, the trainer node's cores, the trainer's
 * receive, latency with a small window, preparers added and removed
 * mid-run (nothing lost: the consumer takes batches in order, a lost one
 * would stop it), determinism for a seed, snapshot fields, the profile
 * keys and events. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched/limits.h"
#include "sim/run.h"
#include "sim/sim.h"
#include "testutil.h"

#define BB (64.0 * 224 * 224 * 3) /* bytes of a batch of 64 */

/* Preparers alone on 2-core nodes (no CPU contention), chunk 1: a batch
 * costs a preparer 64 x 2 ms of decode, then 16 ms of serialize, strictly
 * one after the other: 144 ms, 444.4 img/s each. */
static sl__sim_profile_t prof(int n, double link_bw)
{
    sl__sim_profile_t p;
    sl__sim_profile_default(&p);
    p.ncpu = 2;
    p.batch_size = 64;
    p.batch_bytes = BB;
    p.read_ms = 0;
    p.read_cv = 0;
    p.decode_ms = 2.0;
    p.decode_cv = 0.3;
    p.step_ms = 0;
    p.remote.preparers = n;
    p.remote.threads = 1;
    p.remote.local = 0;
    p.remote.per_node = 1;
    p.remote.node_cores = 2;
    p.remote.chunk = 1;
    p.remote.depth = 2;
    p.remote.serialize_ms = 16;
    p.remote.store_ms = 3;
    p.remote.receive_ms = 2;
    p.remote.link_bw = link_bw;
    p.remote.link_latency_ms = 0.1;
    return p;
}

#define ONE (64.0 / 0.144) /* one preparer's img/s */

typedef struct span {
    double rate;      /* img/s over [t0, t1] */
    double link_busy; /* share of [t0, t1] the link moved bytes */
    double cpu_self, rx, workers;
} span_t;

/* img/s between t0 and t1 (multiples of 0.1 s) of p under `seed`. */
static span_t run_span(const sl__sim_profile_t *p, uint64_t seed, double t0,
                       double t1)
{
    sl__knobs_t k = {1, 1, 2, 0};
    sl__sim_t *s = sl__sim_create(p, &k, seed);
    assert_non_null(s);
    sl_snapshot_t sn;
    int64_t a = 0;
    sl__sim_remote_stats_t st0, st1;
    memset(&st0, 0, sizeof st0);
    span_t r = {0};
    int n0 = (int)lround(t0 / 0.1), n1 = (int)lround(t1 / 0.1);
    for (int i = 0; i < n1; i++) {
        sl__sim_step(s, 0.1, &sn);
        if (i + 1 == n0) {
            a = sn.samples_total;
            sl__sim_remote_stats(s, &st0);
        }
        if (i + 1 > n0) {
            r.cpu_self += sn.cpu_self / (n1 - n0);
            r.rx += sn.net_rx_bytes_per_s / (n1 - n0);
            r.workers += (double)sn.decode.workers / (n1 - n0);
        }
    }
    sl__sim_remote_stats(s, &st1);
    r.rate = (double)(sn.samples_total - a) / (t1 - t0);
    r.link_busy = (st1.link_busy_s - st0.link_busy_s) / (t1 - t0);
    sl__sim_destroy(s);
    return r;
}

static double rate(const sl__sim_profile_t *p)
{
    return run_span(p, 1, 5, 35).rate;
}

static void near(double got, double want, double rel, const char *what)
{
    if (fabs(got - want) > rel * want)
        fail_msg("%s: %.1f, wanted %.1f +- %.0f%%", what, got, want, rel * 100);
}

static void test_one_preparer(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(1, 0);
    near(rate(&p), ONE, 0.03, "1 preparer");
    /* Two decode threads: the 64 items in half the time, the serialize
     * still after them: 64 + 16 ms a batch. */
    p.remote.threads = 2;
    near(rate(&p), 64 / 0.080, 0.03, "1 preparer, 2 threads");
}

/* The knee: the rate grows with the preparers until it reaches the
 * link's batches per second, link_bw / batch_bytes, and stays there. */
static void test_scales_until_the_link_binds(void **state)
{
    (void)state;
    double bw = 2e8, link = bw / BB * 64; /* 1,329 img/s: N* = 2.99 */
    double prev = 0;
    for (int n = 1; n <= 8; n *= 2) {
        sl__sim_profile_t p = prof(n, bw);
        span_t r = run_span(&p, 1, 5, 35);
        char what[64];
        snprintf(what, sizeof what, "%d preparers, link %.0f img/s", n, link);
        if (n * ONE < 0.9 * link) {
            near(r.rate, n * ONE, 0.03, what); /* preparer-bound */
            assert_true(r.link_busy < 0.9);
        } else if (n * ONE > 1.2 * link) {
            near(r.rate, link, 0.03, what); /* link-bound */
            assert_true(r.link_busy > 0.97);
            near(r.rx, bw, 0.03, "net_rx_bytes_per_s at the link's bound");
        }
        /* never above the link: within the window's edges (transfers
         * under way at its start finish inside it: 8 preparers, 0.5 %) */
        assert_true(r.rate <= link * 1.01);
        assert_true(r.rate >= prev * 0.99); /* never falls with more */
        prev = r.rate;
    }
    /* The bound follows the bandwidth: twice the link, twice the rate. */
    sl__sim_profile_t p = prof(16, bw), q = prof(16, 2 * bw);
    near(rate(&q) / rate(&p), 2.0, 0.03, "16 preparers, link x 2");
    /* An unlimited link: the preparers' sum. */
    sl__sim_profile_t u = prof(8, 0);
    near(rate(&u), 8 * ONE, 0.03, "8 preparers, no link limit");
}

/* Preparers on the trainer's node share its cores with the trainer: the
 * rate tops at C / (p + (s + t + r) / B) = 2 / (2 + 21/64) ms. */
static void test_trainer_node_cores_bind(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(1, 2e8);
    p.remote.local = 4;
    span_t one = run_span(&p, 1, 5, 35);
    near(one.rate, ONE, 0.03, "1 local preparer");
    assert_true(one.link_busy == 0); /* same node: no transfer */
    p.remote.preparers = 4;
    span_t four = run_span(&p, 1, 5, 35);
    near(four.rate, 2 / (2.0 + 21.0 / 64) * 1000, 0.03, "4 local on 2 cores");
    assert_true(four.cpu_self > 0.98);
}

/* Everything fast but the trainer's receive: B / t. */
static void test_trainer_receive_binds(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(16, 0);
    p.remote.receive_ms = 20;
    near(rate(&p), 64 / 0.020, 0.02, "receive 20 ms");
}

/* Latency the model on paper leaves out: a batch is handed out at most
 * window = depth x chunk batches ahead of the one the trainer takes, and
 * takes 128 + 16 ms to make, 3 to store, 200 to cross, 2 to receive:
 * 349 ms from hand-out to take at least, so the rate is at most
 * window / 349 ms (Little's law) as long as that is below 444 img/s. */
static void test_latency_with_a_small_window(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(1, 0);
    p.remote.link_latency_ms = 200;
    p.remote.depth = 1;
    near(rate(&p), 64 / 0.349, 0.03, "window 1, 200 ms latency");
    p.remote.depth = 2;
    near(rate(&p), 2 * 64 / 0.349, 0.03, "window 2, 200 ms latency");
    p.remote.depth = 4; /* 733 > 444: the preparer binds again */
    near(rate(&p), ONE, 0.03, "window 4, 200 ms latency");
}

/* Preparers added at 10 s double the rate; removed at 20 s, the retired
 * ones finish their batches (the in-order trainer would stop otherwise). */
static void test_preparers_added_and_removed(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(2, 0);
    assert_int_equal(sl__sim_events_parse("10:remote_preparers=4,"
                                          "20:remote_preparers=1",
                                          &p),
                     0);
    near(run_span(&p, 1, 3, 10).rate, 2 * ONE, 0.04, "2 preparers");
    near(run_span(&p, 1, 12, 20).rate, 4 * ONE, 0.04, "4 after the event");
    near(run_span(&p, 1, 23, 35).rate, ONE, 0.04, "1 after the second");
    span_t w = run_span(&p, 1, 12, 20);
    assert_true(fabs(w.workers - 4) < 1e-9); /* decode.workers */
    /* Preparers from an event alone: remote mode on, none before it. */
    sl__sim_profile_t q = prof(0, 0);
    assert_int_equal(sl__sim_events_parse("5:remote_preparers=2", &q), 0);
    assert_true(run_span(&q, 1, 1, 5).rate == 0);
    near(run_span(&q, 1, 8, 20).rate, 2 * ONE, 0.04, "2 from an event");
}

/* The link changed mid-run: slower, then unlimited. */
static void test_link_events(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(8, 4e8);
    assert_int_equal(sl__sim_events_parse("10:link_bw=1e8,20:link_bw=0", &p),
                     0);
    near(run_span(&p, 1, 3, 10).rate, 4e8 / BB * 64, 0.03, "4e8");
    near(run_span(&p, 1, 13, 20).rate, 1e8 / BB * 64, 0.03, "1e8");
    near(run_span(&p, 1, 23, 35).rate, 8 * ONE, 0.03, "unlimited");
}

static void test_deterministic_for_a_seed(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(6, 3e8);
    p.remote.per_node = 4;
    p.remote.local = 1;
    p.remote.chunk = 2;
    p.remote.link_latency_ms = 2;
    p.interfere = 0.5;
    p.step_ms = 30;
    p.consumer_cpu = 0.5;
    assert_int_equal(sl__sim_events_parse("3:remote_preparers=9,"
                                          "6:link_bw=1e8,9:remote_preparers=2",
                                          &p),
                     0);
    sl__knobs_t k = {1, 1, 2, 0};
    sl__sim_t *a = sl__sim_create(&p, &k, 42), *b = sl__sim_create(&p, &k, 42),
              *c = sl__sim_create(&p, &k, 43);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    int differ = 0;
    for (int i = 0; i < 150; i++) {
        sl_snapshot_t x, y, z;
        sl__sim_step(a, 0.1, &x);
        sl__sim_step(b, 0.1, &y);
        sl__sim_step(c, 0.1, &z);
        assert_memory_equal(&x, &y, sizeof x);
        differ |= memcmp(&x, &z, sizeof x) != 0;
    }
    assert_true(differ);
    sl__sim_remote_stats_t sa, sb;
    sl__sim_remote_stats(a, &sa);
    sl__sim_remote_stats(b, &sb);
    assert_memory_equal(&sa, &sb, sizeof sa);
    assert_int_equal(sa.live, 2);
    assert_int_equal(sa.nodes, 2); /* 8 others at 4 a node */
    assert_true(sa.transferred > 0 && sa.node_cpu_s > 0);
    sl__sim_destroy(a);
    sl__sim_destroy(b);
    sl__sim_destroy(c);
}

/* Whole chunks, as ray.py hands them out: with chunk 4, every task holds
 * 4 batches (the old hand-out filled a free slot with what the window
 * allowed at that moment, down to 1 batch), with preparers joining and
 * leaving mid-run too. */
static void test_whole_chunks(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(3, 0);
    p.remote.chunk = 4;
    p.remote.per_node = 3;
    p.remote.node_cores = 4;
    p.step_ms = 5;
    assert_int_equal(
        sl__sim_events_parse("4:remote_preparers=5,8:remote_preparers=2", &p),
        0);
    sl__knobs_t k = {1, 1, 2, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 7);
    assert_non_null(s);
    sl_snapshot_t sn;
    for (int i = 0; i < 120; i++)
        sl__sim_step(s, 0.1, &sn);
    sl__sim_remote_stats_t st;
    sl__sim_remote_stats(s, &st);
    assert_true(st.chunks > 20);
    if (st.handed != 4 * st.chunks)
        fail_msg("%lld batches in %lld tasks: not whole chunks of 4",
                 (long long)st.handed, (long long)st.chunks);
    assert_true(sn.samples_total > 0);
    sl__sim_destroy(s);
}

/* sluice.ray's window rule (ray.py's _window; tests/python/
 * test_sim_window.py checks the two agree on a grid): the count, narrowed
 * by budget / batch bytes, never below one chunk per live preparer. */
static void test_window_rule(void **state)
{
    (void)state;
    const int64_t bb = 1000, count = 4 * 2 * 8; /* 4 live, depth 2, chunk 8 */
    /* no budget, or no batch bytes yet: the count */
    assert_int_equal(sl__sim_remote_window(count, 0, bb, 4, 8), count);
    assert_int_equal(sl__sim_remote_window(count, 50 * bb, 0, 4, 8), count);
    /* below one chunk per live preparer: that floor, whatever the budget */
    assert_int_equal(sl__sim_remote_window(count, 1, bb, 4, 8), 32);
    assert_int_equal(sl__sim_remote_window(count, 31 * bb + 999, bb, 4, 8), 32);
    /* between: whole batches of the budget */
    assert_int_equal(sl__sim_remote_window(count, 40 * bb, bb, 4, 8), 40);
    assert_int_equal(sl__sim_remote_window(count, 40 * bb + 999, bb, 4, 8), 40);
    /* above the count: the count */
    assert_int_equal(sl__sim_remote_window(count, 64 * bb, bb, 4, 8), 64);
    assert_int_equal(sl__sim_remote_window(count, 1000 * bb, bb, 4, 8), 64);
    /* more live preparers raise the floor, never above the count */
    assert_int_equal(sl__sim_remote_window(count, 1, bb, 6, 8), 48);
    assert_int_equal(sl__sim_remote_window(16, 1, bb, 6, 8), 16);
}

typedef struct budget_run {
    sl__sim_remote_stats_t st;
    int64_t first;    /* in flight at the first period */
    int64_t max_late; /* the most in flight at a period from 3 s on */
    double rate;      /* img/s over [5, 20] s */
    sl_snapshot_t last;
} budget_run_t;

/* 20 s of p, in flight (handed out, not taken: ready + filling) per
 * period. */
static budget_run_t run_budget(const sl__sim_profile_t *p)
{
    sl__knobs_t k = {1, 1, 2, 0};
    sl__sim_t *s = sl__sim_create(p, &k, 3);
    assert_non_null(s);
    budget_run_t r;
    memset(&r, 0, sizeof r);
    int64_t a = 0;
    for (int i = 0; i < 200; i++) {
        sl__sim_step(s, 0.1, &r.last);
        int64_t fl = r.last.batches_ready + r.last.batches_filling;
        if (i == 0)
            r.first = fl;
        if (i >= 30 && fl > r.max_late)
            r.max_late = fl;
        if (i + 1 == 50)
            a = r.last.samples_total;
    }
    r.rate = (double)(r.last.samples_total - a) / 15.0;
    sl__sim_remote_stats(s, &r.st);
    sl__sim_destroy(s);
    return r;
}

/* The byte budget (object_store_bytes) in the simulated hand-out: 4
 * preparers, chunk 2, depth 4 (count window 32 batches). Above the count
 * nothing changes; between, the window is the budget's batches; below
 * one chunk per preparer, that floor, and the run goes on (no deadlock).
 * Before the first chunk is done only the count holds (ray.py learns a
 * batch's bytes from it). */
static void test_byte_budget(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(4, 0);
    p.remote.chunk = 2;
    p.remote.depth = 4;
    p.step_ms = 5;
    budget_run_t none = run_budget(&p);
    assert_int_equal(none.st.window, 32);
    assert_int_equal(none.st.budget_held, 0);
    assert_true(none.max_late > 24); /* the count window is used */

    p.remote.store_bytes = 100 * BB; /* above the count */
    budget_run_t above = run_budget(&p);
    assert_memory_equal(&above.last, &none.last, sizeof none.last);
    assert_memory_equal(&above.st, &none.st, sizeof none.st);

    p.remote.store_bytes = 12.5 * BB; /* between: 12 batches */
    budget_run_t mid = run_budget(&p);
    assert_int_equal(mid.first, 32); /* bytes not known yet */
    assert_int_equal(mid.st.window, 12);
    if (mid.max_late > 12)
        fail_msg("budget of 12 batches: %lld in flight",
                 (long long)mid.max_late);
    assert_true(mid.st.budget_held > 0);
    assert_true(mid.st.in_flight_s < none.st.in_flight_s);
    /* the store holds at most the trainer's chunk more */
    assert_true(mid.st.store_s >= mid.st.in_flight_s &&
                mid.st.store_s <= mid.st.in_flight_s + 1 * 20.0);

    p.remote.store_bytes = 1; /* below one chunk per preparer: 8 */
    budget_run_t low = run_budget(&p);
    assert_int_equal(low.st.window, 8);
    if (low.max_late > 8)
        fail_msg("floor of 8 batches: %lld in flight", (long long)low.max_late);
    assert_true(low.st.budget_held > mid.st.budget_held);
    /* every preparer still gets a whole chunk: the run goes on */
    assert_true(low.rate > 0.5 * none.rate);
    assert_int_equal(low.st.handed, 2 * low.st.chunks);

    /* Preparers added: the floor follows the live count. */
    assert_int_equal(sl__sim_events_parse("8:remote_preparers=8", &p), 0);
    budget_run_t more = run_budget(&p);
    assert_int_equal(more.st.window, 16);
    assert_true(more.max_late > 8 && more.max_late <= 16);
}

/* Off: the local pipeline as before, no remote state. */
static void test_off_by_default(void **state)
{
    (void)state;
    sl__sim_profile_t p;
    sl__sim_profile_default(&p);
    assert_int_equal(p.remote.preparers, 0);
    sl__knobs_t k = {1, 2, 2, 0};
    sl__sim_t *s = sl__sim_create(&p, &k, 1);
    sl_snapshot_t sn;
    for (int i = 0; i < 20; i++)
        sl__sim_step(s, 0.1, &sn);
    sl__sim_remote_stats_t st;
    sl__sim_remote_stats(s, &st);
    assert_int_equal(st.handed, 0);
    assert_true(sn.samples_total > 0 && sn.net_rx_bytes_per_s < 0);
    assert_int_equal(sn.decode.workers, 2);
    sl__sim_destroy(s);
}

/* A simulated run (sim/run.h) with remote preparers: the figures of
 * `sluice simulate`. */
static void test_simulated_run(void **state)
{
    (void)state;
    sl__sim_profile_t p = prof(2, 0);
    sl__limits_t lim;
    sl__knobs_t k;
    sl_options_t o;
    memset(&o, 0, sizeof o);
    o.policy = SL_POLICY_STATIC;
    char err[128];
    assert_int_equal(sl__limits_make(&o, p.ncpu, (size_t)p.batch_bytes, &lim,
                                     &k, err, sizeof err),
                     0);
    sl__sim_run_opts_t ro = {30, 0, 1, NULL, NULL};
    sl__sim_result_t r;
    assert_int_equal(sl__sim_run(&p, &lim, &k, NULL, &ro, &r), 0);
    /* From t = 0: the first batch costs one batch's time. */
    near(r.samples_per_s, 2 * ONE * (30 - 0.15) / 30, 0.03, "sim_run");
    assert_true(r.batches * 64 == r.samples);
    /* The remote figures in its JSON: the window (2 x depth 2 x chunk 1),
     * how often the byte budget held it (none here). */
    char json[2048];
    int n = sl__sim_result_json(&r, json, sizeof json);
    assert_true(n > 0 && n < (int)sizeof json);
    assert_non_null(strstr(json, ", \"remote\": {\"window\": 4, "));
    assert_non_null(strstr(json, "\"budget_held\": 0, "));
    /* A budget of 2 batches: below one chunk per preparer, the floor. */
    p.remote.store_bytes = 2 * BB;
    assert_int_equal(sl__sim_run(&p, &lim, &k, NULL, &ro, &r), 0);
    assert_true(r.rm.budget_held > 0 && r.rm.budget_held <= r.rm.hand_outs);
    n = sl__sim_result_json(&r, json, sizeof json);
    assert_true(n > 0 && n < (int)sizeof json);
    assert_non_null(strstr(json, "\"remote\": {\"window\": 2, "));
    assert_null(strstr(json, "\"budget_held\": 0, "));
    /* the local pipeline's has none */
    sl__sim_profile_t q = prof(0, 0);
    assert_int_equal(sl__sim_run(&q, &lim, &k, NULL, &ro, &r), 0);
    n = sl__sim_result_json(&r, json, sizeof json);
    assert_true(n > 0 && n < (int)sizeof json);
    assert_null(strstr(json, "\"remote\""));
}

static int remote_equal(const sl__sim_remote_t *a, const sl__sim_remote_t *b)
{
    return a->preparers == b->preparers && a->threads == b->threads &&
           a->local == b->local && a->per_node == b->per_node &&
           a->node_cores == b->node_cores && a->chunk == b->chunk &&
           a->depth == b->depth && a->serialize_ms == b->serialize_ms &&
           a->store_ms == b->store_ms && a->receive_ms == b->receive_ms &&
           a->link_bw == b->link_bw &&
           a->link_latency_ms == b->link_latency_ms &&
           a->store_bytes == b->store_bytes;
}

static void test_profile_keys(void **state)
{
    (void)state;
    const char *js = "{\"remote_preparers\": 12, \"remote_threads\": 3, "
                     "\"remote_local\": 2, \"remote_per_node\": 5, "
                     "\"remote_node_cores\": 8, \"remote_chunk\": 4, "
                     "\"remote_depth\": 3, \"serialize_ms\": 1.5, "
                     "\"store_ms\": 0.25, \"receive_ms\": 0.75, "
                     "\"link_bw\": 3.125e9, \"link_latency_ms\": 0.05, "
                     "\"object_store_bytes\": 4e9, "
                     "\"events\": [{\"t\": 2, \"kind\": \"remote_preparers\", "
                     "\"value\": 20}, {\"t\": 1, \"kind\": \"link_bw\", "
                     "\"value\": 1e9}, {\"t\": 3, \"kind\": "
                     "\"link_latency_ms\", \"value\": 5}]}";
    sl__sim_profile_t p, q;
    char err[256];
    assert_int_equal(sl__sim_profile_parse(js, strlen(js), &p, err, 256), 0);
    sl__sim_remote_t *r = &p.remote;
    assert_int_equal(r->preparers, 12);
    assert_int_equal(r->threads, 3);
    assert_int_equal(r->local, 2);
    assert_int_equal(r->per_node, 5);
    assert_int_equal(r->node_cores, 8);
    assert_int_equal(r->chunk, 4);
    assert_int_equal(r->depth, 3);
    assert_true(r->serialize_ms == 1.5 && r->store_ms == 0.25 &&
                r->receive_ms == 0.75 && r->link_bw == 3.125e9 &&
                r->link_latency_ms == 0.05 && r->store_bytes == 4e9);
    assert_int_equal(p.n_events, 3);
    assert_int_equal(p.events[0].kind, SL_SIM_EV_LINK_BW);
    assert_int_equal(p.events[1].kind, SL_SIM_EV_REMOTE_PREPARERS);
    assert_int_equal(p.events[2].kind, SL_SIM_EV_LINK_LATENCY_MS);
    /* A save / load round trip keeps every remote key. */
    char *dir = tu_tmpdir("sim_remote");
    char path[512];
    snprintf(path, sizeof path, "%s/p.json", dir);
    assert_int_equal(sl__sim_profile_save(path, &p, err, sizeof err), 0);
    memset(&q, 0, sizeof q);
    assert_int_equal(sl__sim_profile_load(path, &q, err, sizeof err), 0);
    assert_true(remote_equal(&q.remote, &p.remote));
    assert_string_equal(sl__sim_event_name(q.events[1].kind),
                        "remote_preparers");
    remove(path);
    rmdir(dir);
    free(dir);
    /* Out of range: the key named; *p unchanged. */
    const char *bad[][2] = {
        {"{\"remote_chunk\": 0}", "'remote_chunk'"},
        {"{\"remote_threads\": 1.5}", "'remote_threads'"},
        {"{\"link_bw\": -1}", "'link_bw'"},
        {"{\"object_store_bytes\": -1}", "'object_store_bytes'"},
        {"{\"remote_preparers\": 5000}", "'remote_preparers'"},
        {"{\"events\": [{\"t\": 1, \"kind\": \"remote_preparers\", "
         "\"value\": -2}]}",
         "events[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(&q, &p, sizeof p);
        err[0] = '\0';
        int rc = sl__sim_profile_parse(bad[i][0], strlen(bad[i][0]), &q, err,
                                       sizeof err);
        if (rc == 0 || !strstr(err, bad[i][1]))
            fail_msg("'%s': rc %d, err '%s'", bad[i][0], rc, err);
        assert_memory_equal(&q, &p, sizeof p);
    }
    /* --events: the new kinds, sorted, ranges checked. */
    sl__sim_profile_default(&q);
    assert_int_equal(
        sl__sim_events_parse("5:remote_preparers=4,1:link_latency_ms=2", &q),
        0);
    assert_int_equal(q.events[0].kind, SL_SIM_EV_LINK_LATENCY_MS);
    assert_int_equal(q.events[1].kind, SL_SIM_EV_REMOTE_PREPARERS);
    sl__sim_profile_default(&q);
    assert_int_equal(sl__sim_events_parse("1:remote_preparers=4097", &q), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_preparer),
        cmocka_unit_test(test_scales_until_the_link_binds),
        cmocka_unit_test(test_trainer_node_cores_bind),
        cmocka_unit_test(test_trainer_receive_binds),
        cmocka_unit_test(test_latency_with_a_small_window),
        cmocka_unit_test(test_preparers_added_and_removed),
        cmocka_unit_test(test_link_events),
        cmocka_unit_test(test_deterministic_for_a_seed),
        cmocka_unit_test(test_whole_chunks),
        cmocka_unit_test(test_window_rule),
        cmocka_unit_test(test_byte_budget),
        cmocka_unit_test(test_off_by_default),
        cmocka_unit_test(test_simulated_run),
        cmocka_unit_test(test_profile_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
