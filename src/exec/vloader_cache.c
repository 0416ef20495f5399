/* exec/vloader_cache: the volume loader's case cache (offline results
 * within cache_bytes, given back by Belady's rule), its memory budget
 * (memory_bytes: each offline stage charged before it allocates) and the
 * look-ahead (idle threads making later cases' offline stages ahead).
 * Every function runs under the loader's mutex (vloader_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/rng.h"
#include "vloader_internal.h"
#include "vloader_offline.h"
#include "volume/gzindex.h"

/* Epoch e's case order (of the cases used) and its inverse (under mu). */
const struct eperm *sl__vl_eperm(sl_vloader_t *l, int64_t e)
{
    struct eperm *p = &l->ep[e & 1];
    if (p->epoch == e)
        return p;
    sl__rng_t r;
    sl__rng_init(&r, l->o.seed, (uint64_t)e, 0, SL_RNG_SHUFFLE);
    for (int64_t i = 0; i < l->nuse; i++)
        p->perm[i] = l->use[i];
    for (int64_t i = l->nuse - 1; i > 0; i--) {
        int64_t j = (int64_t)sl__rng_below(&r, (uint64_t)i + 1);
        int64_t t = p->perm[i];
        p->perm[i] = p->perm[j];
        p->perm[j] = t;
    }
    for (int64_t i = 0; i < l->nuse; i++)
        p->inv[p->perm[i]] = i;
    p->epoch = e;
    return p;
}

/* Where case c is next used in the stream (epoch x cases + position),
 * from the consumer's batch on: the order is known, so the cache can give
 * back the case used again last (Belady's rule) rather than the least
 * recently used one. Under mu. */
static int64_t next_use(sl_vloader_t *l, int64_t c)
{
    int64_t e = l->next_g / l->nb, from = (l->next_g % l->nb) * l->o.batch_size;
    int64_t p = sl__vl_eperm(l, e)->inv[c];
    if (p >= from)
        return e * l->nuse + p;
    return (e + 1) * l->nuse + sl__vl_eperm(l, e + 1)->inv[c];
}

static void drop(sl_vloader_t *l, vcase_t *k)
{
    free(k->img);
    free(k->lbl);
    free(k->fg);
    k->img = NULL;
    k->lbl = NULL;
    k->fg = NULL;
    k->state = CASE_NONE;
    l->cache_held -= k->bytes;
    l->mem_used -= k->bytes;
}

/* Whether the cache is over its bound or `need` more bytes do not fit the
 * memory budget. */
static int over(const sl_vloader_t *l, int64_t need)
{
    return l->cache_held > l->o.cache_bytes ||
           (l->mem_limit && l->mem_used + need > l->mem_limit);
}

/* Case k's gzip indexes given back (not while its stage runs: its jobs
 * read them unlocked). */
static void drop_index(sl_vloader_t *l, vcase_t *k)
{
    for (int i = 0; i < 2; i++) {
        sl__gzindex_free(k->gzi[i]);
        k->gzi[i] = NULL;
    }
    l->mem_used -= k->gz_bytes;
    k->gz_bytes = 0;
}

/* Over the memory budget with no cached case to give back: the gzip
 * indexes of cases not being made, the one used again last first (such a
 * case is read whole once more, and indexed again). */
static void drop_indexes(sl_vloader_t *l, int64_t need)
{
    while (l->mem_limit && l->mem_used + need > l->mem_limit) {
        vcase_t *old = NULL;
        int64_t ou = -1;
        for (int64_t c = 0; c < l->ncases; c++) {
            vcase_t *k = &l->cases[c];
            int64_t u;
            if (k->gz_bytes && !k->staging && (u = next_use(l, c)) > ou) {
                old = k;
                ou = u;
            }
        }
        if (!old)
            return;
        drop_index(l, old);
    }
}

/* Gives back cached cases nobody uses, the one used again last first,
 * until the cache fits its bound and `need` more bytes the memory budget
 * (then gzip indexes). Under mu. */
void sl__vl_evict(sl_vloader_t *l, int64_t need)
{
    while (over(l, need)) {
        vcase_t *old = NULL;
        int64_t ou = -1;
        for (int64_t c = 0; c < l->ncases; c++) {
            vcase_t *k = &l->cases[c];
            if (k->state != CASE_READY || k->users)
                continue;
            int64_t u = next_use(l, c);
            if (u > ou) {
                old = k;
                ou = u;
            }
        }
        if (!old) {
            drop_indexes(l, need);
            return;
        }
        drop(l, old);
    }
}

void sl__vl_ema(double *r, double v)
{
    if (v > 0)
        *r += 0.2 * (v - *r);
}

void sl__vl_mem_add(sl_vloader_t *l, int64_t bytes)
{
    l->mem_used += bytes;
    if (l->mem_used > l->mem_peak)
        l->mem_peak = l->mem_used;
}

/* Charges an offline stage's bytes to the memory budget (under mu): the
 * cache gives back what nobody uses; while others' stages or patches hold
 * the rest, waits for them. A stage that cannot fit even alone fails at
 * once, naming the sizes (the caller names the case): whether a case fits
 * never depends on timing. */
static int mem_charge(sl_vloader_t *l, int64_t need, char *err, size_t errlen)
{
    if (l->mem_limit && need > l->mem_limit - l->buf_bytes)
        return sl__fail(
            err, errlen, SL_ENOMEM,
            "its offline stage needs %.1f MB, the memory "
            "budget allows %.1f MB (%.1f MB less %.1f MB of batch "
            "buffers)%s",
            (double)need / 1e6, (double)(l->mem_limit - l->buf_bytes) / 1e6,
            (double)l->mem_limit / 1e6, (double)l->buf_bytes / 1e6, l->mem_why);
    for (;;) {
        /* The cache may stay over its own bound while its cases are in
         * use (given back when they are not): only the budget waits. */
        sl__vl_evict(l, need);
        if (!l->mem_limit || l->mem_used + need <= l->mem_limit)
            break;
        if (l->stopping)
            return sl__fail(err, errlen, SL_ESTATE, "vloader: stopping");
        pthread_cond_wait(&l->cv_case, &l->mu);
    }
    sl__vl_mem_add(l, need);
    return 0;
}

/* At 2^24 stored voxels (64 x 512^2, ~0.3 s of offline stage on this VM)
 * a case is worth splitting: smaller ones cost less than a patch batch's
 * spread, and each extra slab reads the slices before it again. */
double sl__vl_split_min_vox = (double)(1 << 24);

static int64_t case_bytes(const sl_vloader_t *l, int64_t c, int nslab)
{
    const vcase_t *k = &l->cases[c];
    return sl__voff_bytes(k->raw, k->rs, k->dims,
                          !sl_volume_dataset_image(l->ds, c), /* a pack's */
                          nslab);
}

/* Whether case c's stage is split when it is waited for: balanced, the
 * case large, and files (a pack's slab would decompress the case's record
 * from its start again: a zstd stream cannot seek, and has no index as
 * gzip has). */
static int splittable(const sl_vloader_t *l, int64_t c)
{
    return !l->o.no_balance && l->o.threads >= 2 &&
           l->cases[c].raw_vox >= l->split_min_vox &&
           sl_volume_dataset_image(l->ds, c);
}

/* How many slabs case c's stage is made in: one per thread when balanced
 * and the case is large, fewer when more would not fit the memory budget
 * (whether a case fits never depends on the split). */
static int case_slabs(const sl_vloader_t *l, int64_t c)
{
    const vcase_t *k = &l->cases[c];
    if (!splittable(l, c))
        return 1;
    int n = l->o.threads < k->rs[0] ? l->o.threads : (int)k->rs[0];
    while (n > 1 && l->mem_limit &&
           case_bytes(l, c, n) > l->mem_limit - l->buf_bytes)
        n--;
    return n;
}

/* Whether split sp has a job to claim now. */
static int claimable(const vsplit_t *sp)
{
    return sp->next < sp->njobs && sp->next - sp->done < sp->conc;
}

/* Runs a claimed job of split sp (under mu; unlocks while computing). */
static void run_slab(sl_vloader_t *l, vsplit_t *sp, int s)
{
    char err[512];
    pthread_mutex_unlock(&l->mu);
    int rc = sl__voff_slab(sp->v, s, err, sizeof err);
    pthread_mutex_lock(&l->mu);
    if (rc && !sp->rc) {
        sp->rc = rc;
        snprintf(sp->err, sizeof sp->err, "%s", err);
    }
    sp->done++;
    pthread_cond_broadcast(&l->cv_case);
}

int sl__vl_help(sl_vloader_t *l, int64_t c, int64_t g_max)
{
    for (int64_t i = c < 0 ? 0 : c; i < (c < 0 ? l->ncases : c + 1); i++) {
        vsplit_t *sp = l->cases[i].split;
        if (!sp || !claimable(sp) || (c < 0 && sp->g > g_max))
            continue;
        int s = sp->next++;
        if (sp->next == sp->njobs)
            l->cases[i].split = NULL; /* nothing left to claim */
        l->st.offline_helped++;
        run_slab(l, sp, s);
        return 1;
    }
    return 0;
}

/* Case c's stage with `nslab` jobs at once: this thread claims them in
 * order while free threads take the rest (sl__vl_help); then it finishes
 * the stage. Under mu; unlocks while computing. */
static int stage_run(sl_vloader_t *l, int64_t c, int64_t g, int nslab,
                     float **img, uint8_t **lbl, sl_vol_fg_t **fg, char *err,
                     size_t errlen)
{
    vcase_t *k = &l->cases[c];
    vsplit_t sp = {.conc = nslab, .g = g};
    k->staging = 1;
    pthread_mutex_unlock(&l->mu);
    /* a case worth splitting keeps its gzip files' indexes (any stage,
     * a look-ahead's too, builds them) */
    int rc =
        sl__voff_begin(l->ds, c, k->raw, k->rs, k->dims, l->pdims, nslab,
                       splittable(l, c) ? k->gzi : NULL, &sp.v, err, errlen);
    pthread_mutex_lock(&l->mu);
    if (rc) {
        k->staging = 0;
        return rc;
    }
    sp.njobs = sl__voff_jobs(sp.v);
    if (nslab > 1) {
        k->split = &sp;
        pthread_cond_broadcast(&l->cv_work);
        pthread_cond_broadcast(&l->cv_case); /* the case's waiters help */
    }
    while (sp.done < sp.njobs) { /* meanwhile, other splits' jobs */
        if (claimable(&sp)) {
            int s = sp.next++;
            if (sp.next == sp.njobs)
                k->split = NULL;
            run_slab(l, &sp, s);
        } else if (!sl__vl_help(l, -1, INT64_MAX)) {
            pthread_cond_wait(&l->cv_case, &l->mu);
        }
    }
    k->split = NULL;
    pthread_mutex_unlock(&l->mu);
    if (sp.rc)
        rc = sl__fail(err, errlen, sp.rc, "%s", sp.err);
    else
        rc = sl__voff_end(sp.v, img, lbl, fg, err, errlen);
    sl__voff_free(sp.v);
    pthread_mutex_lock(&l->mu);
    k->staging = 0;
    return rc;
}

/* Case c's offline stage (state LOADING and `need` charged by the
 * caller, for `nslab` slabs): unlocks while computing; then READY with
 * `users` users, or NONE on failure. Under mu. */
static int case_make(sl_vloader_t *l, int64_t c, int64_t g, int64_t need,
                     int nslab, int users, char *err, size_t errlen)
{
    vcase_t *k = &l->cases[c];
    float *img = NULL;
    uint8_t *lbl = NULL;
    sl_vol_fg_t *fg = NULL;
    int64_t t0 = sl__now_ns();
    int rc = stage_run(l, c, g, nslab, &img, &lbl, &fg, err, errlen);
    int64_t t1 = sl__now_ns();
    l->mem_used -= need;
    /* Indexes the stage built are held from now on, kept when they fit
     * the memory budget (then given back before cached cases are). */
    int64_t gz = sl__gzindex_bytes(k->gzi[0]) + sl__gzindex_bytes(k->gzi[1]);
    l->mem_used -= k->gz_bytes;
    k->gz_bytes = 0;
    if (l->mem_limit && l->mem_used + gz > l->mem_limit)
        drop_index(l, k);
    else
        sl__vl_mem_add(l, k->gz_bytes = gz);
    if (rc) {
        k->state = CASE_NONE;
    } else {
        k->img = img;
        k->lbl = lbl;
        k->fg = fg;
        k->bytes = (int64_t)(k->vox * 5) + (int64_t)sizeof *fg;
        k->state = CASE_READY;
        k->ahead_failed = 0; /* a passing failure: looked ahead again */
        k->users = users;
        l->cache_held += k->bytes;
        sl__vl_mem_add(l, k->bytes);
        l->st.offline_runs++;
        if (nslab > 1)
            l->st.offline_split++;
        /* the stage's wall time, split or not: what its batch waits */
        sl__vl_ema(&l->r_off, (double)(t1 - t0) / k->raw_vox);
        sl__vl_evict(l, 0);
    }
    pthread_cond_broadcast(&l->cv_case);
    return rc;
}

/* Case c's offline result, computed once (others wait for it). Under mu;
 * unlocks while computing. */
int sl__vl_case_get(sl_vloader_t *l, int64_t c, int64_t g, int *budget,
                    char *err, size_t errlen)
{
    vcase_t *k = &l->cases[c];
    *budget = 0;
    while (k->state == CASE_LOADING) /* helping with its slabs, if split */
        if (!sl__vl_help(l, c, 0))
            pthread_cond_wait(&l->cv_case, &l->mu);
    if (k->state == CASE_READY) {
        k->users++;
        l->st.cache_hits++;
        return 0;
    }
    k->state = CASE_LOADING;
    int nslab = case_slabs(l, c);
    int64_t need = case_bytes(l, c, nslab);
    int rc = mem_charge(l, need, err, errlen);
    if (rc) {
        *budget = rc == SL_ENOMEM;
        k->state = CASE_NONE;
        pthread_cond_broadcast(&l->cv_case);
        return rc;
    }
    return case_make(l, c, g, need, nslab, 1, err, errlen);
}

static int64_t case_add(const vcase_t *k)
{
    return (int64_t)(k->vox * 5) + (int64_t)sizeof(sl_vol_fg_t);
}

/* Cache bytes already promised: stages in flight, and the window's tasks
 * whose cases are not cached (each case once). */
static int64_t promised(const sl_vloader_t *l)
{
    int64_t b = 0;
    for (int64_t c = 0; c < l->ncases; c++)
        if (l->cases[c].state == CASE_LOADING)
            b += case_add(&l->cases[c]);
    for (int i = 0; i < l->ntasks; i++) {
        int64_t c = l->tasks[i].c;
        int seen = l->cases[c].state != CASE_NONE;
        for (int j = 0; j < i && !seen; j++)
            seen = l->tasks[j].c == c;
        if (!seen)
            b += case_add(&l->cases[c]);
    }
    return b;
}

/* An idle thread's work (the window's tasks all taken): the offline stage
 * of the next case beyond the window that is not cached, started before
 * its batch opens — the stream's order is known — when it fits the
 * cache's free room beside the window's own misses, and the memory budget
 * without waiting. Looks one window ahead; at most threads - 1 such stages at
 * once (one thread stays free for the window's next batch). Under mu;
 * unlocks while computing. @return 1 when it ran one, failed or not (mu
 * was let go: what the caller saw before may have changed). */
int sl__vl_look_ahead(sl_vloader_t *l)
{
    if (l->ahead >= (l->o.threads > 1 ? l->o.threads - 1 : 1))
        return 0;
    int64_t e0 = l->claim_g / l->nb,
            p0 = (l->claim_g % l->nb) * l->o.batch_size;
    /* The next window's samples only: a case made far ahead holds cache
     * room that nearer cases need. */
    int64_t horizon = (int64_t)l->o.prefetch * l->o.batch_size;
    if (horizon > l->nuse)
        horizon = l->nuse;
    for (int64_t i = 0; i < horizon && !l->stopping; i++) {
        int64_t e = e0 + (p0 + i) / l->nuse, p = (p0 + i) % l->nuse;
        int64_t c = sl__vl_eperm(l, e)->perm[p];
        vcase_t *k = &l->cases[c];
        if (k->state != CASE_NONE || k->ahead_failed)
            continue;
        /* not split: the other threads are for the window's batches */
        int64_t need = case_bytes(l, c, 1), owed = promised(l);
        /* Free room only, beside what the window's own misses will take.
         * Giving back cases used after this one to make room (Belady's
         * order) made more stages than it saved: 44 for 41 and a longer
         * wait on a quiet machine (bench/RESULTS.md). */
        if (l->cache_held + case_add(k) + owed > l->o.cache_bytes ||
            (l->mem_limit && l->mem_used + need + owed > l->mem_limit))
            return 0; /* the nearest uncached case does not fit yet; a
                         later one would take the room it needs */
        k->state = CASE_LOADING;
        sl__vl_mem_add(l, need);
        l->st.offline_ahead++;
        l->ahead++;
        char err[512];
        /* A failure shows when its task makes the case itself; it is not
         * looked ahead again, or the idle thread would take it straight
         * back (LOADING) each time it failed, and that task, waiting for
         * it, would never run. */
        if (case_make(l, c, INT64_MAX, need, 1, 0, err, sizeof err))
            k->ahead_failed = 1;
        l->ahead--;
        return 1;
    }
    return 0;
}
