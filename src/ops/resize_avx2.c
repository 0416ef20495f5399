/* ops/resize_avx2: AVX2 kernels of the two resample passes, picked at run
 * time (the build targets baseline x86-64). Same arithmetic as the scalar
 * code in resize.c: 32-bit products of uint8 samples and 22-bit weights,
 * so the results are bit-identical; only the instruction count changes. */
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

/* Horizontal pass, 3 bytes per pixel. Two taps per step: 8 bytes hold
 * pixels i and i+1, shuffled to R G B 0 R G B 0 and widened to 8 lanes.
 * Reads up to 2 bytes past the last tap (callers leave SL__SLACK). */
SL__AVX2 void sl__hpass3_avx2(const uint8_t *src, const sl__axis_t *h,
                              uint8_t *dst)
{
    const __m128i shuf =
        _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i dup = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    const __m128i half = _mm_set1_epi32(1 << (SL__RS_BITS - 1));
    for (int xx = 0; xx < h->out; xx++) {
        const int32_t *k = h->kk + (size_t)xx * h->ksize;
        const uint8_t *p = src + (size_t)h->bounds[2 * xx] * 3;
        int n = h->bounds[2 * xx + 1], i = 0;
        __m256i acc = _mm256_setzero_si256();
        for (; i + 2 <= n; i += 2) {
            __m128i px = _mm_loadl_epi64((const __m128i *)(p + 3 * i));
            __m256i v = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(px, shuf));
            __m256i kk = _mm256_permutevar8x32_epi32(
                _mm256_castsi128_si256(
                    _mm_loadl_epi64((const __m128i *)(k + i))),
                dup);
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(v, kk));
        }
        __m128i a = _mm_add_epi32(_mm256_castsi256_si128(acc),
                                  _mm256_extracti128_si256(acc, 1));
        a = _mm_add_epi32(a, half);
        if (i < n) {
            int32_t px;
            __builtin_memcpy(&px, p + 3 * i, 4);
            __m128i v = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(px));
            a = _mm_add_epi32(a, _mm_mullo_epi32(v, _mm_set1_epi32(k[i])));
        }
        uint32_t rgb = pack_rgb(a);
        dst[3 * xx] = (uint8_t)rgb;
        dst[3 * xx + 1] = (uint8_t)(rgb >> 8);
        dst[3 * xx + 2] = (uint8_t)(rgb >> 16);
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
void sl__hpass3_avx2(const uint8_t *src, const sl__axis_t *h, uint8_t *dst)
{
    (void)src, (void)h, (void)dst;
}
void sl__vpass_avx2(const uint8_t *buf, size_t stride, const int32_t *k,
                    int first, int n, size_t w3, uint8_t *dst)
{
    (void)buf, (void)stride, (void)k, (void)first, (void)n, (void)w3, (void)dst;
}
#endif
