/* sched/mlp: the scheduler's small neural network, by hand.
 *
 *   x[n_in] -> tanh(W1 x + b1)[n_hid] -> tanh(W2 h1 + b2)[n_hid] -+-> logits
 *                                                                 | [knobs x 3]
 *                                                                 +-> value
 *
 * A shared trunk with two linear heads: the policy head gives one
 * categorical over {-1, 0, +1} per knob (n_knobs x SL_MLP_ACTS logits:
 * read_threads, decode_threads, prefetch, and for a policy that places,
 * the GPU share — sched/rl.h), the value head one number (the critic of
 * PPO). With n_in = 24, n_hid = 64 and 3 knobs that is 6410 parameters.
 *
 * Parameters live in one flat array of doubles (the optimiser and the
 * gradient check see a vector), in this order: W1 (row-major, n_hid x
 * n_in), b1, W2 (n_hid x n_hid), b2, Wp (3 n_knobs x n_hid), bp (3
 * n_knobs), wv (n_hid), bv (1). Double precision so that finite differences
 * check every gradient; the weights file stores float32. Depends on base (rng).
 */
#ifndef SL_MLP_H
#define SL_MLP_H

#include <stddef.h>
#include <stdint.h>

#define SL_MLP_MAX_KNOBS 4 /* read, decode, prefetch (, GPU share) */
#define SL_MLP_ACTS 3      /* -1, 0, +1 */
#define SL_MLP_MAX_LOGITS (SL_MLP_MAX_KNOBS * SL_MLP_ACTS)
#define SL_MLP_MAX_IN 256
#define SL_MLP_MAX_HID 256

typedef struct sl__mlp {
    int n_in, n_hid, n_knobs;
    size_t n_params;
    double *w; /* n_params, owned */
} sl__mlp_t;

/* Activations kept by the forward pass for the backward pass. */
typedef struct sl__mlp_cache {
    double h1[SL_MLP_MAX_HID], h2[SL_MLP_MAX_HID];
} sl__mlp_cache_t;

/* @return parameters of a network of these sizes (0 if out of range). */
size_t sl__mlp_count(int n_in, int n_hid, int n_knobs);

/* Allocates zero weights. @return 0, SL_EINVAL (sizes out of 1..256,
 * knobs out of 1..SL_MLP_MAX_KNOBS) or SL_ENOMEM. */
int sl__mlp_init(sl__mlp_t *m, int n_in, int n_hid, int n_knobs);
void sl__mlp_free(sl__mlp_t *m);
/* Deep copy into an uninitialised *dst. @return 0 or SL_ENOMEM. */
int sl__mlp_clone(sl__mlp_t *dst, const sl__mlp_t *src);

/* Scaled-uniform initialisation from `seed` (variance 1/fan_in in the
 * trunk, a 0.01 gain on the policy head so that the first policy is
 * close to uniform, as PPO implementations do). */
void sl__mlp_randomize(sl__mlp_t *m, uint64_t seed);

/* Forward pass: logits[3 n_knobs] and *value. `c` may be NULL when no
 * backward pass follows. */
void sl__mlp_forward(const sl__mlp_t *m, const double *x, sl__mlp_cache_t *c,
                     double *logits, double *value);

/* Backward pass of one sample: given dL/dlogits and dL/dvalue at the
 * point of the forward pass that filled `c`, ADDS dL/dparams to grad
 * (n_params). */
void sl__mlp_backward(const sl__mlp_t *m, const double *x,
                      const sl__mlp_cache_t *c, const double *dlogits,
                      double dvalue, double *grad);

#endif
