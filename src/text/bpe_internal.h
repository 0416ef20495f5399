/* text/bpe_internal: the byte-level BPE tokenizer's tables, shared by its
 * loaders (bpe_load.c, bpe_gpt2.c), the rank map (bpe_map.c) and the
 * encoder (bpe.c). Ranks are ids, as in tiktoken. */
#ifndef SL_BPE_INTERNAL_H
#define SL_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

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

/* Reads a whole file (NUL-terminated for convenience). */
int sl__bpe_read_file(const char *path, char **data, size_t *n, char *err,
                      size_t errlen);

#endif
