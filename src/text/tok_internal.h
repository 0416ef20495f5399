/* text/tok_internal: the tokenizer object shared by BPE and WordPiece.
 * Private to src/text (and the tokenizer tests). sl__tok_t holds either kind;
 * tok_common.c dispatches on `kind`.
 *
 * Ownership: the BPE section is owned by bpe*.c, the WordPiece section by
 * wordpiece*.c. Each side adds fields only inside its own marked section. */
#ifndef SL_TOK_INTERNAL_H
#define SL_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

typedef enum sl__tok_kind {
    SL__TOK_BPE = 1,
    SL__TOK_WORDPIECE = 2,
} sl__tok_kind_t;

struct sl__bpe; /* bpe.c / bpe_load.c */
struct sl__wp;  /* wordpiece*.c */

struct sl__tok {
    sl__tok_kind_t kind;
    struct sl__bpe *bpe; /* kind == SL__TOK_BPE */
    struct sl__wp *wp;   /* kind == SL__TOK_WORDPIECE */
};

/* Per-thread scratch: grows, never shrinks. Created zeroed
 * (sl__tok_scratch_create). sl__tok_scratch_destroy calls
 * sl__bpe_scratch_release, then frees wp_buf[] and free(wp_extra). */
struct sl__tok_scratch {
    /* ---- BPE section (bpe*.c) ---- */
    void *bpe_md;        /* pcre2_match_data_8 *, lazily created */
    void *bpe_md_owner;  /* the pcre2 code bpe_md was sized for */
    void *bpe_work;      /* long-piece merge: min-tree (bpe_merge.c) */
    size_t bpe_work_cap; /* its uint32 entries */
    void *bpe_cache;     /* recent pieces cache (bpe.c) */
    sl__bytes_t bpe_buf; /* e.g. U+FFFD-repaired text */
    /* ---- end BPE section ---- */

    /* ---- WordPiece section (wordpiece*.c): add fields here ---- */
    sl__bytes_t wp_buf[4]; /* general-purpose growable buffers */
    void *wp_extra;        /* one malloc'd block; tok_common.c free()s it */
    /* ---- end WordPiece section ---- */
};

/* ---- BPE entry points (bpe*.c) ---- */
int sl__bpe_encode(const sl__tok_t *t, const char *text, size_t n,
                   int allow_special, sl__tok_scratch_t *s, sl__ids_t *ids,
                   char *err, size_t errlen);
int sl__bpe_encode_part(const sl__tok_t *t, const char *text, size_t n,
                        int more, int allow_special, sl__tok_scratch_t *s,
                        sl__ids_t *ids, size_t *used, char *err, size_t errlen);
void sl__bpe_free(struct sl__bpe *bpe);
int32_t sl__bpe_id(const struct sl__bpe *bpe, const char *token);
size_t sl__bpe_size(const struct sl__bpe *bpe);
void sl__bpe_scratch_release(sl__tok_scratch_t *s); /* frees the BPE section */

/* ---- WordPiece entry points (wordpiece*.c) ----
 * sl__wp_encode: WordPiece has no special-token splitting (BERT's basic
 * tokenizer treats [CLS] etc. as text); tok_common.c passes no allow_special.
 */
int sl__wp_encode(const sl__tok_t *t, const char *text, size_t n,
                  sl__tok_scratch_t *s, sl__ids_t *ids, char *err,
                  size_t errlen);
/* The longest prefix of text[0..n) that encodes alone as it does followed
 * by any bytes: up to the last ASCII whitespace byte (wordpiece.c). */
size_t sl__wp_cut(const char *text, size_t n);
void sl__wp_free(struct sl__wp *wp);
int32_t sl__wp_id(const struct sl__wp *wp, const char *token);
size_t sl__wp_size(const struct sl__wp *wp);

#endif
