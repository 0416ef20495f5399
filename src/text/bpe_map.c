/* text/bpe_map: byte string -> rank, open addressing over xxh3. */
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
