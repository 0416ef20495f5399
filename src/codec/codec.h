/* codec: per-record compression of stored bytes (none, lz4, zstd).
 * Depends on base only. Tags are stable numbers written into shards. */
#ifndef SL_CODEC_H
#define SL_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum sl__codec {
    SL_CODEC_NONE = 0,
    SL_CODEC_LZ4 = 1,
    SL_CODEC_ZSTD = 2,
} sl__codec_t;

/* "none" | "lz4" | "zstd" -> tag; -1 if unknown. */
int sl__codec_from_name(const char *name);
/* tag -> name, or "unknown". */
const char *sl__codec_name(int codec);

/* Worst-case compressed size of n bytes (n for none); 0 if n is too large
 * for the codec (lz4: about 2 GB) or the codec is unknown. */
size_t sl__codec_bound(int codec, size_t n);

/* Compresses src into out (out->n set). Returns 0 or SL_E*. */
int sl__codec_compress(int codec, const void *src, size_t n, sl__bytes_t *out,
                       char *err, size_t errlen);

/* The same at a zstd level (0: the default, 3; negative: zstd's fast
 * levels; ignored by the other codecs). */
int sl__codec_compress_level(int codec, int level, const void *src, size_t n,
                             sl__bytes_t *out, char *err, size_t errlen);

/* Decompresses exactly raw_n bytes into dst (which holds raw_n). Any other
 * outcome (short, long, malformed) is SL_ECORRUPT with a message. */
int sl__codec_decompress(int codec, const void *src, size_t n, void *dst,
                         size_t raw_n, char *err, size_t errlen);

#endif
