/* sluice train-policy: trains the RL scheduler with PPO in the simulator
 * (sim/train.h), writes the weights file, and prints how it does on
 * held-out random profiles against the heuristic and a static
 * configuration (docs/POLICY.md). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "cli.h"
#include "opts.h"
#include "sched/rl.h"
#include "sim/train.h"
#include "sluice/telemetry.h"

typedef struct targs {
    const char *out; /* weights file */
    const char *profile, *init;
    int hidden, eval, quiet, detail;
    sl__sim_profile_t base;
    sl__train_opts_t o;
} targs_t;

#define F(f) offsetof(targs_t, f)
static const sl__opt_t train_opts[] = {
    {"out", 'o', SL__OPT_STR, F(out), 0, 0, "FILE",
     "weights file to write (docs/POLICY.md)", .need = 1},
    {"seed", 0, SL__OPT_U64, F(o.seed), 0, 0, "S",
     "everything random follows S", "0"},
    {"steps", 0, SL__OPT_I64, F(o.steps), 0, 9e18, "N",
     "decisions of training, 0.5 s simulated each", "200000"},
    {"profile", 0, SL__OPT_STR, F(profile), 0, 0, "P.json",
     "randomise around this profile (sluice calibrate)", "the default"},
    {"episode-s", 0, SL__OPT_DOUBLE, F(o.episode_s), 1, HUGE_VAL, "T",
     "simulated seconds per episode", "60"},
    {"rollout", 0, SL__OPT_INT, F(o.rollout), 16, INT_MAX, "N",
     "decisions per PPO update", "2048"},
    {"hidden", 0, SL__OPT_INT, F(hidden), 1, SL_MLP_MAX_HID, "H",
     "hidden units per layer", "64"},
    {"lr", 0, SL__OPT_DOUBLE, F(o.lr), -HUGE_VAL, HUGE_VAL, "LR",
     "Adam step size", "1e-3"},
    {"init", 0, SL__OPT_STR, F(init), 0, 0, "FILE",
     "start from these weights (fine-tuning)"},
    {"gpu", 0, SL__OPT_FLAG, F(o.gpu), 0, 0, NULL,
     "a policy that also places: 4 profiles in 5 get a GPU stage, the "
     "network a share head (an --init of the CPU knobs is widened)"},
    {"eval", 0, SL__OPT_INT, F(eval), 0, INT_MAX, "N",
     "held-out profiles for the final comparison (0: none)", "16"},
    {"detail", 0, SL__OPT_FLAG, F(detail), 0, 0, NULL,
     "one evaluation line per held-out profile"},
    {"quiet", 0, SL__OPT_FLAG, F(quiet), 0, 0, NULL, "no progress lines"},
    {NULL},
};

static const sl__opts_t train_usage = {
    "-o FILE [options]",
    "Trains the rl scheduling policy with PPO in the simulator on random "
    "profiles\n(domain randomisation), then compares rl, heuristic and "
    "static on held-out ones.\n",
    {train_opts}};

typedef struct progress {
    int tty;
    int64_t t0;
} progress_t;

static void on_update(void *ctx, const sl__train_progress_t *p)
{
    progress_t *pg = ctx;
    fprintf(stderr,
            "%supdate %3d  decisions %7ld  model jumps %4ld  mean reward "
            "%8.4f  entropy %.3f  kl %.4f  clip %.2f  v_loss %.3f  %.0f s%s",
            pg->tty ? "\r" : "", p->update, p->decisions, p->model_windows,
            p->mean_reward, p->st.entropy, p->st.approx_kl, p->st.clip_frac,
            p->st.v_loss, (sl__now_ns() - pg->t0) / 1e9, pg->tty ? "  " : "\n");
}

static void on_row(void *ctx, int i, const sl__sim_profile_t *p,
                   const sl__eval_score_t *row)
{
    (void)ctx;
    printf("%3d %4d %8.2f %8.1f %8.0f %6d  %8.2f %8.2f %8.2f  %.3f %.3f\n", i,
           p->ncpu, p->decode_ms, p->step_ms, p->storage_bw / 1e6, p->n_events,
           row[SL_EVAL_RL].wait_ms, row[SL_EVAL_HEURISTIC].wait_ms,
           row[SL_EVAL_STATIC].wait_ms, row[SL_EVAL_RL].stall,
           row[SL_EVAL_HEURISTIC].stall);
}

static int evaluate(const targs_t *a, const sl__rl_policy_t *pol)
{
    static const char *name[SL_EVAL_NPOL] = {"rl", "heuristic", "static"};
    sl__eval_score_t m[SL_EVAL_NPOL];
    if (a->detail)
        printf("%3s %4s %8s %8s %8s %6s  %s\n", "i", "ncpu", "dec_ms",
               "step_ms", "bw_MB/s", "events",
               "wait ms/batch rl / heuristic / static, stall rl / heur");
    int rc = sl__train_evaluate(&a->o, pol, a->eval, m,
                                a->detail ? on_row : NULL, NULL);
    if (rc)
        return rc;
    printf("held-out evaluation: %d random profiles x %.0f s simulated "
           "(seeds %#llx + %llu x 7919 + i)\n",
           a->eval, a->o.episode_s, SL_EVAL_SEED_BASE,
           (unsigned long long)a->o.seed);
    printf("%-10s %12s %8s %10s %12s %8s %8s %9s%s\n", "policy", "wait ms/bat",
           "stall", "CPU cores", "samples/s", "threads", "prefetch", "reward",
           a->o.gpu ? "  gpu_share" : "");
    for (int w = 0; w < SL_EVAL_NPOL; w++) {
        printf("%-10s %12.2f %8.3f %10.2f %12.0f %8.1f %8.1f %9.4f", name[w],
               m[w].wait_ms, m[w].stall, m[w].cores, m[w].rate, m[w].threads,
               m[w].prefetch, m[w].reward);
        if (a->o.gpu)
            printf("  %9.0f", m[w].share);
        putchar('\n');
    }
    if (a->o.gpu)
        printf("(rl places with its share head; heuristic: the placement "
               "rule sets the share; static: none)\n");
    return 0;
}

/* Standardisation (a fresh policy; a widened one's GPU features) and
 * PPO, with progress lines. */
static int train(const targs_t *a, sl__rl_policy_t *pol, int from)
{
    int rc = from < pol->net.n_in ? sl__train_normalise(&a->o, pol, from) : 0;
    if (rc)
        return rc;
    progress_t pg = {isatty(2), sl__now_ns()};
    sl__train_opts_t o = a->o;
    if (!a->quiet) {
        o.on_update = on_update;
        o.ctx = &pg;
    }
    rc = sl__train_ppo(&o, pol);
    if (!a->quiet && pg.tty)
        fputc('\n', stderr);
    return rc;
}

int sl__cmd_train_policy(int argc, char **argv)
{
    targs_t a = {.hidden = 64, .eval = 16};
    a.o.steps = 200000;
    a.o.episode_s = 60;
    a.o.rollout = 2048;
    int rc = sl__opts_parse(&train_usage, &a, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    char err[512];
    if (a.profile) {
        sl__sim_profile_default(&a.base);
        if (sl__sim_profile_load(a.profile, &a.base, err, sizeof err)) {
            fprintf(stderr, "sluice train-policy: %s\n", err);
            return 1;
        }
        a.o.base = &a.base;
    }
    sl__rl_policy_t pol;
    rc = a.init ? sl__rl_policy_load(a.init, &pol, err, sizeof err)
                : sl__rl_policy_init(&pol, a.hidden, a.o.gpu, a.o.seed);
    if (rc) {
        fprintf(stderr, "sluice train-policy: %s\n",
                a.init ? err : sl_strerror(rc));
        return 1;
    }
    /* Features to standardise: all of a fresh policy's, none of a loaded
     * one's but those a widening adds. */
    int from = a.init ? pol.net.n_in : 0;
    if (a.o.gpu && !sl__rl_places(&pol)) {
        sl__rl_policy_t wide;
        rc = sl__rl_policy_widen(&wide, &pol);
        sl__rl_policy_free(&pol);
        if (rc) {
            fprintf(stderr, "sluice train-policy: %s\n", sl_strerror(rc));
            return 1;
        }
        pol = wide;
    }
    rc = train(&a, &pol, from);
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
