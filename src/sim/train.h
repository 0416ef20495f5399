/* sim/train: the rl scheduling policy trained with PPO in the simulator
 * under domain randomisation, and judged on held-out random profiles
 * against the heuristic and a static configuration (docs/POLICY.md).
 *
 * Episodes: random profiles around a base (sl__sim_profile_random), the
 * loader's budgets for each (sched/limits.h; sometimes capped by a random
 * memory budget so the policy meets small max_prefetch too), started from
 * the loader's default knobs or, half of the time, random ones. One
 * decision per SL_SCHED_PERIODS periods of 0.1 s, as the loader.
 * Deterministic: the same options and seed give the same weights.
 * Depends on sim, sched (rl, ppo, policy, limits). */
#ifndef SL_SIM_TRAIN_H
#define SL_SIM_TRAIN_H

#include <stdint.h>

#include "sched/policy.h"
#include "sched/ppo.h"
#include "sched/rl.h"
#include "sim/sim.h"

/* One PPO update's figures, for progress lines. */
typedef struct sl__train_progress {
    int update;
    long decisions;     /* taken so far */
    double mean_reward; /* over this update's rollout */
    long model_windows; /* of this rollout's windows, decided by the stall
                           model's jump (no experience for the policy) */
    sl__ppo_stats_t st;
} sl__train_progress_t;

typedef struct sl__train_opts {
    uint64_t seed;                 /* everything random follows it */
    long steps;                    /* decisions of training */
    double episode_s;              /* simulated seconds per episode */
    int rollout;                   /* decisions per PPO update */
    double lr;                     /* Adam step size (0: the default) */
    const sl__sim_profile_t *base; /* randomise around it (NULL: default) */
    int gpu; /* 1: four profiles in five get a GPU stage to place on
                (sl__sim_gpu_random), in training and evaluation */
    void (*on_update)(void *ctx, const sl__train_progress_t *p);
    void *ctx;
} sl__train_opts_t;

/* Fits pol's input standardisation (mean, sd of features from..n_in)
 * under pol itself over 2,000 decisions (from > 0: a widened policy keeps
 * the CPU features' constants). @return 0 or SL_ENOMEM. */
int sl__train_normalise(const sl__train_opts_t *o, sl__rl_policy_t *pol,
                        int from);

/* o->steps decisions of PPO on pol's network (in place).
 * @return 0 or SL_ENOMEM. */
int sl__train_ppo(const sl__train_opts_t *o, sl__rl_policy_t *pol);

/* ---------------------------------------------------------- evaluation */

enum { SL_EVAL_RL = 0, SL_EVAL_HEURISTIC, SL_EVAL_STATIC, SL_EVAL_NPOL };

typedef struct sl__eval_score {
    double wait_ms;  /* consumer wait per batch */
    double stall;    /* consumer idle share */
    double cores;    /* loader CPU, cores */
    double rate;     /* samples/s */
    double reward;   /* mean per decision */
    double threads;  /* read + decode, mean */
    double prefetch; /* mean */
    double share;    /* gpu_share, per mille, mean */
} sl__eval_score_t;

/* The seeds of held-out profile i: sl__train_eval_profile draws it. */
#define SL_EVAL_SEED_BASE 0x5eed0000ull
void sl__train_eval_profile(const sl__train_opts_t *o, uint64_t i,
                            sl__sim_profile_t *p);

/* Policy `which` (SL_EVAL_*; rl: pol, greedy; static: prefetch 2) on
 * held-out profile i over o->episode_s. @return 0 or SL_ENOMEM. */
int sl__train_eval_one(const sl__train_opts_t *o, const sl__rl_policy_t *pol,
                       int which, uint64_t i, sl__eval_score_t *sc);

/* Profiles 0..n-1: mean[SL_EVAL_NPOL] gets the means; on_row (NULL: none)
 * sees each profile's scores. @return 0 or SL_ENOMEM. */
int sl__train_evaluate(const sl__train_opts_t *o, const sl__rl_policy_t *pol,
                       int n, sl__eval_score_t *mean,
                       void (*on_row)(void *ctx, int i,
                                      const sl__sim_profile_t *p,
                                      const sl__eval_score_t *row),
                       void *ctx);

#endif
