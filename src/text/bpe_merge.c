/* text/bpe_merge: tiktoken's byte_pair_merge for one pre-token piece:
 * repeatedly merge the adjacent pair of parts whose concatenation has the
 * lowest rank (leftmost on ties) until no pair is a token.
 *
 * Two ways to the same result, as tiktoken has (src/lib.rs,
 * byte_pair_encode): pieces under SL__BPE_LARGE bytes rescan a flat array
 * per merge (O(n^2), but n is small and the array stays in cache); longer
 * ones keep the part starts as a bitmap and the candidate merges in a
 * min-tree over byte positions, O(n log n). The tree holds exactly the
 * merges the array would scan (a leaf is updated when its parts change,
 * never left stale) and its leftmost minimum is the scan's pick, the
 * lowest rank leftmost, so both merge the same pairs in the same order
 * (tests/unit/test_bpe.c checks both against a reference; the fuzz target
 * checks one against the other). A JSON Lines record with a megabyte of
 * letters is one piece: it must not cost minutes (issue 14, item 9), nor
 * much more memory than its bytes. */
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"

#define NONE UINT32_MAX

/* Large-path work entries (uint32) up to this many stay in the scratch;
 * a longer piece's are freed after it (an outlier does not pin ~4 bytes
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

/* ---- long pieces: a bitmap of part starts, a min-tree of merges ----
 *
 * leaf i holds the rank of merging the part that starts at byte i with the
 * next part (NONE when i starts no part, or nothing follows it); each
 * level above holds the minimum of FAN entries below it, so the top's
 * minimum, found leftmost on the way down, is the scan's pick. About 4.3
 * bytes a byte of the piece (leaves, levels, the bitmap): the indexed
 * heap it replaced took 20, so a 50 MB piece needed 1 GB (issue: text has
 * no memory bound). A part is a token, so the next or previous part start
 * is a few words of the bitmap away. */

#define FAN 16
#define LEVELS 9 /* FAN^8 = 2^32 leaves, and the top */

typedef struct tree {
    uint32_t *lv[LEVELS]; /* lv[0]: leaves; lv[k][b] = min of block b */
    size_t len[LEVELS];
    int depth;      /* levels in use; lv[depth - 1] has <= FAN entries */
    uint64_t *bits; /* bit i: byte i starts a part */
    size_t n;
} tree_t;

/* Entries of a tree over n leaves (the scratch is sized by this). */
static size_t tree_entries(size_t n, int *depth)
{
    size_t all = 0, len = n;
    int d = 0;
    for (;;) {
        all += len;
        d++;
        if (len <= FAN)
            break;
        len = (len + FAN - 1) / FAN;
    }
    *depth = d;
    /* the bitmap's words after them, 8-byte aligned */
    return all + (all & 1) + (n + 63) / 64 * 2;
}

static uint32_t block_min(const uint32_t *v, size_t from, size_t to)
{
    uint32_t m = NONE;
    for (size_t k = from; k < to; k++)
        m = v[k] < m ? v[k] : m;
    return m;
}

/* Sets leaf i to r and the minima above it, up to the first unchanged. */
static void tree_set(tree_t *t, size_t i, uint32_t r)
{
    t->lv[0][i] = r;
    for (int k = 1; k < t->depth; k++) {
        size_t b = i / FAN, from = b * FAN;
        size_t to = from + FAN < t->len[k - 1] ? from + FAN : t->len[k - 1];
        uint32_t m = block_min(t->lv[k - 1], from, to);
        if (t->lv[k][b] == m)
            return;
        t->lv[k][b] = m;
        i = b;
    }
}

/* The leftmost leaf of the lowest rank, or NONE when no merge is left. */
static size_t tree_min(const tree_t *t)
{
    int k = t->depth - 1;
    uint32_t m = block_min(t->lv[k], 0, t->len[k]);
    if (m == NONE)
        return NONE;
    size_t i = 0;
    for (;; k--) {
        while (t->lv[k][i] != m)
            i++;
        if (k == 0)
            return i;
        i *= FAN;
    }
}

/* The first part start after i, or n. */
static size_t next_start(const tree_t *t, size_t i)
{
    size_t w = (i + 1) / 64;
    if (i + 1 >= t->n)
        return t->n;
    uint64_t x = t->bits[w] & (~(uint64_t)0 << ((i + 1) % 64));
    while (!x) {
        if (++w * 64 >= t->n)
            return t->n;
        x = t->bits[w];
    }
    size_t at = w * 64 + (size_t)__builtin_ctzll(x);
    return at < t->n ? at : t->n;
}

/* The last part start before i (i > 0; byte 0 always starts one). */
static size_t prev_start(const tree_t *t, size_t i)
{
    size_t w = (i - 1) / 64;
    uint64_t x = t->bits[w] & (~(uint64_t)0 >> (63 - (i - 1) % 64));
    while (!x)
        x = t->bits[--w];
    return w * 64 + 63 - (size_t)__builtin_clzll(x);
}

static int merge_large(const struct sl__bpe *b, const uint8_t *p, size_t n,
                       sl__tok_scratch_t *s, sl__ids_t *ids, char *err,
                       size_t errlen)
{
    if (n >= NONE)
        return sl__fail(err, errlen, SL_EINVAL,
                        "bpe: one piece of %zu bytes (4 GiB at most)", n);
    tree_t t = {.n = n};
    size_t need = tree_entries(n, &t.depth);
    uint32_t *w = s->bpe_work;
    if (need > s->bpe_work_cap) {
        size_t cap = need;
        if (cap <= KEEP_ENTRIES && 2 * s->bpe_work_cap > cap)
            cap = 2 * s->bpe_work_cap < KEEP_ENTRIES ? 2 * s->bpe_work_cap
                                                     : KEEP_ENTRIES;
        w = malloc(cap * sizeof *w);
        if (!w)
            return SL_ENOMEM;
        if (cap <= KEEP_ENTRIES) {
            free(s->bpe_work);
            s->bpe_work = w;
            s->bpe_work_cap = cap;
        }
    }
    uint32_t *at = w;
    for (int k = 0; k < t.depth; k++) {
        t.len[k] = k ? (t.len[k - 1] + FAN - 1) / FAN : n;
        t.lv[k] = at;
        at += t.len[k];
    }
    t.bits = (uint64_t *)(void *)(at + ((size_t)(at - w) & 1));
    memset(t.bits, 0xff, (n + 63) / 64 * sizeof *t.bits);
    for (size_t i = 0; i < n; i++)
        t.lv[0][i] = i + 1 < n ? b->pair2[p[i] << 8 | p[i + 1]] : NONE;
    for (int k = 1; k < t.depth; k++)
        for (size_t j = 0; j < t.len[k]; j++) {
            size_t from = j * FAN;
            size_t to = from + FAN < t.len[k - 1] ? from + FAN : t.len[k - 1];
            t.lv[k][j] = block_min(t.lv[k - 1], from, to);
        }
    for (size_t i; (i = tree_min(&t)) != NONE;) {
        size_t j = next_start(&t, i), k = next_start(&t, j);
        /* part i absorbs part j: it now ends at k */
        t.bits[j / 64] &= ~((uint64_t)1 << (j % 64));
        tree_set(&t, j, NONE);
        tree_set(&t, i,
                 k < n ? sl__bpe_rank(b, p + i, next_start(&t, k) - i) : NONE);
        if (i > 0) {
            size_t l = prev_start(&t, i);
            tree_set(&t, l, sl__bpe_rank(b, p + l, k - l));
        }
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        size_t e = next_start(&t, i);
        uint32_t r = sl__bpe_rank(b, p + i, e - i);
        if (r == SL__BPE_NORANK)
            rc = missing(p + i, e - i, err, errlen);
        else if (sl__ids_push(ids, (int32_t)r))
            rc = SL_ENOMEM;
        i = e;
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
        path = n < SL__BPE_LARGE ? SL__BPE_PATH_SCAN : SL__BPE_PATH_TREE;
    int rc = path == SL__BPE_PATH_SCAN && n <= SL__BPE_LARGE
                 ? merge_small(b, p, n, ids, err, errlen)
                 : merge_large(b, p, n, s, ids, err, errlen);
    return rc == SL_ENOMEM ? sl__fail(err, errlen, rc, "bpe: out of memory")
                           : rc;
}
