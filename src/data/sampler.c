#include "sampler.h"

#include <stdlib.h>

#include "base/base.h"
#include "base/rng.h"

int sl__sampler_init(sl__sampler_t *s, int64_t n, int batch, int rank,
                     int world, int drop_last, int shuffle, uint64_t seed,
                     char *err, size_t errlen)
{
    if (batch < 1)
        return sl__fail(err, errlen, SL_EINVAL, "batch size %d < 1", batch);
    if (world < 1 || rank < 0 || rank >= world)
        return sl__fail(err, errlen, SL_EINVAL,
                        "rank %d is not in [0, world size %d)", rank, world);
    if (n < world)
        return sl__fail(err, errlen, SL_ERANGE,
                        "%lld samples cannot feed %d ranks", (long long)n,
                        world);
    s->n = n;
    s->batch = batch;
    s->rank = rank;
    s->world = world;
    s->drop_last = drop_last;
    s->shuffle = shuffle;
    s->seed = seed;
    s->buffer = 0;
    s->work = NULL;
    int64_t q = n / world, rem = n % world;
    if (drop_last) {
        s->rank_n = q;
        s->nbatches = q / batch;
        if (s->nbatches == 0)
            return sl__fail(err, errlen, SL_ERANGE,
                            "drop_last: %lld samples per rank make no full "
                            "batch of %d",
                            (long long)q, batch);
        return 0;
    }
    s->rank_n = q + (rank < rem);
    int64_t most = q + (rem > 0);
    s->nbatches = (most + batch - 1) / batch;
    /* A short rank whose last batch would be empty needs a sample from its
     * second-to-last batch: impossible with batches of one. */
    if (rem > 0 && q % batch == 0 && batch == 1)
        return sl__fail(err, errlen, SL_ERANGE,
                        "batch size 1: %lld samples over %d ranks would give "
                        "ranks unequal batch counts; use drop_last",
                        (long long)n, world);
    return 0;
}

int sl__sampler_stream(sl__sampler_t *s, int64_t buffer, const int64_t *groups,
                       int ngroups, char *err, size_t errlen)
{
    sl__sampler_free(s);
    s->buffer = 0;
    if (buffer <= 0)
        return 0;
    if (buffer > s->n)
        buffer = s->n;
    s->work = malloc((size_t)(buffer + ngroups) * sizeof *s->work);
    if (!s->work)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    s->buffer = buffer;
    s->groups = groups;
    s->ngroups = ngroups;
    return 0;
}

void sl__sampler_free(sl__sampler_t *s)
{
    free(s->work);
    s->work = NULL;
}

/* The stream of samples: each group's in order, groups in `order`. */
typedef struct stream {
    const int64_t *groups, *order;
    int ngroups, g;
    int64_t next;
} stream_t;

static int pull(stream_t *t, int64_t *x)
{
    while (t->g < t->ngroups && t->next >= t->groups[t->order[t->g] + 1])
        if (++t->g < t->ngroups)
            t->next = t->groups[t->order[t->g]];
    if (t->g >= t->ngroups)
        return 0;
    *x = t->next++;
    return 1;
}

/* A uniform pick from buf[0..*len), replaced by the buffer's last. */
static int64_t pick(int64_t *buf, int64_t *len, sl__rng_t *r)
{
    int64_t k = (int64_t)sl__rng_below(r, (uint64_t)*len);
    int64_t x = buf[k];
    buf[k] = buf[--*len];
    return x;
}

/* WebDataset's order (sl__sampler_stream). */
static void stream_order(const sl__sampler_t *s, int64_t epoch, int64_t *perm)
{
    int64_t *buf = s->work, *order = s->work + s->buffer;
    sl__rng_t r;
    sl__rng_init(&r, s->seed, (uint64_t)epoch, 0, SL_RNG_FILE_ORDER);
    for (int g = 0; g < s->ngroups; g++)
        order[g] = g;
    for (int g = s->ngroups - 1; g > 0; g--) {
        int64_t j = (int64_t)sl__rng_below(&r, (uint64_t)g + 1);
        int64_t t = order[g];
        order[g] = order[j];
        order[j] = t;
    }
    stream_t t = {s->groups, order, s->ngroups, 0,
                  s->ngroups ? s->groups[order[0]] : 0};
    sl__rng_init(&r, s->seed, (uint64_t)epoch, 0, SL_RNG_SHUFFLE_BUFFER);
    int64_t initial = s->buffer < 100 ? s->buffer : 100, len = 0, out = 0, x;
    while (pull(&t, &x)) {
        buf[len++] = x;
        if (len < s->buffer && pull(&t, &x))
            buf[len++] = x;
        if (len >= initial)
            perm[out++] = pick(buf, &len, &r);
    }
    while (len > 0)
        perm[out++] = pick(buf, &len, &r);
}

void sl__sampler_permute(const sl__sampler_t *s, int64_t epoch, int64_t *perm)
{
    for (int64_t i = 0; i < s->n; i++)
        perm[i] = i;
    if (!s->shuffle)
        return;
    if (s->buffer > 0) {
        stream_order(s, epoch, perm);
        return;
    }
    sl__rng_t r;
    sl__rng_init(&r, s->seed, (uint64_t)epoch, 0, SL_RNG_SHUFFLE);
    for (int64_t i = s->n - 1; i > 0; i--) {
        int64_t j = (int64_t)sl__rng_below(&r, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

int sl__sampler_batch(const sl__sampler_t *s, const int64_t *perm, int64_t b,
                      int64_t *out)
{
    int64_t B = s->batch, nb = s->nbatches, rn = s->rank_n;
    int64_t start, count;
    if (rn >= (nb - 1) * B + 1) {
        start = b * B;
        count = rn - start < B ? rn - start : B;
    } else if (b < nb - 2) { /* rn == (nb-1)*B: the B-1, 1 split */
        start = b * B;
        count = B;
    } else if (b == nb - 2) {
        start = b * B;
        count = B - 1;
    } else {
        start = rn - 1;
        count = 1;
    }
    for (int64_t k = 0; k < count; k++)
        out[k] = perm[s->rank + (start + k) * s->world];
    return (int)count;
}
