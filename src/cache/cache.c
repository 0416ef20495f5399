/* cache: the index (one pointer per key), one list per cache (LRU: most
 * recent first; MinIO: newest first), pinned entries. See cache.h. */
#include "cache/cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"

typedef struct centry {
    struct centry *prev, *next; /* the list, while indexed */
    int64_t key, aux;
    size_t raw_n, stored_n;
    int codec;
    int pins;
    int dead; /* evicted while pinned: freed at the last unpin */
    int lent; /* a lent entry (never charged to bytes) */
    uint8_t data[];
} centry_t;

struct sl__cache {
    pthread_mutex_t mu;
    int64_t nkeys, limit;
    int policy;
    centry_t **index; /* nkeys, made at the first put */
    centry_t *head, *tail;
    centry_t **lent; /* nkeys, made at the first lend (not charged) */
    centry_t *lhead; /* lent entries not taken, a list through prev/next */
    sl__cache_stats_t st;
};

static int64_t cost(const centry_t *e)
{
    return (int64_t)(e->stored_n + SL__CACHE_ENTRY_OVERHEAD);
}

static int64_t index_bytes(const sl__cache_t *c)
{
    return c->nkeys * (int64_t)sizeof(centry_t *);
}

sl__cache_t *sl__cache_create(int64_t nkeys, int64_t limit, int policy)
{
    sl__cache_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    c->nkeys = nkeys > 0 ? nkeys : 0;
    c->limit = limit > 0 ? limit : 0;
    c->policy = policy == SL__CACHE_LRU ? SL__CACHE_LRU : SL__CACHE_MINIO;
    c->st.limit = c->limit;
    return c;
}

void sl__cache_destroy(sl__cache_t *c)
{
    if (!c)
        return;
    for (centry_t *e = c->head, *n; e; e = n) {
        n = e->next;
        free(e);
    }
    sl__cache_lend_clear(c);
    free(c->lent);
    free(c->index);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void unlink_entry(sl__cache_t *c, centry_t *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(sl__cache_t *c, centry_t *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

/* Under mu: out of the index and the list; freed now, or at its last
 * unpin. Its bytes stop counting when it is freed. */
static void evict(sl__cache_t *c, centry_t *e)
{
    unlink_entry(c, e);
    c->index[e->key] = NULL;
    c->st.entries--;
    c->st.raw_bytes -= (int64_t)e->raw_n;
    c->st.by_codec[e->codec]--;
    c->st.evictions++;
    if (e->pins) {
        e->dead = 1;
        return;
    }
    c->st.bytes -= cost(e);
    free(e);
}

/* Under mu: evicts from the tail (LRU: least recent; MinIO: newest, only
 * when the limit was lowered) until `need` more bytes fit. 0 when they
 * do. */
static int make_room(sl__cache_t *c, int64_t need)
{
    centry_t *e = c->tail;
    while (c->st.bytes + need > c->limit && e) {
        centry_t *prev = e->prev;
        evict(c, e);
        e = prev;
    }
    return c->st.bytes + need <= c->limit ? 0 : -1;
}

int sl__cache_find(sl__cache_t *c, int64_t key, sl__cache_ref_t *ref)
{
    pthread_mutex_lock(&c->mu);
    centry_t *e = c->index && key >= 0 && key < c->nkeys ? c->index[key] : NULL;
    if (e) {
        e->pins++;
        if (c->policy == SL__CACHE_LRU && c->head != e) {
            unlink_entry(c, e);
            push_front(c, e);
        }
        c->st.hits++;
        *ref = (sl__cache_ref_t){e, e->raw_n, e->aux, e->codec};
    } else if (c->lent && key >= 0 && key < c->nkeys && c->lent[key]) {
        /* Taken: out of the lent set, freed at this pin's unpin. */
        e = c->lent[key];
        c->lent[key] = NULL;
        if (e->prev)
            e->prev->next = e->next;
        else
            c->lhead = e->next;
        if (e->next)
            e->next->prev = e->prev;
        e->prev = e->next = NULL;
        e->pins = 1;
        e->dead = 1;
        c->st.lent_hits++;
        c->st.lent_entries--;
        c->st.lent_bytes -= (int64_t)e->raw_n;
        *ref = (sl__cache_ref_t){e, e->raw_n, e->aux, e->codec};
    } else {
        c->st.misses++;
        *ref = (sl__cache_ref_t){0};
    }
    pthread_mutex_unlock(&c->mu);
    return e != NULL;
}

const void *sl__cache_view(const sl__cache_ref_t *ref)
{
    const centry_t *e = ref->e;
    return e && e->codec == SL_CODEC_NONE ? e->data : NULL;
}

int sl__cache_copy(const sl__cache_ref_t *ref, void *dst, char *err,
                   size_t errlen)
{
    const centry_t *e = ref->e;
    if (!e)
        return sl__fail(err, errlen, SL_EINVAL, "no cache entry");
    return sl__codec_decompress(e->codec, e->data, e->stored_n, dst, e->raw_n,
                                err, errlen);
}

void sl__cache_unpin(sl__cache_t *c, sl__cache_ref_t *ref)
{
    centry_t *e = ref->e;
    if (!e)
        return;
    ref->e = NULL;
    pthread_mutex_lock(&c->mu);
    if (--e->pins == 0 && e->dead) {
        if (!e->lent)
            c->st.bytes -= cost(e);
        free(e);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Under mu: the index exists (made and charged at the first put). */
static int have_index(sl__cache_t *c)
{
    if (c->index)
        return 1;
    if (!c->nkeys || index_bytes(c) > c->limit)
        return 0;
    c->index = calloc((size_t)c->nkeys, sizeof *c->index);
    if (!c->index)
        return 0;
    c->st.bytes += index_bytes(c);
    return 1;
}

int sl__cache_holds(sl__cache_t *c, int64_t key)
{
    pthread_mutex_lock(&c->mu);
    int yes = c->index && key >= 0 && key < c->nkeys && c->index[key];
    pthread_mutex_unlock(&c->mu);
    return yes;
}

int sl__cache_wants(sl__cache_t *c, size_t n)
{
    pthread_mutex_lock(&c->mu);
    int64_t need =
        (int64_t)n + SL__CACHE_ENTRY_OVERHEAD + (c->index ? 0 : index_bytes(c));
    int yes = c->policy == SL__CACHE_LRU ? need <= c->limit
                                         : c->st.bytes + need <= c->limit;
    pthread_mutex_unlock(&c->mu);
    return yes;
}

int sl__cache_put(sl__cache_t *c, int64_t key, const void *p, size_t n,
                  int64_t aux, int codec, int level)
{
    if (key < 0 || key >= c->nkeys || !sl__cache_wants(c, 0))
        return 0;
    /* The codec's work, outside the lock. */
    sl__bytes_t z = {0};
    const void *src = p;
    size_t stored = n;
    if (codec != SL_CODEC_NONE) {
        if (sl__codec_compress_level(codec, level, p, n, &z, NULL, 0) ||
            z.n >= n) { /* no gain: kept as it is */
            codec = SL_CODEC_NONE;
        } else {
            src = z.p;
            stored = z.n;
        }
    }
    centry_t *e = malloc(sizeof *e + stored);
    if (e) {
        *e = (centry_t){.key = key,
                        .aux = aux,
                        .raw_n = n,
                        .stored_n = stored,
                        .codec = codec};
        memcpy(e->data, src, stored);
    }
    sl__bytes_free(&z);
    if (!e)
        return 0;
    int kept = 0;
    pthread_mutex_lock(&c->mu);
    if (have_index(c) && !c->index[key]) {
        int64_t need = cost(e);
        int fits = c->policy == SL__CACHE_LRU
                       ? need <= c->limit && make_room(c, need) == 0
                       : c->st.bytes + need <= c->limit;
        if (fits) {
            c->index[key] = e;
            push_front(c, e);
            c->st.bytes += need;
            c->st.raw_bytes += (int64_t)n;
            c->st.entries++;
            c->st.inserts++;
            c->st.by_codec[codec]++;
            kept = 1;
        }
    }
    if (!kept)
        c->st.rejects++;
    pthread_mutex_unlock(&c->mu);
    if (!kept)
        free(e);
    return kept;
}

int sl__cache_lend(sl__cache_t *c, int64_t key, const void *p, size_t n)
{
    if (key < 0 || key >= c->nkeys)
        return 0;
    centry_t *e = malloc(sizeof *e + n);
    if (!e)
        return 0;
    *e = (centry_t){.key = key,
                    .raw_n = n,
                    .stored_n = n,
                    .codec = SL_CODEC_NONE,
                    .lent = 1};
    memcpy(e->data, p, n);
    pthread_mutex_lock(&c->mu);
    if (!c->lent)
        c->lent = calloc((size_t)c->nkeys, sizeof *c->lent);
    int ok = c->lent && !c->lent[key] && !(c->index && c->index[key]);
    if (ok) {
        c->lent[key] = e;
        e->next = c->lhead;
        if (c->lhead)
            c->lhead->prev = e;
        c->lhead = e;
        c->st.lent_entries++;
        c->st.lent_bytes += (int64_t)n;
    }
    pthread_mutex_unlock(&c->mu);
    if (!ok)
        free(e);
    return ok;
}

int64_t sl__cache_lend_clear(sl__cache_t *c)
{
    pthread_mutex_lock(&c->mu);
    int64_t k = 0;
    for (centry_t *e = c->lhead, *n; e; e = n) {
        n = e->next;
        c->lent[e->key] = NULL;
        free(e);
        k++;
    }
    c->lhead = NULL;
    c->st.lent_entries = 0;
    c->st.lent_bytes = 0;
    pthread_mutex_unlock(&c->mu);
    return k;
}

void sl__cache_set_limit(sl__cache_t *c, int64_t limit)
{
    pthread_mutex_lock(&c->mu);
    c->limit = limit > 0 ? limit : 0;
    c->st.limit = c->limit;
    if (c->index) {
        make_room(c, 0);
        if (c->st.bytes > c->limit && !c->head) { /* the index alone */
            free(c->index);
            c->index = NULL;
            c->st.bytes -= index_bytes(c);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

int64_t sl__cache_limit(sl__cache_t *c)
{
    pthread_mutex_lock(&c->mu);
    int64_t v = c->limit;
    pthread_mutex_unlock(&c->mu);
    return v;
}

void sl__cache_get_stats(sl__cache_t *c, sl__cache_stats_t *s)
{
    pthread_mutex_lock(&c->mu);
    *s = c->st;
    pthread_mutex_unlock(&c->mu);
}

static const char *const policy_names[] = {
    [SL__CACHE_MINIO] = "minio",
    [SL__CACHE_LRU] = "lru",
};

int sl__cache_policy_from_name(const char *name)
{
    for (int i = 0; name && i < 2; i++)
        if (!strcmp(name, policy_names[i]))
            return i;
    return -1;
}

const char *sl__cache_policy_name(int policy)
{
    return policy >= 0 && policy < 2 ? policy_names[policy] : "unknown";
}
