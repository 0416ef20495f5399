/* text/bpe_map: byte string -> rank, open addressing over xxh3, and the
 * UTF-8 repair the BPE encoder applies to bytes input. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "text/bpe_internal.h"

int sl__bpe_map_init(sl__bpe_map_t *m, size_t expect)
{
    memset(m, 0, sizeof *m);
    size_t slots = 64;
    while (slots < expect * 2 + 2)
        slots *= 2;
    m->slot = calloc(slots, sizeof *m->slot);
    if (!m->slot)
        return SL_ENOMEM;
    m->mask = (uint32_t)(slots - 1);
    return 0;
}

void sl__bpe_map_free(sl__bpe_map_t *m)
{
    free(m->arena);
    free(m->off);
    free(m->len);
    free(m->rank);
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static inline uint64_t map_hash(const uint8_t *p, size_t n)
{
    return XXH3_64bits(p, n);
}

static int map_grow_slots(sl__bpe_map_t *m)
{
    size_t slots = ((size_t)m->mask + 1) * 2;
    if (slots > ((size_t)1 << 31))
        return SL_ENOMEM;
    uint64_t *s = calloc(slots, sizeof *s);
    if (!s)
        return SL_ENOMEM;
    for (uint32_t e = 0; e < m->n; e++) {
        uint64_t h = map_hash(m->arena + m->off[e], m->len[e]);
        size_t i = (size_t)h & (slots - 1);
        while (s[i])
            i = (i + 1) & (slots - 1);
        s[i] = (h & 0xffffffff00000000ull) | (uint64_t)(e + 1);
    }
    free(m->slot);
    m->slot = s;
    m->mask = (uint32_t)(slots - 1);
    return 0;
}

static int grow(void **p, size_t elem, size_t cap)
{
    void *q = realloc(*p, elem * cap);
    if (!q)
        return SL_ENOMEM;
    *p = q;
    return 0;
}

int sl__bpe_map_put(sl__bpe_map_t *m, const uint8_t *p, size_t n, uint32_t rank)
{
    if (n > UINT32_MAX || m->n == UINT32_MAX - 1)
        return SL_ENOMEM;
    uint64_t h = map_hash(p, n);
    uint64_t tag = h & 0xffffffff00000000ull;
    size_t i = (size_t)h & m->mask;
    for (; m->slot[i]; i = (i + 1) & m->mask) {
        uint64_t s = m->slot[i];
        if ((s & 0xffffffff00000000ull) != tag)
            continue;
        uint32_t e = (uint32_t)s - 1;
        if (m->len[e] == n && !memcmp(m->arena + m->off[e], p, n)) {
            m->rank[e] = rank;
            return 0;
        }
    }
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 1024;
        if (grow((void **)&m->off, sizeof *m->off, cap) ||
            grow((void **)&m->len, sizeof *m->len, cap) ||
            grow((void **)&m->rank, sizeof *m->rank, cap))
            return SL_ENOMEM;
        m->cap = cap;
    }
    if (m->arena_n + n > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 4096;
        while (cap < m->arena_n + n)
            cap *= 2;
        if (cap > UINT32_MAX || grow((void **)&m->arena, 1, cap))
            return SL_ENOMEM;
        m->arena_cap = cap;
    }
    if (n)
        memcpy(m->arena + m->arena_n, p, n);
    uint32_t e = m->n++;
    m->off[e] = (uint32_t)m->arena_n;
    m->len[e] = (uint32_t)n;
    m->rank[e] = rank;
    m->arena_n += n;
    m->slot[i] = tag | (uint64_t)(e + 1);
    if ((size_t)m->n * 2 > m->mask)
        return map_grow_slots(m);
    return 0;
}

uint32_t sl__bpe_map_get(const sl__bpe_map_t *m, const uint8_t *p, size_t n)
{
    uint64_t h = map_hash(p, n);
    uint64_t tag = h & 0xffffffff00000000ull;
    for (size_t i = (size_t)h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t s = m->slot[i];
        if (!s)
            return SL__BPE_NORANK;
        if ((s & 0xffffffff00000000ull) != tag)
            continue;
        uint32_t e = (uint32_t)s - 1;
        if (m->len[e] == n && !memcmp(m->arena + m->off[e], p, n))
            return m->rank[e];
    }
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 with *bad set to the
 * length of its maximal invalid subpart (>= 1), per Unicode's "U+FFFD
 * substitution of maximal subparts", which CPython's decoder follows. */
static size_t utf8_seq(const uint8_t *p, size_t n, size_t *bad)
{
    uint8_t b = p[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf;
    if (b < 0x80)
        return 1;
    if (b >= 0xc2 && b <= 0xdf)
        need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
        need = 2;
        if (b == 0xe0)
            lo = 0xa0;
        else if (b == 0xed)
            hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 3;
        if (b == 0xf0)
            lo = 0x90;
        else if (b == 0xf4)
            hi = 0x8f;
    } else {
        *bad = 1;
        return 0;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n || p[i] < lo || p[i] > hi) {
            *bad = i;
            return 0;
        }
        lo = 0x80;
        hi = 0xbf;
    }
    return need + 1;
}

size_t sl__utf8_valid_prefix(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII runs, 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        size_t bad, k = utf8_seq(p + i, n - i, &bad);
        if (!k)
            return i;
        i += k;
    }
    return n;
}

int sl__utf8_repair(const uint8_t *p, size_t n, sl__bytes_t *out)
{
    out->n = 0;
    /* worst case: each byte -> 3 bytes of U+FFFD */
    if (n > SIZE_MAX / 3 || sl__bytes_reserve(out, n * 3 + 1))
        return SL_ENOMEM;
    uint8_t *o = out->p;
    size_t i = 0;
    while (i < n) {
        size_t bad, k = utf8_seq(p + i, n - i, &bad);
        if (k) {
            memcpy(o, p + i, k);
            o += k;
            i += k;
        } else {
            *o++ = 0xef;
            *o++ = 0xbf;
            *o++ = 0xbd;
            i += bad;
        }
    }
    out->n = (size_t)(o - out->p);
    return 0;
}
