/* text/wp_unicode: the Unicode predicates of HF's BERT normalizer and
 * pre-tokenizer, from utf8proc, corrected where HF's own Unicode data
 * (Rust std; the unicode_categories crate, whose tables are older) differs.
 * Private to bert_basic.c and its tests. */
#ifndef SL_WP_UNICODE_H
#define SL_WP_UNICODE_H

#include <stdint.h>

/* Category C* as HF's is_control sees it (dropped by clean_text). */
int sl__wpu_is_other(uint32_t c);
/* Rust char::is_whitespace (the White_Space property). */
int sl__wpu_is_space(uint32_t c);
/* BERT's _is_chinese_char ranges, as HF writes them. */
int sl__wpu_is_cjk(uint32_t c);
/* Category Mn as HF's strip_accents sees it. */
int sl__wpu_is_mn(uint32_t c);
/* Category P* as HF's is_punctuation sees it (ASCII handled by caller). */
int sl__wpu_is_punct(uint32_t c);
/* Rust char::to_lowercase, single char (U+0130, the one multi-char
 * mapping, never reaches it: NFD strips its dot first). */
uint32_t sl__wpu_lower(uint32_t c);
/* Whether HF's NFD decomposes c (its tables are older than utf8proc's). */
int sl__wpu_decomposes(uint32_t c);
/* Canonical combining class as HF's NFD sees it. */
int sl__wpu_ccc(uint32_t c);

#endif
