/* Volume loader: sluice/vloader.h.
 *
 * One mutex guards everything shared: the batch buffers, the waiting
 * samples (tasks) of the open batches, the case cache and the cost rates.
 * The work itself (offline stage, draw, patch) runs outside it. Batches
 * open in stream order while fewer than `prefetch` are ahead of the
 * consumer and a buffer is free; their samples become tasks; a thread
 * helps with a large case's offline stage split into slabs first, then
 * takes the task with the least slack (or the oldest, without the
 * balancer), and with none left looks ahead (vloader_cache.c). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/abi.h"
#include "base/base.h"
#include "sched/limits.h"
#include "sluice/testing.h"
#include "telemetry/machine.h"
#include "vloader_internal.h"
#include "vloader_offline.h"
#include "volume/gzindex.h"

void sl_vloader_options_init_sized(sl_vloader_options_t *o, size_t size)
{
    if (!o)
        return;
    sl__abi_init(o, size);
    sl_vol_aug_init(&o->aug); /* in every layout, the first included */
}

void(sl_vloader_options_init)(sl_vloader_options_t *o)
{
    sl_vloader_options_init_sized(o, sizeof *o);
}

static double prod3(const int64_t d[3])
{
    return (double)d[0] * (double)d[1] * (double)d[2];
}

/* Counts and lists a skip (under mu): message m (taken) or, NULL, text. */
static void add_skip(sl_vloader_t *l, char *m, const char *text)
{
    l->st.skipped++;
    l->skipped_total++;
    if (l->nskips < SKIPS_KEPT && !m && text)
        m = strdup(text);
    if (l->nskips < SKIPS_KEPT && m)
        l->skips[l->nskips++] = m;
    else
        free(m);
}

/* "%d dimensions" for a volume that is not 3-D to the loader. */
static int not_3d(const sl_volume_t *v, const char *path, char *err,
                  size_t errlen)
{
    if (v->ndim == 4)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "%s: 4 dimensions (%lld x %lld x %lld x %lld), a 3-D "
                        "volume expected (a 4th dimension of 1 is accepted)",
                        path, (long long)v->dim[0], (long long)v->dim[1],
                        (long long)v->dim[2], (long long)v->dim[3]);
    return sl__fail(err, errlen, SL_EUNSUPPORTED,
                    "%s: %d dimensions, a 3-D volume expected", path, v->ndim);
}

/* Case c's volumes, read and checked; stored dims and spacing. */
static int case_header(sl_vloader_t *l, int64_t c, char *err, size_t errlen)
{
    sl_volume_options_t vo;
    sl_volume_options_init(&vo);
    vo.header_only = 1;
    sl_volume_t *v = NULL;
    /* files or a pack's record alike (a pack has no paths) */
    const char *path = sl_volume_dataset_image(l->ds, c);
    if (!path)
        path = sl_volume_dataset_name(l->ds, c);
    const char *lpath = sl_volume_dataset_label(l->ds, c);
    sl_volume_t *lv = NULL;
    int rc = sl_volume_dataset_load(l->ds, c, &vo, &v, &lv, err, errlen);
    if (rc)
        return rc;
    if (!sl__voff_is_3d(v))
        rc = not_3d(v, path, err, errlen);
    else if (lv && !sl__voff_is_3d(lv))
        rc = not_3d(lv, lpath ? lpath : path, err, errlen);
    else if (lv && (lv->dim[0] != v->dim[0] || lv->dim[1] != v->dim[1] ||
                    lv->dim[2] != v->dim[2]))
        /* at create, not at the case's first read (the readers check it
         * again there: a file changed since) */
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: the label is %lld x %lld x %lld, its image (%s) "
                      "%lld x %lld x %lld",
                      lpath ? lpath : path, (long long)lv->dim[0],
                      (long long)lv->dim[1], (long long)lv->dim[2], path,
                      (long long)v->dim[0], (long long)v->dim[1],
                      (long long)v->dim[2]);
    if (rc) {
        sl_volume_free(v);
        sl_volume_free(lv);
        return rc;
    }
    vcase_t *k = &l->cases[c];
    k->stored = (double)v->dim[0] * (double)v->dim[1] * (double)v->dim[2] *
                (double)(sl_volume_dtype_size(v->stored_dtype) +
                         (lv ? sl_volume_dtype_size(lv->stored_dtype) : 0));
    sl_volume_free(lv);
    for (int i = 0; i < 3; i++) {
        k->raw[i] = v->dim[2 - i];
        k->spacing[i] = v->spacing[2 - i];
    }
    sl_volume_free(v);
    double tgt[3] = {l->o.target_spacing[2], l->o.target_spacing[1],
                     l->o.target_spacing[0]};
    int64_t *rs = k->rs;
    if (sl_vol_resample_shape(k->raw, k->spacing, tgt, rs))
        return sl__fail(err, errlen, SL_EINVAL,
                        "%s: %lld x %lld x %lld voxels of %g x %g x %g mm "
                        "cannot be resampled to target_spacing %g x %g x %g "
                        "(an axis of no voxel, or too many)",
                        path, (long long)k->raw[2], (long long)k->raw[1],
                        (long long)k->raw[0], k->spacing[2], k->spacing[1],
                        k->spacing[0], tgt[2], tgt[1], tgt[0]);
    for (int i = 0; i < 3; i++)
        k->dims[i] = rs[i] > l->pdims[i] ? rs[i] : l->pdims[i];
    k->raw_vox = prod3(k->raw);
    k->vox = prod3(k->dims);
    return 0;
}

/* A task's predicted cost in ns (under mu). */
static double predict(const sl_vloader_t *l, const task_t *t)
{
    const vcase_t *k = &l->cases[t->c];
    double ns = l->r_patch * (double)l->pvox;
    if (k->state != CASE_READY)
        ns += l->r_off * k->raw_vox;
    if (t->pre.noise)
        ns += l->r_noise * (double)l->pvox;
    return ns;
}

/* Opens the batches the window allows (under mu). */
static void open_batches(sl_vloader_t *l)
{
    while (l->claim_g < l->next_g + l->o.prefetch) {
        vbuf_t *b = NULL;
        for (int i = 0; i < l->nbufs && !b; i++)
            if (l->bufs[i].state == VB_FREE)
                b = &l->bufs[i];
        if (!b)
            return;
        int64_t g = l->claim_g++, e = g / l->nb, idx = g % l->nb;
        const int64_t *perm = sl__vl_eperm(l, e)->perm;
        int64_t first = idx * l->o.batch_size;
        int n = (int)(l->nuse - first < l->o.batch_size ? l->nuse - first
                                                        : l->o.batch_size);
        b->g = g;
        b->pub.epoch = e;
        b->pub.index = idx;
        b->pub.n = n;
        b->pending = n;
        b->rc = 0;
        b->err[0] = 0;
        b->nbad = 0;
        b->state = VB_FILLING;
        b->t_open = sl__now_ns();
        double work = 0;
        for (int s = 0; s < n; s++) {
            task_t *t = &l->tasks[l->ntasks++];
            t->g = g;
            t->slot = s;
            t->c = perm[first + s];
            b->pub.cases[s] = t->c;
            sl_vol_predict(&l->aug, l->o.seed, (uint64_t)e, (uint64_t)t->c,
                           &t->pre);
            work += predict(l, t);
        }
        work /= l->o.threads;
        l->period = l->period > 0 ? l->period + 0.2 * (work - l->period) : work;
    }
}

static vbuf_t *buf_of(sl_vloader_t *l, int64_t g)
{
    for (int i = 0; i < l->nbufs; i++)
        if (l->bufs[i].state != VB_FREE && l->bufs[i].g == g)
            return &l->bufs[i];
    return NULL;
}

/* Takes the next task. In order: the oldest batch's first slot. Balanced
 * (a task whose case another thread is making comes last):
 * least slack first — batch g falls due (g - next_g + 1) periods from now
 * and a task needs its predicted cost, so an expensive sample of a later
 * batch starts before cheap ones of the head batch exactly when waiting
 * would make its own batch late; among equals, the oldest. */
static int take(sl_vloader_t *l, task_t *out, double *pred)
{
    if (!l->ntasks)
        return 0;
    int best = -1;
    double bs = 0, bp = 0;
    int bwait = 0;
    for (int i = 0; i < l->ntasks; i++) {
        const task_t *t = &l->tasks[i];
        double p = predict(l, t);
        double slack = l->o.no_balance
                           ? 0
                           : (double)(t->g - l->next_g + 1) * l->period - p;
        /* A case another thread is making (ahead, or for another task)
         * would only block the taker: last, balanced. */
        int wait = !l->o.no_balance && l->cases[t->c].state == CASE_LOADING;
        const task_t *b = best >= 0 ? &l->tasks[best] : NULL;
        if (!b || wait < bwait || (wait == bwait && slack < bs) ||
            (wait == bwait && slack == bs &&
             (t->g < b->g || (t->g == b->g && t->slot < b->slot)))) {
            best = i;
            bs = slack;
            bp = p;
            bwait = wait;
        }
    }
    *out = l->tasks[best];
    *pred = bp;
    l->tasks[best] = l->tasks[--l->ntasks];
    return 1;
}

/* A skipped slot's message when there was no memory for its own. */
static const char no_msg[] = "(no memory for the message)";

/* Runs a task with mu held; returns with it held. scratch: this thread's
 * float patch when the output is bfloat16 (else NULL). */
static void run_task(sl_vloader_t *l, const task_t *t, double pred,
                     float *scratch)
{
    char err[512] = "";
    int64_t t0 = sl__now_ns();
    vcase_t *k = &l->cases[t->c];
    int budget;
    int rc = sl__vl_case_get(l, t->c, t->g, &budget, err, sizeof err);
    int held = !rc; /* a user of the cached case until the patch is made */
    pthread_mutex_unlock(&l->mu);
    int64_t t1 = sl__now_ns(), t2 = t1, t3 = t1;
    sl_vol_draw_t d;
    if (!rc) {
        const uint64_t e = (uint64_t)(t->g / l->nb);
        vbuf_t *b = NULL;
        pthread_mutex_lock(&l->mu);
        b = buf_of(l, t->g);
        pthread_mutex_unlock(&l->mu);
        rc = sl_vol_draw_fg(k->fg, k->dims, &l->aug, l->o.seed, e,
                            (uint64_t)t->c, &d, err, sizeof err);
        t2 = sl__now_ns();
        size_t at = (size_t)t->slot * (size_t)l->pvox;
        if (!rc)
            rc = sl_vol_apply(k->img, k->lbl, k->dims, &l->aug, &d, l->o.seed,
                              e, (uint64_t)t->c,
                              scratch ? scratch : b->pub.image + at,
                              b->pub.label + at);
        if (!rc && scratch)
            sl_vol_to_bf16(scratch, b->pub.image_bf16 + at, (size_t)l->pvox);
        t3 = sl__now_ns();
        if (rc && !err[0])
            snprintf(err, sizeof err, "%s: the patch failed",
                     sl_volume_dataset_name(l->ds, t->c));
    }
    pthread_mutex_lock(&l->mu);
    if (held && --k->users == 0 && l->mem_limit)
        pthread_cond_broadcast(&l->cv_case); /* memory waiters */
    if (!rc) {
        double pv = (double)l->pvox;
        if (d.noise)
            sl__vl_ema(&l->r_noise, ((double)(t3 - t2) - l->r_patch * pv) / pv);
        else
            sl__vl_ema(&l->r_patch, (double)(t3 - t2) / pv);
    }
    l->st.predicted_ns += (int64_t)pred;
    l->st.actual_ns += sl__now_ns() - t0;
    sl__vl_evict(l, 0);
    vbuf_t *b = buf_of(l, t->g);
    /* Not skipped where the memory budget refused the case: whether it
     * fits depends on prefetch and threads (the batch buffers), and the
     * stream under skip must not; the run fails naming memory_bytes. */
    if (rc && l->o.on_error == SL_ON_ERROR_SKIP && sl__err_is_data(rc) &&
        !budget) {
        /* left out as the batch is handed out; its message kept until
         * then (NULL without memory: still left out, listed without it) */
        size_t n = strlen(err) + 512;
        char *m = malloc(n);
        if (m)
            snprintf(m, n, "case %s: %s", sl_volume_dataset_name(l->ds, t->c),
                     err);
        b->serr[t->slot] = m ? m : (char *)no_msg;
        b->nbad++;
    } else if (rc && !b->rc) {
        b->rc = rc;
        int k = snprintf(b->err, sizeof b->err,
                         "case %s: ", sl_volume_dataset_name(l->ds, t->c));
        if (k > 0 && (size_t)k < sizeof b->err)
            snprintf(b->err + k, sizeof b->err - (size_t)k, "%.*s",
                     (int)(sizeof b->err - (size_t)k - 1), err);
    }
    if (--b->pending == 0) {
        b->state = VB_READY;
        l->lat[l->nlat++ % LAT_RING] = sl__now_ns() - b->t_open;
        pthread_cond_broadcast(&l->cv_ready);
    }
}

static void *worker(void *arg)
{
    sl_vloader_t *l = arg;
    pthread_mutex_lock(&l->mu);
    float *scratch =
        l->scratch ? l->scratch + (size_t)l->nwid++ * (size_t)l->pvox : NULL;
    while (!l->stopping) {
        open_batches(l);
        /* A large case's job first when it is the head batch's (the one
         * the consumer waits for): that batch waits for all of them; a
         * later batch's waits until the window's tasks are taken (they
         * may fall due first). */
        if (sl__vl_help(l, -1, l->next_g))
            continue;
        task_t t;
        double pred;
        if (take(l, &t, &pred)) {
            run_task(l, &t, pred, scratch);
            continue;
        }
        if (sl__vl_help(l, -1, INT64_MAX))
            continue;
        if (!l->o.no_balance && sl__vl_look_ahead(l))
            continue;
        pthread_cond_wait(&l->cv_work, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* The options checked beyond the counts: a value out of its range is an
 * error naming it (zero spacing and zero sizes are the defaults'). */
static int check_options(const sl_vloader_options_t *o, char *err,
                         size_t errlen)
{
    /* Sizes in bytes: 0 is the default (cache_bytes 2 GiB, memory_bytes
     * half the cgroup's limit, or no bound); a negative one is a caller's
     * mistake, not a default. */
    const struct {
        const char *name;
        int64_t v;
    } b[] = {{"cache_bytes", o->cache_bytes},
             {"memory_bytes", o->memory_bytes}};
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        if (b[i].v < 0)
            return sl__fail(err, errlen, SL_EINVAL,
                            "vloader: %s %lld: bytes, >= 0 (0: the default)",
                            b[i].name, (long long)b[i].v);
    static const char *const ax = "xyz";
    for (int i = 0; i < 3; i++)
        if (!(o->target_spacing[i] >= 0) || !isfinite(o->target_spacing[i]))
            return sl__fail(err, errlen, SL_EINVAL,
                            "vloader: target_spacing %c = %g: a voxel size "
                            "in mm, > 0 (0: the default)",
                            ax[i], o->target_spacing[i]);
    const struct {
        const char *name;
        double v, hi;
    } r[] = {{"oversampling", o->aug.oversampling, 1},
             {"flip_prob", o->aug.flip_prob, 1},
             {"brightness_prob", o->aug.brightness_prob, 1},
             {"noise_prob", o->aug.noise_prob, 1},
             {"brightness_factor", o->aug.brightness_factor, 1},
             {"noise_std", o->aug.noise_std, 1e6}};
    for (size_t i = 0; i < sizeof r / sizeof *r; i++)
        if (!(r[i].v >= 0 && r[i].v <= r[i].hi))
            return sl__fail(err, errlen, SL_EINVAL, "vloader: %s = %g: 0..%g",
                            r[i].name, r[i].v, r[i].hi);
    return 0;
}

/* The patch's dimensions, each 1..SL_VL_MAX_PVOX and their product (the
 * voxels of a patch) too: checked one by one, since two negative ones
 * make a positive product and a huge one a product that wraps. */
#define SL_VL_MAX_PVOX ((int64_t)1 << 28)
static int check_patch(const int64_t p[3], char *err, size_t errlen)
{
    for (int i = 0; i < 3; i++)
        if (p[i] < 1 || p[i] > SL_VL_MAX_PVOX)
            return sl__fail(err, errlen, SL_EINVAL,
                            "vloader: aug.patch[%d] %lld: voxels, 1..%lld", i,
                            (long long)p[i], (long long)SL_VL_MAX_PVOX);
    if (p[0] * p[1] > SL_VL_MAX_PVOX / p[2]) /* < 2^56: no overflow */
        return sl__fail(err, errlen, SL_EINVAL,
                        "vloader: aug.patch %lld x %lld x %lld: more than "
                        "%lld voxels",
                        (long long)p[0], (long long)p[1], (long long)p[2],
                        (long long)SL_VL_MAX_PVOX);
    return 0;
}

/* The first published options (through image_bf16): a caller built
 * against them gets the later fields' defaults (base/abi.h). Its sizeof
 * was VOPTS_V1_SIZE: on_error now sits in what was its tail padding,
 * which such a caller may pass with anything in it. */
#define VOPTS_V1_END (offsetof(sl_vloader_options_t, image_bf16) + sizeof(int))
#define VOPTS_ALIGN _Alignof(sl_vloader_options_t)
#define VOPTS_V1_SIZE                                                          \
    ((VOPTS_V1_END + VOPTS_ALIGN - 1) / VOPTS_ALIGN * VOPTS_ALIGN)
_Static_assert(offsetof(sl_vloader_options_t, on_error) == VOPTS_V1_END,
               "on_error follows image_bf16");

int sl_vloader_create(const char *dataset, const sl_vloader_options_t *opt,
                      sl_vloader_t **out, char *err, size_t errlen)
{
    if (!dataset || !out)
        return sl__fail(err, errlen, SL_EINVAL, "vloader: no dataset");
    *out = NULL;
    sl_vloader_t *l = calloc(1, sizeof *l);
    if (!l)
        return sl__fail(err, errlen, SL_ENOMEM, "vloader: out of memory");
    if (!opt) {
        sl_vloader_options_init(&l->o);
    } else if (sl__abi_in(&l->o, sizeof l->o, opt, VOPTS_V1_END,
                          "sl_vloader_options", err, errlen)) {
        free(l);
        return SL_EINVAL;
    } else if (opt->size <= VOPTS_V1_SIZE) { /* the old padding: defaults */
        memset((char *)&l->o + VOPTS_V1_END, 0, VOPTS_V1_SIZE - VOPTS_V1_END);
    }
    sl_vloader_options_t *o = &l->o;
    int rc = 0;
    if (o->batch_size < 0 || o->threads < 0 || o->threads > 256 ||
        o->prefetch < 0 || o->prefetch > 4096)
        rc = sl__fail(err, errlen, SL_EINVAL,
                      "vloader: batch_size %d, threads %d, prefetch %d: "
                      "batch_size >= 1, threads 1..256, prefetch 1..4096 "
                      "(0: the default)",
                      o->batch_size, o->threads, o->prefetch);
    if (rc) {
        free(l);
        return rc;
    }
    if (o->batch_size == 0)
        o->batch_size = 2;
    if (o->threads == 0)
        o->threads = sl__cpus_usable() < 256 ? sl__cpus_usable() : 256;
    if (o->prefetch == 0)
        o->prefetch = o->threads > 2 ? o->threads : 2;
    rc = check_options(o, err, errlen);
    if (rc) {
        free(l);
        return rc;
    }
    static const double kits[3] = {1.6, 1.2, 1.2};
    for (int i = 0; i < 3; i++)
        if (o->target_spacing[i] == 0)
            o->target_spacing[i] = kits[i];
    if (o->cache_bytes == 0)
        o->cache_bytes = (int64_t)2 << 30;
    /* No budget given: half the cgroup's memory limit, the other loaders'
     * rule (sched/limits.h), as if given. The cache is not held besides
     * the half, as the image loader's is: here it lives inside the budget
     * and gives back what a stage needs. */
    if (o->memory_bytes == 0)
        o->memory_bytes = sl__limits_default_memory(
            sl__read_cgroup_memory("/"), 0, "memory_bytes", l->mem_why,
            sizeof l->mem_why);
    l->aug = o->aug;
    for (int i = 0; i < 3; i++)
        l->pdims[i] = l->aug.patch[i] = o->aug.patch[2 - i];
    l->ep[0].epoch = l->ep[1].epoch = -1;
    l->r_off = 30, l->r_patch = 2, l->r_noise = 20;
    const char *sm = getenv("SL_VLOADER_SPLIT_MIN_VOX");
    l->split_min_vox = sm && *sm ? strtod(sm, NULL) : sl__vl_split_min_vox;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    pthread_cond_init(&l->cv_case, NULL);
    if (o->aug.size < sizeof o->aug) {
        rc = sl__fail(err, errlen, SL_EINVAL,
                      "vloader: aug.size %zu, less than sl_vol_aug_t's %zu "
                      "bytes: the augmentation settings were not filled by "
                      "sl_vol_aug_init (or sl_vloader_options_init)",
                      o->aug.size, sizeof o->aug);
        goto fail;
    }
    if (o->batch_size > SL__VL_BATCH_MAX) {
        rc = sl__fail(err, errlen, SL_EINVAL,
                      "vloader: batch_size %d: at most %d patches a batch "
                      "(the loader keeps a batch's per-patch state in "
                      "arrays of that size)",
                      o->batch_size, SL__VL_BATCH_MAX);
        goto fail;
    }
    if ((rc = check_patch(o->aug.patch, err, errlen)))
        goto fail;
    l->pvox = l->pdims[0] * l->pdims[1] * l->pdims[2];
    /* The window's batch numbers (start + prefetch) must not overflow. */
    if (o->start < 0 || o->start > INT64_MAX - o->prefetch - 1) {
        rc = sl__fail(err, errlen, SL_EINVAL,
                      "vloader: start %lld: a stream position, 0..%lld",
                      (long long)o->start,
                      (long long)(INT64_MAX - o->prefetch - 1));
        goto fail;
    }
    if (o->on_error != SL_ON_ERROR_FAIL && o->on_error != SL_ON_ERROR_SKIP) {
        rc = sl__fail(err, errlen, SL_EINVAL,
                      "vloader: on_error %d: SL_ON_ERROR_FAIL or _SKIP",
                      o->on_error);
        goto fail;
    }
    sl_volume_options_t vo;
    sl_volume_options_init(&vo);
    vo.unlabeled = o->unlabeled != 0;
    if ((rc = sl_volume_dataset_open(dataset, &vo, &l->ds, err, errlen)))
        goto fail;
    l->ncases = sl_volume_dataset_count(l->ds);
    if (l->ncases <= 0) {
        rc = sl__fail(err, errlen, SL_ENOTFOUND, "%s: no cases", dataset);
        goto fail;
    }
    l->cases = calloc((size_t)l->ncases, sizeof *l->cases);
    l->use = malloc((size_t)l->ncases * sizeof *l->use);
    l->skips = malloc(SKIPS_KEPT * sizeof *l->skips);
    for (int i = 0; i < 2; i++) {
        l->ep[i].perm = malloc((size_t)l->ncases * sizeof *l->ep[i].perm);
        l->ep[i].inv = malloc((size_t)l->ncases * sizeof *l->ep[i].inv);
    }
    l->nbufs = o->prefetch + 1;
    /* batch buffers (image and label), and bfloat16's float patch per
     * thread */
    l->buf_bytes =
        (int64_t)l->nbufs * o->batch_size * l->pvox * (o->image_bf16 ? 3 : 5) +
        (o->image_bf16 ? (int64_t)o->threads * l->pvox * 4 : 0);
    l->mem_limit = o->memory_bytes; /* 0: no bound (no limit either) */
    if (l->mem_limit && l->buf_bytes >= l->mem_limit) {
        rc = sl__fail(err, errlen, SL_ENOMEM,
                      "vloader: %d batch buffers of %d patches need %.1f MB, "
                      "memory_bytes allows %.1f MB%s",
                      l->nbufs, o->batch_size, (double)l->buf_bytes / 1e6,
                      (double)l->mem_limit / 1e6, l->mem_why);
        goto fail;
    }
    l->bufs = calloc((size_t)l->nbufs, sizeof *l->bufs);
    l->tasks =
        malloc((size_t)l->nbufs * (size_t)o->batch_size * sizeof *l->tasks);
    if (!l->cases || !l->ep[0].perm || !l->ep[0].inv || !l->ep[1].perm ||
        !l->ep[1].inv || !l->bufs || !l->tasks || !l->use || !l->skips) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "vloader: out of memory");
        goto fail;
    }
    /* Every case's header; under SL_ON_ERROR_SKIP a bad one is left out
     * of every epoch (counted and listed). */
    for (int64_t c = 0; c < l->ncases; c++) {
        if (!(rc = case_header(l, c, err, errlen))) {
            l->use[l->nuse++] = c;
            continue;
        }
        if (o->on_error != SL_ON_ERROR_SKIP || !sl__err_is_data(rc))
            goto fail;
        size_t n = strlen(err) + 16;
        char *m = malloc(n);
        if (m)
            snprintf(m, n, "create: %s", err);
        add_skip(l, m, m ? NULL : err);
    }
    if (!l->nuse) {
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: no case could be read (%lld skipped; the first: "
                      "%s)",
                      dataset, (long long)l->st.skipped,
                      l->nskips ? l->skips[0] : "");
        goto fail;
    }
    rc = 0;
    l->nb = (l->nuse + o->batch_size - 1) / o->batch_size;
    sl__vl_mem_add(l, l->buf_bytes);
    for (int i = 0; i < l->nbufs; i++) {
        sl_vbatch_t *p = &l->bufs[i].pub;
        for (int k = 0; k < 3; k++)
            p->dims[k] = l->pdims[k];
        size_t n = (size_t)o->batch_size * (size_t)l->pvox;
        if (o->image_bf16)
            p->image_bf16 = malloc(n * sizeof *p->image_bf16);
        else
            p->image = malloc(n * sizeof *p->image);
        p->label = malloc(n);
        p->cases = malloc((size_t)o->batch_size * sizeof *p->cases);
        l->bufs[i].serr =
            calloc((size_t)o->batch_size, sizeof *l->bufs[i].serr);
        if (!(p->image || p->image_bf16) || !p->label || !p->cases ||
            !l->bufs[i].serr) {
            rc = sl__fail(err, errlen, SL_ENOMEM,
                          "vloader: out of memory for %d batches of %d "
                          "patches",
                          l->nbufs, o->batch_size);
            goto fail;
        }
    }
    if (o->image_bf16 &&
        !(l->scratch = malloc((size_t)o->threads * (size_t)l->pvox *
                              sizeof *l->scratch))) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "vloader: out of memory");
        goto fail;
    }
    l->th = calloc((size_t)o->threads, sizeof *l->th);
    if (!l->th) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "vloader: out of memory");
        goto fail;
    }
    l->claim_g = l->next_g = o->start; /* before any thread claims */
    for (; l->nth < o->threads; l->nth++)
        if (pthread_create(&l->th[l->nth], NULL, worker, l)) {
            rc = sl__fail(err, errlen, SL_ETHREAD, "vloader: no threads");
            goto fail;
        }
    *out = l;
    return 0;
fail:
    sl_vloader_destroy(l);
    return rc;
}

/* Batch b's skipped slots counted, listed and marked in bad[], their
 * messages given back (under mu). @return 1 when none of its slots is
 * left. */
static int note_skips(sl_vloader_t *l, vbuf_t *b, unsigned char *bad)
{
    for (int s = 0; s < b->pub.n; s++) {
        char *m = b->serr[s];
        bad[s] = m != NULL;
        if (!m)
            continue;
        b->serr[s] = NULL;
        size_t n = strlen(m) + 32;
        char *e = malloc(n);
        if (e)
            snprintf(e, n, "epoch %lld: %s", (long long)b->pub.epoch, m);
        add_skip(l, e, e ? NULL : m);
        if (m != no_msg)
            free(m);
    }
    return b->nbad == b->pub.n;
}

/* Batch b without its skipped slots (those of `bad`: slot order kept). The
 * consumer's alone now (HELD): no lock. */
static void compact(sl_vloader_t *l, vbuf_t *b, const unsigned char *bad)
{
    sl_vbatch_t *p = &b->pub;
    size_t pv = (size_t)l->pvox;
    int j = 0;
    for (int s = 0; s < p->n; s++) {
        if (bad[s])
            continue;
        if (j != s) {
            if (p->image)
                memmove(p->image + (size_t)j * pv, p->image + (size_t)s * pv,
                        pv * sizeof *p->image);
            if (p->image_bf16)
                memmove(p->image_bf16 + (size_t)j * pv,
                        p->image_bf16 + (size_t)s * pv,
                        pv * sizeof *p->image_bf16);
            memmove(p->label + (size_t)j * pv, p->label + (size_t)s * pv, pv);
            p->cases[j] = p->cases[s];
        }
        j++;
    }
    p->n = j;
}

int sl_vloader_next(sl_vloader_t *l, sl_vbatch_t **out, char *err,
                    size_t errlen)
{
    if (!l || !out)
        return sl__fail(err, errlen, SL_EINVAL, "vloader: bad arguments");
    int64_t t0 = sl__now_ns();
    pthread_mutex_lock(&l->mu);
    vbuf_t *b;
    int rc, skips = 0;
    unsigned char bad[SL__VL_BATCH_MAX]; /* batch_size at most */
    for (;;) {
        open_batches(l);
        pthread_cond_broadcast(&l->cv_work);
        while (!(b = buf_of(l, l->next_g)) || b->state != VB_READY)
            pthread_cond_wait(&l->cv_ready, &l->mu);
        l->next_g++;
        rc = b->rc;
        if (rc || !b->nbad)
            break;
        /* Skips: a batch left empty is passed over; a whole stream of
         * them (no case left in two epochs' worth) is an error. */
        if (!note_skips(l, b, bad)) {
            skips = 1;
            break;
        }
        b->state = VB_FREE;
        if (++l->empty_run >= 2 * l->nb) {
            rc = sl__fail(err, errlen, SL_ECORRUPT,
                          "vloader: every case was skipped (%lld batches in "
                          "a row): %s",
                          (long long)l->empty_run,
                          l->nskips ? l->skips[l->nskips - 1] : "");
            l->empty_run = 0;
            open_batches(l);
            pthread_cond_broadcast(&l->cv_work);
            pthread_mutex_unlock(&l->mu);
            return rc;
        }
    }
    l->st.wait_ns += sl__now_ns() - t0;
    if (rc) {
        sl__fail(err, errlen, rc, "%s", b->err);
        for (int s = 0; s < b->pub.n; s++) { /* never handed out */
            if (b->serr[s] != no_msg)
                free(b->serr[s]);
            b->serr[s] = NULL;
        }
        b->state = VB_FREE;
    } else {
        l->empty_run = 0;
        b->state = VB_HELD;
        l->st.batches++;
        l->st.samples += b->pub.n; /* handed out, as batches */
        *out = &b->pub;
    }
    open_batches(l);
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    if (!rc && skips)
        compact(l, b, bad);
    return rc;
}

void sl_vloader_release(sl_vloader_t *l, sl_vbatch_t *pub)
{
    if (!l || !pub)
        return;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nbufs; i++)
        if (&l->bufs[i].pub == pub && l->bufs[i].state == VB_HELD)
            l->bufs[i].state = VB_FREE;
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
}

int64_t sl_vloader_batches_per_epoch(const sl_vloader_t *l)
{
    return l ? l->nb : 0;
}

int64_t sl_vloader_position(sl_vloader_t *l)
{
    if (!l)
        return 0;
    pthread_mutex_lock(&l->mu);
    int64_t g = l->next_g;
    pthread_mutex_unlock(&l->mu);
    return g;
}

int64_t sl_vloader_cases(const sl_vloader_t *l)
{
    return l ? l->nuse : 0;
}

int64_t sl_vloader_skipped_count(sl_vloader_t *l)
{
    if (!l)
        return 0;
    pthread_mutex_lock(&l->mu);
    int64_t n = l->skipped_total;
    pthread_mutex_unlock(&l->mu);
    return n;
}

const char *sl_vloader_skipped_message(sl_vloader_t *l, int64_t i)
{
    if (!l)
        return NULL;
    pthread_mutex_lock(&l->mu);
    const char *m = i >= 0 && i < l->nskips ? l->skips[i] : NULL;
    pthread_mutex_unlock(&l->mu);
    return m;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The first published layout (through latency_p99_ns): a caller built
 * against it gets that prefix; fields are only added at the end
 * (base/abi.h). */
#define VSTATS_V1_SIZE                                                         \
    (offsetof(sl_vloader_stats_t, latency_p99_ns) + sizeof(int64_t))

SL__ABI_INIT_PAIR(sl_vloader_stats_init, sl_vloader_stats_t)

int sl_vloader_stats(sl_vloader_t *l, sl_vloader_stats_t *out)
{
    if (!l || !out || sl__abi_size(out) < VSTATS_V1_SIZE)
        return SL_EINVAL;
    sl_vloader_stats_t st, *s = &st;
    pthread_mutex_lock(&l->mu);
    *s = l->st;
    s->size = sizeof *s;
    s->cache_bytes = l->cache_held;
    s->memory_bytes = l->mem_used;
    s->memory_peak = l->mem_peak;
    int n = l->nlat < LAT_RING ? l->nlat : LAT_RING;
    int64_t v[LAT_RING];
    memcpy(v, l->lat, (size_t)n * sizeof *v);
    pthread_mutex_unlock(&l->mu);
    if (n) {
        qsort(v, (size_t)n, sizeof *v, cmp_i64);
        s->latency_p50_ns = v[n / 2];
        s->latency_p99_ns = v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
    }
    return sl__abi_out(out, s, sizeof *s, VSTATS_V1_SIZE);
}

void sl_vloader_stats_reset(sl_vloader_t *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    memset(&l->st, 0, sizeof l->st);
    l->nlat = 0;
    l->mem_peak = l->mem_used;
    pthread_mutex_unlock(&l->mu);
}

void sl_vloader_destroy(sl_vloader_t *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_cond_broadcast(&l->cv_work);
    pthread_cond_broadcast(&l->cv_case);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nth; i++)
        pthread_join(l->th[i], NULL);
    free(l->th);
    for (int i = 0; l->bufs && i < l->nbufs; i++) {
        free(l->bufs[i].pub.image);
        free(l->bufs[i].pub.image_bf16);
        free(l->bufs[i].pub.label);
        free(l->bufs[i].pub.cases);
        for (int s = 0; l->bufs[i].serr && s < l->o.batch_size; s++)
            if (l->bufs[i].serr[s] != no_msg)
                free(l->bufs[i].serr[s]);
        free(l->bufs[i].serr);
    }
    for (int64_t i = 0; i < l->nskips; i++)
        free(l->skips[i]);
    free(l->skips);
    free(l->use);
    for (int64_t c = 0; l->cases && c < l->ncases; c++) {
        free(l->cases[c].img);
        free(l->cases[c].lbl);
        free(l->cases[c].fg);
        sl__gzindex_free(l->cases[c].gzi[0]);
        sl__gzindex_free(l->cases[c].gzi[1]);
    }
    free(l->bufs);
    free(l->scratch);
    free(l->tasks);
    free(l->cases);
    for (int i = 0; i < 2; i++) {
        free(l->ep[i].perm);
        free(l->ep[i].inv);
    }
    sl_volume_dataset_destroy(l->ds);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_ready);
    pthread_cond_destroy(&l->cv_case);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int64_t sl__testing_vloader_memory_budget(const sl_vloader_t *l,
                                          const char **why)
{
    if (why)
        *why = l->mem_why;
    return l->mem_limit;
}
