/* The RL policy: the PPO loss's gradient against finite differences for
 * every parameter, PPO learning a contextual bandit it can fail, masks
 * that keep every decision within the budgets, the weights file and its
 * errors, features and reward, and the online-learning guard. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/mlp.h"
#include "sched/ppo.h"
#include "sched/rl.h"
#include "sim/train.h"
#include "testutil.h"

/* All knobs tuned; budgets: threads, read, decode, prefetch. */
#define LIMITS(t, r, d, p)                                                     \
    (sl__limits_t)                                                             \
    {                                                                          \
        .tune_read = 1, .tune_decode = 1, .tune_prefetch = 1,                  \
        .max_threads = (t), .max_read = (r), .max_decode = (d),                \
        .max_prefetch = (p)                                                    \
    }

/* A random minibatch whose ratios stay clear of the clip's kinks (where the
 * loss has no derivative) by at least 0.02. */
typedef struct batch {
    int n;
    double obs[8 * SL_RL_NOBS], logp_old[8], adv[8], ret[8];
    uint8_t act[8 * SL_MLP_MAX_KNOBS], mask[8 * SL_MLP_MAX_LOGITS];
} batch_t;

static double normal(sl__rng_t *r)
{
    double u = sl__rng_double(r) + 1e-12, v = sl__rng_double(r);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

static void make_batch(const sl__mlp_t *m, const sl__ppo_hp_t *hp,
                       uint64_t seed, batch_t *b)
{
    sl__rng_t r;
    sl__rng_init(&r, seed, 1, 2, 3);
    b->n = 8;
    int nk = m->n_knobs;
    for (int i = 0; i < b->n; i++) {
        double *x = b->obs + i * m->n_in;
        for (int j = 0; j < m->n_in; j++)
            x[j] = normal(&r);
        uint8_t *mk = b->mask + i * nk * 3;
        uint8_t *a = b->act + i * nk;
        for (int k = 0; k < nk; k++) {
            mk[k * 3 + 0] = sl__rng_double(&r) < 0.7;
            mk[k * 3 + 1] = 1;
            mk[k * 3 + 2] = sl__rng_double(&r) < 0.7;
            do
                a[k] = (uint8_t)sl__rng_below(&r, 3);
            while (!mk[k * 3 + a[k]]);
        }
        double z[SL_MLP_MAX_LOGITS], v, p[SL_MLP_MAX_LOGITS],
            lp[SL_MLP_MAX_LOGITS];
        sl__mlp_forward(m, x, NULL, z, &v);
        sl__ppo_probs(z, mk, nk, p, lp);
        double logp = 0;
        for (int k = 0; k < nk; k++)
            logp += lp[3 * k + a[k]];
        /* ratio r = exp(logp - old): spread over [0.6, 1.5], away from the
         * kinks at 1 +- clip. */
        double ratio;
        do
            ratio = sl__rng_uniform(&r, 0.6, 1.5);
        while (fabs(ratio - (1 - hp->clip)) < 0.02 ||
               fabs(ratio - (1 + hp->clip)) < 0.02);
        b->logp_old[i] = logp - log(ratio);
        b->adv[i] = normal(&r);
        b->ret[i] = normal(&r);
    }
}

/* Both kinds of policy: the CPU knobs' (24 inputs, 3 heads) and one that
 * places (29 inputs, 4 heads). */
static void gradient_check(int n_in, int n_knobs)
{
    sl__mlp_t m;
    assert_int_equal(sl__mlp_init(&m, n_in, 64, n_knobs), 0);
    sl__mlp_randomize(&m, 7);
    /* A livelier policy head than the 0.01-gain start, so that the
     * probabilities differ and every gradient term is exercised. */
    for (size_t i = m.n_params - 1 - 64 - (size_t)n_knobs * 3 * 65;
         i < m.n_params - 65; i++)
        m.w[i] *= 100;
    sl__ppo_hp_t hp;
    sl__ppo_hp_default(&hp);
    hp.ent_coef = 0.05; /* make the entropy term count */
    batch_t b;
    make_batch(&m, &hp, 11, &b);
    double *g = malloc(m.n_params * sizeof *g);
    sl__ppo_stats_t st;
    sl__ppo_loss(&m, &hp, b.obs, b.act, b.mask, b.logp_old, b.adv, b.ret, b.n,
                 g, &st);
    assert_true(st.clip_frac > 0 && st.clip_frac < 1); /* both branches */
    const double h = 1e-6;
    double worst = 0, worst_abs = 0;
    size_t zero = 0;
    for (size_t i = 0; i < m.n_params; i++) {
        double keep = m.w[i];
        m.w[i] = keep + h;
        double lp = sl__ppo_loss(&m, &hp, b.obs, b.act, b.mask, b.logp_old,
                                 b.adv, b.ret, b.n, NULL, NULL);
        m.w[i] = keep - h;
        double lm = sl__ppo_loss(&m, &hp, b.obs, b.act, b.mask, b.logp_old,
                                 b.adv, b.ret, b.n, NULL, NULL);
        m.w[i] = keep;
        double fd = (lp - lm) / (2 * h);
        double err = fabs(fd - g[i]) / (1e-6 + fabs(fd) + fabs(g[i]));
        if (fabs(fd) > 1e-5 && err > worst)
            worst = err;
        if (fabs(fd - g[i]) > worst_abs)
            worst_abs = fabs(fd - g[i]);
        zero += g[i] == 0;
        if (fabs(fd - g[i]) > 1e-7 && err > 1e-4)
            fail_msg("parameter %zu: analytic %.9g, finite difference %.9g", i,
                     g[i], fd);
    }
    print_message("gradient check: %zu parameters, worst absolute error "
                  "%.2e, worst relative %.2e (where |g| > 1e-5), %zu exactly "
                  "zero\n",
                  m.n_params, worst_abs, worst, zero);
    assert_true(zero < m.n_params / 10);
    free(g);
    sl__mlp_free(&m);
}

static void test_gradient_matches_finite_differences(void **state)
{
    (void)state;
    gradient_check(SL_RL_NOBS_CPU, SL_RL_KNOBS_CPU);
    gradient_check(SL_RL_NOBS, SL_RL_KNOBS_PLACE);
}

/* A contextual bandit whose best action is known: knob 0 should step +1
 * when x[0] > 0 and -1 otherwise, knob 1 stay, knob 2 step +1 when
 * x[1] > 0 and stay otherwise. Reward: the share of knobs right. A
 * uniform policy scores 1/3; PPO must pass 0.9 within 40 updates. */
static double bandit_reward(const double *x, const uint8_t *a)
{
    int want0 = x[0] > 0 ? 2 : 0, want2 = x[1] > 0 ? 2 : 1;
    return ((a[0] == want0) + (a[1] == 1) + (a[2] == want2)) / 3.0;
}

static void test_ppo_learns_a_contextual_bandit(void **state)
{
    (void)state;
    sl__rl_policy_t pol;
    assert_int_equal(sl__rl_policy_init(&pol, 32, 0, 5), 0);
    sl__ppo_hp_t hp;
    sl__ppo_hp_default(&hp);
    hp.lr = 3e-3;
    hp.minibatch = 64;
    hp.gamma = 0; /* one-step episodes */
    sl__ppo_t ppo;
    sl__ppo_buf_t buf;
    assert_int_equal(sl__ppo_init(&ppo, &hp, &pol.net), 0);
    assert_int_equal(sl__ppo_buf_init(&buf, 256, pol.net.n_in, pol.net.n_knobs),
                     0);
    sl__rng_t r;
    sl__rng_init(&r, 42, 0, 0, 9);
    sl__limits_t lim = LIMITS(64, 8, 32, 16);
    sl__knobs_t cur = {4, 8, 4, 0}, next;
    double first = -1, last = 0;
    int passed_at = -1;
    for (int u = 0; u < 40 && passed_at < 0; u++) {
        double sum = 0;
        buf.n = 0;
        for (int i = 0; i < buf.cap; i++) {
            double raw[SL_RL_NOBS];
            for (int j = 0; j < SL_RL_NOBS; j++)
                raw[j] = normal(&r);
            sl__rl_decision_t d;
            sl__rl_decide(&pol, raw, &lim, &cur, 0, &r, &d, &next);
            double rew = bandit_reward(raw, d.act);
            sum += rew;
            int at = sl__ppo_buf_add(&buf, d.x, d.act, d.mask, d.logp, d.value);
            sl__ppo_buf_reward(&buf, at, rew);
            sl__ppo_buf_end(&buf, 0);
        }
        last = sum / buf.cap;
        if (first < 0)
            first = last;
        if (last > 0.9)
            passed_at = u;
        sl__ppo_stats_t st;
        assert_int_equal(sl__ppo_update(&ppo, &pol.net, &buf, &r, &st), 0);
    }
    print_message("bandit: mean reward %.3f at first, %.3f after %d "
                  "updates\n",
                  first, last, passed_at);
    assert_true(first < 0.5);
    assert_true(passed_at >= 0);
    sl__ppo_buf_free(&buf);
    sl__ppo_free(&ppo);
    sl__rl_policy_free(&pol);
}

static void test_gae_matches_a_hand_computation(void **state)
{
    (void)state;
    sl__ppo_buf_t b;
    assert_int_equal(sl__ppo_buf_init(&b, 4, 1, 3), 0);
    double x = 0;
    uint8_t a[3] = {1, 1, 1}, mk[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    double v[4] = {0.5, 1.0, -0.5, 2.0}, rw[4] = {1, 0, 2, -1};
    for (int i = 0; i < 4; i++) {
        sl__ppo_buf_add(&b, &x, a, mk, 0, v[i]);
        sl__ppo_buf_reward(&b, i, rw[i]);
        if (i == 1)
            sl__ppo_buf_end(&b, 0.0); /* terminal */
    }
    sl__ppo_buf_end(&b, 3.0); /* truncated: bootstrap 3 */
    double g = 0.9, l = 0.8;
    sl__ppo_gae(&b, g, l);
    double d3 = -1 + g * 3.0 - 2.0, d2 = 2 + g * 2.0 + 0.5;
    double d1 = 0 + 0 - 1.0, d0 = 1 + g * 1.0 - 0.5;
    assert_float_equal(b.adv[3], d3, 1e-12);
    assert_float_equal(b.adv[2], d2 + g * l * d3, 1e-12);
    assert_float_equal(b.adv[1], d1, 1e-12);
    assert_float_equal(b.adv[0], d0 + g * l * d1, 1e-12);
    assert_float_equal(b.ret[0], b.adv[0] + 0.5, 1e-12);
    sl__ppo_buf_free(&b);
}

/* Whatever the weights and the knobs, decisions stay within the limits,
 * fixed knobs stay put, and probabilities of masked steps are 0; for a
 * policy that places, the share stays within 0..max, put when not tuned,
 * and never rises while NVML says the GPU is full. */
static void test_decisions_never_cross_the_budgets(void **state)
{
    (void)state;
    sl__rng_t r;
    sl__rng_init(&r, 3, 0, 0, 1);
    int share_moves = 0;
    for (int trial = 0; trial < 3000; trial++) {
        sl__rl_policy_t pol;
        int places = trial % 3 == 0;
        assert_int_equal(sl__rl_policy_init(&pol, 16, places, (uint64_t)trial),
                         0);
        for (size_t i = 0; i < pol.net.n_params; i++)
            pol.net.w[i] *= 30; /* confident, extreme policies */
        sl__limits_t lim;
        memset(&lim, 0, sizeof lim);
        lim.max_gpu_share = sl__rng_double(&r) < 0.7 ? 1000 : 0;
        lim.tune_gpu_share = lim.max_gpu_share && sl__rng_double(&r) < 0.8;
        int gpu_full = sl__rng_double(&r) < 0.3;
        lim.tune_read = sl__rng_double(&r) < 0.8;
        lim.tune_decode = sl__rng_double(&r) < 0.8;
        lim.tune_prefetch = sl__rng_double(&r) < 0.8;
        lim.max_threads = 2 + (int)sl__rng_below(&r, 10);
        lim.max_read = 1 + (int)sl__rng_below(&r, 8);
        lim.max_decode = lim.max_threads - 1;
        lim.max_prefetch = 1 + (int)sl__rng_below(&r, 16);
        sl__knobs_t cur;
        memset(&cur, 0, sizeof cur);
        cur.gpu_share = lim.max_gpu_share ? 50 * (int)sl__rng_below(&r, 21) : 0;
        cur.read_threads = 1 + (int)sl__rng_below(&r, lim.max_read);
        cur.decode_threads = 1 + (int)sl__rng_below(&r, lim.max_decode);
        cur.prefetch = 1 + (int)sl__rng_below(&r, lim.max_prefetch);
        double raw[SL_RL_NOBS];
        for (int j = 0; j < SL_RL_NOBS; j++)
            raw[j] = normal(&r);
        sl__rl_decision_t d;
        sl__knobs_t next;
        sl__rl_decide(&pol, raw, &lim, &cur, gpu_full, trial % 2 ? &r : NULL,
                      &d, &next);
        assert_true(next.read_threads >= 1 &&
                    next.read_threads <= lim.max_read);
        assert_true(next.decode_threads >= 1 &&
                    next.decode_threads <= lim.max_decode);
        /* CPU threads: decode + 1 for the read stage; read threads are
         * I/O depth, within max_read only. */
        assert_true(next.decode_threads + 1 <= lim.max_threads);
        assert_true(next.prefetch >= 1 && next.prefetch <= lim.max_prefetch);
        if (!lim.tune_read)
            assert_int_equal(next.read_threads, cur.read_threads);
        if (!lim.tune_decode)
            assert_int_equal(next.decode_threads, cur.decode_threads);
        if (!lim.tune_prefetch)
            assert_int_equal(next.prefetch, cur.prefetch);
        assert_true(next.gpu_share >= 0 && next.gpu_share <= lim.max_gpu_share);
        if (!places || !lim.tune_gpu_share)
            assert_int_equal(next.gpu_share, cur.gpu_share);
        if (gpu_full)
            assert_true(next.gpu_share <= cur.gpu_share);
        share_moves += next.gpu_share != cur.gpu_share;
        assert_int_equal(d.n_knobs, places ? 4 : 3);
        for (int q = 0; q < 3 * d.n_knobs; q++)
            if (!d.mask[q])
                assert_true(d.prob[q] == 0);
        double s = 0;
        for (int q = 0; q < 3 * d.n_knobs; q++)
            s += d.prob[q];
        assert_float_equal(s, d.n_knobs, 1e-9);
        sl__rl_policy_free(&pol);
    }
    assert_true(share_moves > 100); /* the share head does move it */
}

static void test_reason_carries_the_probabilities(void **state)
{
    (void)state;
    sl__rl_policy_t pol;
    for (int places = 0; places < 2; places++) {
        assert_int_equal(sl__rl_policy_init(&pol, 8, places, 1), 0);
        sl__limits_t lim = LIMITS(8, 4, 7, 16);
        lim.max_gpu_share = 1000;
        lim.tune_gpu_share = 1;
        sl__knobs_t cur = {1, 4, 4, 0}, next;
        double raw[SL_RL_NOBS] = {0};
        sl__rl_decision_t d;
        sl__rl_decide(&pol, raw, &lim, &cur, 0, NULL, &d, &next);
        char why[200];
        sl__rl_reason(&d, why, sizeof why);
        assert_non_null(strstr(why, "rl: read "));
        assert_non_null(strstr(why, "decode "));
        assert_non_null(strstr(why, "prefetch "));
        assert_true(!strstr(why, "gpu_share ") == !places);
        assert_non_null(strstr(why, "(p 0.")); /* near-uniform start */
        assert_true(strlen(why) < sizeof why - 1);
        sl__rl_policy_free(&pol);
    }
}

/* ------------------------------------------------------- weights file */

static void test_weights_file_round_trip_and_errors(void **state)
{
    (void)state;
    sl__rl_policy_t p, q;
    assert_int_equal(sl__rl_policy_init(&p, 64, 0, 9), 0);
    for (int i = 0; i < SL_RL_NOBS; i++) {
        p.mean[i] = 0.1 * i;
        p.sd[i] = 0.5 + 0.01 * i;
    }
    char *dir = tu_tmpdir("rl");
    char path[4096];
    snprintf(path, sizeof path, "%s/p.bin", dir);
    char err[512];
    assert_int_equal(sl__rl_policy_save(path, &p, err, sizeof err), 0);
    assert_int_equal(sl__rl_policy_load(path, &q, err, sizeof err), 0);
    assert_int_equal(q.net.n_hid, 64);
    for (size_t i = 0; i < p.net.n_params; i++)
        assert_true(q.net.w[i] == (double)(float)p.net.w[i]);
    for (int i = 0; i < SL_RL_NOBS_CPU; i++)
        assert_true(q.sd[i] == (double)(float)p.sd[i]);
    for (int i = SL_RL_NOBS_CPU; i < SL_RL_NOBS; i++)
        assert_true(q.sd[i] == 1); /* features it does not read */
    sl__rl_policy_free(&q);

    size_t n;
    uint8_t *bytes = tu_read_file(path, &n);
    assert_non_null(bytes);
    assert_int_equal(n, 32 + 8 * SL_RL_NOBS_CPU + 4 * p.net.n_params + 8);
    /* One flipped weight bit: the checksum. */
    bytes[200] ^= 1;
    tu_write_file(path, bytes, n);
    assert_int_equal(sl__rl_policy_load(path, &q, err, sizeof err),
                     SL_ECHECKSUM);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "checksum"));
    bytes[200] ^= 1;
    /* Truncated. */
    tu_write_file(path, bytes, n - 5);
    assert_int_equal(sl__rl_policy_load(path, &q, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "truncated"));
    /* Another version, another feature count, no magic. */
    uint8_t *c = malloc(n);
    memcpy(c, bytes, n);
    c[8] = 2;
    assert_int_equal(sl__rl_policy_parse(c, n, &q, err, sizeof err),
                     SL_EUNSUPPORTED);
    assert_non_null(strstr(err, "version 2"));
    memcpy(c, bytes, n);
    c[12] = SL_RL_NOBS_CPU + 1;
    assert_int_equal(sl__rl_policy_parse(c, n, &q, err, sizeof err),
                     SL_EUNSUPPORTED);
    assert_non_null(strstr(err, "features"));
    /* The CPU knobs' features with the share head: not a kind. */
    memcpy(c, bytes, n);
    c[20] = SL_RL_KNOBS_PLACE;
    assert_int_equal(sl__rl_policy_parse(c, n, &q, err, sizeof err),
                     SL_EUNSUPPORTED);
    memcpy(c, bytes, n);
    c[0] = 'X';
    assert_int_equal(sl__rl_policy_parse(c, n, &q, err, sizeof err),
                     SL_ECORRUPT);
    /* Missing file: named, with the cause. */
    snprintf(path, sizeof path, "%s/none.bin", dir);
    assert_int_equal(sl__rl_policy_load(path, &q, err, sizeof err),
                     SL_ENOTFOUND);
    assert_non_null(strstr(err, "none.bin"));
    assert_non_null(strstr(err, "No such file"));
    /* Not a regular file (a directory, a FIFO): refused, named (fread of
     * a FIFO waited for a writer; base/file's one rule for small files). */
    assert_int_not_equal(sl__rl_policy_load(dir, &q, err, sizeof err), 0);
    assert_non_null(strstr(err, "directory"));
    free(c);
    free(bytes);
    tu_rmtree(dir);
    free(dir);
    sl__rl_policy_free(&p);
}

/* A zero sd would divide by zero in every decision: refused, even with a
 * right checksum. */
static void test_weights_file_refuses_bad_constants(void **state)
{
    (void)state;
    sl__rl_policy_t p, q;
    assert_int_equal(sl__rl_policy_init(&p, 4, 0, 1), 0);
    p.sd[3] = 0;
    size_t n = sl__rl_policy_serialize(&p, NULL, 0);
    uint8_t *b = malloc(n);
    sl__rl_policy_serialize(&p, b, n);
    char err[256];
    assert_int_equal(sl__rl_policy_parse(b, n, &q, err, sizeof err),
                     SL_ECORRUPT);
    assert_non_null(strstr(err, "feature 3"));
    free(b);
    sl__rl_policy_free(&p);
}

/* The built-in default, when this build has one, parses. */
static void test_default_policy_parses_when_built_in(void **state)
{
    (void)state;
    sl__rl_policy_t p;
    char err[256];
    int rc = sl__rl_policy_default(&p, err, sizeof err);
    if (rc == SL_ENOTFOUND) {
        print_message("no built-in default policy: %s\n", err);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(p.net.n_in, SL_RL_NOBS_CPU);
    sl__rl_policy_free(&p);
}

/* With SL_GEN_CORPUS=DIR set, writes the fuzz seed corpus into DIR (see
 * fuzz/corpus/fuzz_policy/): small valid policies and damaged copies. */
static void test_gen_corpus(void **state)
{
    (void)state;
    const char *out = getenv("SL_GEN_CORPUS");
    if (!out || !*out)
        return;
    for (int h = 1; h <= 7; h += 3) {
        sl__rl_policy_t p;
        int places = h == 7; /* a policy with the share head */
        assert_int_equal(sl__rl_policy_init(&p, h, places, (uint64_t)h), 0);
        size_t n = sl__rl_policy_serialize(&p, NULL, 0);
        uint8_t *b = malloc(n);
        sl__rl_policy_serialize(&p, b, n);
        char name[64];
        const char *kind = places ? "_place" : "";
        snprintf(name, sizeof name, "valid_h%d%s.bin", h, kind);
        tu_write_at(out, name, b, n);
        snprintf(name, sizeof name, "truncated_h%d%s.bin", h, kind);
        tu_write_at(out, name, b, n / 2);
        b[40] ^= 0x80;
        snprintf(name, sizeof name, "badsum_h%d%s.bin", h, kind);
        tu_write_at(out, name, b, n);
        b[16] = 200; /* hidden size that does not fit the length */
        snprintf(name, sizeof name, "badsize_h%d%s.bin", h, kind);
        tu_write_at(out, name, b, n);
        free(b);
        sl__rl_policy_free(&p);
    }
    tu_write_at(out, "magic_only.bin", "SLPOLICY", 8);
}

/* ------------------------------------------------- features and reward */

static void window(sl_snapshot_t *w, double stall, double wait_ms, double dbusy,
                   int ready)
{
    memset(w, 0, 5 * sizeof *w);
    for (int i = 0; i < 5; i++) {
        w[i].interval_s = 0.1;
        w[i].ncpu = 8;
        w[i].cpu_self = 0.4;
        w[i].cpu_other = -1; /* unreadable */
        w[i].psi_cpu_some = -1;
        w[i].mem_total_bytes = 1000;
        w[i].mem_available_bytes = 250;
        w[i].stall_fraction = stall;
        w[i].consumer_wait_ms = wait_ms;
        w[i].samples_per_s = 1000 + 100 * (i - 2);
        w[i].decode.busy = dbusy;
        w[i].decode.items_per_s = 1000;
        w[i].read.busy = 0.1;
        w[i].read.items_per_s = 1000;
        w[i].read.queue_capacity = 32;
        w[i].read.queue_depth = 16;
        w[i].prefetch = 4;
        w[i].batches_ready = ready;
    }
}

static void test_features_are_bounded_and_mean_what_they_say(void **state)
{
    (void)state;
    sl_snapshot_t w[5];
    window(w, 0.5, 40, 0.25, 2);
    sl__limits_t lim = LIMITS(16, 8, 15, 16);
    sl__knobs_t cur = {2, 6, 8, 0};
    double o[SL_RL_NOBS];
    sl__rl_features(w, 5, &lim, &cur, o);
    for (int i = 0; i < SL_RL_NOBS; i++)
        assert_true(o[i] >= -1 && o[i] <= 1);
    assert_float_equal(o[0], 0.4, 1e-12);  /* own CPU */
    assert_float_equal(o[1], 0, 1e-12);    /* unreadable: 0 */
    assert_float_equal(o[3], 0.25, 1e-12); /* memory headroom */
    assert_float_equal(o[7], 0.5, 1e-12);  /* read queue fill */
    assert_float_equal(o[9], 0.5, 1e-12);  /* batches ready / prefetch */
    assert_float_equal(o[10], 0.5, 1e-12); /* stall */
    assert_true(o[14] > 0);                /* throughput rising */
    assert_float_equal(o[17], 6.0 / 15, 1e-12);
    assert_float_equal(o[19], 0.5, 1e-12);
    assert_float_equal(o[20], 0.5, 1e-12); /* log2(8) / 6 */
    /* Decoders busy 25 % for today's rate: 4x capacity, log2 4 / 4. */
    assert_float_equal(o[22], 0.5, 1e-9);
}

static void test_reward_prices_wait_idle_and_resources(void **state)
{
    (void)state;
    sl_snapshot_t w[5];
    sl__limits_t lim = LIMITS(16, 8, 15, 16);
    sl__knobs_t small = {1, 3, 4, 0}, big = {4, 12, 16, 0};
    window(w, 0, 0, 0.5, 2);
    double calm_small = sl__rl_reward(w, 5, &lim, &small, 0, NULL);
    double calm_big = sl__rl_reward(w, 5, &lim, &big, 0, NULL);
    assert_true(calm_small > calm_big); /* idle resources cost */
    /* 0.25 + 0.25 of the budgets held: U = 0.25. */
    assert_float_equal(calm_small, -SL_RL_MU * 0.25 * 1.0, 1e-12);
    window(w, 0.3, 50, 0.5, 0);
    double stalled = sl__rl_reward(w, 5, &lim, &small, 0, NULL);
    assert_float_equal(stalled, calm_small - 0.5 - SL_RL_LAMBDA * 0.3, 1e-12);
}

/* The GPU stage's features and the reward's GPU terms. */
static void test_gpu_features_and_reward(void **state)
{
    (void)state;
    sl_snapshot_t w[5];
    window(w, 0, 0, 0.5, 2);
    for (int i = 0; i < 5; i++) {
        w[i].gpu_stage_busy = 0.25;
        w[i].gpu_samples_per_s = 500; /* 2000/s busy: 2x the rate */
    }
    sl__limits_t lim = LIMITS(16, 8, 15, 16);
    sl__knobs_t cur = {1, 3, 4, 300};
    double o[SL_RL_NOBS];
    sl__rl_features(w, 5, &lim, &cur, o);
    assert_float_equal(o[24], 0.3, 1e-12); /* the share */
    assert_float_equal(o[25], 0.25, 1e-12);
    assert_float_equal(o[26], 0.25, 1e-9); /* log2 2 / 4 */
    /* 1000 samples/s, never waiting: 1 ms = 1000 us a sample. */
    assert_float_equal(o[27], log10(1001) / 4, 1e-9);
    assert_true(o[28] < 0); /* the rate rises: each sample takes less */

    /* A policy that does not place: the CPU knobs' reward alone. */
    double ref = 0;
    lim.max_gpu_share = 1000;
    lim.tune_gpu_share = 1;
    double cpu = sl__rl_reward(w, 5, &lim, &cur, 0, &ref);
    assert_true(ref == 0);
    double r1 = sl__rl_reward(w, 5, &lim, &cur, 1, &ref);
    assert_float_equal(ref, 1e-3, 1e-15); /* the reference: 1 ms */
    assert_float_equal(r1, cpu - SL_RL_NU * 0.3, 1e-12);
    /* The trainer slowed by a quarter (the GPU work beside its step), at
     * no wait: charged against the reference let rise 1 %. */
    for (int i = 0; i < 5; i++)
        w[i].samples_per_s = 800 + 80 * (i - 2);
    double r2 = sl__rl_reward(w, 5, &lim, &cur, 1, &ref);
    assert_float_equal(ref, 1.01e-3, 1e-15);
    assert_float_equal(r2, r1 - SL_RL_KAPPA * log(1.25 / 1.01), 1e-9);
    /* Faster: a new reference, nothing charged. */
    for (int i = 0; i < 5; i++)
        w[i].samples_per_s = 2000;
    assert_float_equal(sl__rl_reward(w, 5, &lim, &cur, 1, &ref), r1, 1e-12);
    assert_float_equal(ref, 0.5e-3, 1e-15);
    /* Back at 1 ms: the fast window's reference fades within 70 windows
     * (1.01^70 > 2), and then nothing is charged. */
    for (int i = 0; i < 5; i++)
        w[i].samples_per_s = 1000;
    double r = 0;
    for (int t = 0; t < 80; t++)
        r = sl__rl_reward(w, 5, &lim, &cur, 1, &ref);
    assert_float_equal(ref, 1e-3, 1e-15);
    assert_float_equal(r, r1, 1e-12);
}

/* Widening a policy of the CPU knobs keeps every decision it made: the
 * same probabilities on the three knobs whatever the GPU features say,
 * and a uniform share head to start from. */
static void test_widen_keeps_the_cpu_decisions(void **state)
{
    (void)state;
    sl__rng_t r;
    sl__rng_init(&r, 8, 0, 0, 2);
    sl__rl_policy_t a, b;
    assert_int_equal(sl__rl_policy_init(&a, 16, 0, 4), 0);
    for (size_t i = 0; i < a.net.n_params; i++)
        a.net.w[i] *= 30;
    for (int i = 0; i < SL_RL_NOBS_CPU; i++) {
        a.mean[i] = 0.1 * i;
        a.sd[i] = 0.5 + 0.05 * i;
    }
    assert_int_equal(sl__rl_policy_widen(&b, &a), 0);
    assert_true(sl__rl_places(&b) && !sl__rl_places(&a));
    assert_int_equal(b.net.n_in, SL_RL_NOBS);
    sl__limits_t lim = LIMITS(16, 8, 15, 16);
    lim.max_gpu_share = 1000;
    lim.tune_gpu_share = 1;
    sl__knobs_t cur = {2, 6, 8, 500}, na, nb;
    for (int t = 0; t < 200; t++) {
        double raw[SL_RL_NOBS];
        for (int j = 0; j < SL_RL_NOBS; j++)
            raw[j] = normal(&r);
        sl__rl_decision_t da, db;
        sl__rl_decide(&a, raw, &lim, &cur, 0, NULL, &da, &na);
        sl__rl_decide(&b, raw, &lim, &cur, 0, NULL, &db, &nb);
        for (int q = 0; q < 9; q++)
            assert_float_equal(da.prob[q], db.prob[q], 1e-12);
        for (int q = 9; q < 12; q++)
            assert_float_equal(db.prob[q], 1.0 / 3, 1e-12);
        assert_int_equal(na.read_threads, nb.read_threads);
        assert_int_equal(na.decode_threads, nb.decode_threads);
        assert_int_equal(na.prefetch, nb.prefetch);
        assert_float_equal(da.value, db.value, 1e-12);
    }
    sl__rl_policy_free(&a);
    sl__rl_policy_free(&b);
}

/* Training a policy that places: a GPU stage in most profiles, its share
 * moved by the policy; held-out, the heuristic's rule and the policy
 * place (share > 0) where static does not. */
static void test_training_with_a_gpu_stage(void **state)
{
    (void)state;
    sl__rl_policy_t pol;
    assert_int_equal(sl__rl_policy_init(&pol, 16, 1, 3), 0);
    sl__train_opts_t o = {
        .seed = 5, .steps = 1024, .episode_s = 20, .rollout = 512, .gpu = 1};
    assert_int_equal(sl__train_normalise(&o, &pol, 0), 0);
    assert_true(pol.sd[24] > 0.05); /* the share did move */
    assert_int_equal(sl__train_ppo(&o, &pol), 0);
    sl__eval_score_t m[SL_EVAL_NPOL];
    assert_int_equal(sl__train_evaluate(&o, &pol, 4, m, NULL, NULL), 0);
    assert_true(m[SL_EVAL_STATIC].share == 0);
    assert_true(m[SL_EVAL_RL].share > 0);
    print_message("held-out share: rl %.0f, heuristic %.0f per mille\n",
                  m[SL_EVAL_RL].share, m[SL_EVAL_HEURISTIC].share);
    sl__rl_policy_free(&pol);
}

/* --------------------------------------------------------------- guard */

static void test_guard_trips_only_on_lasting_degradation(void **state)
{
    (void)state;
    sl__rl_guard_t g;
    sl__rl_guard_init(&g, 20, 10, 0.05, 0.25);
    sl__rng_t r;
    sl__rng_init(&r, 1, 0, 0, 0);
    /* Steady reward around -0.4 with noise: never trips. */
    for (int i = 0; i < 500; i++)
        assert_int_equal(
            sl__rl_guard_feed(&g, -0.4 + 0.1 * sl__rng_uniform(&r, -1, 1)), 0);
    /* A short dip of 2 bad windows: the average recovers in time. */
    for (int i = 0; i < 2; i++)
        assert_int_equal(sl__rl_guard_feed(&g, -1.5), 0);
    for (int i = 0; i < 50; i++)
        assert_int_equal(sl__rl_guard_feed(&g, -0.4), 0);
    /* Improvement never trips. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(sl__rl_guard_feed(&g, -0.1), 0);
    /* Lasting degradation: trips, after the average falls below
     * -0.4 - 0.05 - 0.1 and stays there 10 decisions. */
    int at = -1;
    for (int i = 0; i < 100 && at < 0; i++)
        if (sl__rl_guard_feed(&g, -1.0))
            at = i;
    assert_true(at >= 10 && at < 40);
    assert_int_equal(sl__rl_guard_feed(&g, 0.0), 1); /* for good */
}

/* The scheduler with learn on: updates happen, and a reward collapse hands
 * the knobs to the heuristic, with a reason that says so. */
static void test_sched_learns_online_and_falls_back(void **state)
{
    (void)state;
    sl__rl_policy_t pol;
    assert_int_equal(sl__rl_policy_init(&pol, 16, 0, 3), 0);
    sl__rl_sched_t s;
    assert_int_equal(sl__rl_sched_init(&s, &pol, 1, 7), 0);
    sl__limits_t lim = LIMITS(64, 8, 63, 64);
    sl__knobs_t cur = {1, 4, 4, 0}, next;
    sl_snapshot_t w[5];
    char why[160];
    int i;
    for (i = 0; i < 140; i++) {
        window(w, 0.0, 0, 0.5, 2);
        sl__rl_sched_step(&s, w, 5, &lim, &cur, &next, why, sizeof why);
        assert_non_null(strstr(why, "rl:"));
        cur = next;
    }
    assert_true(s.updates >= 2);
    assert_int_equal(s.fallback, 0);
    for (i = 0; i < 100 && !s.fallback; i++) {
        window(w, 0.8, 300, 1.0, 0);
        sl__rl_sched_step(&s, w, 5, &lim, &cur, &next, why, sizeof why);
        cur = next;
    }
    assert_int_equal(s.fallback, 1);
    assert_non_null(strstr(why, "heuristic"));
    /* From now on the heuristic decides: a stall with busy decoders gets
     * a decoder if there is room. */
    cur = (sl__knobs_t){1, 4, 4, 0};
    window(w, 0.4, 50, 0.95, 0);
    int mask = sl__rl_sched_step(&s, w, 5, &lim, &cur, &next, why, sizeof why);
    assert_int_equal(mask, 1 << SL_KNOB_DECODE);
    assert_null(strstr(why, "rl:"));
    sl__rl_sched_free(&s);
}

/* A policy that places, learning online, whose guard trips: the
 * heuristic takes the CPU knobs and the placement rule the share (the
 * policy no longer says it places, so the tick runs the rule). */
static void test_a_placing_policy_that_falls_back_leaves_the_share(void **state)
{
    (void)state;
    sl__rl_policy_t pol;
    assert_int_equal(sl__rl_policy_init(&pol, 16, 1, 3), 0);
    /* The share head keeps the share (bp[3 x 3 + 1]): a calm run's reward
     * stays level. */
    pol.net.w[pol.net.n_params - (size_t)pol.net.n_hid - 3] = 20;
    sl__policy_t *p = sl__policy_rl(&pol, 1, 7);
    assert_non_null(p);
    assert_int_equal(p->places, 1);
    sl__limits_t lim = LIMITS(64, 8, 63, 64);
    lim.max_gpu_share = 1000;
    lim.tune_gpu_share = 1;
    sl__knobs_t cur = {1, 4, 4, 0}, next;
    sl_snapshot_t w[5];
    char why[200];
    for (int i = 0; i < 25; i++) { /* past the guard's 20 to start */
        window(w, 0.0, 0, 0.5, 2);
        p->step(p, w, 5, &lim, &cur, &next, why, sizeof why);
        cur = next;
    }
    assert_int_equal(p->places, 1);
    for (int i = 0; i < 100 && p->places; i++) {
        window(w, 0.8, 300, 1.0, 0);
        p->step(p, w, 5, &lim, &cur, &next, why, sizeof why);
        cur = next;
    }
    assert_int_equal(p->places, 0);
    assert_non_null(strstr(why, "heuristic"));
    sl__policy_destroy(p);
}

static void count_model(void *ctx, const sl__train_progress_t *p)
{
    long *m = ctx;
    m[0] += p->model_windows;
    m[1] = p->decisions;
}

/* Training meets the windows the policy meets at run time: the stall
 * model's jump runs first (as in sl__rl_sched_step), and the windows it
 * decides are no experience for the policy. Random profiles include
 * fetch-bound starts, so some windows are the model's. */
static void test_training_runs_the_model_jump_first(void **state)
{
    (void)state;
    sl__rl_policy_t pol;
    assert_int_equal(sl__rl_policy_init(&pol, 16, 0, 3), 0);
    long m[2] = {0, 0};
    sl__train_opts_t o = {.seed = 5,
                          .steps = 2048,
                          .episode_s = 20,
                          .rollout = 512,
                          .on_update = count_model,
                          .ctx = m};
    assert_int_equal(sl__train_normalise(&o, &pol, 0), 0);
    assert_int_equal(sl__train_ppo(&o, &pol), 0);
    assert_int_equal(m[1], 2048); /* the policy's own decisions only */
    assert_true(m[0] > 0);
    assert_true(m[0] < m[1]); /* the model jumps, the policy steps */
    sl__rl_policy_free(&pol);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradient_matches_finite_differences),
        cmocka_unit_test(test_ppo_learns_a_contextual_bandit),
        cmocka_unit_test(test_gae_matches_a_hand_computation),
        cmocka_unit_test(test_decisions_never_cross_the_budgets),
        cmocka_unit_test(test_reason_carries_the_probabilities),
        cmocka_unit_test(test_weights_file_round_trip_and_errors),
        cmocka_unit_test(test_weights_file_refuses_bad_constants),
        cmocka_unit_test(test_default_policy_parses_when_built_in),
        cmocka_unit_test(test_gen_corpus),
        cmocka_unit_test(test_features_are_bounded_and_mean_what_they_say),
        cmocka_unit_test(test_reward_prices_wait_idle_and_resources),
        cmocka_unit_test(test_gpu_features_and_reward),
        cmocka_unit_test(test_widen_keeps_the_cpu_decisions),
        cmocka_unit_test(test_training_with_a_gpu_stage),
        cmocka_unit_test(test_guard_trips_only_on_lasting_degradation),
        cmocka_unit_test(test_sched_learns_online_and_falls_back),
        cmocka_unit_test(
            test_a_placing_policy_that_falls_back_leaves_the_share),
        cmocka_unit_test(test_training_runs_the_model_jump_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
