/* Fuzz target: any bytes through the shard reader. Opens them as a shard
 * (header, index, names: all the parsing), checks every record's label
 * (the label rule, with and without a classes.txt) and reads every record
 * (codecs, checksums, a 1.1 shard's zstd dictionary) whole and streamed
 * (the same bytes where the whole read succeeds), twice: as given,
 * then with every checksum made to match (see reseal). Nothing may crash,
 * leak or read out of bounds. The seed corpus is written by
 * `SL_GEN_CORPUS=DIR tests/unit/test_shard` (and test_shard_dict: the
 * dict-*.sls seeds). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "data/shard.h"
#include "data/shard_format.h"

/* A valid index can promise up to 4 GiB per record; the reader would try to
 * allocate it. Those are honest allocations, not bugs: skip them here so
 * the fuzzer's malloc limit does not report them. */
#define FUZZ_MAX_RECORD (64u << 20)

/* Record i streamed (data/shard_stream) in uneven pieces, every third
 * passed over: where the whole read gave `whole` (NULL: it failed), the
 * stream gives the same bytes; either way nothing crashes. */
static void stream_record(const sl__shard_t *s, uint64_t i,
                          const sl__bytes_t *whole)
{
    char err[512];
    sl__shard_stream_t *st = NULL;
    if (sl__shard_stream_open(s, i, NULL, &st, err, sizeof err)) {
        if (whole)
            abort();
        return;
    }
    uint8_t buf[777];
    size_t at = 0;
    for (int k = 0; sl__shard_stream_left(st); k++) {
        size_t left = (size_t)sl__shard_stream_left(st);
        size_t n = (size_t)(k * 131 % 777) + 1;
        n = n < left ? n : left;
        int pass = k % 3 == 2;
        if (sl__shard_stream_read(st, pass ? NULL : buf, n, err, sizeof err)) {
            if (whole)
                abort();
            break;
        }
        if (whole && !pass && memcmp(buf, whole->p + at, n))
            abort();
        at += n;
    }
    sl__shard_stream_close(st);
}

static void open_and_read(const uint8_t *data, size_t size)
{
    sl__shard_t *s = NULL;
    char err[512];
    if (sl__shard_open_mem(data, size, &s, err, sizeof err))
        return;
    sl__bytes_t out = {0}, scratch = {0};
    uint64_t n = sl__shard_count(s);
    for (uint64_t i = 0; i < n; i++) {
        const sl__shard_entry_t *e = sl__shard_entry(s, i);
        int bad = sl__shard_label_check(s, i, -1, err, sizeof err) != 0;
        /* The bound without classes.txt is the bound with that many. */
        if (bad != (sl__shard_label_check(s, i, SL__SHARD_CLASSES_MAX, err,
                                          sizeof err) != 0))
            abort();
        (void)sl__shard_label_check(s, i, 3, err, sizeof err);
        if (e->raw_size > FUZZ_MAX_RECORD)
            continue;
        uint64_t stored;
        int rc = sl__shard_read(s, i, &out, &scratch, &stored, err, sizeof err);
        stream_record(s, i, rc ? NULL : &out);
    }
    (void)sl__shard_read(s, n, &out, &scratch, NULL, err, sizeof err);
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    sl__shard_close(s);
}

/* Rewrites both checksums to match the bytes, where the header locates the
 * index well enough. Mutations almost never keep a checksum right, so
 * without this the fuzzer would never get past them to the bounds checks
 * on the header fields and index entries. Returns 1 if anything changed. */
static int reseal(uint8_t *p, size_t n)
{
    if (n < SL_SHARD_HEADER_SIZE)
        return 0;
    uint32_t hsize = sl__get_u32(p + SL_SHARD_H_HEADER_SIZE);
    if (hsize < SL_SHARD_HEADER_SIZE || hsize > SL_SHARD_HEADER_MAX ||
        hsize % 8 || hsize > n)
        return 0;
    uint64_t at = sl__get_u64(p + SL_SHARD_H_INDEX_OFF);
    uint64_t len = sl__get_u64(p + SL_SHARD_H_INDEX_SIZE);
    if (at <= n && len <= n - at)
        sl__put_u64(p + SL_SHARD_H_INDEX_SUM, XXH3_64bits(p + at, len));
    if (hsize >= SL_SHARD_HEADER_SIZE_DICT) { /* 1.1: the dictionary's */
        at = sl__get_u64(p + SL_SHARD_H_DICT_OFF);
        len = sl__get_u32(p + SL_SHARD_H_DICT_SIZE);
        if (at <= n && len <= n - at)
            sl__put_u64(p + SL_SHARD_H_DICT_SUM, XXH3_64bits(p + at, len));
    }
    sl__put_u64(p + hsize - 8, XXH3_64bits(p, hsize - 8));
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    open_and_read(data, size);
    /* Exactly sized copies, so ASan sees any read past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (reseal(copy, size))
        open_and_read(copy, size);
    free(copy);
    return 0;
}
