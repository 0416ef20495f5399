/* data/shard_format: the on-disk layout of a shard (docs/FORMAT.md), shared by
 * the writer and the reader only. All integers are little-endian. */
#ifndef SL_SHARD_FORMAT_H
#define SL_SHARD_FORMAT_H

/* PNG-style magic: the high byte catches 7-bit transfers, CR LF and LF catch
 * newline translation, ^Z stops `type` on DOS. */
#define SL_SHARD_MAGIC "\x89SLS\r\n\x1a\n"
#define SL_SHARD_MAGIC_LEN 8

/* Major changes break old readers; minor changes only append fields to the
 * header or to entries (header_size / entry_size grow), which old readers
 * skip. */
#define SL_SHARD_VERSION_MAJOR 1
#define SL_SHARD_VERSION_MINOR 0
/* 1.1: the header holds a zstd dictionary's place (SL_SHARD_H_DICT_*).
 * Written only by shards that hold one, so every other shard stays 1.0,
 * byte for byte as before. */
#define SL_SHARD_VERSION_MINOR_DICT 1

/* Header, at offset 0 (version 1.0 sizes; a reader accepts larger ones). */
#define SL_SHARD_HEADER_SIZE 64
#define SL_SHARD_HEADER_MAX 4096
#define SL_SHARD_H_MAGIC 0        /* 8 bytes */
#define SL_SHARD_H_MAJOR 8        /* u16 */
#define SL_SHARD_H_MINOR 10       /* u16 */
#define SL_SHARD_H_HEADER_SIZE 12 /* u32 */
#define SL_SHARD_H_COUNT 16       /* u64 records */
#define SL_SHARD_H_INDEX_OFF 24   /* u64 = end of the data region */
#define SL_SHARD_H_INDEX_SIZE 32  /* u64 entries + name table */
#define SL_SHARD_H_ENTRY_SIZE 40  /* u32 */
#define SL_SHARD_H_FLAGS 44       /* u32, 0 */
#define SL_SHARD_H_INDEX_SUM 48   /* u64 xxh3-64 of the index bytes */
/* 1.1 (header size >= SL_SHARD_HEADER_SIZE_DICT): the dictionary records
 * of codec zstd-dict need, stored in the data region (size 0: none). */
#define SL_SHARD_HEADER_SIZE_DICT 88
#define SL_SHARD_H_DICT_OFF 56  /* u64 from the start of the file */
#define SL_SHARD_H_DICT_SIZE 64 /* u32 bytes */
#define SL_SHARD_H_DICT_ID 68   /* u32 zstd's dictionary ID */
#define SL_SHARD_H_DICT_SUM 72  /* u64 xxh3-64 of the dictionary bytes */
/* The header's last 8 bytes: xxh3-64 of the bytes before them. */

/* Index entry (version 1.0 size; a reader accepts larger ones). */
#define SL_SHARD_ENTRY_SIZE 40
#define SL_SHARD_ENTRY_MAX 1024
#define SL_SHARD_E_OFFSET 0    /* u64 from the start of the file */
#define SL_SHARD_E_STORED 8    /* u32 */
#define SL_SHARD_E_RAW 12      /* u32 */
#define SL_SHARD_E_CHECKSUM 16 /* u64 xxh3-64 of the raw bytes */
#define SL_SHARD_E_LABEL 24    /* i64 */
#define SL_SHARD_E_NAME_OFF 32 /* u32 into the name table */
#define SL_SHARD_E_NAME_LEN 36 /* u16, not counting the NUL after it */
#define SL_SHARD_E_CODEC 38    /* u8 sl__codec_t */
#define SL_SHARD_E_RESERVED 39 /* u8, 0 */

#define SL_SHARD_NAME_MAX 65535

/* 1 if byte c may appear in a record name (no NUL, no control bytes, so a
 * name printed in a message cannot move the terminal's cursor). */
static inline int sl__shard_name_byte_ok(unsigned char c)
{
    return c >= 0x20 && c != 0x7f;
}

#endif
