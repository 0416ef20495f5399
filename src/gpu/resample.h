/* gpu/resample: the GPU stage's crop + resize + flip + convert, one output
 * element at a time, written once for both compilers: the CUDA kernels
 * (gpu/kernels.cu) call these per thread, and the C tests call them over
 * every element to check, on any machine, that they write what the CPU
 * path writes (tests/unit/test_gpu_resample.c).
 *
 * The arithmetic is the CPU path's (ops/resize.c, ops/convert.c): PIL's
 * antialiased bilinear with the same integer weights and bounds (computed
 * on the host by sl__image_plan, the CPU's own planner), the same pass
 * order, an accumulator starting at 1 << 21, clipping to uint8 between the
 * passes, and the same float table for normalisation. Given the same
 * decoded pixels the output is the same bytes; only the decoder (nvJPEG's
 * IDCT and chroma upsampling against libjpeg-turbo's) can differ
 * (docs/DESIGN.md, "GPU stage"). */
#ifndef SL_GPU_RESAMPLE_H
#define SL_GPU_RESAMPLE_H

#include <stdint.h>

#ifdef __CUDACC__
#define SL__HD __host__ __device__ static inline
#else
#define SL__HD static inline
#endif

/* The fixed-point bits of the weights: ops/ops_internal.h's SL__RS_BITS
 * (checked equal there). */
#define SL__GPU_RS_BITS 22

/* One sample's work, pointers in the memory the code runs on. */
typedef struct sl__gpu_plan {
    const uint8_t *src;                 /* decoded RGB, interleaved */
    uint8_t *tmp;                       /* the first pass's output */
    void *out;                          /* the sample's slot */
    const int32_t *hb, *hkk, *vb, *vkk; /* bounds (first, count), weights */
    const float *lut; /* float32 output: 3 x 256 normalised values */
    int pitch;        /* bytes per src row */
    int ox, oy;       /* src pixel of local (0, 0) */
    int out_w, out_h;
    int hk, vk; /* taps per output of each axis */
    int hn, vn; /* local extent of each axis (hi - lo) */
    int vfirst; /* 1: the vertical pass first (PIL's order rule) */
    int flip;
    int f32; /* 1: float32 via lut, 0: uint8 */
    int chw; /* 1: planar CHW, 0: HWC */
} sl__gpu_plan_t;

SL__HD uint8_t sl__gpu_clip8(int32_t acc)
{
    int32_t v = acc >> SL__GPU_RS_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Elements of the first pass: rows x columns of tmp. */
SL__HD int sl__gpu_pass1_count(const sl__gpu_plan_t *p)
{
    return p->vfirst ? p->out_h * p->hn : p->vn * p->out_w;
}

/* Element e of the first pass (three channels). Horizontal first: tmp row
 * r (source row oy + r), output column xx. Vertical first: tmp row yy
 * (output row), source column ox + x. */
SL__HD void sl__gpu_pass1(const sl__gpu_plan_t *p, int e)
{
    int32_t s0 = 1 << (SL__GPU_RS_BITS - 1), s1 = s0, s2 = s0;
    if (!p->vfirst) {
        int r = e / p->out_w, xx = e % p->out_w;
        const int32_t *k = p->hkk + (int64_t)xx * p->hk;
        int n = p->hb[2 * xx + 1];
        const uint8_t *s = p->src + (int64_t)(p->oy + r) * p->pitch +
                           (int64_t)(p->ox + p->hb[2 * xx]) * 3;
        for (int i = 0; i < n; i++) {
            s0 += s[3 * i] * k[i];
            s1 += s[3 * i + 1] * k[i];
            s2 += s[3 * i + 2] * k[i];
        }
        uint8_t *d = p->tmp + ((int64_t)r * p->out_w + xx) * 3;
        d[0] = sl__gpu_clip8(s0);
        d[1] = sl__gpu_clip8(s1);
        d[2] = sl__gpu_clip8(s2);
        return;
    }
    int yy = e / p->hn, x = e % p->hn;
    const int32_t *k = p->vkk + (int64_t)yy * p->vk;
    int n = p->vb[2 * yy + 1];
    const uint8_t *s = p->src + (int64_t)(p->oy + p->vb[2 * yy]) * p->pitch +
                       (int64_t)(p->ox + x) * 3;
    for (int i = 0; i < n; i++) {
        const uint8_t *q = s + (int64_t)i * p->pitch;
        s0 += q[0] * k[i];
        s1 += q[1] * k[i];
        s2 += q[2] * k[i];
    }
    uint8_t *d = p->tmp + ((int64_t)yy * p->hn + x) * 3;
    d[0] = sl__gpu_clip8(s0);
    d[1] = sl__gpu_clip8(s1);
    d[2] = sl__gpu_clip8(s2);
}

/* Elements of the second pass: output pixels. */
SL__HD int sl__gpu_pass2_count(const sl__gpu_plan_t *p)
{
    return p->out_h * p->out_w;
}

/* Output pixel e = (yy, j): the resampled column xx (j, or out_w-1-j when
 * flipped), written in the slot's layout and type. */
SL__HD void sl__gpu_pass2(const sl__gpu_plan_t *p, int e)
{
    int yy = e / p->out_w, j = e % p->out_w;
    int xx = p->flip ? p->out_w - 1 - j : j;
    int32_t s0 = 1 << (SL__GPU_RS_BITS - 1), s1 = s0, s2 = s0;
    if (!p->vfirst) {
        const int32_t *k = p->vkk + (int64_t)yy * p->vk;
        int n = p->vb[2 * yy + 1];
        int64_t stride = (int64_t)p->out_w * 3;
        const uint8_t *t = p->tmp + (int64_t)p->vb[2 * yy] * stride + xx * 3;
        for (int i = 0; i < n; i++) {
            const uint8_t *q = t + (int64_t)i * stride;
            s0 += q[0] * k[i];
            s1 += q[1] * k[i];
            s2 += q[2] * k[i];
        }
    } else {
        const int32_t *k = p->hkk + (int64_t)xx * p->hk;
        int n = p->hb[2 * xx + 1];
        const uint8_t *t = p->tmp + ((int64_t)yy * p->hn + p->hb[2 * xx]) * 3;
        for (int i = 0; i < n; i++) {
            s0 += t[3 * i] * k[i];
            s1 += t[3 * i + 1] * k[i];
            s2 += t[3 * i + 2] * k[i];
        }
    }
    uint8_t v[3] = {sl__gpu_clip8(s0), sl__gpu_clip8(s1), sl__gpu_clip8(s2)};
    int64_t plane = (int64_t)p->out_w * p->out_h;
    int64_t px = (int64_t)yy * p->out_w + j;
    for (int c = 0; c < 3; c++) {
        int64_t at = p->chw ? c * plane + px : px * 3 + c;
        if (p->f32)
            ((float *)p->out)[at] = p->lut[c * 256 + v[c]];
        else
            ((uint8_t *)p->out)[at] = v[c];
    }
}

#endif
