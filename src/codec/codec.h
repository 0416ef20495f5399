/* codec: per-record compression of stored bytes (none, lz4, zstd, zstd
 * with a dictionary trained on the data). Depends on base only. Tags are
 * stable numbers written into shards: add, never renumber. */
#ifndef SL_CODEC_H
#define SL_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum sl__codec {
    SL_CODEC_NONE = 0,
    SL_CODEC_LZ4 = 1,
    SL_CODEC_ZSTD = 2,
    SL_CODEC_ZSTD_DICT = 3, /* zstd frames that need the shard's dictionary */
} sl__codec_t;
#define SL__CODEC_LAST SL_CODEC_ZSTD_DICT

/* "none" | "lz4" | "zstd" | "zstd-dict" -> tag; -1 if unknown. */
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

/* Whether n stored bytes of `codec` at src can give raw_n bytes, from
 * what the bytes say, so a caller checks before it allocates raw_n: none,
 * n == raw_n; lz4, at most SL__CODEC_LZ4_RATIO x n; zstd, a frame that
 * declares its size declares raw_n (the only frame) or no more, and
 * frames give at most SL__CODEC_ZSTD_RATIO x n. SL_ECORRUPT with the
 * cause when they cannot. sl__codec_decompress* check it too. */
#define SL__CODEC_LZ4_RATIO 255    /* a match length byte of 255 per byte */
#define SL__CODEC_ZSTD_RATIO 32768 /* a 128 KiB RLE block in 4 bytes */
int sl__codec_check_raw(int codec, const void *src, size_t n, uint64_t raw_n,
                        char *err, size_t errlen);

/* Decompresses exactly raw_n bytes into dst (which holds raw_n). Any other
 * outcome (short, long, malformed) is SL_ECORRUPT with a message. */
int sl__codec_decompress(int codec, const void *src, size_t n, void *dst,
                         size_t raw_n, char *err, size_t errlen);

/* ---- dictionaries (SL_CODEC_ZSTD_DICT) */

/* Largest dictionary a shard may hold (zstd's CLI trains 110 KiB ones). */
#define SL__CODEC_DICT_MAX ((size_t)1 << 20)

/* Trains a zstd dictionary of at most `capacity` bytes on n samples laid
 * end to end in `samples` (sizes[i] bytes each): ZDICT_trainFromBuffer.
 * SL_EINVAL with zstd's reason when the samples are too few or too alike
 * to train on (the caller falls back to plain zstd). */
int sl__codec_dict_train(const void *samples, const size_t *sizes, unsigned n,
                         size_t capacity, sl__bytes_t *dict, char *err,
                         size_t errlen);

/* A loaded dictionary: the decompression half (ZSTD_DDict) always, the
 * compression half (ZSTD_CDict at `level`) when level > 0. Immutable
 * after load, so any thread may use it. */
typedef struct sl__codec_dict sl__codec_dict_t;
/* Checks that p holds a zstd dictionary (its magic, ID and entropy
 * tables; raw-content dictionaries are refused) and loads it.
 * SL_ECORRUPT with the cause when it does not. */
int sl__codec_dict_load(const void *p, size_t n, int level,
                        sl__codec_dict_t **out, char *err, size_t errlen);
void sl__codec_dict_free(sl__codec_dict_t *d);
/* zstd's ID of the dictionary (written in every frame that uses it). */
unsigned sl__codec_dict_id(const sl__codec_dict_t *d);

/* sl__codec_compress_level / sl__codec_decompress with a dictionary:
 * codec SL_CODEC_ZSTD_DICT needs d (its compression half to compress);
 * the other codecs ignore it. Without d, SL_CODEC_ZSTD_DICT is
 * SL_ECORRUPT ("no dictionary"). */
int sl__codec_compress_dict(int codec, int level, const sl__codec_dict_t *d,
                            const void *src, size_t n, sl__bytes_t *out,
                            char *err, size_t errlen);
int sl__codec_decompress_dict(int codec, const sl__codec_dict_t *d,
                              const void *src, size_t n, void *dst,
                              size_t raw_n, char *err, size_t errlen);

/* ---- streaming decompression (a record larger than a working set) */

/* A zstd (or zstd-dict) frame decompressed a piece at a time
 * (ZSTD_decompressStream), so a caller holds a piece of the stored bytes
 * and zstd's window instead of the whole stored and raw record. A frame
 * whose window is larger than 2^SL__CODEC_STREAM_WINDOW_LOG is refused
 * (SL_EUNSUPPORTED) before its window is allocated: the most a stream
 * holds is SL__CODEC_STREAM_BYTES. Other codecs cannot stream (an LZ4
 * block is one unit; none needs no codec). One thread at a time. */
#define SL__CODEC_STREAM_WINDOW_LOG 24
#define SL__CODEC_STREAM_BYTES                                                 \
    (((int64_t)1 << SL__CODEC_STREAM_WINDOW_LOG) + ((int64_t)512 << 10))
typedef struct sl__codec_stream sl__codec_stream_t;
/* 1 when records of `codec` can be streamed by sl__codec_stream_*. */
int sl__codec_streams(int codec);
/* codec zstd, or zstd-dict with d. SL_EINVAL for another codec. */
int sl__codec_stream_open(int codec, const sl__codec_dict_t *d,
                          sl__codec_stream_t **out, char *err, size_t errlen);
/* Decompresses from in[*in_pos, in_n) into out[*out_pos, out_n), moving
 * both positions; *frame_end is 1 when a frame ended with this step (and
 * nothing of a next one began). @return 0, or SL_ECORRUPT (malformed) /
 * SL_EUNSUPPORTED (window too large) with zstd's reason. */
int sl__codec_stream_step(sl__codec_stream_t *z, const void *in, size_t in_n,
                          size_t *in_pos, void *out, size_t out_n,
                          size_t *out_pos, int *frame_end, char *err,
                          size_t errlen);
void sl__codec_stream_free(sl__codec_stream_t *z);

#endif
