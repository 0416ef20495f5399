/* ops/resize_avx2: AVX2 kernels of the two resample passes and the CHW
 * uint8 writer, picked at run time (the build targets baseline x86-64).
 * Same integers as the scalar code in resize.c / convert.c (the horizontal
 * pass splits the 22-bit weights for pmaddwd, exactly; see below), so the
 * results are bit-identical; only the instruction count changes.
 * tests/unit/test_image.c checks them against scalar references. */
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define SL__AVX2 __attribute__((target("avx2")))

int sl__have_avx2(void)
{
    static int cached = -1; /* benign: every thread computes the same */
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
        const char *e = getenv("SL_NO_AVX2");
        if (e && *e && strcmp(e, "0") != 0)
            v = 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}

static SL__AVX2 inline uint32_t pack_rgb(__m128i acc)
{
    acc = _mm_srai_epi32(acc, SL__RS_BITS);
    acc = _mm_packs_epi32(acc, acc);
    acc = _mm_packus_epi16(acc, acc);
    return (uint32_t)_mm_cvtsi128_si32(acc);
}

void sl__axis_expand(sl__axis_t *h)
{
    int g = h->kgroups, ks = h->ksize, in = h->hi - h->lo;
    h->kx_safe = 0;
    for (int xx = 0; xx < h->out; xx++) {
        /* all groups read pixels up to bounds + 4g (+ 4 bytes): safe when
         * that is no further than the last tap's own group would read */
        if (h->kx_safe == xx && h->bounds[2 * xx] + 4 * g <= in + 1)
            h->kx_safe = xx + 1;
        const int32_t *k = h->kk + (size_t)xx * ks;
        int16_t *o = h->kx + (size_t)xx * g * SL__KX_WORDS;
        for (int j = 0; j < g; j++, o += SL__KX_WORDS) {
            /* lane 0: taps 4j, 4j+1; lane 1: taps 4j+2, 4j+3; each pair
             * four times; kh words first (16), then kl (16). */
            for (int lane = 0; lane < 2; lane++) {
                int t = 4 * j + 2 * lane;
                int32_t ka = t < ks ? k[t] : 0, kb = t + 1 < ks ? k[t + 1] : 0;
                /* arithmetic split: kl in [0, 2^11), kh = floor(k / 2^11) */
                int16_t ha = (int16_t)(ka >> 11), la = (int16_t)(ka & 2047);
                int16_t hb = (int16_t)(kb >> 11), lb = (int16_t)(kb & 2047);
                for (int r = 0; r < 4; r++) {
                    o[8 * lane + 2 * r] = ha;
                    o[8 * lane + 2 * r + 1] = hb;
                    o[16 + 8 * lane + 2 * r] = la;
                    o[16 + 8 * lane + 2 * r + 1] = lb;
                }
            }
        }
    }
}

/* Horizontal pass, 3 bytes per pixel. Exact in 32 bits: with
 * k = kh * 2^11 + kl, sum(v * k) = (sum(v * kh) << 11) + sum(v * kl), and
 * both partial sums are pmaddwd of zero-extended samples and int16 weights.
 * Four taps per step: 16 bytes from pixel 4j, broadcast to both lanes and
 * shuffled to R R G G B B 0 0 words (lane 0: pixels 4j, 4j+1; lane 1:
 * 4j+2, 4j+3). Taps past n have zero weights; the loads read up to 13
 * bytes past the last tap (callers leave SL__SLACK).
 *
 * hpix: one output pixel's sums over ng groups, before the lane reduction:
 * lanes 0-2 and 4-6 hold R G B partial sums (without the rounding half). */
static SL__AVX2 inline __attribute__((always_inline)) __m256i
hpix(const uint8_t *p, int ng, const int16_t *k, __m256i shuf)
{
    __m256i ah = _mm256_setzero_si256(), al = ah;
    for (int i = 0; i < ng; i++, p += 12, k += SL__KX_WORDS) {
        __m256i v = _mm256_shuffle_epi8(
            _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p)),
            shuf);
        ah = _mm256_add_epi32(
            ah, _mm256_madd_epi16(v, _mm256_load_si256((const __m256i *)k)));
        al = _mm256_add_epi32(
            al,
            _mm256_madd_epi16(v, _mm256_load_si256((const __m256i *)(k + 16))));
    }
    return _mm256_add_epi32(_mm256_slli_epi32(ah, 11), al);
}

SL__AVX2 void sl__hpass3_avx2(const uint8_t *src, const sl__axis_t *h,
                              uint8_t *dst)
{
    sl__hpass3_rows_avx2(src, 0, 1, h, dst, 0);
}

/* nrows rows at once (src rows sstride bytes apart, dst rows dstride):
 * for each four outputs, all rows, so that their weights (kgroups * 64
 * bytes each) are read from memory once per call, not once per row. */
SL__AVX2 void sl__hpass3_rows_avx2(const uint8_t *src0, size_t sstride,
                                   int nrows, const sl__axis_t *h,
                                   uint8_t *dst0, size_t dstride)
{
    const __m256i shuf = _mm256_setr_epi8(
        0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, /* lane 0 */
        6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
    const __m256i half8 = _mm256_set1_epi32(1 << (SL__RS_BITS - 1));
    const __m128i rgb12 =
        _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const size_t gw = (size_t)h->kgroups * SL__KX_WORDS;
    const int *bd = h->bounds;
    const int16_t *kx = h->kx;
    int out = h->out, xx = 0, safe = h->kx_safe, g = h->kgroups;
    /* Four outputs at a time: one reduction, rounding and pack for all.
     * Where the loads allow, every output runs all g groups (zero weights
     * past its taps): a fixed trip count, so no branch misses on the
     * per-output tap count; g = 1..3 get unrolled copies. */
#define SL__H4(NG0, NG1, NG2, NG3)                                             \
    for (int r = 0; r < nrows; r++) {                                          \
        const uint8_t *src = src0 + r * sstride;                               \
        __m256i a = hpix(src + (size_t)bd[0] * 3, (NG0), kx, shuf);            \
        __m256i b = hpix(src + (size_t)bd[2] * 3, (NG1), kx + gw, shuf);       \
        __m256i c = hpix(src + (size_t)bd[4] * 3, (NG2), kx + 2 * gw, shuf);   \
        __m256i d = hpix(src + (size_t)bd[6] * 3, (NG3), kx + 3 * gw, shuf);   \
        __m256i ab = _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),   \
                                      _mm256_permute2x128_si256(a, b, 0x31));  \
        __m256i cd = _mm256_add_epi32(_mm256_permute2x128_si256(c, d, 0x20),   \
                                      _mm256_permute2x128_si256(c, d, 0x31));  \
        ab = _mm256_srai_epi32(_mm256_add_epi32(ab, half8), SL__RS_BITS);      \
        cd = _mm256_srai_epi32(_mm256_add_epi32(cd, half8), SL__RS_BITS);      \
        /* packs is per lane: [a c | b d] -> [a b c d] */                      \
        __m256i w =                                                            \
            _mm256_permute4x64_epi64(_mm256_packs_epi32(ab, cd), 0xD8);        \
        __m128i px = _mm_packus_epi16(_mm256_castsi256_si128(w),               \
                                      _mm256_extracti128_si256(w, 1));         \
        px = _mm_shuffle_epi8(px, rgb12);                                      \
        uint8_t *o = dst0 + r * dstride + 3 * (size_t)xx;                      \
        _mm_storel_epi64((__m128i *)o, px);                                    \
        uint32_t t = (uint32_t)_mm_extract_epi32(px, 2);                       \
        __builtin_memcpy(o + 8, &t, 4);                                        \
    }
#define SL__H4_FIXED(NG)                                                       \
    for (; xx + 4 <= safe; xx += 4, bd += 8, kx += 4 * gw)                     \
    SL__H4(NG, NG, NG, NG)
    switch (g) {
    case 1:
        SL__H4_FIXED(1);
        break;
    case 2:
        SL__H4_FIXED(2);
        break;
    case 3:
        SL__H4_FIXED(3);
        break;
    default:
        SL__H4_FIXED(g);
        break;
    }
    for (; xx + 4 <= out; xx += 4, bd += 8, kx += 4 * gw)
        SL__H4((bd[1] + 3) >> 2, (bd[3] + 3) >> 2, (bd[5] + 3) >> 2,
               (bd[7] + 3) >> 2);
#undef SL__H4_FIXED
#undef SL__H4
    const __m128i half = _mm_set1_epi32(1 << (SL__RS_BITS - 1));
    for (; xx < out; xx++, bd += 2, kx += gw)
        for (int r = 0; r < nrows; r++) {
            __m256i a = hpix(src0 + r * sstride + (size_t)bd[0] * 3,
                             (bd[1] + 3) >> 2, kx, shuf);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(a),
                                       _mm256_extracti128_si256(a, 1));
            uint32_t rgb = pack_rgb(_mm_add_epi32(s4, half));
            __builtin_memcpy(dst0 + r * dstride + 3 * (size_t)xx, &rgb, 3);
        }
}

/* CHW uint8 write: 16 pixels (48 bytes) at a time, each plane gathered from
 * the three 16-byte loads by pshufb (masks: [flip][3 * channel + load]). */
static const int8_t chw_masks[2][9][16] = {
    {
        {0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13},
        {1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14},
        {2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15},
    },
    {
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 15, 12, 9, 6, 3, 0},
        {-1, -1, -1, -1, -1, 14, 11, 8, 5, 2, -1, -1, -1, -1, -1, -1},
        {13, 10, 7, 4, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 13, 10, 7, 4, 1},
        {-1, -1, -1, -1, -1, 15, 12, 9, 6, 3, 0, -1, -1, -1, -1, -1},
        {14, 11, 8, 5, 2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 14, 11, 8, 5, 2},
        {-1, -1, -1, -1, -1, -1, 13, 10, 7, 4, 1, -1, -1, -1, -1, -1},
        {15, 12, 9, 6, 3, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
    },
};

SL__AVX2 void sl__chw8_avx2(const uint8_t *rgb, int w, int flip, uint8_t *d0,
                            uint8_t *d1, uint8_t *d2)
{
    const int8_t(*m)[16] = chw_masks[flip ? 1 : 0];
    __m128i mk[9];
    for (int i = 0; i < 9; i++)
        mk[i] = _mm_loadu_si128((const __m128i *)m[i]);
    uint8_t *d[3] = {d0, d1, d2};
    int j = 0;
    for (; j + 16 <= w; j += 16) {
        const uint8_t *p = rgb + 3 * (size_t)(flip ? w - 16 - j : j);
        __m128i a = _mm_loadu_si128((const __m128i *)p);
        __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
        for (int ch = 0; ch < 3; ch++) {
            __m128i v =
                _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, mk[3 * ch]),
                                          _mm_shuffle_epi8(b, mk[3 * ch + 1])),
                             _mm_shuffle_epi8(c, mk[3 * ch + 2]));
            _mm_storeu_si128((__m128i *)(d[ch] + j), v);
        }
    }
    for (; j < w; j++) {
        const uint8_t *p = rgb + 3 * (size_t)(flip ? w - 1 - j : j);
        d0[j] = p[0];
        d1[j] = p[1];
        d2[j] = p[2];
    }
}

/* Vertical pass for one output row: 16 bytes across, taps innermost, so
 * the accumulators stay in registers. */
SL__AVX2 void sl__vpass_avx2(const uint8_t *buf, size_t stride,
                             const int32_t *k, int first, int n, size_t w3,
                             uint8_t *dst)
{
    const __m256i half = _mm256_set1_epi32(1 << (SL__RS_BITS - 1));
    const uint8_t *base = buf + (size_t)first * stride;
    size_t j = 0;
    for (; j + 16 <= w3; j += 16) {
        __m256i a0 = half, a1 = half;
        const uint8_t *r = base + j;
        for (int i = 0; i < n; i++, r += stride) {
            __m128i v = _mm_loadu_si128((const __m128i *)r);
            __m256i ki = _mm256_set1_epi32(k[i]);
            a0 = _mm256_add_epi32(
                a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), ki));
            a1 = _mm256_add_epi32(
                a1, _mm256_mullo_epi32(
                        _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), ki));
        }
        a0 = _mm256_srai_epi32(a0, SL__RS_BITS);
        a1 = _mm256_srai_epi32(a1, SL__RS_BITS);
        /* packs works within 128-bit lanes: fix the order after. */
        __m256i p16 = _mm256_packs_epi32(a0, a1);
        p16 = _mm256_permute4x64_epi64(p16, 0xD8);
        __m128i p8 = _mm_packus_epi16(_mm256_castsi256_si128(p16),
                                      _mm256_extracti128_si256(p16, 1));
        _mm_storeu_si128((__m128i *)(dst + j), p8);
    }
    for (; j < w3; j++) {
        int32_t acc = 1 << (SL__RS_BITS - 1);
        const uint8_t *r = base + j;
        for (int i = 0; i < n; i++, r += stride)
            acc += *r * k[i];
        acc >>= SL__RS_BITS;
        dst[j] = (uint8_t)(acc < 0 ? 0 : acc > 255 ? 255 : acc);
    }
}

#else
int sl__have_avx2(void)
{
    return 0;
}
void sl__axis_expand(sl__axis_t *h)
{
    (void)h;
}
void sl__chw8_avx2(const uint8_t *rgb, int w, int flip, uint8_t *d0,
                   uint8_t *d1, uint8_t *d2)
{
    (void)rgb, (void)w, (void)flip, (void)d0, (void)d1, (void)d2;
}
void sl__hpass3_avx2(const uint8_t *src, const sl__axis_t *h, uint8_t *dst)
{
    (void)src, (void)h, (void)dst;
}
void sl__hpass3_rows_avx2(const uint8_t *src, size_t sstride, int nrows,
                          const sl__axis_t *h, uint8_t *dst, size_t dstride)
{
    (void)src, (void)sstride, (void)nrows, (void)h, (void)dst, (void)dstride;
}
void sl__vpass_avx2(const uint8_t *buf, size_t stride, const int32_t *k,
                    int first, int n, size_t w3, uint8_t *dst)
{
    (void)buf, (void)stride, (void)k, (void)first, (void)n, (void)w3, (void)dst;
}
#endif
