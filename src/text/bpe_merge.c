/* text/bpe_merge: tiktoken's byte_pair_merge for one pre-token piece:
 * repeatedly merge the adjacent pair of parts whose concatenation has the
 * lowest rank (leftmost on ties) until no pair is a token.
 *
 * Two ways to the same result, as tiktoken has (src/lib.rs,
 * byte_pair_encode): pieces under SL__BPE_LARGE bytes rescan a flat array
 * per merge (O(n^2), but n is small and the array stays in cache); longer
 * ones keep the parts as a linked list and the candidate merges in an
 * indexed min-heap keyed (rank, start), O(n log n). The heap holds
 * exactly the merges the array would scan (an entry is updated or removed
 * when its parts change, never left stale) and its minimum is the scan's
 * pick, the lowest rank leftmost, so both merge the same pairs in the same
 * order (tests/unit/test_bpe.c checks both against a reference; the fuzz
 * target checks one against the other). A JSON Lines record with a
 * megabyte of letters is one piece: it must not cost minutes (issue 14,
 * item 9). */
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"

#define NONE UINT32_MAX

/* Large-path work arrays up to this many entries stay in the scratch;
 * a longer piece's are freed after it (an outlier does not pin ~20 bytes
 * per byte of it for the thread's life). */
#define KEEP_ENTRIES (1u << 16)

static int missing(const uint8_t *p, size_t n, char *err, size_t errlen)
{
    return sl__fail(err, errlen, SL_ECORRUPT,
                    "bpe: vocabulary has no token for bytes of a piece "
                    "(first byte 0x%02x, %zu bytes)",
                    p[0], n);
}

/* ---- small pieces: a flat array, rescanned per merge ---- */

static int merge_small(const struct sl__bpe *b, const uint8_t *p, size_t n,
                       sl__ids_t *ids, char *err, size_t errlen)
{
    /* st[0..m) part boundaries; rk[i] = rank of p[st[i]..st[i+2]) (parts i
     * and i+1 merged) */
    uint32_t st[SL__BPE_LARGE + 1], rk[SL__BPE_LARGE + 1];
    size_t m = n + 1;
    uint32_t minr = SL__BPE_NORANK;
    size_t mini = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        st[i] = (uint32_t)i;
        uint32_t r = b->pair2[p[i] << 8 | p[i + 1]];
        rk[i] = r;
        if (r < minr) {
            minr = r;
            mini = i;
        }
    }
    st[n - 1] = (uint32_t)(n - 1);
    rk[n - 1] = SL__BPE_NORANK;
    st[n] = (uint32_t)n;
    rk[n] = SL__BPE_NORANK;
    while (minr != SL__BPE_NORANK) {
        size_t i = mini;
        /* merge parts i and i+1: drop boundary i+1 */
        if (i > 0)
            rk[i - 1] = i + 2 < m ? sl__bpe_rank(b, p + st[i - 1],
                                                 st[i + 2] - st[i - 1])
                                  : SL__BPE_NORANK;
        rk[i] = i + 3 < m ? sl__bpe_rank(b, p + st[i], st[i + 3] - st[i])
                          : SL__BPE_NORANK;
        memmove(st + i + 1, st + i + 2, (m - i - 2) * sizeof *st);
        memmove(rk + i + 1, rk + i + 2, (m - i - 2) * sizeof *rk);
        m--;
        minr = SL__BPE_NORANK;
        for (size_t k = 0; k + 1 < m; k++)
            if (rk[k] < minr) {
                minr = rk[k];
                mini = k;
            }
    }
    for (size_t i = 0; i + 1 < m; i++) {
        uint32_t r = sl__bpe_rank(b, p + st[i], st[i + 1] - st[i]);
        if (r == SL__BPE_NORANK)
            return missing(p + st[i], st[i + 1] - st[i], err, errlen);
        if (sl__ids_push(ids, (int32_t)r))
            return SL_ENOMEM;
    }
    return 0;
}

/* ---- long pieces: linked parts, indexed min-heap of merges ---- */

/* A 4-ary heap of keys (rank << 32 | start): the minimum is the lowest
 * rank, leftmost on ties, with no indirection per comparison; 4 children
 * share a cache line and the depth halves (a heap of a megabyte's pairs
 * is all cache misses). */
typedef struct big {
    uint64_t *heap; /* merges, (rank of start + next part) << 32 | start */
    uint32_t *nxt;  /* part start -> start of the next part (n: none) */
    uint32_t *prv;  /* part start -> start of the previous part */
    uint32_t *pos;  /* part start -> index in heap, NONE if absent */
    uint32_t size;  /* entries in heap */
} big_t;

#define KEY(r, i) ((uint64_t)(r) << 32 | (i))

static inline void put(big_t *h, uint32_t at, uint64_t key)
{
    h->heap[at] = key;
    h->pos[(uint32_t)key] = at;
}

static void sift_up(big_t *h, uint32_t at)
{
    uint64_t key = h->heap[at];
    while (at > 0) {
        uint32_t up = (at - 1) / 4;
        if (h->heap[up] <= key)
            break;
        put(h, at, h->heap[up]);
        at = up;
    }
    put(h, at, key);
}

static void sift_down(big_t *h, uint32_t at)
{
    uint64_t key = h->heap[at];
    for (;;) {
        uint32_t c = 4 * at + 1, end = c + 4 < h->size ? c + 4 : h->size;
        if (c >= h->size)
            break;
        uint32_t m = c;
        for (uint32_t k = c + 1; k < end; k++)
            if (h->heap[k] < h->heap[m])
                m = k;
        if (h->heap[m] >= key)
            break;
        put(h, at, h->heap[m]);
        at = m;
    }
    put(h, at, key);
}

static void heap_remove(big_t *h, uint32_t i)
{
    uint32_t at = h->pos[i];
    if (at == NONE)
        return;
    h->pos[i] = NONE;
    uint64_t last = h->heap[--h->size];
    if (at == h->size)
        return;
    put(h, at, last);
    sift_down(h, at);
    sift_up(h, h->pos[(uint32_t)last]);
}

/* The merge of part i with the next now has rank r: insert, move or
 * remove it. */
static void heap_set(big_t *h, uint32_t i, uint32_t r)
{
    if (r == SL__BPE_NORANK) {
        heap_remove(h, i);
        return;
    }
    uint32_t at = h->pos[i];
    if (at == NONE) {
        put(h, h->size, KEY(r, i));
        sift_up(h, h->size++);
        return;
    }
    uint64_t old = h->heap[at];
    h->heap[at] = KEY(r, i);
    if (KEY(r, i) > old)
        sift_down(h, at);
    else
        sift_up(h, at);
}

static int merge_large(const struct sl__bpe *b, const uint8_t *p, size_t n,
                       sl__tok_scratch_t *s, sl__ids_t *ids, char *err,
                       size_t errlen)
{
    if (n >= NONE)
        return sl__fail(err, errlen, SL_EINVAL,
                        "bpe: one piece of %zu bytes (4 GiB at most)", n);
    /* the four arrays, cap entries each, in one block */
    size_t cap = n + 1, per = sizeof(uint64_t) + 3 * sizeof(uint32_t);
    void *w = s->bpe_work;
    if (cap <= s->bpe_work_cap) {
        cap = s->bpe_work_cap;
    } else {
        if (cap <= KEEP_ENTRIES && 2 * s->bpe_work_cap > cap)
            cap = 2 * s->bpe_work_cap < KEEP_ENTRIES ? 2 * s->bpe_work_cap
                                                     : KEEP_ENTRIES;
        w = malloc(cap * per);
        if (!w)
            return SL_ENOMEM;
        if (cap <= KEEP_ENTRIES) {
            free(s->bpe_work);
            s->bpe_work = w;
            s->bpe_work_cap = cap;
        }
    }
    big_t h = {w, NULL, NULL, NULL, 0};
    h.nxt = (uint32_t *)(void *)(h.heap + cap);
    h.prv = h.nxt + cap;
    h.pos = h.prv + cap;
    for (uint32_t i = 0; i < n; i++) {
        h.nxt[i] = i + 1;
        h.prv[i] = i - 1; /* prv[0] unused */
        h.pos[i] = NONE;
        uint32_t r =
            i + 1 < n ? b->pair2[p[i] << 8 | p[i + 1]] : SL__BPE_NORANK;
        if (r != SL__BPE_NORANK)
            put(&h, h.size++, KEY(r, i));
    }
    if (h.size > 1) /* heapify: sift each parent, last first */
        for (uint32_t at = (h.size - 2) / 4 + 1; at-- > 0;)
            sift_down(&h, at);
    while (h.size) {
        uint32_t i = (uint32_t)h.heap[0], j = h.nxt[i], k = h.nxt[j];
        /* part i absorbs part j: it now ends at k */
        heap_remove(&h, j);
        h.nxt[i] = k;
        if (k < n)
            h.prv[k] = i;
        heap_set(&h, i,
                 k < n ? sl__bpe_rank(b, p + i, h.nxt[k] - i) : SL__BPE_NORANK);
        if (i > 0) {
            uint32_t l = h.prv[i];
            heap_set(&h, l, sl__bpe_rank(b, p + l, k - l));
        }
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i = h.nxt[i]) {
        size_t e = h.nxt[i];
        uint32_t r = sl__bpe_rank(b, p + i, e - i);
        if (r == SL__BPE_NORANK)
            rc = missing(p + i, e - i, err, errlen);
        else if (sl__ids_push(ids, (int32_t)r))
            rc = SL_ENOMEM;
    }
    if (w != s->bpe_work)
        free(w);
    return rc;
}

int sl__bpe_merge_piece(const struct sl__bpe *b, const uint8_t *p, size_t n,
                        sl__bpe_path_t path, sl__tok_scratch_t *s,
                        sl__ids_t *ids, char *err, size_t errlen)
{
    if (n == 1)
        return missing(p, n, err, errlen);
    if (path == SL__BPE_PATH_AUTO)
        path = n < SL__BPE_LARGE ? SL__BPE_PATH_SCAN : SL__BPE_PATH_HEAP;
    int rc = path == SL__BPE_PATH_SCAN && n <= SL__BPE_LARGE
                 ? merge_small(b, p, n, ids, err, errlen)
                 : merge_large(b, p, n, s, ids, err, errlen);
    return rc == SL_ENOMEM ? sl__fail(err, errlen, rc, "bpe: out of memory")
                           : rc;
}
