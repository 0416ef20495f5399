/* sched/ppo: PPO with GAE and Adam for the factored policy (see ppo.h). */
#include "sched/ppo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "sluice/sluice.h"

void sl__ppo_hp_default(sl__ppo_hp_t *hp)
{
    hp->gamma = 0.95; /* decisions are 0.5 s apart: a ~10 s horizon */
    hp->lambda = 0.95;
    hp->clip = 0.2;
    hp->vf_coef = 0.5;
    hp->ent_coef = 0.01;
    hp->lr = 1e-3;
    hp->max_grad_norm = 0.5;
    hp->epochs = 4;
    hp->minibatch = 256;
}

void sl__ppo_probs(const double *logits, const uint8_t *mask, int n_knobs,
                   double *p, double *logp)
{
    for (int k = 0; k < n_knobs; k++) {
        const double *z = logits + k * SL_MLP_ACTS;
        const uint8_t *ok = mask + k * SL_MLP_ACTS;
        double mx = -INFINITY;
        for (int a = 0; a < SL_MLP_ACTS; a++)
            if (ok[a] && z[a] > mx)
                mx = z[a];
        double s = 0;
        for (int a = 0; a < SL_MLP_ACTS; a++)
            if (ok[a])
                s += exp(z[a] - mx);
        double lse = mx + log(s);
        for (int a = 0; a < SL_MLP_ACTS; a++) {
            int i = k * SL_MLP_ACTS + a;
            logp[i] = ok[a] ? z[a] - lse : -INFINITY;
            p[i] = ok[a] ? exp(logp[i]) : 0;
        }
    }
}

/* ------------------------------------------------------------ buffer */

int sl__ppo_buf_init(sl__ppo_buf_t *b, int cap, int n_in, int n_knobs)
{
    memset(b, 0, sizeof *b);
    size_t c = (size_t)cap, nk = (size_t)n_knobs;
    b->cap = cap;
    b->n_in = n_in;
    b->n_knobs = n_knobs;
    /* One zeroed block; obs first, so free(b->obs) frees it. */
    const sl__part_t parts[] = {
        {&b->obs, c * (size_t)n_in * sizeof *b->obs},
        {&b->act, c * nk},
        {&b->mask, c * nk * SL_MLP_ACTS},
        {&b->logp, c * sizeof *b->logp},
        {&b->value, c * sizeof *b->value},
        {&b->reward, c * sizeof *b->reward},
        {&b->last, c * sizeof *b->last},
        {&b->boot, c * sizeof *b->boot},
        {&b->adv, c * sizeof *b->adv},
        {&b->ret, c * sizeof *b->ret},
    };
    return sl__parts_alloc(parts, (int)(sizeof parts / sizeof *parts));
}

void sl__ppo_buf_free(sl__ppo_buf_t *b)
{
    free(b->obs); /* the block of sl__ppo_buf_init */
    memset(b, 0, sizeof *b);
}

int sl__ppo_buf_add(sl__ppo_buf_t *b, const double *obs, const uint8_t *act,
                    const uint8_t *mask, double logp, double value)
{
    if (b->n >= b->cap)
        return -1;
    int i = b->n++;
    memcpy(b->obs + (size_t)i * b->n_in, obs, (size_t)b->n_in * sizeof *obs);
    size_t nk = (size_t)b->n_knobs, nl = nk * SL_MLP_ACTS;
    memcpy(b->act + (size_t)i * nk, act, nk);
    memcpy(b->mask + (size_t)i * nl, mask, nl);
    b->logp[i] = logp;
    b->value[i] = value;
    b->reward[i] = 0;
    b->last[i] = 0;
    b->boot[i] = 0;
    return i;
}

void sl__ppo_buf_reward(sl__ppo_buf_t *b, int i, double r)
{
    if (i >= 0 && i < b->n)
        b->reward[i] = r;
}

void sl__ppo_buf_end(sl__ppo_buf_t *b, double bootstrap)
{
    if (b->n > 0) {
        b->last[b->n - 1] = 1;
        b->boot[b->n - 1] = bootstrap;
    }
}

void sl__ppo_gae(sl__ppo_buf_t *b, double gamma, double lambda)
{
    double next_adv = 0;
    for (int t = b->n - 1; t >= 0; t--) {
        double next_v;
        if (b->last[t] || t == b->n - 1) {
            next_v = b->boot[t];
            next_adv = 0;
        } else {
            next_v = b->value[t + 1];
        }
        double delta = b->reward[t] + gamma * next_v - b->value[t];
        next_adv = delta + gamma * lambda * next_adv;
        b->adv[t] = next_adv;
        b->ret[t] = next_adv + b->value[t];
    }
}

/* -------------------------------------------------------------- loss */

double sl__ppo_loss(const sl__mlp_t *m, const sl__ppo_hp_t *hp,
                    const double *obs, const uint8_t *act, const uint8_t *mask,
                    const double *logp_old, const double *adv,
                    const double *ret, int n, double *grad, sl__ppo_stats_t *st)
{
    if (grad)
        memset(grad, 0, m->n_params * sizeof *grad);
    sl__ppo_stats_t s = {0};
    if (n <= 0)
        return 0;
    double inv = 1.0 / n;
    int nk = m->n_knobs;
    for (int i = 0; i < n; i++) {
        const double *x = obs + (size_t)i * m->n_in;
        const uint8_t *a = act + (size_t)i * nk;
        const uint8_t *mk = mask + (size_t)i * nk * SL_MLP_ACTS;
        sl__mlp_cache_t c;
        double z[SL_MLP_MAX_LOGITS], v, p[SL_MLP_MAX_LOGITS],
            lp[SL_MLP_MAX_LOGITS];
        sl__mlp_forward(m, x, &c, z, &v);
        sl__ppo_probs(z, mk, nk, p, lp);
        double logp = 0, ent[SL_MLP_MAX_KNOBS];
        for (int k = 0; k < nk; k++) {
            logp += lp[k * SL_MLP_ACTS + a[k]];
            ent[k] = 0;
            for (int j = 0; j < SL_MLP_ACTS; j++) {
                int q = k * SL_MLP_ACTS + j;
                if (mk[q])
                    ent[k] -= p[q] * lp[q];
            }
            s.entropy += ent[k] * inv;
        }
        double d = logp - logp_old[i];
        double r = exp(d);
        double rc = r < 1 - hp->clip   ? 1 - hp->clip
                    : r > 1 + hp->clip ? 1 + hp->clip
                                       : r;
        double u = r * adv[i], cl = rc * adv[i];
        /* The unclipped term is the min (and carries the gradient) unless
         * the clipped one is strictly smaller. */
        int clipped = cl < u;
        s.pi_loss -= (clipped ? cl : u) * inv;
        s.clip_frac += (r != rc) * inv;
        s.approx_kl += ((r - 1) - d) * inv; /* the k3 estimator, >= 0 */
        double verr = v - ret[i];
        s.v_loss += 0.5 * verr * verr * inv;
        if (!grad)
            continue;
        double dlogp = clipped ? 0 : -adv[i] * r * inv;
        double dz[SL_MLP_MAX_LOGITS];
        for (int k = 0; k < nk; k++)
            for (int j = 0; j < SL_MLP_ACTS; j++) {
                int q = k * SL_MLP_ACTS + j;
                if (!mk[q]) {
                    dz[q] = 0;
                    continue;
                }
                /* d logp / dz = onehot - p; d H / dz = -p (log p + H) */
                double g = dlogp * ((a[k] == j) - p[q]);
                g -= hp->ent_coef * inv * (-p[q] * (lp[q] + ent[k]));
                dz[q] = g;
            }
        double dv = hp->vf_coef * verr * inv;
        sl__mlp_backward(m, x, &c, dz, dv, grad);
    }
    s.loss = s.pi_loss + hp->vf_coef * s.v_loss - hp->ent_coef * s.entropy;
    if (st)
        *st = s;
    return s.loss;
}

double sl__ppo_test_loss(const double *params, size_t n_params, int n_in,
                         int n_hid, int n_knobs, const double *obs,
                         const uint8_t *act, const uint8_t *mask,
                         const double *logp_old, const double *adv,
                         const double *ret, int n, const double *hp3,
                         double *grad)
{
    sl__mlp_t m;
    if (sl__mlp_init(&m, n_in, n_hid, n_knobs))
        return NAN;
    if (m.n_params != n_params) {
        sl__mlp_free(&m);
        return NAN;
    }
    memcpy(m.w, params, m.n_params * sizeof *m.w);
    sl__ppo_hp_t hp;
    sl__ppo_hp_default(&hp);
    hp.clip = hp3[0];
    hp.vf_coef = hp3[1];
    hp.ent_coef = hp3[2];
    double L = sl__ppo_loss(&m, &hp, obs, act, mask, logp_old, adv, ret, n,
                            grad, NULL);
    sl__mlp_free(&m);
    return L;
}

/* ------------------------------------------------------------ update */

int sl__ppo_init(sl__ppo_t *p, const sl__ppo_hp_t *hp, const sl__mlp_t *m)
{
    memset(p, 0, sizeof *p);
    p->hp = *hp;
    p->n_params = m->n_params;
    int c = hp->minibatch > 0 ? hp->minibatch : 1;
    p->cap = c;
    size_t np = (size_t)m->n_params, nc = (size_t)c, nk = (size_t)m->n_knobs;
    /* One zeroed block; m1 first, so free(p->m1) frees it. */
    const sl__part_t parts[] = {
        {&p->m1, np * sizeof *p->m1},
        {&p->m2, np * sizeof *p->m2},
        {&p->grad, np * sizeof *p->grad},
        {&p->obs, nc * (size_t)m->n_in * sizeof *p->obs},
        {&p->logp, nc * sizeof *p->logp},
        {&p->adv, nc * sizeof *p->adv},
        {&p->ret, nc * sizeof *p->ret},
        {&p->act, nc * nk},
        {&p->mask, nc * nk * SL_MLP_ACTS},
    };
    return sl__parts_alloc(parts, (int)(sizeof parts / sizeof *parts));
}

void sl__ppo_free(sl__ppo_t *p)
{
    free(p->m1); /* the block of sl__ppo_init */
    free(p->perm);
    memset(p, 0, sizeof *p);
}

void sl__ppo_adam(sl__ppo_t *p, sl__mlp_t *m, double *g)
{
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    size_t n = m->n_params;
    if (p->hp.max_grad_norm > 0) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += g[i] * g[i];
        double norm = sqrt(s);
        if (norm > p->hp.max_grad_norm)
            for (size_t i = 0; i < n; i++)
                g[i] *= p->hp.max_grad_norm / norm;
    }
    p->t++;
    double c1 = 1 - pow(b1, (double)p->t), c2 = 1 - pow(b2, (double)p->t);
    for (size_t i = 0; i < n; i++) {
        p->m1[i] = b1 * p->m1[i] + (1 - b1) * g[i];
        p->m2[i] = b2 * p->m2[i] + (1 - b2) * g[i] * g[i];
        m->w[i] -= p->hp.lr * (p->m1[i] / c1) / (sqrt(p->m2[i] / c2) + eps);
    }
}

int sl__ppo_update(sl__ppo_t *p, sl__mlp_t *m, sl__ppo_buf_t *b, sl__rng_t *rng,
                   sl__ppo_stats_t *st)
{
    sl__ppo_stats_t sum = {0};
    if (st)
        *st = sum;
    if (b->n == 0)
        return 0;
    size_t nk = (size_t)m->n_knobs, nl = nk * SL_MLP_ACTS;
    if (p->perm_cap < b->n) {
        int *np = realloc(p->perm, (size_t)b->n * sizeof *np);
        if (!np)
            return SL_ENOMEM;
        p->perm = np;
        p->perm_cap = b->n;
    }
    sl__ppo_gae(b, p->hp.gamma, p->hp.lambda);
    int steps = 0;
    for (int e = 0; e < p->hp.epochs; e++) {
        for (int i = 0; i < b->n; i++)
            p->perm[i] = i;
        for (int i = b->n - 1; i > 0; i--) { /* Fisher-Yates */
            int j = (int)sl__rng_below(rng, (uint64_t)i + 1);
            int t = p->perm[i];
            p->perm[i] = p->perm[j];
            p->perm[j] = t;
        }
        for (int at = 0; at < b->n; at += p->cap) {
            int n = b->n - at < p->cap ? b->n - at : p->cap;
            if (n < 2)
                break; /* one sample has no advantage spread */
            double mean = 0, var = 0;
            for (int i = 0; i < n; i++) {
                int s = p->perm[at + i];
                memcpy(p->obs + (size_t)i * m->n_in,
                       b->obs + (size_t)s * m->n_in,
                       (size_t)m->n_in * sizeof(double));
                memcpy(p->act + (size_t)i * nk, b->act + (size_t)s * nk, nk);
                memcpy(p->mask + (size_t)i * nl, b->mask + (size_t)s * nl, nl);
                p->logp[i] = b->logp[s];
                p->adv[i] = b->adv[s];
                p->ret[i] = b->ret[s];
                mean += b->adv[s] / n;
            }
            for (int i = 0; i < n; i++)
                var += (p->adv[i] - mean) * (p->adv[i] - mean) / n;
            double sd = sqrt(var) + 1e-8;
            for (int i = 0; i < n; i++)
                p->adv[i] = (p->adv[i] - mean) / sd;
            sl__ppo_stats_t s;
            sl__ppo_loss(m, &p->hp, p->obs, p->act, p->mask, p->logp, p->adv,
                         p->ret, n, p->grad, &s);
            sl__ppo_adam(p, m, p->grad);
            sum.loss += s.loss;
            sum.pi_loss += s.pi_loss;
            sum.v_loss += s.v_loss;
            sum.entropy += s.entropy;
            sum.approx_kl += s.approx_kl;
            sum.clip_frac += s.clip_frac;
            steps++;
        }
    }
    if (st && steps) {
        st->loss = sum.loss / steps;
        st->pi_loss = sum.pi_loss / steps;
        st->v_loss = sum.v_loss / steps;
        st->entropy = sum.entropy / steps;
        st->approx_kl = sum.approx_kl / steps;
        st->clip_frac = sum.clip_frac / steps;
    }
    return 0;
}
