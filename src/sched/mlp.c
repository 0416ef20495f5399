/* sched/mlp: forward and backward of the scheduler's MLP (see mlp.h). */
#include "sched/mlp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "sluice/sluice.h"

/* Where each block of the flat parameter vector starts. */
typedef struct offs {
    size_t w1, b1, w2, b2, wp, bp, wv, bv, end;
} offs_t;

static offs_t offsets(int n_in, int n_hid, int n_knobs)
{
    offs_t o;
    size_t i = (size_t)n_in, h = (size_t)n_hid,
           nl = (size_t)n_knobs * SL_MLP_ACTS;
    o.w1 = 0;
    o.b1 = o.w1 + h * i;
    o.w2 = o.b1 + h;
    o.b2 = o.w2 + h * h;
    o.wp = o.b2 + h;
    o.bp = o.wp + nl * h;
    o.wv = o.bp + nl;
    o.bv = o.wv + h;
    o.end = o.bv + 1;
    return o;
}

size_t sl__mlp_count(int n_in, int n_hid, int n_knobs)
{
    if (n_in < 1 || n_in > SL_MLP_MAX_IN || n_hid < 1 ||
        n_hid > SL_MLP_MAX_HID || n_knobs < 1 || n_knobs > SL_MLP_MAX_KNOBS)
        return 0;
    return offsets(n_in, n_hid, n_knobs).end;
}

int sl__mlp_init(sl__mlp_t *m, int n_in, int n_hid, int n_knobs)
{
    memset(m, 0, sizeof *m);
    size_t n = sl__mlp_count(n_in, n_hid, n_knobs);
    if (!n)
        return SL_EINVAL;
    m->w = calloc(n, sizeof *m->w);
    if (!m->w)
        return SL_ENOMEM;
    m->n_in = n_in;
    m->n_hid = n_hid;
    m->n_knobs = n_knobs;
    m->n_params = n;
    return 0;
}

void sl__mlp_free(sl__mlp_t *m)
{
    free(m->w);
    memset(m, 0, sizeof *m);
}

int sl__mlp_clone(sl__mlp_t *dst, const sl__mlp_t *src)
{
    int rc = sl__mlp_init(dst, src->n_in, src->n_hid, src->n_knobs);
    if (!rc)
        memcpy(dst->w, src->w, src->n_params * sizeof *src->w);
    return rc;
}

static void fill(sl__rng_t *r, double *w, size_t n, double bound)
{
    for (size_t i = 0; i < n; i++)
        w[i] = sl__rng_uniform(r, -bound, bound);
}

void sl__mlp_randomize(sl__mlp_t *m, uint64_t seed)
{
    sl__rng_t r;
    sl__rng_init(&r, seed, 0, 0, 0x6d6c70); /* "mlp" */
    offs_t o = offsets(m->n_in, m->n_hid, m->n_knobs);
    memset(m->w, 0, m->n_params * sizeof *m->w);
    /* uniform(-b, b) has variance b^2 / 3: b = sqrt(3 / fan_in) gives
     * variance 1 / fan_in. */
    double s_in = sqrt(3.0 / m->n_in), s_h = sqrt(3.0 / m->n_hid);
    fill(&r, m->w + o.w1, o.b1 - o.w1, s_in);
    fill(&r, m->w + o.w2, o.b2 - o.w2, s_h);
    fill(&r, m->w + o.wp, o.bp - o.wp, 0.01 * s_h);
    fill(&r, m->w + o.wv, o.bv - o.wv, s_h);
}

/* y[r] = b[r] + sum_c W[r][c] x[c] */
static void affine(const double *W, const double *b, const double *x, int rows,
                   int cols, double *y)
{
    for (int r = 0; r < rows; r++) {
        const double *wr = W + (size_t)r * cols;
        double s = b[r];
        for (int c = 0; c < cols; c++)
            s += wr[c] * x[c];
        y[r] = s;
    }
}

void sl__mlp_forward(const sl__mlp_t *m, const double *x, sl__mlp_cache_t *c,
                     double *logits, double *value)
{
    sl__mlp_cache_t local;
    if (!c)
        c = &local;
    const double *w = m->w;
    offs_t o = offsets(m->n_in, m->n_hid, m->n_knobs);
    int h = m->n_hid;
    affine(w + o.w1, w + o.b1, x, h, m->n_in, c->h1);
    for (int j = 0; j < h; j++)
        c->h1[j] = tanh(c->h1[j]);
    affine(w + o.w2, w + o.b2, c->h1, h, h, c->h2);
    for (int j = 0; j < h; j++)
        c->h2[j] = tanh(c->h2[j]);
    affine(w + o.wp, w + o.bp, c->h2, m->n_knobs * SL_MLP_ACTS, h, logits);
    affine(w + o.wv, w + o.bv, c->h2, 1, h, value);
}

/* For y = W x + b: adds dy x^T to dW, dy to db, and (if dx) W^T dy to dx. */
static void affine_back(const double *W, const double *x, const double *dy,
                        int rows, int cols, double *dW, double *db, double *dx)
{
    if (dx)
        memset(dx, 0, (size_t)cols * sizeof *dx);
    for (int r = 0; r < rows; r++) {
        double g = dy[r];
        if (g == 0)
            continue;
        db[r] += g;
        const double *wr = W + (size_t)r * cols;
        double *dwr = dW + (size_t)r * cols;
        for (int c = 0; c < cols; c++) {
            dwr[c] += g * x[c];
            if (dx)
                dx[c] += g * wr[c];
        }
    }
}

void sl__mlp_backward(const sl__mlp_t *m, const double *x,
                      const sl__mlp_cache_t *c, const double *dlogits,
                      double dvalue, double *grad)
{
    const double *w = m->w;
    offs_t o = offsets(m->n_in, m->n_hid, m->n_knobs);
    int h = m->n_hid;
    double dh2[SL_MLP_MAX_HID], dv2[SL_MLP_MAX_HID], dh1[SL_MLP_MAX_HID];
    /* Heads: both read h2; their input gradients add up. */
    affine_back(w + o.wp, c->h2, dlogits, m->n_knobs * SL_MLP_ACTS, h,
                grad + o.wp, grad + o.bp, dh2);
    affine_back(w + o.wv, c->h2, &dvalue, 1, h, grad + o.wv, grad + o.bv, dv2);
    for (int j = 0; j < h; j++) /* tanh' = 1 - tanh^2 */
        dh2[j] = (dh2[j] + dv2[j]) * (1 - c->h2[j] * c->h2[j]);
    affine_back(w + o.w2, c->h1, dh2, h, h, grad + o.w2, grad + o.b2, dh1);
    for (int j = 0; j < h; j++)
        dh1[j] *= 1 - c->h1[j] * c->h1[j];
    affine_back(w + o.w1, x, dh1, h, m->n_in, grad + o.w1, grad + o.b1, NULL);
}
