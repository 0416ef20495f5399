#include "rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static void philox10(const uint32_t key_in[2], const uint32_t ctr_in[4],
                     uint32_t out[4])
{
    uint32_t k0 = key_in[0], k1 = key_in[1];
    uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void sl__rng_init(sl__rng_t *r, uint64_t seed, uint64_t epoch, uint64_t item,
                  uint32_t purpose)
{
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    /* ctr[0] counts draws; the purpose shares its top byte (2^24 blocks,
     * 2^26 words per stream: far more than any decision draws). */
    r->ctr[0] = purpose << 24;
    r->ctr[1] = (uint32_t)item;
    r->ctr[2] = (uint32_t)(item >> 32);
    r->ctr[3] = (uint32_t)epoch ^ ((uint32_t)(epoch >> 32) << 16);
    r->left = 0;
}

uint32_t sl__rng_u32(sl__rng_t *r)
{
    if (r->left == 0) {
        philox10(r->key, r->ctr, r->buf);
        r->ctr[0]++;
        r->left = 4;
    }
    return r->buf[4 - r->left--];
}

uint64_t sl__rng_u64(sl__rng_t *r)
{
    uint64_t hi = sl__rng_u32(r);
    return (hi << 32) | sl__rng_u32(r);
}

double sl__rng_double(sl__rng_t *r)
{
    return (double)(sl__rng_u64(r) >> 11) * 0x1.0p-53;
}

double sl__rng_uniform(sl__rng_t *r, double a, double b)
{
    return a + (b - a) * sl__rng_double(r);
}

double sl__rng_log_uniform(sl__rng_t *r, double lo, double hi)
{
    return exp(sl__rng_uniform(r, log(lo), log(hi)));
}

uint64_t sl__rng_below(sl__rng_t *r, uint64_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased for any n. */
    uint64_t x = sl__rng_u64(r);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t t = -n % n;
        while (low < t) {
            x = sl__rng_u64(r);
            m = (__uint128_t)x * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}
