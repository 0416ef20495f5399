/* data/sampler: which samples make batch b of epoch e on this rank.
 *
 * Epoch order: a Fisher-Yates permutation of 0..n-1 drawn from the counter
 * RNG keyed by (seed, epoch), so it is a pure function of both. Ranks take
 * the permutation strided (rank r: positions r, r+W, r+2W, ...), so every
 * sample belongs to exactly one rank per epoch and ranks differ by at most
 * one sample. Batch counts are equal on every rank:
 *   drop_last: each rank keeps floor(n/W) samples, floor(that/B) batches;
 *   otherwise: ceil(ceil(n/W)/B) batches; a rank one sample short whose
 *   last batch would be empty gives one sample of its second-to-last batch
 *   to the last (sizes ..., B-1, 1). Depends on base. */
#ifndef SL_SAMPLER_H
#define SL_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__sampler {
    int64_t n;
    int batch, rank, world, drop_last, shuffle;
    uint64_t seed;
    int64_t rank_n;   /* samples this rank has each epoch */
    int64_t nbatches; /* batches each rank has each epoch */
    /* WebDataset order (sl__sampler_stream), or buffer 0 */
    int64_t buffer;
    const int64_t *groups; /* ngroups + 1 starts, owned by the caller */
    int ngroups;
    int64_t *work; /* buffer + ngroups scratch for the order */
} sl__sampler_t;

/* Validates and fills s. Errors (SL_EINVAL/SL_ERANGE) with a message. */
int sl__sampler_init(sl__sampler_t *s, int64_t n, int batch, int rank,
                     int world, int drop_last, int shuffle, uint64_t seed,
                     char *err, size_t errlen);

/* Switches a shuffling sampler to WebDataset's streaming order: each
 * epoch, the groups (files; group g holds [groups[g], groups[g+1]), which
 * must outlive s) in a seeded random order, their samples in stored order
 * through a shuffle buffer of `buffer` samples with webdataset's rule
 * (filters._shuffle: two in for each one out until the buffer is full,
 * output from min(100, buffer) held on; each output a uniform pick,
 * replaced by the buffer's last). Still a pure function of (seed, epoch),
 * so ranks, resume and the loader work unchanged. buffer 0: back to the
 * global permutation. @return 0 or SL_ENOMEM (message in err). */
int sl__sampler_stream(sl__sampler_t *s, int64_t buffer, const int64_t *groups,
                       int ngroups, char *err, size_t errlen);
/* Frees what sl__sampler_stream allocated (s may be zeroed). */
void sl__sampler_free(sl__sampler_t *s);

/* perm[0..n) = the epoch's order of dataset indices. */
void sl__sampler_permute(const sl__sampler_t *s, int64_t epoch, int64_t *perm);

/* Batch b (< nbatches) of this rank given the epoch's perm: writes the
 * dataset indices into out (room for s->batch) and returns how many. */
int sl__sampler_batch(const sl__sampler_t *s, const int64_t *perm, int64_t b,
                      int64_t *out);

#endif
