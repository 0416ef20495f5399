/* Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
 *
 * Why counter-based: every random decision of the pipeline (shuffle, crop
 * box, flip) must be a pure function of (seed, epoch, sample), never of the
 * thread that happens to run it, so that thread counts and the scheduler can
 * change how fast, never what. A stream is a key (the seed) plus a 128-bit
 * counter whose upper words name the decision (epoch, sample, purpose) and
 * whose lowest word counts draws. */
#ifndef SL_RNG_H
#define SL_RNG_H

#include <stdint.h>

/* Purposes: one independent stream per kind of decision. */
enum { SL_RNG_SHUFFLE = 1, SL_RNG_CROP = 2, SL_RNG_FLIP = 3 };
/* Text pipeline (docs/TEXT.md): document order, window shuffle, MLM mask. */
enum { SL_RNG_TEXT_DOCS = 4, SL_RNG_TEXT_SHUFFLE = 5, SL_RNG_TEXT_MASK = 6 };
/* Volumes (sluice/volops.h): a sample's label-free draws (foreground or
 * not, flips, brightness, noise: known before the volume is read), its
 * noise values, and its crop (which needs the label). */
enum { SL_RNG_VOL_DRAW = 7, SL_RNG_VOL_NOISE = 8, SL_RNG_VOL_CROP = 9 };
/* WebDataset order (data/sampler: shuffle_buffer): the files' order in an
 * epoch, and the shuffle buffer's picks. */
enum { SL_RNG_FILE_ORDER = 10, SL_RNG_SHUFFLE_BUFFER = 11 };
/* Synthetic datasets (make-dataset): a class's palette, an image's pixels,
 * an image's size and shape. */
enum {
    SL_RNG_DATASET_PALETTE = 100,
    SL_RNG_DATASET_IMAGE = 101,
    SL_RNG_DATASET_SHAPE = 102
};
/* The simulator (its events and noise; profile randomisation), the RL
 * scheduler's sampled actions, the policy network's initial weights, PPO
 * training's scenario draws and its noise. Values are the historical ones
 * (ASCII tags), kept so that seeds give the same runs. */
enum {
    SL_RNG_SIM_PROFILE = 0x50,  /* 'P' */
    SL_RNG_SIM = 0x53,          /* 'S' */
    SL_RNG_RL_ACTIONS = 0x726c, /* "rl" */
    SL_RNG_MLP_INIT = 0x6d6c70, /* "mlp" */
    SL_RNG_TRAIN = 0x7472,      /* "tr" */
    SL_RNG_TRAIN_NOISE = 0x6e6f /* "no" */
};

typedef struct sl__rng {
    uint32_t key[2];
    uint32_t ctr[4];
    uint32_t buf[4];
    int left; /* unread words in buf */
} sl__rng_t;

/* A stream for (seed, epoch, item, purpose). */
void sl__rng_init(sl__rng_t *r, uint64_t seed, uint64_t epoch, uint64_t item,
                  uint32_t purpose);
uint32_t sl__rng_u32(sl__rng_t *r);
uint64_t sl__rng_u64(sl__rng_t *r);
/* Uniform in [0, 1) with 53 random bits. */
double sl__rng_double(sl__rng_t *r);
/* Uniform in [a, b). */
double sl__rng_uniform(sl__rng_t *r, double a, double b);
/* Log-uniform in [lo, hi) (lo > 0): as many between lo and 2 lo as
 * between hi / 2 and hi. */
double sl__rng_log_uniform(sl__rng_t *r, double lo, double hi);
/* Uniform integer in [0, n), unbiased (Lemire); n > 0. */
uint64_t sl__rng_below(sl__rng_t *r, uint64_t n);

#endif
