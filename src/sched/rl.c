/* sched/rl: features, reward, masked decisions, the guard and the
 * scheduler object (see rl.h; the weights file is rl_file.c). */
#include "sched/rl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/analysis.h"
#include "sched/estimate.h"
#include "sched/place.h"

/* ------------------------------------------------------------- policy */

int sl__rl_policy_init(sl__rl_policy_t *p, int n_hid, int places, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    int rc =
        places ? sl__mlp_init(&p->net, SL_RL_NOBS, n_hid, SL_RL_KNOBS_PLACE)
               : sl__mlp_init(&p->net, SL_RL_NOBS_CPU, n_hid, SL_RL_KNOBS_CPU);
    if (rc)
        return rc;
    sl__mlp_randomize(&p->net, seed);
    for (int i = 0; i < SL_RL_NOBS; i++)
        p->sd[i] = 1;
    return 0;
}

int sl__rl_places(const sl__rl_policy_t *p)
{
    return p->net.n_knobs == SL_RL_KNOBS_PLACE;
}

int sl__rl_policy_widen(sl__rl_policy_t *dst, const sl__rl_policy_t *src)
{
    if (sl__rl_places(src))
        return sl__rl_policy_clone(dst, src);
    *dst = *src;
    int h = src->net.n_hid, ni = src->net.n_in;
    int rc = sl__mlp_init(&dst->net, SL_RL_NOBS, h, SL_RL_KNOBS_PLACE);
    if (rc)
        return rc;
    for (int i = ni; i < SL_RL_NOBS; i++) {
        dst->mean[i] = 0;
        dst->sd[i] = 1;
    }
    /* Blocks in mlp.h's order; the wider W1's rows and Wp's extra rows
     * (the share head) stay zero. */
    const double *a = src->net.w;
    double *b = dst->net.w;
    for (int r = 0; r < h; r++, a += ni, b += SL_RL_NOBS)
        memcpy(b, a, (size_t)ni * sizeof *a);
    size_t trunk = (size_t)h + (size_t)h * h + h; /* b1, W2, b2 */
    memcpy(b, a, trunk * sizeof *a);
    a += trunk, b += trunk;
    size_t wp = (size_t)SL_RL_KNOBS_CPU * SL_MLP_ACTS * h;
    memcpy(b, a, wp * sizeof *a);
    a += wp, b += (size_t)SL_RL_KNOBS_PLACE * SL_MLP_ACTS * h;
    memcpy(b, a, SL_RL_KNOBS_CPU * SL_MLP_ACTS * sizeof *a); /* bp */
    a += SL_RL_KNOBS_CPU * SL_MLP_ACTS, b += SL_RL_KNOBS_PLACE * SL_MLP_ACTS;
    memcpy(b, a, ((size_t)h + 1) * sizeof *a); /* wv, bv */
    return 0;
}

void sl__rl_policy_free(sl__rl_policy_t *p)
{
    sl__mlp_free(&p->net);
}

int sl__rl_policy_clone(sl__rl_policy_t *dst, const sl__rl_policy_t *src)
{
    *dst = *src;
    return sl__mlp_clone(&dst->net, &src->net);
}

/* ----------------------------------------------------------- features */

static double clampd(double v, double lo, double hi)
{
    return v != v ? lo : v < lo ? lo : v > hi ? hi : v;
}

static double pos(double v) /* unreadable (< 0) fields count as 0 */
{
    return v > 0 ? v : 0;
}

/* Window means of the noisy per-interval fields. */
typedef struct wmean {
    double cpu_self, cpu_other, psi, io, rbusy, dbusy, rfill, dfill, ofill,
        stall, wait, lat, rate, rrate, drate, gbusy, grate;
} wmean_t;

static wmean_t wmean(const sl_snapshot_t *w, int n)
{
    wmean_t m = {0};
    double wsum = 0, span_ms = 0;
    for (int i = 0; i < n; i++) {
        const sl_snapshot_t *s = &w[i];
        m.cpu_self += pos(s->cpu_self) / n;
        m.cpu_other += pos(s->cpu_other) / n;
        m.psi += pos(s->psi_cpu_some) / n;
        m.io += pos(s->read_bytes_per_s) / n;
        m.rbusy += pos(s->read.busy) / n;
        m.dbusy += pos(s->decode.busy) / n;
        if (s->read.queue_capacity > 0)
            m.rfill += (double)s->read.queue_depth / s->read.queue_capacity / n;
        if (s->decode.queue_capacity > 0)
            m.dfill +=
                (double)s->decode.queue_depth / s->decode.queue_capacity / n;
        if (s->prefetch > 0)
            m.ofill += (double)s->batches_ready / s->prefetch / n;
        m.stall += pos(s->stall_fraction) / n;
        /* Wait per batch over the window: weighted by the samples each
         * interval handed out (an interval with no batch has no mean). */
        double got = pos(s->samples_per_s) * pos(s->interval_s);
        m.wait += pos(s->consumer_wait_ms) * got;
        wsum += got;
        span_ms += pos(s->interval_s) * 1e3;
        m.lat += pos(s->batch_latency_ms) / n;
        m.rate += pos(s->samples_per_s) / n;
        m.rrate += pos(s->read.items_per_s) / n;
        m.drate += pos(s->decode.items_per_s) / n;
        m.gbusy += pos(s->gpu_stage_busy) / n;
        m.grate += pos(s->gpu_samples_per_s) / n;
    }
    /* No batch at all in the window: the consumer waited all of it. */
    m.wait = wsum > 0 ? m.wait / wsum : m.stall * span_ms;
    return m;
}

/* log2 of a stage's capacity (items/s if busy all the time) over the
 * consumption rate, in [-1, 1] for 1/16..16: > 0 means room to spare. */
static double headroom(double items_per_s, double busy, double rate)
{
    if (items_per_s <= 0)
        return 0;
    double cap = items_per_s / (busy > 0.05 ? busy : 0.05);
    return clampd(log2(cap / (rate > 1 ? rate : 1)) / 4, -1, 1);
}

/* The trainer's seconds per sample while it is not waiting on us (the
 * stall model's demand, inverted); 0 where it cannot be measured. */
static double consumer_work(const sl_snapshot_t *win, int n)
{
    double d = sl__estimate_demand(win, n);
    return d > 0 ? 1 / d : 0;
}

void sl__rl_features(const sl_snapshot_t *win, int n, const sl__limits_t *lim,
                     const sl__knobs_t *cur, double *o)
{
    memset(o, 0, SL_RL_NOBS * sizeof *o);
    if (n < 1)
        return;
    wmean_t m = wmean(win, n);
    const sl_snapshot_t *last = &win[n - 1];
    /* First and second half of the window: trends. */
    int h = n / 2 > 0 ? n / 2 : 1;
    wmean_t a = wmean(win, h), b = wmean(win + n - h, h);
    int ncpu = sl__snapshot_cpus(last) > 0 ? sl__snapshot_cpus(last) : 1;
    int threads = cur->read_threads + cur->decode_threads;
    o[0] = clampd(m.cpu_self, 0, 1);
    o[1] = clampd(m.cpu_other, 0, 1);
    o[2] = clampd(m.psi / 100, 0, 1);
    o[3] = last->mem_total_bytes > 0 && last->mem_available_bytes >= 0
               ? clampd((double)last->mem_available_bytes /
                            (double)last->mem_total_bytes,
                        0, 1)
               : 1;
    o[4] = clampd(log10(1 + m.io / 1e6) / 4, 0, 1);
    o[5] = clampd(m.rbusy, 0, 1);
    o[6] = clampd(m.dbusy, 0, 1);
    o[7] = clampd(m.rfill, 0, 1);
    o[8] = clampd(m.dfill, 0, 1);
    o[9] = clampd(m.ofill, 0, 1);
    o[10] = clampd(m.stall, 0, 1);
    o[11] = clampd(log10(1 + m.wait) / 3, 0, 1);
    o[12] = clampd(log10(1 + m.lat) / 4, 0, 1);
    o[13] = clampd(log10(1 + m.rate) / 5, 0, 1);
    o[14] = clampd((b.rate - a.rate) / (m.rate + 1), -1, 1);
    o[15] = clampd(b.stall - a.stall, -1, 1);
    o[16] = lim->max_read > 0 ? (double)cur->read_threads / lim->max_read : 0;
    o[17] =
        lim->max_decode > 0 ? (double)cur->decode_threads / lim->max_decode : 0;
    o[18] =
        lim->max_prefetch > 0 ? (double)cur->prefetch / lim->max_prefetch : 0;
    o[19] = lim->max_threads > 0 ? (double)threads / lim->max_threads : 0;
    o[20] = clampd(log2(ncpu) / 6, 0, 1);
    o[21] = clampd((double)threads / ncpu / 4, 0, 1);
    o[22] = headroom(m.drate, m.dbusy, m.rate);
    o[23] = headroom(m.rrate, m.rbusy, m.rate);
    /* The GPU stage's, for a policy that places. */
    o[24] = (double)cur->gpu_share / SL_KNOB_SHARE_UNIT;
    o[25] = clampd(m.gbusy, 0, 1);
    o[26] = headroom(m.grate, m.gbusy, m.rate);
    /* The trainer's time per sample outside next() (its step, which GPU
     * work can slow), and how it moved over the window. */
    double w = consumer_work(win, n), wa = consumer_work(win, h),
           wb = consumer_work(win + n - h, h);
    o[27] = w > 0 ? clampd(log10(1 + w * 1e6) / 4, 0, 1) : 0;
    o[28] = w > 0 && wa > 0 && wb > 0 ? clampd((wb - wa) / w, -1, 1) : 0;
}

void sl__rl_normalise(const sl__rl_policy_t *p, const double *raw, double *x)
{
    for (int i = 0; i < p->net.n_in; i++)
        x[i] = clampd((raw[i] - p->mean[i]) / p->sd[i], -5, 5);
}

double sl__rl_reward(const sl_snapshot_t *win, int n, const sl__limits_t *lim,
                     const sl__knobs_t *cur, int gpu, double *work_ref)
{
    if (n < 1)
        return 0;
    wmean_t m = wmean(win, n);
    double W = clampd(m.wait / 100, 0, 10);
    double S = clampd(m.stall, 0, 1);
    double t = lim->max_threads > 0
                   ? (double)(cur->read_threads + cur->decode_threads) /
                         lim->max_threads
                   : 0;
    double q =
        lim->max_prefetch > 0 ? (double)cur->prefetch / lim->max_prefetch : 0;
    double U = 0.5 * (t + q);
    double r = -W - SL_RL_LAMBDA * S - SL_RL_MU * U;
    if (!gpu)
        return r;
    double G = (double)cur->gpu_share / SL_KNOB_SHARE_UNIT, I = 0;
    double w = consumer_work(win, n);
    if (work_ref && w > 0) {
        double ref = *work_ref * 1.01; /* lets a fast glitch fade */
        *work_ref = ref > 0 && ref < w ? ref : w;
        I = log(w / *work_ref);
    }
    return r - SL_RL_NU * G - SL_RL_KAPPA * I;
}

/* ----------------------------------------------------------- decision */

static int pick(const double *p, const uint8_t *mask, sl__rng_t *rng)
{
    if (rng) {
        double u = sl__rng_double(rng), c = 0;
        int lastok = 1;
        for (int a = 0; a < SL_MLP_ACTS; a++) {
            if (!mask[a])
                continue;
            lastok = a;
            c += p[a];
            if (u < c)
                return a;
        }
        return lastok; /* rounding: the last allowed one */
    }
    int best = 1; /* "stay" is always allowed */
    for (int a = 0; a < SL_MLP_ACTS; a++)
        if (mask[a] && p[a] > p[best])
            best = a;
    return best;
}

/* Allowed steps of one knob: value v in [1, hi], tuned or fixed. */
static void knob_mask(uint8_t *mk, int tuned, int v, int hi)
{
    mk[0] = tuned && v > 1;
    mk[1] = 1;
    mk[2] = tuned && v < hi;
}

void sl__rl_decide(const sl__rl_policy_t *p, const double *raw,
                   const sl__limits_t *lim, const sl__knobs_t *cur,
                   int gpu_full, sl__rng_t *rng, sl__rl_decision_t *d,
                   sl__knobs_t *next)
{
    int nk = p->net.n_knobs;
    double z[SL_MLP_MAX_LOGITS], lp[SL_MLP_MAX_LOGITS];
    d->n_knobs = nk;
    sl__rl_normalise(p, raw, d->x);
    sl__mlp_forward(&p->net, d->x, NULL, z, &d->value);
    *next = *cur;
    uint8_t *mk = d->mask;
    uint8_t *mr = mk + SL_RL_K_READ * SL_MLP_ACTS;
    uint8_t *md = mk + SL_RL_K_DECODE * SL_MLP_ACTS;
    uint8_t *mp = mk + SL_RL_K_PREFETCH * SL_MLP_ACTS;
    /* Separate budgets: decode threads within the CPU-thread budget
     * (decode + 1 for the read stage <= max_threads), read threads within
     * the I/O depth (max_read), prefetch within the memory-derived cap.
     * The masks do not depend on one another. */
    int dhi = lim->max_threads - 1 < lim->max_decode ? lim->max_threads - 1
                                                     : lim->max_decode;
    knob_mask(md, lim->tune_decode, cur->decode_threads,
              dhi > cur->decode_threads ? dhi : cur->decode_threads);
    knob_mask(mr, lim->tune_read, cur->read_threads,
              lim->max_read > cur->read_threads ? lim->max_read
                                                : cur->read_threads);
    knob_mask(mp, lim->tune_prefetch, cur->prefetch, lim->max_prefetch);
    if (nk > SL_RL_K_SHARE) {
        /* The share: 0..max in steps (the last one short), never up while
         * NVML says the GPU has no room. */
        uint8_t *ms = mk + SL_RL_K_SHARE * SL_MLP_ACTS;
        int tuned = lim->tune_gpu_share && lim->max_gpu_share > 0;
        ms[0] = tuned && cur->gpu_share > 0;
        ms[1] = 1;
        ms[2] = tuned && !gpu_full && cur->gpu_share < lim->max_gpu_share;
    }
    sl__ppo_probs(z, mk, nk, d->prob, lp);
    /* Sampling order (training draws from rng in it): decode, read,
     * prefetch, the share. */
    static const int order[SL_MLP_MAX_KNOBS] = {
        SL_RL_K_DECODE, SL_RL_K_READ, SL_RL_K_PREFETCH, SL_RL_K_SHARE};
    d->logp = 0;
    for (int i = 0; i < nk; i++) {
        int k = order[i];
        int a = pick(d->prob + k * SL_MLP_ACTS, mk + k * SL_MLP_ACTS, rng);
        d->act[k] = (uint8_t)a;
        d->logp += lp[k * SL_MLP_ACTS + a];
    }
    next->read_threads += d->act[SL_RL_K_READ] - 1;
    next->decode_threads += d->act[SL_RL_K_DECODE] - 1;
    next->prefetch += d->act[SL_RL_K_PREFETCH] - 1;
    if (nk > SL_RL_K_SHARE) {
        int s = cur->gpu_share + (d->act[SL_RL_K_SHARE] - 1) * SL_RL_SHARE_STEP;
        next->gpu_share = s < 0                    ? 0
                          : s > lim->max_gpu_share ? lim->max_gpu_share
                                                   : s;
    }
}

void sl__rl_reason(const sl__rl_decision_t *d, char *buf, size_t len)
{
    static const char *name[SL_MLP_MAX_KNOBS] = {"read", "decode", "prefetch",
                                                 "gpu_share"};
    static const char *step[SL_MLP_ACTS] = {"-1", "0", "+1"};
    size_t at = 0;
    int w = snprintf(buf, len, "rl:");
    for (int k = 0; k < d->n_knobs && w >= 0; k++) {
        at += (size_t)w;
        if (at >= len)
            return;
        const double *p = d->prob + k * SL_MLP_ACTS;
        w = snprintf(buf + at, len - at, " %s %s (p %.2f/%.2f/%.2f)", name[k],
                     step[d->act[k]], p[0], p[1], p[2]);
    }
}

/* --------------------------------------------------------------- guard */

void sl__rl_guard_init(sl__rl_guard_t *g, int warm, int k, double margin_abs,
                       double margin_rel)
{
    memset(g, 0, sizeof *g);
    g->warm = warm > 0 ? warm : 1;
    g->k = k > 0 ? k : 1;
    g->margin_abs = margin_abs;
    g->margin_rel = margin_rel;
    g->alpha = 0.1;
}

int sl__rl_guard_feed(sl__rl_guard_t *g, double r)
{
    if (g->tripped)
        return 1;
    if (g->seen < g->warm) {
        g->ref_sum += r;
        if (++g->seen == g->warm)
            g->ref = g->ema = g->ref_sum / g->warm;
        return 0;
    }
    g->seen++;
    g->ema += g->alpha * (r - g->ema);
    double floor = g->ref - g->margin_abs - g->margin_rel * fabs(g->ref);
    g->bad = g->ema < floor ? g->bad + 1 : 0;
    if (g->bad >= g->k)
        g->tripped = 1;
    return g->tripped;
}

/* ----------------------------------------------------------- scheduler */

#define LEARN_BATCH 64 /* decisions (32 s) per online PPO update */

int sl__rl_sched_init(sl__rl_sched_t *s, sl__rl_policy_t *pol, int learn,
                      uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->pol = *pol;
    memset(pol, 0, sizeof *pol);
    s->learn = learn;
    s->pending = -1;
    sl__heur_init(&s->heur);
    sl__rng_init(&s->rng, seed, 0, 0, 0x726c); /* "rl" */
    /* 20 decisions (10 s) set the reference; 10 bad ones in a row trip. */
    sl__rl_guard_init(&s->guard, 20, 10, 0.05, 0.25);
    if (!learn)
        return 0;
    sl__ppo_hp_t hp;
    sl__ppo_hp_default(&hp);
    hp.lr = 1e-4; /* fine-tuning: small steps */
    hp.minibatch = 32;
    if (sl__ppo_init(&s->ppo, &hp, &s->pol.net) ||
        sl__ppo_buf_init(&s->buf, LEARN_BATCH, s->pol.net.n_in,
                         s->pol.net.n_knobs)) {
        sl__rl_sched_free(s);
        return SL_ENOMEM;
    }
    return 0;
}

void sl__rl_sched_free(sl__rl_sched_t *s)
{
    sl__rl_policy_free(&s->pol);
    if (s->learn) {
        sl__ppo_free(&s->ppo);
        sl__ppo_buf_free(&s->buf);
    }
    memset(s, 0, sizeof *s);
}

static int changed(const sl__knobs_t *a, const sl__knobs_t *b)
{
    return (a->read_threads != b->read_threads) << SL_KNOB_READ |
           (a->decode_threads != b->decode_threads) << SL_KNOB_DECODE |
           (a->prefetch != b->prefetch) << SL_KNOB_PREFETCH |
           (a->gpu_share != b->gpu_share) << SL_KNOB_GPU_SHARE;
}

int sl__rl_sched_step(sl__rl_sched_t *s, const sl_snapshot_t *win, int n,
                      const sl__limits_t *lim, const sl__knobs_t *cur,
                      sl__knobs_t *next, char *reason, size_t len)
{
    *next = *cur;
    if (len)
        reason[0] = 0;
    if (n < 1)
        return 0;
    if (s->fallback) {
        int k = sl__heur_step(&s->heur, win, n, lim, cur, next, reason, len);
        return k == SL_KNOB_NONE ? 0 : 1 << k;
    }
    if (!s->learn) {
        /* The stall model first: where it sees a stage far short of the
         * target it jumps there (and judges the jump); the learned policy
         * steps the rest. Not while learning: every window must then be
         * the outcome of the policy's own action. */
        int k =
            sl__heur_model_step(&s->heur, win, n, lim, cur, next, reason, len);
        if (k != SL_KNOB_NONE)
            return 1 << k;
    }
    double raw[SL_RL_NOBS];
    sl__rl_features(win, n, lim, cur, raw);
    sl__rl_decision_t d;
    if (s->learn) {
        /* This window is the outcome of the previous decision. */
        double r = sl__rl_reward(win, n, lim, cur,
                                 sl__rl_places(&s->pol) && lim->tune_gpu_share,
                                 &s->work_ref);
        sl__ppo_buf_reward(&s->buf, s->pending, r);
        if (sl__rl_guard_feed(&s->guard, r)) {
            s->fallback = 1;
            snprintf(reason, len,
                     "rl guard: reward avg %.3f < start %.3f for %d "
                     "decisions; heuristic from now on",
                     s->guard.ema, s->guard.ref, s->guard.k);
            return SL__POLICY_EVENT;
        }
        if (s->buf.n == s->buf.cap) {
            double z[SL_MLP_MAX_LOGITS], v, x[SL_RL_NOBS];
            sl__rl_normalise(&s->pol, raw, x);
            sl__mlp_forward(&s->pol.net, x, NULL, z, &v);
            sl__ppo_buf_end(&s->buf, v);
            sl__ppo_update(&s->ppo, &s->pol.net, &s->buf, &s->rng, NULL);
            s->buf.n = 0;
            s->updates++;
        }
    }
    int gpu_full =
        sl__rl_places(&s->pol) && sl__place_gpu_full(win, n, NULL, NULL);
    sl__rl_decide(&s->pol, raw, lim, cur, gpu_full, s->learn ? &s->rng : NULL,
                  &d, next);
    if (s->learn)
        s->pending =
            sl__ppo_buf_add(&s->buf, d.x, d.act, d.mask, d.logp, d.value);
    sl__rl_reason(&d, reason, len);
    return changed(cur, next);
}
