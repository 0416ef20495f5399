/* base/utf8: the one strict UTF-8 check (no overlongs, surrogates, or code
 * points past U+10FFFF: the text module's documents, the JSON escaper's
 * names), and the repair the BPE encoder applies to bytes input. */
#ifndef SL_BASE_UTF8_H
#define SL_BASE_UTF8_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* The length of the valid prefix of p: the offset of the first byte of the
 * first invalid or truncated sequence, or n when all of p is valid. */
size_t sl__utf8_valid_prefix(const uint8_t *p, size_t n);

/* UTF-8 repair as Python's bytes.decode('utf-8', errors='replace'): each
 * maximal invalid subpart of p[0..n) becomes U+FFFD, written into out.
 * 0 or SL_ENOMEM. */
int sl__utf8_repair(const uint8_t *p, size_t n, sl__bytes_t *out);

/* For text that arrives in pieces: the length of the prefix of p[0..n)
 * whose repair no later byte can change, i.e. all of it but a trailing
 * sequence that more bytes could complete (at most 3 bytes). */
size_t sl__utf8_settled(const uint8_t *p, size_t n);

/* The offset in p[0..n) of offset r of its repair (r on a code point
 * boundary of the repaired text): maps a position found in the repaired
 * text back to the bytes. */
size_t sl__utf8_raw_offset(const uint8_t *p, size_t n, size_t r);

#endif
