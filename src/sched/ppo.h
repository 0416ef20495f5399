/* sched/ppo: Proximal Policy Optimisation (Schulman et al. 2017) for the
 * MLP of mlp.h, kept small: a rollout buffer, generalised advantage
 * estimation (GAE, Schulman et al. 2016), the clipped surrogate with a
 * value loss and an entropy bonus, and Adam over minibatch epochs.
 *
 * The policy is factored: one categorical over {-1, 0, +1} per knob, each
 * with its own mask of allowed actions (a masked action has probability 0
 * and gets no gradient). log pi(a | s) is the sum over knobs.
 *
 * Loss of a minibatch of n samples (advantages A already normalised):
 *   r      = exp(logp_new - logp_old)
 *   L_clip = -mean(min(r A, clip(r, 1 - eps, 1 + eps) A))
 *   L_v    = vf_coef * mean(0.5 (V - R)^2)
 *   L_ent  = -ent_coef * mean(sum over knobs of H(pi_k))
 *   L      = L_clip + L_v + L_ent
 * Depends on mlp and base (rng). */
#ifndef SL_PPO_H
#define SL_PPO_H

#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "sched/mlp.h"

typedef struct sl__ppo_hp {
    double gamma, lambda;  /* discount, GAE lambda */
    double clip;           /* epsilon of the clipped ratio */
    double vf_coef;        /* weight of the value loss */
    double ent_coef;       /* weight of the entropy bonus */
    double lr;             /* Adam step size */
    double max_grad_norm;  /* global gradient norm clip (0: none) */
    int epochs, minibatch; /* passes over a rollout, samples per step */
} sl__ppo_hp_t;

/* The defaults documented in docs/POLICY.md. */
void sl__ppo_hp_default(sl__ppo_hp_t *hp);

/* Probabilities (and their logs) of each knob's categorical under its
 * mask (1 = allowed; a knob needs at least one allowed action). Masked
 * entries get p = 0, logp = -inf. */
void sl__ppo_probs(const double *logits, const uint8_t *mask, int n_knobs,
                   double *p, double *logp);

/* Stored transitions of one rollout (several episodes back to back). */
typedef struct sl__ppo_buf {
    int cap, n, n_in, n_knobs;
    double *obs;   /* n x n_in, as fed to the network (normalised) */
    uint8_t *act;  /* n x n_knobs, action index 0..2 (= step + 1) */
    uint8_t *mask; /* n x n_knobs x SL_MLP_ACTS */
    double *logp, *value, *reward;
    uint8_t *last; /* 1: the episode ends after this step */
    double *boot;  /* at a last step: V(next state) (truncation), or 0 */
    double *adv, *ret;
} sl__ppo_buf_t;

int sl__ppo_buf_init(sl__ppo_buf_t *b, int cap, int n_in, int n_knobs);
void sl__ppo_buf_free(sl__ppo_buf_t *b);
/* Appends one step; the reward is filled in later by sl__ppo_buf_reward
 * (it is only known after the next window). @return the step's index, or
 * -1 when full. */
int sl__ppo_buf_add(sl__ppo_buf_t *b, const double *obs, const uint8_t *act,
                    const uint8_t *mask, double logp, double value);
void sl__ppo_buf_reward(sl__ppo_buf_t *b, int i, double r);
/* Marks the last step as the end of an episode, with the value of the
 * state it led to (0 for a true terminal state). */
void sl__ppo_buf_end(sl__ppo_buf_t *b, double bootstrap);
/* Fills adv and ret (= adv + value) by GAE. The last step must be an
 * episode end. */
void sl__ppo_gae(sl__ppo_buf_t *b, double gamma, double lambda);

typedef struct sl__ppo_stats {
    double loss, pi_loss, v_loss, entropy, approx_kl, clip_frac;
} sl__ppo_stats_t;

/* Loss L of n samples and (if grad) dL/dparams written to grad. obs is
 * n x n_in, act n x m->n_knobs, mask n x 3 m->n_knobs; adv must already
 * be normalised. */
double sl__ppo_loss(const sl__mlp_t *m, const sl__ppo_hp_t *hp,
                    const double *obs, const uint8_t *act, const uint8_t *mask,
                    const double *logp_old, const double *adv,
                    const double *ret, int n, double *grad,
                    sl__ppo_stats_t *st);

/* The same loss and gradient from flat inputs, for
 * tests/python/test_rl_autograd.py, which compares them with PyTorch
 * autograd through the extension's private _sluice._ppo_test_loss (not
 * exported from libsluice.so). params: n_params weights of an n_in ->
 * n_hid network with n_knobs heads; hp3 = {clip, vf_coef, ent_coef}; grad:
 * n_params.
 * @return the loss; NAN on bad sizes or out of memory. */
double sl__ppo_test_loss(const double *params, size_t n_params, int n_in,
                         int n_hid, int n_knobs, const double *obs,
                         const uint8_t *act, const uint8_t *mask,
                         const double *logp_old, const double *adv,
                         const double *ret, int n, const double *hp3,
                         double *grad);

/* Adam state and minibatch scratch for one network. */
typedef struct sl__ppo {
    sl__ppo_hp_t hp;
    size_t n_params;
    double *m1, *m2, *grad; /* Adam moments, gradient */
    long t;                 /* Adam steps taken */
    int cap;                /* minibatch scratch capacity */
    double *obs, *logp, *adv, *ret;
    uint8_t *act, *mask;
    int *perm;
    int perm_cap;
} sl__ppo_t;

int sl__ppo_init(sl__ppo_t *p, const sl__ppo_hp_t *hp, const sl__mlp_t *m);
void sl__ppo_free(sl__ppo_t *p);

/* One Adam step on m with gradient g (after the global norm clip). */
void sl__ppo_adam(sl__ppo_t *p, sl__mlp_t *m, double *g);

/* GAE over b, then hp.epochs passes of shuffled minibatches (advantages
 * normalised per minibatch), one Adam step each. st: means over the
 * steps. @return 0 or SL_ENOMEM. */
int sl__ppo_update(sl__ppo_t *p, sl__mlp_t *m, sl__ppo_buf_t *b, sl__rng_t *rng,
                   sl__ppo_stats_t *st);

#endif
