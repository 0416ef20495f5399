/* data/crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as
 * TFRecord framing uses it, and TFRecord's mask. Debian has no maintained
 * CRC-32C library in C for bookworm (libcrc32c-dev is absent), so this is
 * the small slicing-by-8 table form, tested against the RFC 3720 vectors.
 * Depends on nothing. */
#ifndef SL_CRC32C_H
#define SL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc of p[0..n) continued from crc (0 to start). */
uint32_t sl__crc32c(uint32_t crc, const void *p, size_t n);

/* TFRecord's masked CRC: rotate right by 15, add 0xa282ead8. */
static inline uint32_t sl__crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

#endif
