/* sluice train-policy: trains the RL scheduler (src/sched/rl.h) with PPO in
 * the simulator (src/sim) under domain randomisation, writes the weights
 * file, and judges the result on held-out random profiles against the
 * heuristic and a static configuration (docs/POLICY.md). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/telemetry.h"
#include "base/base.h"
#include "cli.h"
#include "sched/heuristic.h"
#include "sched/rl.h"
#include "sim/sim.h"

#define PERIOD 0.1 /* s: the telemetry period */
#define TICKS 5    /* periods per decision, as the loader */
#define EVAL_SEED_BASE 0x5eed0000ull

typedef struct targs {
    uint64_t seed;
    long steps;      /* decisions of training */
    const char *out; /* weights file */
    const char *profile, *init;
    double episode_s;
    int rollout, hidden, eval, quiet, detail;
    double lr;
    sl__sim_profile_t base;
    int have_base;
} targs_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice train-policy -o FILE [options]\n"
            "Trains the rl scheduling policy with PPO in the simulator on "
            "random profiles\n(domain randomisation), then compares rl, "
            "heuristic and static on held-out ones.\n"
            "  -o, --out FILE     weights file to write (docs/POLICY.md)\n"
            "  --seed S           everything random follows S (0)\n"
            "  --steps N          decisions of training, 0.5 s simulated "
            "each (200000)\n"
            "  --profile P.json   randomise around this profile (sluice "
            "calibrate) instead of the default\n"
            "  --episode-s T      simulated seconds per episode (60)\n"
            "  --rollout N        decisions per PPO update (2048)\n"
            "  --hidden H         hidden units per layer (64)\n"
            "  --lr LR            Adam step size (1e-3)\n"
            "  --init FILE        start from these weights (fine-tuning)\n"
            "  --eval N           held-out profiles for the final comparison "
            "(16; 0: none)\n"
            "  --detail           one evaluation line per held-out profile\n"
            "  --quiet            no progress lines\n");
}

/* The loader's budgets for a simulated machine (exec/loader.c
 * set_budgets with no user budget), sometimes capped by a random memory
 * budget so the policy meets small max_prefetch too. */
static void sim_limits(const sl__sim_profile_t *p, sl__rng_t *r,
                       sl__limits_t *lim)
{
    lim->tune_read = lim->tune_decode = lim->tune_prefetch = 1;
    lim->max_threads = 2 * p->ncpu;
    lim->max_read = sl__io_depth_budget(p->ncpu);
    lim->max_decode = lim->max_threads - 1;
    lim->min_decode = p->ncpu; /* the loader's default decode threads */
    int want = 2 * p->ncpu;
    lim->max_prefetch = want * 4 > 16 ? want * 4 : 16;
    if (r && sl__rng_double(r) < 0.3)
        lim->max_prefetch = 2 + (int)sl__rng_below(r, 7);
}

/* Where a loader with every knob on autotune starts: read 1, decode =
 * cores, prefetch 2 x decode. Training also starts from random knobs. */
static void start_knobs(const sl__sim_profile_t *p, const sl__limits_t *lim,
                        sl__rng_t *r, sl__knobs_t *k)
{
    k->read_threads = 1;
    k->decode_threads = p->ncpu;
    k->prefetch =
        2 * p->ncpu < lim->max_prefetch ? 2 * p->ncpu : lim->max_prefetch;
    if (r && sl__rng_double(r) < 0.5) {
        k->read_threads = 1 + (int)sl__rng_below(r, 3);
        k->decode_threads =
            1 + (int)sl__rng_below(r, (uint64_t)lim->max_threads - 1);
        k->prefetch = 1 + (int)sl__rng_below(r, (uint64_t)lim->max_prefetch);
    }
}

/* One decision period of simulated time: fills win[TICKS]. */
static void advance(sl__sim_t *sim, sl_snapshot_t *win)
{
    for (int i = 0; i < TICKS; i++)
        sl__sim_step(sim, PERIOD, &win[i]);
}

/* ------------------------------------------------------------ training */

typedef struct episode {
    sl__sim_profile_t prof;
    sl__limits_t lim;
    sl__knobs_t k;
    sl__sim_t *sim;
    sl_snapshot_t win[TICKS];
    int t, len; /* decisions taken, per episode */
} episode_t;

static int episode_start(episode_t *e, const targs_t *a, uint64_t n,
                         sl__rng_t *r)
{
    sl__sim_profile_random(a->seed * 1000003ull + n,
                           a->have_base ? &a->base : NULL, a->episode_s,
                           &e->prof);
    sim_limits(&e->prof, r, &e->lim);
    start_knobs(&e->prof, &e->lim, r, &e->k);
    e->sim = sl__sim_create(&e->prof, &e->k, a->seed ^ (n << 20));
    if (!e->sim)
        return SL_ENOMEM;
    e->t = 0;
    e->len = (int)(a->episode_s / (PERIOD * TICKS));
    advance(e->sim, e->win);
    return 0;
}

/* Feature means and spreads under the initial policy, frozen into the
 * weights file as its standardisation constants. */
static int fit_normalisation(const targs_t *a, sl__rl_policy_t *pol,
                             sl__rng_t *r)
{
    double s1[SL_RL_NOBS] = {0}, s2[SL_RL_NOBS] = {0};
    long n = 0;
    for (uint64_t ep = 0; n < 2000; ep++) {
        episode_t e;
        if (episode_start(&e, a, ~ep, r))
            return SL_ENOMEM;
        for (; e.t < e.len; e.t++) {
            double raw[SL_RL_NOBS];
            sl__rl_features(e.win, TICKS, &e.lim, &e.k, raw);
            for (int i = 0; i < SL_RL_NOBS; i++) {
                s1[i] += raw[i];
                s2[i] += raw[i] * raw[i];
            }
            n++;
            sl__rl_decision_t d;
            sl__knobs_t next;
            sl__rl_decide(pol, raw, &e.lim, &e.k, r, &d, &next);
            e.k = next;
            sl__sim_set_knobs(e.sim, &e.k);
            advance(e.sim, e.win);
        }
        sl__sim_destroy(e.sim);
    }
    for (int i = 0; i < SL_RL_NOBS; i++) {
        pol->mean[i] = s1[i] / n;
        double var = s2[i] / n - pol->mean[i] * pol->mean[i];
        /* A feature that hardly moves keeps unit scale. */
        pol->sd[i] = var > 1e-4 ? sqrt(var) : 1;
    }
    return 0;
}

static int train(const targs_t *a, sl__rl_policy_t *pol)
{
    sl__rng_t r;
    sl__rng_init(&r, a->seed, 0, 0, 0x7472); /* "tr" */
    sl__ppo_hp_t hp;
    sl__ppo_hp_default(&hp);
    if (a->lr > 0)
        hp.lr = a->lr;
    sl__ppo_t ppo;
    sl__ppo_buf_t buf;
    if (sl__ppo_init(&ppo, &hp, &pol->net))
        return SL_ENOMEM;
    if (sl__ppo_buf_init(&buf, a->rollout, SL_RL_NOBS)) {
        sl__ppo_free(&ppo);
        return SL_ENOMEM;
    }
    int tty = isatty(2);
    episode_t e;
    uint64_t episodes = 0;
    int rc = episode_start(&e, a, episodes++, &r);
    long done = 0;
    int64_t t0 = sl__now_ns();
    for (int u = 1; !rc && done < a->steps; u++) {
        double rsum = 0;
        buf.n = 0;
        while (buf.n < buf.cap) {
            double raw[SL_RL_NOBS];
            sl__rl_features(e.win, TICKS, &e.lim, &e.k, raw);
            sl__rl_decision_t d;
            sl__knobs_t next;
            sl__rl_decide(pol, raw, &e.lim, &e.k, &r, &d, &next);
            int i = sl__ppo_buf_add(&buf, d.x, d.act, d.mask, d.logp, d.value);
            e.k = next;
            sl__sim_set_knobs(e.sim, &e.k);
            advance(e.sim, e.win);
            double rew = sl__rl_reward(e.win, TICKS, &e.lim, &e.k);
            sl__ppo_buf_reward(&buf, i, rew);
            rsum += rew;
            done++;
            int over = ++e.t >= e.len;
            if (over || buf.n == buf.cap) {
                /* Time limits truncate: bootstrap from V(next state). */
                double nraw[SL_RL_NOBS], x[SL_RL_NOBS], z[SL_MLP_LOGITS], v;
                sl__rl_features(e.win, TICKS, &e.lim, &e.k, nraw);
                sl__rl_normalise(pol, nraw, x);
                sl__mlp_forward(&pol->net, x, NULL, z, &v);
                sl__ppo_buf_end(&buf, v);
            }
            if (over) {
                sl__sim_destroy(e.sim);
                if ((rc = episode_start(&e, a, episodes++, &r)))
                    break;
            }
        }
        if (rc)
            break;
        sl__ppo_stats_t st;
        if ((rc = sl__ppo_update(&ppo, &pol->net, &buf, &r, &st)))
            break;
        if (!a->quiet)
            fprintf(stderr,
                    "%supdate %3d  decisions %7ld  mean reward %8.4f  "
                    "entropy %.3f  kl %.4f  clip %.2f  v_loss %.3f  %.0f s%s",
                    tty ? "\r" : "", u, done, rsum / buf.n, st.entropy,
                    st.approx_kl, st.clip_frac, st.v_loss,
                    (sl__now_ns() - t0) / 1e9, tty ? "  " : "\n");
    }
    if (!a->quiet && tty)
        fputc('\n', stderr);
    sl__sim_destroy(e.sim);
    sl__ppo_buf_free(&buf);
    sl__ppo_free(&ppo);
    return rc;
}

/* ---------------------------------------------------------- evaluation */

enum { POL_RL = 0, POL_HEUR, POL_STATIC, NPOL };
static const char *pol_name[NPOL] = {"rl", "heuristic", "static"};

typedef struct score {
    double wait_ms;  /* consumer wait per batch */
    double stall;    /* consumer idle share */
    double cores;    /* loader CPU, cores */
    double rate;     /* samples/s */
    double reward;   /* mean per decision */
    double threads;  /* read + decode, mean */
    double prefetch; /* mean */
} score_t;

/* Held-out profile n: seeds training never draws. */
static void eval_profile(const targs_t *a, uint64_t n, sl__sim_profile_t *p)
{
    sl__sim_profile_random(EVAL_SEED_BASE + a->seed * 7919 + n,
                           a->have_base ? &a->base : NULL, a->episode_s, p);
}

static int run_one(const targs_t *a, const sl__rl_policy_t *pol, int which,
                   uint64_t n, score_t *sc)
{
    sl__sim_profile_t prof;
    eval_profile(a, n, &prof);
    sl__limits_t lim;
    sim_limits(&prof, NULL, &lim);
    sl__knobs_t k;
    start_knobs(&prof, &lim, NULL, &k);
    if (which == POL_STATIC) {
        k.read_threads = 1;
        k.decode_threads = prof.ncpu;
        k.prefetch = 2;
    }
    sl__sim_t *sim = sl__sim_create(&prof, &k, n);
    sl__rl_policy_t copy;
    sl__rl_sched_t rs;
    int have_rs = 0;
    if (!sim)
        return SL_ENOMEM;
    if (which == POL_RL) {
        if (sl__rl_policy_clone(&copy, pol) ||
            sl__rl_sched_init(&rs, &copy, 0, n)) {
            sl__sim_destroy(sim);
            return SL_ENOMEM;
        }
        have_rs = 1;
    }
    sl__heur_t h;
    sl__heur_init(&h);
    memset(sc, 0, sizeof *sc);
    int len = (int)(a->episode_s / (PERIOD * TICKS));
    double wait_s = 0, batches = 0, stall = 0, cpu = 0, samples = 0;
    sl_snapshot_t win[TICKS];
    for (int t = 0; t < len; t++) {
        advance(sim, win);
        for (int i = 0; i < TICKS; i++) {
            double nb = win[i].samples_per_s * PERIOD / prof.batch_size;
            wait_s += win[i].consumer_wait_ms / 1e3 * nb;
            batches += nb;
            stall += win[i].stall_fraction / (len * TICKS);
            cpu += win[i].cpu_self * prof.ncpu / (len * TICKS);
            samples += win[i].samples_per_s * PERIOD;
        }
        sc->reward += sl__rl_reward(win, TICKS, &lim, &k) / len;
        sc->threads += (double)(k.read_threads + k.decode_threads) / len;
        sc->prefetch += (double)k.prefetch / len;
        sl__knobs_t next = k;
        char why[160];
        if (which == POL_RL)
            sl__rl_sched_step(&rs, win, TICKS, &lim, &k, &next, why,
                              sizeof why);
        else if (which == POL_HEUR)
            sl__heur_step(&h, win, TICKS, &lim, &k, &next, why, sizeof why);
        if (memcmp(&next, &k, sizeof k)) {
            k = next;
            sl__sim_set_knobs(sim, &k);
        }
    }
    sc->wait_ms = batches > 0 ? wait_s * 1e3 / batches : 0;
    sc->stall = stall;
    sc->cores = cpu;
    sc->rate = samples / (len * TICKS * PERIOD);
    if (have_rs)
        sl__rl_sched_free(&rs);
    sl__sim_destroy(sim);
    return 0;
}

static int evaluate(const targs_t *a, const sl__rl_policy_t *pol)
{
    score_t mean[NPOL];
    memset(mean, 0, sizeof mean);
    if (a->detail)
        printf("%3s %4s %8s %8s %8s %6s  %s\n", "i", "ncpu", "dec_ms",
               "step_ms", "bw_MB/s", "events",
               "wait ms/batch rl / heuristic / static, stall rl / heur");
    for (int n = 0; n < a->eval; n++) {
        score_t row[NPOL];
        for (int w = 0; w < NPOL; w++) {
            score_t s;
            int rc = run_one(a, pol, w, (uint64_t)n, &s);
            if (rc)
                return rc;
            row[w] = s;
            mean[w].wait_ms += s.wait_ms / a->eval;
            mean[w].stall += s.stall / a->eval;
            mean[w].cores += s.cores / a->eval;
            mean[w].rate += s.rate / a->eval;
            mean[w].reward += s.reward / a->eval;
            mean[w].threads += s.threads / a->eval;
            mean[w].prefetch += s.prefetch / a->eval;
        }
        if (a->detail) {
            sl__sim_profile_t p;
            eval_profile(a, (uint64_t)n, &p);
            printf("%3d %4d %8.2f %8.1f %8.0f %6d  %8.2f %8.2f %8.2f  %.3f "
                   "%.3f\n",
                   n, p.ncpu, p.decode_ms, p.step_ms, p.storage_bw / 1e6,
                   p.n_events, row[POL_RL].wait_ms, row[POL_HEUR].wait_ms,
                   row[POL_STATIC].wait_ms, row[POL_RL].stall,
                   row[POL_HEUR].stall);
        }
    }
    printf("held-out evaluation: %d random profiles x %.0f s simulated "
           "(seeds %#llx + %llu x 7919 + i)\n",
           a->eval, a->episode_s, EVAL_SEED_BASE, (unsigned long long)a->seed);
    printf("%-10s %12s %8s %10s %12s %8s %8s %9s\n", "policy", "wait ms/bat",
           "stall", "CPU cores", "samples/s", "threads", "prefetch", "reward");
    for (int w = 0; w < NPOL; w++)
        printf("%-10s %12.2f %8.3f %10.2f %12.0f %8.1f %8.1f %9.4f\n",
               pol_name[w], mean[w].wait_ms, mean[w].stall, mean[w].cores,
               mean[w].rate, mean[w].threads, mean[w].prefetch, mean[w].reward);
    return 0;
}

/* ---------------------------------------------------------------- main */

int sl__cmd_train_policy(int argc, char **argv)
{
    targs_t a = {0};
    a.steps = 200000;
    a.episode_s = 60;
    a.rollout = 2048;
    a.hidden = 64;
    a.eval = 16;
    enum {
        O_SEED = 256,
        O_STEPS,
        O_PROF,
        O_EPS,
        O_ROLL,
        O_HID,
        O_LR,
        O_INIT,
        O_EVAL,
        O_DETAIL,
        O_QUIET,
        O_HELP
    };
    static const struct option lo[] = {
        {"out", 1, 0, 'o'},         {"seed", 1, 0, O_SEED},
        {"steps", 1, 0, O_STEPS},   {"profile", 1, 0, O_PROF},
        {"episode-s", 1, 0, O_EPS}, {"rollout", 1, 0, O_ROLL},
        {"hidden", 1, 0, O_HID},    {"lr", 1, 0, O_LR},
        {"init", 1, 0, O_INIT},     {"eval", 1, 0, O_EVAL},
        {"detail", 0, 0, O_DETAIL}, {"quiet", 0, 0, O_QUIET},
        {"help", 0, 0, O_HELP},     {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'o':
            a.out = optarg;
            break;
        case O_SEED:
            a.seed = strtoull(optarg, &end, 0);
            break;
        case O_STEPS:
            a.steps = strtol(optarg, &end, 0);
            break;
        case O_PROF:
            a.profile = optarg;
            break;
        case O_EPS:
            a.episode_s = strtod(optarg, &end);
            break;
        case O_ROLL:
            a.rollout = (int)strtol(optarg, &end, 0);
            break;
        case O_HID:
            a.hidden = (int)strtol(optarg, &end, 0);
            break;
        case O_LR:
            a.lr = strtod(optarg, &end);
            break;
        case O_INIT:
            a.init = optarg;
            break;
        case O_EVAL:
            a.eval = (int)strtol(optarg, &end, 0);
            break;
        case O_DETAIL:
            a.detail = 1;
            break;
        case O_QUIET:
            a.quiet = 1;
            break;
        case O_HELP:
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "sluice train-policy: bad number '%s'\n", optarg);
            return 2;
        }
    }
    if (!a.out || optind < argc || a.steps < 0 || a.episode_s < 1 ||
        a.rollout < 16 || a.hidden < 1 || a.hidden > SL_MLP_MAX_HID ||
        a.eval < 0) {
        usage(stderr);
        return 2;
    }
    char err[512];
    if (a.profile) {
        sl__sim_profile_default(&a.base);
        if (sl__sim_profile_load(a.profile, &a.base, err, sizeof err)) {
            fprintf(stderr, "sluice train-policy: %s\n", err);
            return 1;
        }
        a.have_base = 1;
    }
    sl__rl_policy_t pol;
    int rc = a.init ? sl__rl_policy_load(a.init, &pol, err, sizeof err)
                    : sl__rl_policy_init(&pol, a.hidden, a.seed);
    if (rc) {
        fprintf(stderr, "sluice train-policy: %s\n",
                a.init ? err : sl_strerror(rc));
        return 1;
    }
    if (!a.init) {
        sl__rng_t r;
        sl__rng_init(&r, a.seed, 0, 0, 0x6e6f); /* "no" */
        rc = fit_normalisation(&a, &pol, &r);
    }
    if (!rc)
        rc = train(&a, &pol);
    if (!rc)
        rc = sl__rl_policy_save(a.out, &pol, err, sizeof err);
    else
        snprintf(err, sizeof err, "%s", sl_strerror(rc));
    if (rc) {
        fprintf(stderr, "sluice train-policy: %s\n", err);
        sl__rl_policy_free(&pol);
        return 1;
    }
    fprintf(stderr, "wrote %s (%zu parameters)\n", a.out, pol.net.n_params);
    rc = a.eval ? evaluate(&a, &pol) : 0;
    sl__rl_policy_free(&pol);
    if (rc)
        fprintf(stderr, "sluice train-policy: %s\n", sl_strerror(rc));
    return rc ? 1 : 0;
}
