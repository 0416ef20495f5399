#include "sim/train.h"

#include <math.h>
#include <string.h>

#include "base/base.h"
#include "sched/heuristic.h"
#include "sched/limits.h"
#include "sim/gpu.h"
#include "sim/run.h"

#define TICKS SL_SCHED_PERIODS

/* Profile i of training (the episode's seed) or evaluation: random
 * around the base, with a GPU stage in four of five under o->gpu. */
static void profile(const sl__train_opts_t *o, uint64_t seed,
                    sl__sim_profile_t *p)
{
    sl__sim_profile_random(seed, o->base, o->episode_s, p);
    sl__rng_t r;
    sl__rng_init(&r, seed, 0, 0, 0x6770); /* "gp" */
    if (o->gpu && sl__rng_double(&r) < 0.8)
        sl__sim_gpu_random(seed, p);
}

/* The loader's budgets for a simulated machine with every knob left to
 * the scheduler (sched/limits.h), sometimes capped by a random memory
 * budget so the policy meets small max_prefetch too; the share's as
 * placement auto sets them under `policy`. */
static void sim_limits(const sl__sim_profile_t *p, int policy, sl__rng_t *r,
                       sl__limits_t *lim)
{
    sl_options_t o;
    memset(&o, 0, sizeof o);
    o.policy = SL_POLICY_RL;
    sl__knobs_t k;
    char err[8];
    /* No budget given: the rule cannot fail. */
    sl__limits_make(&o, p->ncpu, (size_t)p->batch_bytes, lim, &k, err,
                    sizeof err);
    sl__sim_gpu_limits(p, policy, lim);
    if (r && sl__rng_double(r) < 0.3) {
        lim->max_prefetch = 2 + (int)sl__rng_below(r, 7);
        lim->hard_prefetch = 1;
    }
}

/* Where a loader with every knob on autotune starts: read 1, decode =
 * cores, prefetch 2 x decode, no GPU share. Training also starts from
 * random knobs (and a random share where there is a GPU stage). */
static void start_knobs(const sl__sim_profile_t *p, const sl__limits_t *lim,
                        sl__rng_t *r, sl__knobs_t *k)
{
    k->read_threads = 1;
    k->decode_threads = p->ncpu;
    k->prefetch =
        2 * p->ncpu < lim->max_prefetch ? 2 * p->ncpu : lim->max_prefetch;
    if (r && sl__rng_double(r) < 0.5) {
        k->read_threads = 1 + (int)sl__rng_below(r, 3);
        k->decode_threads =
            1 + (int)sl__rng_below(r, (uint64_t)lim->max_threads - 1);
        k->prefetch = 1 + (int)sl__rng_below(r, (uint64_t)lim->max_prefetch);
        if (lim->max_gpu_share > 0)
            k->gpu_share =
                SL_RL_SHARE_STEP *
                (int)sl__rng_below(
                    r, (uint64_t)lim->max_gpu_share / SL_RL_SHARE_STEP + 1);
    }
}

/* The reward in the simulator: sl__rl_reward with the trainer's slowdown
 * known rather than estimated — the consumer's step runs 1 / (1 +
 * gpu_slow) as fast while the stage works (sim/gpu.h), so the charge is
 * ln(1 + gpu_slow x the stage's busy share). Run time (--learn) estimates
 * it against the least time per sample seen, which a policy that never
 * sheds never sees; training charges it whatever the policy visits. */
static double sim_reward(const sl__sim_profile_t *p, const sl_snapshot_t *win,
                         const sl__limits_t *lim, const sl__knobs_t *k)
{
    /* Every policy judged alike where there is a share to place (the
     * rule's, too). */
    double r = sl__rl_reward(win, TICKS, lim, k, lim->max_gpu_share > 0, NULL);
    if (lim->max_gpu_share <= 0 || !(p->gpu_slow > 0))
        return r;
    double busy = 0;
    for (int i = 0; i < TICKS; i++)
        busy += (win[i].gpu_stage_busy > 0 ? win[i].gpu_stage_busy : 0) / TICKS;
    return r - SL_RL_KAPPA * log(1 + p->gpu_slow * busy);
}

/* One decision period of simulated time: fills win[TICKS]. */
static void advance(sl__sim_t *sim, sl_snapshot_t *win)
{
    for (int i = 0; i < TICKS; i++)
        sl__sim_step(sim, SL_SIM_PERIOD_S, &win[i]);
}

/* ------------------------------------------------------------ training */

typedef struct episode {
    sl__sim_profile_t prof;
    sl__limits_t lim;
    sl__knobs_t k;
    sl__sim_t *sim;
    sl_snapshot_t win[TICKS];
    int t, len; /* decisions taken, per episode */
    /* The stall model's jump, which runs before the learned policy at run
     * time (sched/rl.c), runs before it here too: the policy learns the
     * windows it will meet, not the ones the jump leaves behind. */
    sl__heur_t model;
} episode_t;

static int episode_start(episode_t *e, const sl__train_opts_t *o, uint64_t n,
                         sl__rng_t *r)
{
    profile(o, o->seed * 1000003ull + n, &e->prof);
    sim_limits(&e->prof, SL_POLICY_RL, r, &e->lim);
    memset(&e->k, 0, sizeof e->k);
    start_knobs(&e->prof, &e->lim, r, &e->k);
    e->sim = sl__sim_create(&e->prof, &e->k, o->seed ^ (n << 20));
    if (!e->sim)
        return SL_ENOMEM;
    e->t = 0;
    e->len = (int)(o->episode_s / (SL_SIM_PERIOD_S * TICKS));
    sl__heur_init(&e->model);
    advance(e->sim, e->win);
    return 0;
}

/* The model's jump (or the judgement of one) for this window, applied and
 * simulated; 0 when the model had nothing to say and the policy decides. */
static int model_window(episode_t *e)
{
    sl__knobs_t next;
    if (sl__heur_model_step(&e->model, e->win, TICKS, &e->lim, &e->k, &next,
                            NULL, 0) == SL_KNOB_NONE)
        return 0;
    e->k = next;
    sl__sim_set_knobs(e->sim, &e->k);
    advance(e->sim, e->win);
    return 1;
}

int sl__train_normalise(const sl__train_opts_t *o, sl__rl_policy_t *pol,
                        int from)
{
    sl__rng_t r;
    sl__rng_init(&r, o->seed, 0, 0, 0x6e6f); /* "no" */
    double s1[SL_RL_NOBS] = {0}, s2[SL_RL_NOBS] = {0};
    long n = 0;
    for (uint64_t ep = 0; n < 2000; ep++) {
        episode_t e;
        if (episode_start(&e, o, ~ep, &r))
            return SL_ENOMEM;
        for (; e.t < e.len; e.t++) {
            if (model_window(&e))
                continue;
            double raw[SL_RL_NOBS];
            sl__rl_features(e.win, TICKS, &e.lim, &e.k, raw);
            for (int i = 0; i < SL_RL_NOBS; i++) {
                s1[i] += raw[i];
                s2[i] += raw[i] * raw[i];
            }
            n++;
            sl__rl_decision_t d;
            sl__knobs_t next;
            sl__rl_decide(pol, raw, &e.lim, &e.k, 0, &r, &d, &next);
            e.k = next;
            sl__sim_set_knobs(e.sim, &e.k);
            advance(e.sim, e.win);
        }
        sl__sim_destroy(e.sim);
    }
    for (int i = from; i < pol->net.n_in; i++) {
        pol->mean[i] = s1[i] / n;
        double var = s2[i] / n - pol->mean[i] * pol->mean[i];
        /* A feature that hardly moves keeps unit scale. */
        pol->sd[i] = var > 1e-4 ? sqrt(var) : 1;
    }
    return 0;
}

/* Time limits truncate: the last decision bootstraps from V(this state). */
static void bootstrap_end(const sl__rl_policy_t *pol, sl__ppo_buf_t *buf,
                          const episode_t *e)
{
    double nraw[SL_RL_NOBS], x[SL_RL_NOBS], z[SL_MLP_MAX_LOGITS], v;
    sl__rl_features(e->win, TICKS, &e->lim, &e->k, nraw);
    sl__rl_normalise(pol, nraw, x);
    sl__mlp_forward(&pol->net, x, NULL, z, &v);
    sl__ppo_buf_end(buf, v);
}

static int next_episode(const sl__train_opts_t *o, episode_t *e,
                        uint64_t *episodes, sl__rng_t *r)
{
    sl__sim_destroy(e->sim);
    e->sim = NULL;
    return episode_start(e, o, (*episodes)++, r);
}

/* Fills buf with one rollout; episodes run on across rollouts. */
static int rollout(const sl__train_opts_t *o, sl__rl_policy_t *pol,
                   sl__ppo_buf_t *buf, episode_t *e, uint64_t *episodes,
                   sl__rng_t *r, double *rsum, long *model)
{
    buf->n = 0;
    *rsum = 0;
    *model = 0;
    while (buf->n < buf->cap) {
        if (model_window(e)) {
            ++*model;
            /* Not the policy's action: no experience. A jump between two
             * of its decisions is part of the world it acts in. */
            if (++e->t >= e->len) {
                /* The episode ends here: its last decision (if this
                 * rollout holds one not yet closed) is truncated. */
                if (buf->n > 0 && !buf->last[buf->n - 1])
                    bootstrap_end(pol, buf, e);
                int rc = next_episode(o, e, episodes, r);
                if (rc)
                    return rc;
            }
            continue;
        }
        double raw[SL_RL_NOBS];
        sl__rl_features(e->win, TICKS, &e->lim, &e->k, raw);
        sl__rl_decision_t d;
        sl__knobs_t next;
        sl__rl_decide(pol, raw, &e->lim, &e->k, 0, r, &d, &next);
        int i = sl__ppo_buf_add(buf, d.x, d.act, d.mask, d.logp, d.value);
        e->k = next;
        sl__sim_set_knobs(e->sim, &e->k);
        advance(e->sim, e->win);
        double rew = sim_reward(&e->prof, e->win, &e->lim, &e->k);
        sl__ppo_buf_reward(buf, i, rew);
        *rsum += rew;
        int over = ++e->t >= e->len;
        if (over || buf->n == buf->cap)
            bootstrap_end(pol, buf, e);
        if (over) {
            int rc = next_episode(o, e, episodes, r);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int sl__train_ppo(const sl__train_opts_t *o, sl__rl_policy_t *pol)
{
    sl__rng_t r;
    sl__rng_init(&r, o->seed, 0, 0, 0x7472); /* "tr" */
    sl__ppo_hp_t hp;
    sl__ppo_hp_default(&hp);
    if (o->lr > 0)
        hp.lr = o->lr;
    sl__ppo_t ppo;
    sl__ppo_buf_t buf;
    if (sl__ppo_init(&ppo, &hp, &pol->net))
        return SL_ENOMEM;
    if (sl__ppo_buf_init(&buf, o->rollout, pol->net.n_in, pol->net.n_knobs)) {
        sl__ppo_free(&ppo);
        return SL_ENOMEM;
    }
    episode_t e;
    uint64_t episodes = 0;
    int rc = episode_start(&e, o, episodes++, &r);
    long done = 0;
    for (int u = 1; !rc && done < o->steps; u++) {
        double rsum;
        long model;
        if ((rc = rollout(o, pol, &buf, &e, &episodes, &r, &rsum, &model)))
            break;
        done += buf.n;
        sl__train_progress_t pr;
        memset(&pr, 0, sizeof pr);
        pr.update = u;
        pr.decisions = done;
        pr.mean_reward = rsum / buf.n;
        pr.model_windows = model;
        if ((rc = sl__ppo_update(&ppo, &pol->net, &buf, &r, &pr.st)))
            break;
        if (o->on_update)
            o->on_update(o->ctx, &pr);
    }
    sl__sim_destroy(e.sim);
    sl__ppo_buf_free(&buf);
    sl__ppo_free(&ppo);
    return rc;
}

/* ---------------------------------------------------------- evaluation */

void sl__train_eval_profile(const sl__train_opts_t *o, uint64_t i,
                            sl__sim_profile_t *p)
{
    /* Seeds training never draws. */
    profile(o, SL_EVAL_SEED_BASE + o->seed * 7919 + i, p);
}

static sl__policy_t *eval_policy(const sl__rl_policy_t *pol, int which,
                                 uint64_t i)
{
    if (which == SL_EVAL_STATIC)
        return sl__policy_static();
    if (which == SL_EVAL_HEURISTIC)
        return sl__policy_heuristic();
    sl__rl_policy_t copy;
    if (sl__rl_policy_clone(&copy, pol))
        return NULL;
    return sl__policy_rl(&copy, 0, i);
}

int sl__train_eval_one(const sl__train_opts_t *o, const sl__rl_policy_t *pol,
                       int which, uint64_t i, sl__eval_score_t *sc)
{
    sl__sim_profile_t prof;
    sl__train_eval_profile(o, i, &prof);
    sl__limits_t lim;
    sim_limits(&prof, which == SL_EVAL_STATIC ? SL_POLICY_STATIC : SL_POLICY_RL,
               NULL, &lim);
    sl__knobs_t k;
    memset(&k, 0, sizeof k);
    start_knobs(&prof, &lim, NULL, &k);
    if (which == SL_EVAL_STATIC) {
        k.read_threads = 1;
        k.decode_threads = prof.ncpu;
        k.prefetch = 2;
    }
    sl__sim_t *sim = sl__sim_create(&prof, &k, i);
    sl__policy_t *p = sim ? eval_policy(pol, which, i) : NULL;
    if (!p) {
        sl__sim_destroy(sim);
        return SL_ENOMEM;
    }
    sl__sched_t sched;
    sl__sched_init(&sched, p);
    memset(sc, 0, sizeof *sc);
    int len = (int)(o->episode_s / (SL_SIM_PERIOD_S * TICKS));
    double wait_s = 0, batches = 0, stall = 0, cpu = 0, samples = 0;
    sl_snapshot_t win[TICKS];
    for (int t = 0; t < len; t++) {
        advance(sim, win);
        for (int j = 0; j < TICKS; j++) {
            double nb =
                win[j].samples_per_s * SL_SIM_PERIOD_S / prof.batch_size;
            wait_s += win[j].consumer_wait_ms / 1e3 * nb;
            batches += nb;
            stall += win[j].stall_fraction / (len * TICKS);
            cpu += win[j].cpu_self * prof.ncpu / (len * TICKS);
            samples += win[j].samples_per_s * SL_SIM_PERIOD_S;
        }
        sc->reward += sim_reward(&prof, win, &lim, &k) / len;
        sc->share += (double)k.gpu_share / len;
        sc->threads += (double)(k.read_threads + k.decode_threads) / len;
        sc->prefetch += (double)k.prefetch / len;
        sl__sched_decision_t d;
        if (sl__sched_tick(&sched, win, TICKS, &lim, &k, &d)) {
            for (int c = 0; c < d.n; c++)
                *sl__knob_ref(&k, d.ch[c].knob) = d.ch[c].to;
            sl__sim_set_knobs(sim, &k);
        }
    }
    sc->wait_ms = batches > 0 ? wait_s * 1e3 / batches : 0;
    sc->stall = stall;
    sc->cores = cpu;
    sc->rate = samples / (len * TICKS * SL_SIM_PERIOD_S);
    sl__sched_free(&sched);
    sl__sim_destroy(sim);
    return 0;
}

int sl__train_evaluate(const sl__train_opts_t *o, const sl__rl_policy_t *pol,
                       int n, sl__eval_score_t *mean,
                       void (*on_row)(void *ctx, int i,
                                      const sl__sim_profile_t *p,
                                      const sl__eval_score_t *row),
                       void *ctx)
{
    memset(mean, 0, SL_EVAL_NPOL * sizeof *mean);
    for (int i = 0; i < n; i++) {
        sl__eval_score_t row[SL_EVAL_NPOL];
        for (int w = 0; w < SL_EVAL_NPOL; w++) {
            sl__eval_score_t *s = &row[w];
            int rc = sl__train_eval_one(o, pol, w, (uint64_t)i, s);
            if (rc)
                return rc;
            mean[w].wait_ms += s->wait_ms / n;
            mean[w].stall += s->stall / n;
            mean[w].cores += s->cores / n;
            mean[w].rate += s->rate / n;
            mean[w].reward += s->reward / n;
            mean[w].threads += s->threads / n;
            mean[w].prefetch += s->prefetch / n;
            mean[w].share += s->share / n;
        }
        if (on_row) {
            sl__sim_profile_t p;
            sl__train_eval_profile(o, (uint64_t)i, &p);
            on_row(ctx, i, &p, row);
        }
    }
    return 0;
}
