/* sched/rl: the reinforcement-learning policy as the scheduler uses it.
 *
 * State: SL_RL_NOBS features of a telemetry window (sl__rl_features; see
 * docs/POLICY.md for the list), each scaled by hand to about [0, 1] or
 * [-1, 1] and then standardised with the constants stored in the weights
 * file. Action: per knob one step of -1 / 0 / +1 (read_threads,
 * decode_threads, prefetch), drawn from the MLP's factored heads under a
 * mask that keeps every knob within its limits (budgets) and fixed knobs
 * fixed. Reward of a window (sl__rl_reward):
 *     r = -W - lambda * S - mu * U
 * W: consumer wait per batch over the window (intervals weighted by the
 * samples they handed out; with none, the whole window), in units of
 * 100 ms, capped at 10,
 * S: stall fraction (the consumer's idle share), U: resources held,
 * (threads / max_threads + prefetch / max_prefetch) / 2.
 *
 * sl__rl_sched_t is the scheduler the loader calls every decision period:
 * the policy (argmax at deployment), optionally online PPO fine-tuning
 * (`learn`) guarded by sl__rl_guard_t, which hands the knobs to the
 * heuristic for good when the reward degrades.
 *
 * Depends on mlp, ppo, knobs (types), heuristic (the fallback) and
 * the public snapshot type. */
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

#define SL_RL_NOBS 24
#define SL_RL_LAMBDA 1.0 /* weight of the stall fraction in the reward */
#define SL_RL_MU 0.5     /* weight of the resources held */

/* ------------------------------------------------------ policy + file */

typedef struct sl__rl_policy {
    sl__mlp_t net;
    double mean[SL_RL_NOBS], sd[SL_RL_NOBS]; /* input standardisation */
} sl__rl_policy_t;

/* A fresh policy: random weights from seed, identity standardisation. */
int sl__rl_policy_init(sl__rl_policy_t *p, int n_hid, uint64_t seed);
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

/* Raw features of win[0..n) (oldest first) and the knobs in force. */
void sl__rl_features(const sl_snapshot_t *win, int n, const sl__limits_t *lim,
                     const sl__knobs_t *cur, double *obs);
/* Standardised network input (clamped to +-5). */
void sl__rl_normalise(const sl__rl_policy_t *p, const double *raw, double *x);
double sl__rl_reward(const sl_snapshot_t *win, int n, const sl__limits_t *lim,
                     const sl__knobs_t *cur);

/* ------------------------------------------------------------ decision */

typedef struct sl__rl_decision {
    double x[SL_RL_NOBS];        /* network input */
    uint8_t act[SL_MLP_KNOBS];   /* 0..2 = step + 1; knob order below */
    uint8_t mask[SL_MLP_LOGITS]; /* allowed actions */
    double prob[SL_MLP_LOGITS];  /* under the mask */
    double logp, value;
} sl__rl_decision_t;

/* Knob order of the heads: SL_RL_K_READ, _DECODE, _PREFETCH. */
enum { SL_RL_K_READ = 0, SL_RL_K_DECODE, SL_RL_K_PREFETCH };

/* One decision from raw features: samples the action when rng is given
 * (training), else takes each knob's most probable step (deployment).
 * Masks keep next within lim: decode is decided first, read under the
 * thread budget left by decode's step, prefetch alone. Fills d and *next.
 */
void sl__rl_decide(const sl__rl_policy_t *p, const double *raw,
                   const sl__limits_t *lim, const sl__knobs_t *cur,
                   sl__rng_t *rng, sl__rl_decision_t *d, sl__knobs_t *next);
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
} sl__rl_sched_t;

/* Takes ownership of *pol. learn: online PPO fine-tuning with the guard.
 * @return 0 or SL_ENOMEM. */
int sl__rl_sched_init(sl__rl_sched_t *s, sl__rl_policy_t *pol, int learn,
                      uint64_t seed);
void sl__rl_sched_free(sl__rl_sched_t *s);

/* One decision over win[0..n). Sets *next (within lim) and a reason.
 * @return a bit mask of the knobs changed, bit SL_KNOB_* (0: none). */
int sl__rl_sched_step(sl__rl_sched_t *s, const sl_snapshot_t *win, int n,
                      const sl__limits_t *lim, const sl__knobs_t *cur,
                      sl__knobs_t *next, char *reason, size_t len);

#endif
