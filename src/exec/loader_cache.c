/* The loader's side of the sample cache (cache/cache.h; docs/DESIGN.md,
 * "Sample cache"): a reader asks it before reading (a hit skips the read
 * and the emulated storage), fills it after a good read (encoded tier),
 * and a decoder runs a sample through it (decoded tier: the whole image
 * decoded once, the per-epoch transform from its pixels). Every sample's
 * bytes are the same whether it hit or not, so the stream does not depend
 * on the cache, its size, its policy or timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "loader_internal.h"

/* Decoded pixels a decoder keeps between samples (more is freed). */
#define PIX_KEEP ((size_t)8 << 20)
/* Auto codec: entries probed with every candidate, and how often (in
 * offers) the choice is made again with the latest miss cost. */
#define PROBE_ENTRIES 4
#define REPICK_EVERY 32

int sl__loader_cache_open(sl_loader_t *l, char *err, size_t errlen)
{
    int64_t n = sl__source_count(l->src);
    if (l->opt.cache_dir && l->opt.cache_dir[0]) {
        int rc = sl__dtier_create(l->opt.cache_dir, n, l->opt.cache_disk_bytes,
                                  &l->disk, err, errlen);
        if (rc)
            return rc;
    }
    l->cache = sl__cache_create(n, l->lim.mem_cache, l->opt.cache_policy);
    if (!l->cache) {
        sl__dtier_destroy(l->disk);
        l->disk = NULL;
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    atomic_store(&l->cache_limit, l->lim.mem_cache);
    atomic_store(&l->cache_codec, l->opt.cache_codec);
    pthread_mutex_init(&l->pick_mu, NULL);
    return 0;
}

void sl__loader_cache_close(sl_loader_t *l)
{
    for (int i = 0; i < SL_WORKERS_MAX; i++)
        sl__bytes_free(&l->dpix[i]);
    if (l->cache)
        pthread_mutex_destroy(&l->pick_mu);
    sl__cache_destroy(l->cache);
    l->cache = NULL;
    sl__dtier_destroy(l->disk); /* its file and directory removed */
    l->disk = NULL;
}

/* Lookups and fills happen: a memory tier of some bytes, or a disk tier. */
static int cache_on(sl_loader_t *l)
{
    return atomic_load(&l->cache_limit) > 0 || l->disk;
}

/* What a miss costs now, per sample: the decoder's time on misses plus
 * the read stage's time per sample over its slots (a read-bound pipeline
 * pays for a miss in read time). 0 before any was measured. */
static double miss_cost(sl_loader_t *l)
{
    double n = (double)atomic_load(&l->miss_n);
    double dec = n > 0 ? (double)atomic_load(&l->miss_ns) / n : 0;
    double items = (double)atomic_load(&l->read_items);
    int slots =
        l->async ? sl__loader_io_depth(l) : atomic_load(&l->readers_now);
    double rd = items > 0 ? (double)atomic_load(&l->read_busy_ns) / items /
                                (slots > 0 ? slots : 1)
                          : 0;
    return dec + rd;
}

/* Auto: the probe's first entries, then the choice every REPICK_EVERY
 * offers (cache/pick.h). Returns the candidate in force. */
static int auto_pick(sl_loader_t *l, const void *p, size_t n)
{
    long long k = atomic_fetch_add(&l->cache_offers, 1);
    int probing = 0;
    /* Another thread probing or choosing: use what is in force now
     * rather than wait (a zstd-19 probe takes a while). */
    if (pthread_mutex_trylock(&l->pick_mu))
        return atomic_load(&l->cache_pick);
    if (l->probe.n < PROBE_ENTRIES) {
        sl__pick_probe_add(&l->probe, p, n); /* a few, once: under the lock */
        probing = l->probe.n == PROBE_ENTRIES;
    }
    if (probing || (l->probe.n >= PROBE_ENTRIES && k % REPICK_EVERY == 0)) {
        sl__cache_stats_t st;
        sl__cache_get_stats(l->cache, &st);
        double mean = l->probe.raw_bytes / l->probe.n;
        int64_t samples = sl__source_count(l->src);
        double room = (double)st.limit - (double)samples * 8;
        int c =
            sl__pick_choose(&l->probe, samples, mean, room, miss_cost(l), NULL);
        if (c != atomic_load(&l->cache_pick)) {
            atomic_store(&l->cache_pick, c);
            atomic_fetch_add(&l->cache_choices, 1);
        }
    }
    pthread_mutex_unlock(&l->pick_mu);
    return atomic_load(&l->cache_pick);
}

/* Offers an encoded sample the memory tier did not keep to the disk
 * tier; the first failed write is said once, as a warning with the
 * skips (the tier stops admitting; the sample itself is not lost). */
static void disk_offer(sl_loader_t *l, int64_t key, const void *p, size_t n)
{
    if (!sl__dtier_wants(l->disk, n) || sl__dtier_put(l->disk, key, p, n) >= 0)
        return;
    char why[640];
    sl__dtier_error(l->disk, why, sizeof why);
    sl__msglog_add(&l->skips, "warning: %s", why);
}

/* Offers n bytes for key with the codec in force (auto: chosen here),
 * when the memory tier would keep an entry of about their stored size;
 * what it does not keep goes to the disk tier (encoded samples only: the
 * disk tier is refused with the decoded one). */
static void offer(sl_loader_t *l, int64_t key, const void *p, size_t n,
                  int64_t aux)
{
    int knob = atomic_load(&l->cache_codec);
    int c = knob ? knob - 1 : atomic_load(&l->cache_pick);
    /* Not wanted: full even at the strongest ratio we could hope for. */
    if (atomic_load(&l->cache_limit) > 0 && sl__cache_wants(l->cache, n / 8)) {
        if (!knob)
            c = auto_pick(l, p, n);
        const sl__pick_codec_t *k = &sl__pick_codecs[c];
        if (sl__cache_put(l->cache, key, p, n, aux, k->codec, k->level))
            return;
    }
    /* Not a second copy of a sample the memory tier holds (offered twice
     * when the next epoch asked for it before its first read filled). */
    if (l->disk && !sl__cache_holds(l->cache, key))
        disk_offer(l, key, p, n);
}

/* The memory tier missed: the sample from the disk tier into the item's
 * buffer, as a read would leave it there (charged through adm first).
 * 1: it->data holds it; 0: read the source (not held, larger than the
 * read budget allows, or the tier's read failed: counted there);
 * SL__MEMBUDGET_LATER. */
static int disk_hit(sl_loader_t *l, item_t *it, const sl__admit_t *adm)
{
    size_t n = 0;
    if (!sl__dtier_find(l->disk, it->sample, &n))
        return 0;
    char err[SL_MSG];
    int rc = sl__admit(adm, (int64_t)n, err, sizeof err);
    if (rc == SL__MEMBUDGET_LATER)
        return rc; /* found again when retried */
    if (rc || sl__bytes_reserve(&it->data, n ? n : 1)) {
        sl__dtier_count_miss(l->disk); /* the source read says why */
        return 0;
    }
    if (sl__dtier_read(l->disk, it->sample, it->data.p, n, err, sizeof err))
        return 0; /* counted a miss; the charge is given back with the
                     read's when the sample is decoded */
    it->data.n = n;
    return 1;
}

int sl__loader_cache_hit(sl_loader_t *l, item_t *it, const sl__admit_t *adm)
{
    it->hit = (sl__cache_ref_t){0};
    if (!cache_on(l))
        return 0;
    if (!sl__cache_find(l->cache, it->sample, &it->hit))
        return l->disk ? disk_hit(l, it, adm) : 0;
    if (!sl__cache_view(&it->hit)) {
        /* A compressed entry is copied out by the decoder: those bytes are
         * this sample's, as a read's would be. */
        char err[SL_MSG];
        int rc = sl__admit(adm, (int64_t)it->hit.raw_n, err, sizeof err);
        if (rc) {
            sl__cache_unpin(l->cache, &it->hit);
            return rc == SL__MEMBUDGET_LATER ? rc : 0; /* too big: read */
        }
    }
    return 1;
}

void sl__loader_cache_fill(sl_loader_t *l, const item_t *it)
{
    if (it->rc || l->opt.cache_decoded || !cache_on(l))
        return;
    offer(l, it->sample, it->data.p, it->data.n, 0);
}

void sl__loader_cache_unpin(sl_loader_t *l, item_t *it)
{
    if (l->cache)
        sl__cache_unpin(l->cache, &it->hit);
}

/* The decoded tier's miss: the whole image decoded into dpix (when the
 * cache would keep it), transformed from there and offered to the cache;
 * else the usual path (no DCT scale: the same bytes). */
static int decoded_miss(sl_loader_t *l, int id, const item_t *it,
                        sl__rng_t *crop, sl__rng_t *flip, void *out,
                        char *cause, size_t len)
{
    sl__scratch_t *s = l->dscratch[id];
    int w = 0, h = 0;
    if (sl__image_info(it->data.p, it->data.n, &w, &h, NULL, 0) ||
        !sl__cache_wants(l->cache, ((size_t)w * h * 3 + SL__IMAGE_SLACK) / 8))
        return sl__image_process(it->data.p, it->data.n, &l->xf, crop, flip, s,
                                 out, cause, len);
    sl__bytes_t *pix = &l->dpix[id];
    int rc = sl__image_decode_full(it->data.p, it->data.n, l->xf.strict, s, pix,
                                   &w, &h, cause, len);
    if (!rc)
        rc = sl__image_process_rgb(pix->p, w, h, &l->xf, crop, flip, s, out,
                                   cause, len);
    if (!rc)
        offer(l, it->sample, pix->p, pix->n, (int64_t)w << 32 | (uint32_t)h);
    return rc;
}

int sl__loader_cache_bytes(item_t *it, sl__bytes_t *buf, const uint8_t **p,
                           char *cause, size_t len)
{
    *p = sl__cache_view(&it->hit);
    if (*p)
        return 0;
    if (sl__bytes_reserve(buf, it->hit.raw_n))
        return sl__fail(cause, len, SL_ENOMEM, "out of memory");
    *p = buf->p;
    return sl__cache_copy(&it->hit, buf->p, cause, len);
}

int sl__loader_cache_process(sl_loader_t *l, int id, item_t *it,
                             sl__rng_t *crop, sl__rng_t *flip, void *out,
                             char *cause, size_t len)
{
    sl__scratch_t *s = l->dscratch[id];
    int rc = 0;
    if (!it->hit.e) {
        int64_t t0 = sl__now_ns();
        rc = l->opt.cache_decoded && atomic_load(&l->cache_limit) > 0
                 ? decoded_miss(l, id, it, crop, flip, out, cause, len)
                 : sl__image_process(it->data.p, it->data.n, &l->xf, crop, flip,
                                     s, out, cause, len);
        atomic_fetch_add(&l->miss_ns, sl__now_ns() - t0);
        atomic_fetch_add(&l->miss_n, 1);
    } else {
        /* A hit: the entry's bytes in place, or copied out (compressed)
         * into the item's buffer / the decoder's pixels; a hit the GPU
         * stage refused has its copy in the item's buffer already. */
        sl__bytes_t *buf = l->opt.cache_decoded ? &l->dpix[id] : &it->data;
        const uint8_t *p = NULL;
        if (it->cpu_only && !sl__cache_view(&it->hit))
            p = it->data.p;
        else
            rc = sl__loader_cache_bytes(it, buf, &p, cause, len);
        if (!rc && l->opt.cache_decoded)
            rc = sl__image_process_rgb(p, (int)(it->hit.aux >> 32),
                                       (int)(uint32_t)it->hit.aux, &l->xf, crop,
                                       flip, s, out, cause, len);
        else if (!rc)
            rc = sl__image_process(p, it->hit.raw_n, &l->xf, crop, flip, s, out,
                                   cause, len);
        sl__cache_unpin(l->cache, &it->hit);
    }
    if (l->dpix[id].cap > PIX_KEEP)
        sl__bytes_free(&l->dpix[id]);
    return rc;
}

int sl__loader_cache_set(sl_loader_t *l, int64_t bytes)
{
    sl__cache_set_limit(l->cache, bytes);
    atomic_store(&l->cache_limit, bytes);
    return 0;
}

void sl__loader_cache_sample(sl_loader_t *l, sl__pipe_sample_t *o)
{
    sl__cache_stats_t st;
    sl__cache_get_stats(l->cache, &st);
    o->cache_hits = st.hits;
    o->cache_misses = st.misses;
    o->cache_bytes = st.bytes;
    o->cache_entries = st.entries;
    o->cache_limit = st.limit;
    o->cache_raw_bytes = st.raw_bytes;
    int knob = atomic_load(&l->cache_codec);
    int c = knob ? knob - 1 : atomic_load(&l->cache_pick);
    snprintf(o->cache_codec, sizeof o->cache_codec, "%s",
             st.limit > 0 ? sl__pick_codecs[c].name : "");
    o->cache_codec_choices = atomic_load(&l->cache_choices);
    if (l->disk) {
        sl__dtier_stats_t ds;
        sl__dtier_get_stats(l->disk, &ds);
        o->cache_disk_present = 1;
        o->cache_disk_admitting = ds.admitting;
        o->cache_disk_hits = ds.hits;
        o->cache_disk_misses = ds.misses;
        o->cache_disk_bytes = ds.bytes;
        o->cache_disk_entries = ds.entries;
        o->cache_disk_limit = ds.limit;
        o->cache_disk_errors = ds.errors;
    }
}

/* ------------------------------------------------------------------------
 * A partitioned cache across processes (sluice.ray partition=;
 * docs/DESIGN.md, "Partitioned cache"): the owner of a sample serves its
 * bytes (sl_loader_read_sample), a preparer lends them to its own loader
 * before the batches that need them (sl_loader_cache_lend). */

int sl_loader_batch_samples(const sl_loader_t *l, int64_t epoch, int64_t batch,
                            int64_t *out)
{
    if (!l || !out)
        return SL_EINVAL;
    if (epoch < 0 || batch < 0 || batch >= l->smp.nbatches)
        return SL_ERANGE;
    int64_t *perm = malloc((size_t)l->smp.n * sizeof *perm);
    if (!perm)
        return SL_ENOMEM;
    sl__sampler_permute(&l->smp, epoch, perm);
    int k = sl__sampler_batch(&l->smp, perm, batch, out);
    free(perm);
    return k;
}

int sl_loader_read_sample(sl_loader_t *l, int64_t sample, int fill, void **data,
                          size_t *n, int *hit, char *err, size_t errlen)
{
    if (!l || !data || !n)
        return sl__fail(err, errlen, SL_EINVAL, "a NULL argument");
    if (sample < 0 || sample >= sl__source_count(l->src))
        return sl__fail(err, errlen, SL_ERANGE, "sample %lld is out of range",
                        (long long)sample);
    *data = NULL;
    *n = 0;
    if (hit)
        *hit = 0;
    int cached = cache_on(l) && !l->opt.cache_decoded;
    sl__cache_ref_t ref = {0};
    size_t dn = 0;
    if (cached && !sl__cache_find(l->cache, sample, &ref) && l->disk &&
        sl__dtier_find(l->disk, sample, &dn)) {
        void *p = malloc(dn ? dn : 1);
        if (p && !sl__dtier_read(l->disk, sample, p, dn, err, errlen)) {
            *data = p;
            *n = dn;
            if (hit)
                *hit = 1;
            return 0;
        }
        if (!p)
            sl__dtier_count_miss(l->disk);
        free(p); /* a failed read: the source's bytes instead */
    }
    if (ref.e) {
        int rc = 0;
        void *p = malloc(ref.raw_n ? ref.raw_n : 1);
        if (!p)
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        else
            rc = sl__cache_copy(&ref, p, err, errlen);
        sl__cache_unpin(l->cache, &ref);
        if (rc) {
            free(p);
            return rc;
        }
        *data = p;
        *n = ref.raw_n;
        if (hit)
            *hit = 1;
        return 0;
    }
    /* A miss: a read as a reader does it, through the emulated storage. */
    sl__bytes_t b = {0}, scratch = {0};
    uint64_t stored = 0;
    int64_t t0 = sl__now_ns();
    int rc =
        sl__source_read(l->src, sample, &b, &scratch, &stored, err, errlen);
    sl__bytes_free(&scratch);
    sl__throttle_wait(&l->thr, stored, t0);
    atomic_fetch_add(&l->bytes_read, (long long)stored);
    if (rc) {
        sl__bytes_free(&b);
        return rc;
    }
    if (cached && fill)
        offer(l, sample, b.p, b.n, 0);
    *data = b.p; /* b.p is malloc'd: handed over */
    *n = b.n;
    if (!*data && !(*data = malloc(1)))
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    return 0;
}

void sl_free(void *p)
{
    free(p);
}

int sl_loader_cache_lend(sl_loader_t *l, int64_t sample, const void *data,
                         size_t n)
{
    if (!l || !data || !l->cache || l->opt.cache_decoded ||
        atomic_load(&l->cache_limit) <= 0)
        return 0; /* a read would not look (sl__loader_cache_hit) */
    return sl__cache_lend(l->cache, sample, data, n);
}

int64_t sl_loader_cache_lend_clear(sl_loader_t *l)
{
    return l && l->cache ? sl__cache_lend_clear(l->cache) : 0;
}
