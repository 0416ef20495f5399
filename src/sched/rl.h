/* sched/rl: the reinforcement-learning policy as the scheduler uses it.
 *
 * Two kinds of policy (docs/POLICY.md):
 *   - one that steps the CPU knobs: SL_RL_NOBS_CPU features, 3 heads
 *     (read_threads, decode_threads, prefetch); where there is a GPU
 *     stage, the placement rule (sched/place.h) sets its share;
 *   - one that also places: SL_RL_NOBS features (the CPU ones and the
 *     GPU stage's), a fourth head that steps gpu_share by
 *     SL_RL_SHARE_STEP; the rule then does not run.
 * State: the features of a telemetry window (sl__rl_features), each
 * scaled by hand to about [0, 1] or [-1, 1] and then standardised with
 * the constants stored in the weights file. Action: per knob one step of
 * -1 / 0 / +1, drawn from the MLP's factored heads under a mask that
 * keeps every knob within its limits (budgets) and fixed knobs fixed (and
 * the share from rising while NVML reports the GPU full,
 * sl__place_gpu_full). Reward of a window (sl__rl_reward):
 *     r = -W - lambda * S - mu * U  [ - nu * G - kappa * I ]
 * W: consumer wait per batch over the window (intervals weighted by the
 * samples they handed out; with none, the whole window), in units of
 * 100 ms, capped at 10,
 * S: stall fraction (the consumer's idle share), U: resources held,
 * (threads / max_threads + prefetch / max_prefetch) / 2; where there is
 * a GPU stage a policy places on, also G: the share held (0..1) and I:
 * the trainer's slowdown, the interference of GPU work with its step —
 * ln(this window's time per sample / the least seen lately) at run time,
 * as the simulator knows it in training (sim/train.c).
 *
 * sl__rl_sched_t is the scheduler the loader calls every decision period:
 * the policy (argmax at deployment), optionally online PPO fine-tuning
 * (`learn`) guarded by sl__rl_guard_t, which hands the knobs to the
 * heuristic for good when the reward degrades.
 *
 * Depends on mlp, ppo, knobs (types), heuristic (the fallback),
 * estimate (the trainer's demand), place (NVML's gate) and the public
 * snapshot type. */
#ifndef SL_RL_H
#define SL_RL_H

#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "sched/heuristic.h"
#include "sched/mlp.h"
#include "sched/ppo.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"

#define SL_RL_NOBS_CPU 24 /* features of a policy of the CPU knobs */
#define SL_RL_NOBS 29     /* all: + the GPU stage's, for one that places */
#define SL_RL_KNOBS_CPU 3
#define SL_RL_KNOBS_PLACE 4
#define SL_RL_SHARE_STEP 100 /* per mille: the share head's step */
#define SL_RL_LAMBDA 1.0     /* weight of the stall fraction in the reward */
#define SL_RL_MU 0.5         /* weight of the resources held */
#define SL_RL_NU 0.1         /* weight of the GPU share held */
#define SL_RL_KAPPA 1.0      /* weight of the trainer's slowdown */

/* ------------------------------------------------------ policy + file */

typedef struct sl__rl_policy {
    sl__mlp_t net;
    double mean[SL_RL_NOBS], sd[SL_RL_NOBS]; /* input standardisation */
} sl__rl_policy_t;

/* A fresh policy (places: 1 for one with the share head): random
 * weights from seed, identity standardisation. */
int sl__rl_policy_init(sl__rl_policy_t *p, int n_hid, int places,
                       uint64_t seed);
/* 1 when p has the share head. */
int sl__rl_places(const sl__rl_policy_t *p);
/* A policy that places, from one of the CPU knobs (uninitialised *dst):
 * the same weights, the GPU features' inputs and the share head zero (so
 * it steps the CPU knobs as src does, and the share at random while
 * training), their standardisation identity. @return 0 or SL_ENOMEM. */
int sl__rl_policy_widen(sl__rl_policy_t *dst, const sl__rl_policy_t *src);
void sl__rl_policy_free(sl__rl_policy_t *p);
int sl__rl_policy_clone(sl__rl_policy_t *dst, const sl__rl_policy_t *src);

/* Weights file (docs/POLICY.md): parses bytes into an uninitialised *p.
 * @return 0, or SL_ECORRUPT / SL_EUNSUPPORTED / SL_ECHECKSUM /
 * SL_ENOMEM with the cause in err. */
int sl__rl_policy_parse(const uint8_t *buf, size_t len, sl__rl_policy_t *p,
                        char *err, size_t errlen);
/* Bytes of the file for p; writes them when out has room (cap). */
size_t sl__rl_policy_serialize(const sl__rl_policy_t *p, uint8_t *out,
                               size_t cap);
/* File versions; errors name the file and the cause. */
int sl__rl_policy_load(const char *path, sl__rl_policy_t *p, char *err,
                       size_t errlen);
int sl__rl_policy_save(const char *path, const sl__rl_policy_t *p, char *err,
                       size_t errlen);
/* The default policy built into the library (policies/default.bin at
 * build time). SL_ENOTFOUND if the build had none. */
int sl__rl_policy_default(sl__rl_policy_t *p, char *err, size_t errlen);

/* ------------------------------------------------ features and reward */

/* Raw features of win[0..n) (oldest first) and the knobs in force: all
 * SL_RL_NOBS (a policy of the CPU knobs reads the first SL_RL_NOBS_CPU). */
void sl__rl_features(const sl_snapshot_t *win, int n, const sl__limits_t *lim,
                     const sl__knobs_t *cur, double *obs);
/* Standardised network input (p's n_in of them, clamped to +-5). */
void sl__rl_normalise(const sl__rl_policy_t *p, const double *raw, double *x);
/* The reward of a window. With gpu (a policy that places the share it is
 * judged on) it adds the share held and, when work_ref is given, the
 * trainer's slowdown against *work_ref: the least time per sample seen,
 * let rise 1 % a window so that one fast glitch fades (updated here; 0 to
 * start). */
double sl__rl_reward(const sl_snapshot_t *win, int n, const sl__limits_t *lim,
                     const sl__knobs_t *cur, int gpu, double *work_ref);

/* ------------------------------------------------------------ decision */

typedef struct sl__rl_decision {
    int n_knobs;
    double x[SL_RL_NOBS];            /* network input */
    uint8_t act[SL_MLP_MAX_KNOBS];   /* 0..2 = step + 1; knob order below */
    uint8_t mask[SL_MLP_MAX_LOGITS]; /* allowed actions */
    double prob[SL_MLP_MAX_LOGITS];  /* under the mask */
    double logp, value;
} sl__rl_decision_t;

/* Knob order of the heads: SL_RL_K_READ, _DECODE, _PREFETCH, _SHARE. */
enum { SL_RL_K_READ = 0, SL_RL_K_DECODE, SL_RL_K_PREFETCH, SL_RL_K_SHARE };

/* One decision from raw features: samples the action when rng is given
 * (training), else takes each knob's most probable step (deployment).
 * Masks keep each knob within its own budget in lim; the share (a policy
 * that places) within 0..max_gpu_share, and not up while gpu_full (NVML
 * says the GPU has no room). Fills d and *next. */
void sl__rl_decide(const sl__rl_policy_t *p, const double *raw,
                   const sl__limits_t *lim, const sl__knobs_t *cur,
                   int gpu_full, sl__rng_t *rng, sl__rl_decision_t *d,
                   sl__knobs_t *next);
/* "rl: decode +1 (p .10/.15/.75) read 0 (...) prefetch 0 (...)". */
void sl__rl_reason(const sl__rl_decision_t *d, char *buf, size_t len);

/* --------------------------------------------------------------- guard */

/* Falls back when the reward's moving average stays below the reference
 * (the mean of the first `warm` rewards) by more than
 * margin_abs + margin_rel * |reference| for `k` decisions in a row. */
typedef struct sl__rl_guard {
    int warm, k;
    double margin_abs, margin_rel, alpha;
    int seen, bad, tripped;
    double ref_sum, ref, ema;
} sl__rl_guard_t;

void sl__rl_guard_init(sl__rl_guard_t *g, int warm, int k, double margin_abs,
                       double margin_rel);
/* Feeds one reward. @return 1 once tripped (and ever after). */
int sl__rl_guard_feed(sl__rl_guard_t *g, double reward);

/* ----------------------------------------------------------- scheduler */

typedef struct sl__rl_sched {
    sl__rl_policy_t pol;
    int learn;
    sl__ppo_t ppo;
    sl__ppo_buf_t buf;
    int pending; /* buffer index awaiting its reward, or -1 */
    sl__rl_guard_t guard;
    int fallback; /* 1: the guard tripped, the heuristic decides */
    sl__heur_t heur;
    sl__rng_t rng;
    int updates;
    double work_ref; /* the reward's: the trainer's least time per sample */
} sl__rl_sched_t;

/* Takes ownership of *pol. learn: online PPO fine-tuning with the guard.
 * @return 0 or SL_ENOMEM. */
int sl__rl_sched_init(sl__rl_sched_t *s, sl__rl_policy_t *pol, int learn,
                      uint64_t seed);
void sl__rl_sched_free(sl__rl_sched_t *s);

/* One decision over win[0..n). Sets *next (within lim) and a reason.
 * @return a bit mask of the knobs changed, bit SL_KNOB_* (0: none), or
 * SL__POLICY_EVENT when the guard hands the knobs to the heuristic. */
int sl__rl_sched_step(sl__rl_sched_t *s, const sl_snapshot_t *win, int n,
                      const sl__limits_t *lim, const sl__knobs_t *cur,
                      sl__knobs_t *next, char *reason, size_t len);

#endif
