/* text/bpe_internal: the byte-level BPE tokenizer's tables, shared by its
 * loaders (bpe_load.c, bpe_gpt2.c), the rank map (bpe_map.c) and the
 * encoder (bpe.c, and bpe_merge.c per piece). Ranks are ids, as in tiktoken. */
#ifndef SL_BPE_INTERNAL_H
#define SL_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/utf8.h"
#include "text/tok_internal.h"

#define SL__BPE_NORANK UINT32_MAX

/* Byte string -> rank, open addressing (linear probing) over xxh3. */
typedef struct sl__bpe_map {
    uint8_t *arena; /* token bytes, back to back */
    size_t arena_n, arena_cap;
    uint32_t *off, *len, *rank; /* per entry */
    uint32_t n, cap;            /* entries */
    uint64_t *slot; /* (hash high 32 << 32) | (entry + 1); 0 empty */
    uint32_t mask;  /* slots - 1 */
} sl__bpe_map_t;

int sl__bpe_map_init(sl__bpe_map_t *m, size_t expect);
void sl__bpe_map_free(sl__bpe_map_t *m);
/* Inserts or overwrites (a Python dict's assignment). 0 or SL_ENOMEM. */
int sl__bpe_map_put(sl__bpe_map_t *m, const uint8_t *p, size_t n,
                    uint32_t rank);
uint32_t sl__bpe_map_get(const sl__bpe_map_t *m, const uint8_t *p, size_t n);

typedef struct sl__bpe_special {
    char *s;
    size_t n;
    int32_t id;
} sl__bpe_special_t;

struct sl__bpe {
    char name[32]; /* encoding: "gpt2", "cl100k_base", ... */
    sl__bpe_map_t map;
    uint32_t *pair2; /* rank of each 2-byte string (65536), for speed */
    uint32_t byte_rank[256];
    sl__bpe_special_t *sp;
    size_t nsp;
    uint8_t sp_first[256]; /* 1 where some special token starts with it */
    void *re;              /* pcre2_code_8 * */
    int jit;               /* re was JIT-compiled */
    size_t n_vocab;        /* max(rank, special id) + 1 */
};

/* Memory loaders (the file loaders read whole files and call these; the
 * fuzz target calls them directly). *_name name the inputs in messages. */
int sl__bpe_load_gpt2_mem(const char *enc, size_t enc_n, const char *enc_name,
                          const char *merges, size_t merges_n,
                          const char *merges_name, sl__tok_t **out, char *err,
                          size_t errlen);
int sl__bpe_load_tiktoken_mem(const char *data, size_t n, const char *name,
                              const char *encoding, sl__tok_t **out, char *err,
                              size_t errlen);

/* Finishes a loaded map: the pattern and special tokens of `encoding`, the
 * byte and pair tables, duplicate-rank check. Takes ownership of bpe. */
int sl__bpe_finish(struct sl__bpe *bpe, const char *encoding, const char *name,
                   sl__tok_t **out, char *err, size_t errlen);

/* Pieces of at least this many bytes merge through a tree (O(n log n)),
 * shorter ones through a rescanned array (bpe_merge.c). */
#define SL__BPE_LARGE 128

typedef enum sl__bpe_path {
    SL__BPE_PATH_AUTO = 0, /* by length, as above */
    SL__BPE_PATH_SCAN,     /* the array (only up to SL__BPE_LARGE bytes) */
    SL__BPE_PATH_TREE,     /* the min-tree; tests compare the two */
} sl__bpe_path_t;

/* Rank of the token p[0..n) (n >= 1), SL__BPE_NORANK if none. */
static inline uint32_t sl__bpe_rank(const struct sl__bpe *b, const uint8_t *p,
                                    size_t n)
{
    if (n == 2)
        return b->pair2[p[0] << 8 | p[1]];
    if (n == 1)
        return b->byte_rank[p[0]];
    return sl__bpe_map_get(&b->map, p, n);
}

/* Appends the ids of a piece p[0..n) that is not itself a token:
 * tiktoken's byte_pair_merge (bpe_merge.c). @return 0, SL_ECORRUPT (a
 * byte without a token), SL_ENOMEM or SL_EINVAL (a piece over 4 GiB),
 * with the message in err. */
int sl__bpe_merge_piece(const struct sl__bpe *b, const uint8_t *p, size_t n,
                        sl__bpe_path_t path, sl__tok_scratch_t *s,
                        sl__ids_t *ids, char *err, size_t errlen);

/* Appends the ids of one pre-token piece p[0..n) (n >= 1): its rank when
 * it is a token (inline: most pieces are), else sl__bpe_merge_piece. */
static inline int sl__bpe_encode_piece(const struct sl__bpe *b,
                                       const uint8_t *p, size_t n,
                                       sl__bpe_path_t path,
                                       sl__tok_scratch_t *s, sl__ids_t *ids,
                                       char *err, size_t errlen)
{
    uint32_t r = sl__bpe_rank(b, p, n);
    if (r == SL__BPE_NORANK)
        return sl__bpe_merge_piece(b, p, n, path, s, ids, err, errlen);
    return sl__ids_push(ids, (int32_t)r)
               ? sl__fail(err, errlen, SL_ENOMEM, "bpe: out of memory")
               : 0;
}

/* The tiktoken pattern pat as PCRE2 should compile it: \p{X}, \s and \S
 * spelled out as code-point ranges from bpe_uclass.h (tiktoken's Unicode
 * tables, not PCRE2's). 0 and a malloc'd *out, or SL_ENOMEM, or
 * SL_EUNSUPPORTED for a class the table lacks. See bpe_pattern.c. */
int sl__bpe_pattern_for_pcre2(const char *pat, char **out);

#endif
