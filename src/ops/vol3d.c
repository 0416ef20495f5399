/* The 3-D U-Net (KiTS19) preprocessing ops on volumes: sluice/volops.h.
 *
 * Each op follows the MLPerf training reference's arithmetic (float32 where
 * it computes in float32, its order of random decisions), with the random
 * draws from the counter RNG so that a sample's patch depends on (seed,
 * epoch, sample) only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/rng.h"
#include "sluice/volops.h"
#include "vol3d.h"

#define TWO_PI 6.283185307179586476925286766559

#define MAX_AXIS ((int64_t)1 << 31)

static int dims_ok(const int64_t d[3])
{
    for (int i = 0; i < 3; i++)
        if (d[i] < 1 || d[i] >= MAX_AXIS)
            return 0;
    /* The voxel count fits size_t with room for 8-byte elements. */
    return (double)d[0] * (double)d[1] * (double)d[2] < 0x1p60;
}

static size_t nvox(const int64_t d[3])
{
    return (size_t)d[0] * (size_t)d[1] * (size_t)d[2];
}

int sl_vol_resample_shape(const int64_t dims[3], const double spacing[3],
                          const double target[3], int64_t out[3])
{
    if (!dims || !spacing || !target || !out || !dims_ok(dims))
        return SL_EINVAL;
    for (int i = 0; i < 3; i++) {
        if (!(spacing[i] > 0) || !(target[i] > 0) || !isfinite(spacing[i]) ||
            !isfinite(target[i]))
            return SL_EINVAL;
        double n = spacing[i] / target[i] * (double)dims[i];
        if (!(n >= 1) || n >= (double)MAX_AXIS)
            return SL_EINVAL;
        out[i] = (int64_t)n; /* numpy's astype(int): truncation */
    }
    return dims_ok(out) ? 0 : SL_EINVAL;
}

/* One axis of an aligned-corners linear resample: for each output index
 * the lower source index and the weight of the upper one (torch's
 * area_pixel_compute_source_index in float). */
typedef struct lin_axis {
    int64_t *i0;
    float *w1;
    int64_t n_in, n_out;
} lin_axis_t;

static int lin_axis_make(lin_axis_t *a, int64_t n_in, int64_t n_out)
{
    a->n_in = n_in;
    a->n_out = n_out;
    a->i0 = malloc((size_t)n_out * sizeof *a->i0);
    a->w1 = malloc((size_t)n_out * sizeof *a->w1);
    if (!a->i0 || !a->w1)
        return SL_ENOMEM;
    float scale = n_out > 1 ? (float)(n_in - 1) / (float)(n_out - 1) : 0.0f;
    for (int64_t o = 0; o < n_out; o++) {
        float src = scale * (float)o;
        int64_t i = (int64_t)src;
        if (i > n_in - 1)
            i = n_in - 1;
        float l = src - (float)i;
        a->i0[o] = i;
        a->w1[o] = l < 0 ? 0 : l > 1 ? 1 : l;
    }
    return 0;
}

static void lin_axis_free(lin_axis_t *a)
{
    free(a->i0);
    free(a->w1);
}

/* w = w0 r0 + w1 r1: the one expression every linear pass uses, so that
 * the slice-by-slice form equals the whole-volume one bit for bit. */
static void lerp_rows(const float *r0, const float *r1, float w0, float w1,
                      float *w, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        w[k] = w0 * r0[k] + w1 * r1[k];
}

/* Resamples axis `ax` of a C-order volume `d` into `out` (axis length
 * a->n_out; the others unchanged). */
static void lin_pass(const float *in, const int64_t d[3], int ax,
                     const lin_axis_t *a, float *out)
{
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; i++)
        outer *= d[i];
    for (int i = ax + 1; i < 3; i++)
        inner *= d[i];
    int64_t n_in = a->n_in, n_out = a->n_out;
    for (int64_t p = 0; p < outer; p++) {
        const float *src = in + (size_t)(p * n_in * inner);
        float *dst = out + (size_t)(p * n_out * inner);
        for (int64_t o = 0; o < n_out; o++) {
            int64_t i0 = a->i0[o];
            int64_t i1 = i0 < n_in - 1 ? i0 + 1 : i0;
            float w1 = a->w1[o], w0 = 1.0f - w1;
            const float *r0 = src + (size_t)(i0 * inner);
            const float *r1 = src + (size_t)(i1 * inner);
            lerp_rows(r0, r1, w0, w1, dst + (size_t)(o * inner), inner);
        }
    }
}

int sl_vol_resample_linear(const float *in, const int64_t in_dims[3],
                           float *out, const int64_t out_dims[3])
{
    if (!in || !out || !dims_ok(in_dims) || !dims_ok(out_dims))
        return SL_EINVAL;
    lin_axis_t ax[3] = {{0}};
    int rc = 0;
    float *t1 = NULL, *t2 = NULL;
    for (int i = 0; i < 3 && !rc; i++)
        rc = lin_axis_make(&ax[i], in_dims[i], out_dims[i]);
    /* Fastest axis first, then the middle, then the slowest. */
    int64_t d1[3] = {in_dims[0], in_dims[1], out_dims[2]};
    int64_t d2[3] = {in_dims[0], out_dims[1], out_dims[2]};
    if (!rc) {
        t1 = malloc(nvox(d1) * sizeof *t1);
        t2 = malloc(nvox(d2) * sizeof *t2);
        if (!t1 || !t2)
            rc = SL_ENOMEM;
    }
    if (!rc) {
        lin_pass(in, in_dims, 2, &ax[2], t1);
        lin_pass(t1, d1, 1, &ax[1], t2);
        lin_pass(t2, d2, 0, &ax[0], out);
    }
    free(t1);
    free(t2);
    for (int i = 0; i < 3; i++)
        lin_axis_free(&ax[i]);
    return rc;
}

/* torch's nearest_idx: same size, exact doubling, else floor(o * scale). */
static int64_t nearest_src(int64_t o, int64_t n_in, int64_t n_out)
{
    if (n_out == n_in)
        return o;
    if (n_out == 2 * n_in)
        return o >> 1;
    float scale = (float)n_in / (float)n_out;
    int64_t i = (int64_t)floorf((float)o * scale);
    return i < n_in - 1 ? i : n_in - 1;
}

int sl_vol_resample_nearest(const uint8_t *in, const int64_t in_dims[3],
                            uint8_t *out, const int64_t out_dims[3])
{
    if (!in || !out || !dims_ok(in_dims) || !dims_ok(out_dims))
        return SL_EINVAL;
    int64_t *iz = malloc((size_t)out_dims[2] * sizeof *iz);
    if (!iz)
        return SL_ENOMEM;
    for (int64_t z = 0; z < out_dims[2]; z++)
        iz[z] = nearest_src(z, in_dims[2], out_dims[2]);
    uint8_t *w = out;
    for (int64_t x = 0; x < out_dims[0]; x++) {
        int64_t sx = nearest_src(x, in_dims[0], out_dims[0]);
        for (int64_t y = 0; y < out_dims[1]; y++) {
            int64_t sy = nearest_src(y, in_dims[1], out_dims[1]);
            const uint8_t *row =
                in + (size_t)((sx * in_dims[1] + sy) * in_dims[2]);
            for (int64_t z = 0; z < out_dims[2]; z++)
                *w++ = row[iz[z]];
        }
    }
    free(iz);
    return 0;
}

/* A streaming resample's arguments: callbacks, shapes, a range of output
 * slices. */
static int range_ok(const int64_t in_dims[3], const int64_t out_dims[3],
                    int64_t q0, int64_t q1, sl_vol_slice_fn pull,
                    sl_vol_slice_fn push)
{
    return pull && push && dims_ok(in_dims) && dims_ok(out_dims) && q0 >= 0 &&
           q0 <= q1 && q1 <= out_dims[0];
}

typedef int (*range_fn)(const int64_t *, const int64_t *, int64_t, int64_t, int,
                        int, sl_vol_slice_fn, sl_vol_slice_fn, void *);

/* A streaming resample of the whole volume: every output slice, the input
 * read through. */
static int whole(range_fn f, const int64_t in_dims[3],
                 const int64_t out_dims[3], sl_vol_slice_fn pull,
                 sl_vol_slice_fn push, void *ctx)
{
    if (!in_dims || !out_dims || !pull || !push || !dims_ok(in_dims) ||
        !dims_ok(out_dims))
        return SL_EINVAL;
    return f(in_dims, out_dims, 0, out_dims[0], 1, 0, pull, push, ctx);
}

int sl__vol_resample_linear_range(const int64_t in_dims[3],
                                  const int64_t out_dims[3], int64_t q0,
                                  int64_t q1, int through, int sparse,
                                  sl_vol_slice_fn pull, sl_vol_slice_fn push,
                                  void *ctx)
{
    if (!range_ok(in_dims, out_dims, q0, q1, pull, push))
        return SL_EINVAL;
    lin_axis_t ax[3] = {{0}};
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++)
        rc = lin_axis_make(&ax[i], in_dims[i], out_dims[i]);
    const int64_t d_in[3] = {1, in_dims[1], in_dims[2]};
    const int64_t d_mid[3] = {1, in_dims[1], out_dims[2]};
    size_t n_in = nvox(d_in), n_mid = nvox(d_mid);
    size_t n_out = (size_t)out_dims[1] * (size_t)out_dims[2];
    float *in = NULL, *mid = NULL, *ring = NULL, *o = NULL;
    uint8_t *need = NULL;
    if (!rc) {
        in = malloc(n_in * sizeof *in);
        mid = malloc(n_mid * sizeof *mid);
        ring = malloc(2 * n_out * sizeof *ring);
        o = malloc(n_out * sizeof *o);
        need = calloc((size_t)in_dims[0], 1);
        if (!in || !mid || !ring || !o || !need)
            rc = SL_ENOMEM;
    }
    const lin_axis_t *a = &ax[0];
    for (int64_t q = q0; !rc && q < q1; q++) {
        int64_t i0 = a->i0[q];
        need[i0] = 1;
        need[i0 < in_dims[0] - 1 ? i0 + 1 : i0] = 1;
    }
    /* Input slices resampled on axes 2 then 1 (as the whole-volume op
     * does) into a ring of two: output slice q blends slices i0 and i0 + 1,
     * and i0 never decreases. Slices before the range are read and passed
     * over (a stream has no other way to them). */
    int64_t next = 0;
    for (int64_t q = q0; !rc && q < q1; q++) {
        int64_t i0 = a->i0[q];
        int64_t i1 = i0 < in_dims[0] - 1 ? i0 + 1 : i0;
        while (!rc && next <= i1) {
            rc = pull(ctx, next, sparse && !need[next] ? NULL : in);
            if (!rc && need[next]) {
                float *r = ring + (size_t)(next & 1) * n_out;
                lin_pass(in, d_in, 2, &ax[2], mid);
                lin_pass(mid, d_mid, 1, &ax[1], r);
            }
            next++;
        }
        if (rc)
            break;
        float w1 = a->w1[q], w0 = 1.0f - w1;
        lerp_rows(ring + (size_t)(i0 & 1) * n_out,
                  ring + (size_t)(i1 & 1) * n_out, w0, w1, o, (int64_t)n_out);
        rc = push(ctx, q, o);
    }
    while (!rc && through && next < in_dims[0]) /* read through */
        rc = pull(ctx, next++, sparse ? NULL : in);
    free(in);
    free(mid);
    free(ring);
    free(o);
    free(need);
    for (int i = 0; i < 3; i++)
        lin_axis_free(&ax[i]);
    return rc;
}

int sl_vol_resample_linear_slices(const int64_t in_dims[3],
                                  const int64_t out_dims[3],
                                  sl_vol_slice_fn pull, sl_vol_slice_fn push,
                                  void *ctx)
{
    return whole(sl__vol_resample_linear_range, in_dims, out_dims, pull, push,
                 ctx);
}

int sl__vol_resample_nearest_range(const int64_t in_dims[3],
                                   const int64_t out_dims[3], int64_t q0,
                                   int64_t q1, int through, int sparse,
                                   sl_vol_slice_fn pull, sl_vol_slice_fn push,
                                   void *ctx)
{
    if (!range_ok(in_dims, out_dims, q0, q1, pull, push))
        return SL_EINVAL;
    const int64_t d_in[3] = {1, in_dims[1], in_dims[2]};
    const int64_t d_out[3] = {1, out_dims[1], out_dims[2]};
    size_t n_out = nvox(d_out);
    uint8_t *in = malloc(nvox(d_in)), *cur = malloc(n_out), *o = malloc(n_out);
    int rc = in && cur && o ? 0 : SL_ENOMEM;
    int64_t q = q0;
    /* the last input slice the range needs (source indices never
     * decrease) */
    int64_t last = q1 > q0 ? nearest_src(q1 - 1, in_dims[0], out_dims[0]) : -1;
    for (int64_t i = 0; !rc && i < in_dims[0] && (through || i <= last); i++) {
        int needed = q < q1 && nearest_src(q, in_dims[0], out_dims[0]) == i;
        rc = pull(ctx, i, sparse && !needed ? NULL : in);
        if (rc || !needed)
            continue;
        rc = sl_vol_resample_nearest(in, d_in, cur, d_out);
        for (; !rc && q < q1 && nearest_src(q, in_dims[0], out_dims[0]) == i;
             q++) {
            memcpy(o, cur, n_out); /* push may change its slice */
            rc = push(ctx, q, o);
        }
    }
    free(in);
    free(cur);
    free(o);
    return rc;
}

int sl_vol_resample_nearest_slices(const int64_t in_dims[3],
                                   const int64_t out_dims[3],
                                   sl_vol_slice_fn pull, sl_vol_slice_fn push,
                                   void *ctx)
{
    return whole(sl__vol_resample_nearest_range, in_dims, out_dims, pull, push,
                 ctx);
}

void sl_vol_normalize(float *x, size_t n, float lo, float hi, float mean,
                      float std)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v > hi ? hi : v; /* np.clip (NaN stays NaN) */
        x[i] = (v - mean) / std;
    }
}

int sl_vol_pad_edge(const void *in, const int64_t dims[3], size_t esize,
                    const int64_t min_dims[3], void *out, int64_t out_dims[3])
{
    if ((out && !in) || !dims || !dims_ok(dims) || !min_dims || !out_dims ||
        esize == 0 || esize > 8)
        return SL_EINVAL;
    int64_t before[3];
    for (int i = 0; i < 3; i++) {
        int64_t extra = min_dims[i] > dims[i] ? min_dims[i] - dims[i] : 0;
        before[i] = extra / 2;
        out_dims[i] = dims[i] + extra;
    }
    if (!dims_ok(out_dims))
        return SL_EINVAL;
    if (!out)
        return 0;
    if (!in)
        return SL_EINVAL;
    const uint8_t *src = in;
    uint8_t *w = out;
    size_t row = (size_t)dims[2] * esize;
    for (int64_t x = 0; x < out_dims[0]; x++) {
        int64_t sx = x - before[0];
        sx = sx < 0 ? 0 : sx >= dims[0] ? dims[0] - 1 : sx;
        for (int64_t y = 0; y < out_dims[1]; y++) {
            int64_t sy = y - before[1];
            sy = sy < 0 ? 0 : sy >= dims[1] ? dims[1] - 1 : sy;
            const uint8_t *r = src + (size_t)(sx * dims[1] + sy) * row;
            /* Left edge, the row, right edge. */
            for (int64_t z = 0; z < before[2]; z++, w += esize)
                memcpy(w, r, esize);
            memcpy(w, r, row);
            w += row;
            for (int64_t z = before[2] + dims[2]; z < out_dims[2];
                 z++, w += esize)
                memcpy(w, r + row - esize, esize);
        }
    }
    return 0;
}

void sl_vol_aug_init(sl_vol_aug_t *a)
{
    if (!a)
        return;
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->patch[0] = a->patch[1] = a->patch[2] = 128;
    a->oversampling = 0.4;
    a->flip_prob = 1.0 / 3.0;
    a->brightness_prob = 0.1;
    a->brightness_factor = 0.3;
    a->noise_prob = 0.1;
    a->noise_std = 0.1;
}

/* Python's random.randrange(n) with the reference's guard: 0 when n is 0. */
static int64_t randrange(sl__rng_t *r, int64_t n)
{
    return n <= 0 ? 0 : (int64_t)sl__rng_below(r, (uint64_t)n);
}

/* Keeps the two largest boxes of a class as a stable ascending sort's
 * last two (ties by label order: scipy's find_objects order). */
static void keep_two(sl_vol_fg_t *fg, int k, const int64_t lo[3],
                     const int64_t hi[3])
{
    double v = (double)(hi[0] - lo[0]) * (double)(hi[1] - lo[1]) *
               (double)(hi[2] - lo[2]);
    int n = fg->nbox[k];
    int at; /* slot the new box takes, the others shifted down */
    if (n < 2) {
        at = n;
        if (n == 1 && v < fg->box_vol[k][0]) {
            fg->box_vol[k][1] = fg->box_vol[k][0];
            memcpy(fg->box_lo[k][1], fg->box_lo[k][0], sizeof fg->box_lo[k][0]);
            memcpy(fg->box_hi[k][1], fg->box_hi[k][0], sizeof fg->box_hi[k][0]);
            at = 0;
        }
        fg->nbox[k]++;
    } else if (v >= fg->box_vol[k][1]) {
        fg->box_vol[k][0] = fg->box_vol[k][1];
        memcpy(fg->box_lo[k][0], fg->box_lo[k][1], sizeof fg->box_lo[k][0]);
        memcpy(fg->box_hi[k][0], fg->box_hi[k][1], sizeof fg->box_hi[k][0]);
        at = 1;
    } else if (v >= fg->box_vol[k][0]) {
        at = 0;
    } else {
        return;
    }
    fg->box_vol[k][at] = v;
    memcpy(fg->box_lo[k][at], lo, sizeof fg->box_lo[k][at]);
    memcpy(fg->box_hi[k][at], hi, sizeof fg->box_hi[k][at]);
}

size_t sl__vol_fill_cap = SL__VOL_FILL_CAP;

/* One flood fill's state: the stack holds at most `cap` voxels; a voxel
 * found with the stack full is marked in `pend` instead (its range
 * [plo, phi]) and pushed again when the stack empties, so memory is two
 * bitsets and the stack's cap whatever the component's shape. */
typedef struct fill {
    size_t *q, qn, qcap, cap, depth;
    uint8_t *seen, *pend;
    size_t npend, plo, phi, nbits;
} fill_t;

static int bit(const uint8_t *b, size_t i)
{
    return b[i >> 3] >> (i & 7) & 1;
}

/* Pushes voxel u (already seen); 0, or SL_ENOMEM. */
static int fill_push(fill_t *f, size_t u)
{
    if (f->qn == f->qcap && f->qcap < f->cap) {
        size_t nc = f->qcap * 2 < f->cap ? f->qcap * 2 : f->cap;
        size_t *g = realloc(f->q, nc * sizeof *g);
        if (!g)
            return SL_ENOMEM;
        f->q = g;
        f->qcap = nc;
    }
    if (f->qn < f->qcap) {
        f->q[f->qn++] = u;
        if (f->qn > f->depth)
            f->depth = f->qn;
        return 0;
    }
    if (!f->pend && !(f->pend = calloc((f->nbits + 7) / 8, 1)))
        return SL_ENOMEM;
    f->pend[u >> 3] |= (uint8_t)(1u << (u & 7));
    if (f->npend++ == 0) {
        f->plo = f->phi = u;
    } else {
        f->plo = u < f->plo ? u : f->plo;
        f->phi = u > f->phi ? u : f->phi;
    }
    return 0;
}

/* Refills the empty stack from the pending voxels, lowest first. */
static void fill_refill(fill_t *f)
{
    size_t i = f->plo;
    for (; i <= f->phi && f->qn < f->qcap; i++) {
        if (!(i & 7) && !f->pend[i >> 3]) { /* a byte of none */
            i += 7;
            continue;
        }
        if (!bit(f->pend, i))
            continue;
        f->pend[i >> 3] &= (uint8_t) ~(1u << (i & 7));
        f->npend--;
        f->q[f->qn++] = i;
    }
    f->plo = i;
}

int sl__vol_foreground_capped(const uint8_t *label, const int64_t d[3],
                              sl_vol_fg_t *fg, size_t cap, size_t *depth,
                              char *err, size_t errlen)
{
    if (!label || !fg || !dims_ok(d) || cap < 1)
        return sl__fail(err, errlen, SL_EINVAL, "volume labels: bad arguments");
    memset(fg, 0, sizeof *fg);
    fg->size = sizeof *fg;
    if (depth)
        *depth = 0;
    size_t n = nvox(d);
    int slot[256];
    for (int c = 0; c < 256; c++)
        slot[c] = -1;
    uint8_t present[256] = {0};
    for (size_t i = 0; i < n; i++)
        present[label[i]] = 1;
    for (int c = 1; c < 256; c++)
        if (present[c]) {
            slot[c] = fg->ncls;
            fg->cls[fg->ncls++] = (uint8_t)c;
        }
    if (!fg->ncls)
        return 0;
    /* Every voxel belongs to one class: one bitset serves all flood fills,
     * each started in raster order (scipy's numbering per class). */
    fill_t f = {.cap = cap, .nbits = n};
    f.qcap = cap < 1024 ? cap : 1024;
    f.seen = calloc((n + 7) / 8, 1);
    f.q = malloc(f.qcap * sizeof *f.q);
    int rc = f.seen && f.q ? 0 : SL_ENOMEM;
    size_t sy = (size_t)d[2], sx = (size_t)(d[1] * d[2]);
    for (size_t s = 0; !rc && s < n; s++) {
        uint8_t cls = label[s];
        if (!cls || bit(f.seen, s))
            continue;
        int64_t lo[3] = {INT64_MAX, INT64_MAX, INT64_MAX}, hi[3] = {-1, -1, -1};
        f.seen[s >> 3] |= (uint8_t)(1u << (s & 7));
        f.qn = 0;
        rc = fill_push(&f, s);
        while (!rc && (f.qn || f.npend)) {
            if (!f.qn)
                fill_refill(&f);
            size_t v = f.q[--f.qn];
            int64_t c[3] = {(int64_t)(v / sx), (int64_t)(v / sy % (size_t)d[1]),
                            (int64_t)(v % sy)};
            for (int i = 0; i < 3; i++) {
                if (c[i] < lo[i])
                    lo[i] = c[i];
                if (c[i] + 1 > hi[i])
                    hi[i] = c[i] + 1;
            }
            size_t nb[6];
            int k = 0;
            if (c[0] > 0)
                nb[k++] = v - sx;
            if (c[0] + 1 < d[0])
                nb[k++] = v + sx;
            if (c[1] > 0)
                nb[k++] = v - sy;
            if (c[1] + 1 < d[1])
                nb[k++] = v + sy;
            if (c[2] > 0)
                nb[k++] = v - 1;
            if (c[2] + 1 < d[2])
                nb[k++] = v + 1;
            for (int j = 0; !rc && j < k; j++) {
                size_t u = nb[j];
                if (label[u] != cls || bit(f.seen, u))
                    continue;
                f.seen[u >> 3] |= (uint8_t)(1u << (u & 7));
                rc = fill_push(&f, u);
            }
        }
        int k = slot[cls];
        fg->ncomp[k]++;
        keep_two(fg, k, lo, hi);
    }
    if (depth)
        *depth = f.depth;
    free(f.seen);
    free(f.pend);
    free(f.q);
    if (rc)
        return sl__fail(err, errlen, rc,
                        "volume labels: out of memory labelling components "
                        "(%.1f MB of bitsets and a %.1f MB stack for %zu "
                        "voxels)",
                        (double)((n + 7) / 8) * 2 / 1e6,
                        (double)cap * sizeof(size_t) / 1e6, n);
    return 0;
}

int sl_vol_foreground(const uint8_t *label, const int64_t d[3], sl_vol_fg_t *fg,
                      char *err, size_t errlen)
{
    return sl__vol_foreground_capped(label, d, fg, sl__vol_fill_cap, NULL, err,
                                     errlen);
}

/* The reference's adjust(): the component's extent on one axis moved to
 * the patch length by a drawn split of the difference. */
static void adjust(sl__rng_t *r, int64_t start, int64_t stop, int64_t p,
                   int64_t shape, int64_t *adj, int64_t *lo_out)
{
    int64_t diff = p - (stop - start);
    int64_t sign = diff < 0 ? -1 : 1;
    diff = diff < 0 ? -diff : diff;
    int64_t ladj = randrange(r, diff), hadj = diff - ladj;
    int64_t low = start - sign * ladj;
    int64_t high = stop + sign * hadj;
    low = low > 0 ? low : 0;
    high = high < shape ? high : shape;
    diff = p - (high - low);
    if (diff > 0 && low == 0)
        high += diff;
    else if (diff > 0)
        low -= diff;
    *adj = ladj;
    *lo_out = low;
}

int sl_vol_predict(const sl_vol_aug_t *a, uint64_t seed, uint64_t epoch,
                   uint64_t sample, sl_vol_draw_t *d)
{
    if (!a || !d || a->size < sizeof *a)
        return SL_EINVAL;
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    sl__rng_t r;
    sl__rng_init(&r, seed, epoch, sample, SL_RNG_VOL_DRAW);
    d->foreground = sl__rng_double(&r) < a->oversampling;
    for (int i = 0; i < 3; i++)
        d->flip[i] = sl__rng_double(&r) < a->flip_prob;
    if (sl__rng_double(&r) < a->brightness_prob) {
        d->brightness = 1;
        d->brightness_mul =
            1.0 + sl__rng_uniform(&r, 1.0 - a->brightness_factor,
                                  1.0 + a->brightness_factor);
    }
    if (sl__rng_double(&r) < a->noise_prob) {
        d->noise = 1;
        d->noise_sd = sl__rng_uniform(&r, 0.0, a->noise_std);
    }
    return 0;
}

int sl_vol_draw_fg(const sl_vol_fg_t *fg, const int64_t dims[3],
                   const sl_vol_aug_t *a, uint64_t seed, uint64_t epoch,
                   uint64_t sample, sl_vol_draw_t *d, char *err, size_t errlen)
{
    if (!fg || !a || !d || fg->size < sizeof *fg || a->size < sizeof *a ||
        !dims_ok(dims))
        return sl__fail(err, errlen, SL_EINVAL, "volume draw: bad arguments");
    for (int i = 0; i < 3; i++)
        if (a->patch[i] < 1 || a->patch[i] > dims[i])
            return sl__fail(err, errlen, SL_EINVAL,
                            "volume draw: patch %lldx%lldx%lld larger than "
                            "the volume %lldx%lldx%lld (pad it first)",
                            (long long)a->patch[0], (long long)a->patch[1],
                            (long long)a->patch[2], (long long)dims[0],
                            (long long)dims[1], (long long)dims[2]);
    sl_vol_predict(a, seed, epoch, sample, d);
    sl__rng_t r;
    sl__rng_init(&r, seed, epoch, sample, SL_RNG_VOL_CROP);
    if (d->foreground) {
        d->foreground = fg->ncls > 0; /* none: the uniform crop */
        if (fg->ncls) {
            int k = (int)randrange(&r, fg->ncls);
            d->cls = fg->cls[k];
            d->ncomponents = fg->ncomp[k];
            d->component = (int)randrange(&r, fg->nbox[k]);
            for (int i = 0; i < 3; i++) {
                d->box_lo[i] = fg->box_lo[k][d->component][i];
                d->box_hi[i] = fg->box_hi[k][d->component][i];
                adjust(&r, d->box_lo[i], d->box_hi[i], a->patch[i], dims[i],
                       &d->adj[i], &d->lo[i]);
            }
        }
    }
    if (!d->foreground)
        for (int i = 0; i < 3; i++)
            d->lo[i] = randrange(&r, dims[i] - a->patch[i]);
    for (int i = 0; i < 3; i++)
        if (d->lo[i] < 0 || d->lo[i] + a->patch[i] > dims[i])
            return sl__fail(err, errlen, SL_EINVAL,
                            "volume draw: crop outside the volume on axis %d",
                            i);
    return 0;
}

int sl_vol_draw(const uint8_t *label, const int64_t dims[3],
                const sl_vol_aug_t *a, uint64_t seed, uint64_t epoch,
                uint64_t sample, sl_vol_draw_t *d, char *err, size_t errlen)
{
    if (!label || !a || !d || a->size < sizeof *a || !dims_ok(dims))
        return sl__fail(err, errlen, SL_EINVAL, "volume draw: bad arguments");
    sl_vol_fg_t *fg = malloc(sizeof *fg);
    if (!fg)
        return sl__fail(err, errlen, SL_ENOMEM, "volume draw: out of memory");
    /* Labelling only when the draw wants a foreground crop. */
    sl_vol_draw_t pre;
    sl_vol_predict(a, seed, epoch, sample, &pre);
    int rc = 0;
    if (pre.foreground)
        rc = sl_vol_foreground(label, dims, fg, err, errlen);
    else {
        memset(fg, 0, sizeof *fg);
        fg->size = sizeof *fg;
    }
    if (!rc)
        rc = sl_vol_draw_fg(fg, dims, a, seed, epoch, sample, d, err, errlen);
    free(fg);
    return rc;
}

/* A standard normal pair (Box-Muller in float) from two 32-bit draws of
 * the counter RNG: 24-bit uniforms, so the tails end at 5.8 sd — plenty
 * for augmentation noise, and 10x cheaper than double precision. */
static void normal2(sl__rng_t *r, float *z0, float *z1)
{
    float u1 = (float)((sl__rng_u32(r) >> 8) + 1) * 0x1p-24f; /* (0, 1] */
    float u2 = (float)(sl__rng_u32(r) >> 8) * 0x1p-24f;
    float m = sqrtf(-2.0f * logf(u1));
    float a = (float)TWO_PI * u2;
    *z0 = m * cosf(a);
    *z1 = m * sinf(a);
}

int sl_vol_apply(const float *image, const uint8_t *label,
                 const int64_t dims[3], const sl_vol_aug_t *a,
                 const sl_vol_draw_t *d, uint64_t seed, uint64_t epoch,
                 uint64_t sample, float *out_image, uint8_t *out_label)
{
    if (!a || !d || a->size < sizeof *a || d->size < sizeof *d ||
        !dims_ok(dims) || (out_image && !image) || (out_label && !label))
        return SL_EINVAL;
    const int64_t *p = a->patch;
    for (int i = 0; i < 3; i++)
        if (p[i] < 1 || d->lo[i] < 0 || d->lo[i] + p[i] > dims[i])
            return SL_EINVAL;
    size_t k = 0, pz = (size_t)p[2];
    for (int64_t x = 0; x < p[0]; x++) {
        int64_t sx = d->lo[0] + (d->flip[0] ? p[0] - 1 - x : x);
        for (int64_t y = 0; y < p[1]; y++, k += pz) {
            int64_t sy = d->lo[1] + (d->flip[1] ? p[1] - 1 - y : y);
            size_t row = (size_t)((sx * dims[1] + sy) * dims[2] + d->lo[2]);
            if (!d->flip[2]) {
                if (out_image)
                    memcpy(out_image + k, image + row, pz * sizeof *image);
                if (out_label)
                    memcpy(out_label + k, label + row, pz);
                continue;
            }
            for (size_t z = 0; z < pz; z++) {
                if (out_image)
                    out_image[k + z] = image[row + pz - 1 - z];
                if (out_label)
                    out_label[k + z] = label[row + pz - 1 - z];
            }
        }
    }
    if (!out_image)
        return 0;
    size_t n = k;
    if (d->brightness)
        for (size_t i = 0; i < n; i++)
            out_image[i] = (float)((double)out_image[i] * d->brightness_mul);
    if (d->noise) {
        sl__rng_t r;
        sl__rng_init(&r, seed, epoch, sample, SL_RNG_VOL_NOISE);
        float sd = (float)d->noise_sd;
        for (size_t i = 0; i < n; i += 2) {
            float z0, z1;
            normal2(&r, &z0, &z1);
            out_image[i] += z0 * sd;
            if (i + 1 < n)
                out_image[i + 1] += z1 * sd;
        }
    }
    return 0;
}

void sl_vol_to_bf16(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &in[i], sizeof u);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            out[i] = 0x7fc0;
        else
            out[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}
