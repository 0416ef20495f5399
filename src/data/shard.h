/* data/shard: the native indexed shard format (docs/FORMAT.md).
 * Depends on base and codec. Readers are thread-safe (pread). */
#ifndef SL_SHARD_H
#define SL_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/membudget.h"
#include "codec/codec.h"

/* One record's index entry, decoded. */
typedef struct sl__shard_entry {
    uint64_t offset;      /* of the stored bytes, from the start of file */
    uint32_t stored_size; /* bytes on disk */
    uint32_t raw_size;    /* bytes after decompression */
    uint64_t checksum;    /* xxh3-64 of the raw (decompressed) bytes */
    int64_t label;        /* class index */
    int codec;            /* sl__codec_t */
    const char *name;     /* record name (source relative path), in index */
} sl__shard_entry_t;

/* ---- writer (not thread-safe; one writer per file) */
typedef struct sl__shard_writer sl__shard_writer_t;

/* Creates `path` atomically: bytes go to a temp file beside it, renamed
 * over `path` by sl__shard_writer_finish. */
int sl__shard_writer_open(const char *path, int codec, sl__shard_writer_t **out,
                          char *err, size_t errlen);
/* How a writer stores its records: the codec, its zstd level (0: the
 * default) and, for SL_CODEC_ZSTD_DICT, the dictionary (a zstd one, as
 * sl__codec_dict_train makes), which the shard then holds (format 1.1). */
typedef struct sl__shard_codec {
    int codec;
    int level;
    const void *dict;
    size_t dict_n;
} sl__shard_codec_t;
int sl__shard_writer_open_ex(const char *path, const sl__shard_codec_t *c,
                             sl__shard_writer_t **out, char *err,
                             size_t errlen);
/* Appends one record (raw bytes, compressed with the writer's codec; kept
 * raw and tagged SL_CODEC_NONE when compression would not shrink it). */
int sl__shard_writer_add(sl__shard_writer_t *w, const void *raw, size_t n,
                         int64_t label, const char *name, char *err,
                         size_t errlen);
/* THE rule for what a record may be (a name of at most SL_SHARD_NAME_MAX
 * bytes without control bytes, at most 4 GiB), which writer_add applies:
 * 0, or SL_ERANGE / SL_EINVAL with a message starting with path. */
int sl__shard_record_check(const char *path, const char *name, size_t n,
                           char *err, size_t errlen);
/* Bytes written so far (records + index estimate), for --shard-size. */
uint64_t sl__shard_writer_bytes(const sl__shard_writer_t *w);
uint64_t sl__shard_writer_count(const sl__shard_writer_t *w);
/* Upper bound on what adding a record of raw_n bytes named `name` with
 * `codec` adds to sl__shard_writer_bytes (worst-case compression), so a
 * packer can start a new shard before one would go over its size. */
uint64_t sl__shard_record_cost(int codec, size_t raw_n, const char *name);
/* Writes the index and header, fsyncs, renames. Frees w in every case. */
int sl__shard_writer_finish(sl__shard_writer_t *w, char *err, size_t errlen);
/* Removes the temp file and frees w (on failure paths). NULL ok. */
void sl__shard_writer_abort(sl__shard_writer_t *w);

/* ---- reader (thread-safe after open) */
typedef struct sl__shard sl__shard_t;

/* Opens and validates header and index (not the records). */
int sl__shard_open(const char *path, sl__shard_t **out, char *err,
                   size_t errlen);
/* Same, over bytes in memory (the fuzz target uses this). The memory must
 * outlive the shard. */
int sl__shard_open_mem(const void *p, size_t n, sl__shard_t **out, char *err,
                       size_t errlen);
void sl__shard_close(sl__shard_t *s);
uint64_t sl__shard_count(const sl__shard_t *s);
const char *sl__shard_path(const sl__shard_t *s);
/* 1 when the shard is at a URL: its records are ranged requests. */
int sl__shard_is_remote(const sl__shard_t *s);
/* The object a remote shard's records are read from (NULL: not remote). */
struct sl__remote *sl__shard_remote(const sl__shard_t *s);
/* Bytes of the shard file (or memory) as opened. */
uint64_t sl__shard_size(const sl__shard_t *s);
/* The header checksum (checked at open): it covers the record count and
 * the index checksum, which covers every record's offset, sizes and
 * checksum, so it names the shard's contents. A pack's manifest lists it. */
uint64_t sl__shard_digest(const sl__shard_t *s);
/* Bytes of the shard's zstd dictionary (0: none). */
size_t sl__shard_dict_size(const sl__shard_t *s);
/* zstd's ID of that dictionary (0: none). */
unsigned sl__shard_dict_id(const sl__shard_t *s);
/* Format version of the open shard. */
void sl__shard_version(const sl__shard_t *s, int *major, int *minor);
/* Entry i (i < count); pointers valid until close. */
const sl__shard_entry_t *sl__shard_entry(const sl__shard_t *s, uint64_t i);
/* Classes a source may number itself when it has no classes.txt (class c
 * named "c", for c up to the largest label): a bound, so that one label of
 * 3e9 is an error and not 3e9 class names. */
#define SL__SHARD_CLASSES_MAX (1 << 20)

/* THE label rule: a record's label is a class index, in [0, classes), or
 * with classes < 0 (no classes.txt) in [0, SL__SHARD_CLASSES_MAX).
 * @return 0, or SL_ECORRUPT with a message naming the shard, record i and
 * the label. */
int sl__shard_label_check(const sl__shard_t *s, uint64_t i, int64_t classes,
                          char *err, size_t errlen);
/* Reads record i into out (raw, decompressed, checksum verified; out->n set).
 * *stored_bytes (may be NULL) gets the bytes read from storage. Errors name
 * the shard, record index and name, and cause. Thread-safe: each thread
 * passes its own `out` and `scratch`. */
int sl__shard_read(const sl__shard_t *s, uint64_t i, sl__bytes_t *out,
                   sl__bytes_t *scratch, uint64_t *stored_bytes, char *err,
                   size_t errlen);
/* The same, first asking `admit` (may be NULL) for the bytes the record's
 * buffers need (raw + 1, plus stored + 1 when compressed), before any is
 * allocated: a record that declares gigabytes is refused unread. */
int sl__shard_read_admit(const sl__shard_t *s, uint64_t i, sl__bytes_t *out,
                         sl__bytes_t *scratch, const sl__admit_t *admit,
                         uint64_t *stored_bytes, char *err, size_t errlen);

/* The same read in two halves, for a caller that does the I/O itself
 * (several reads in flight: exec/aread). begin checks, asks admit, makes
 * the buffers and fills *io: io->len bytes at io->off of io->fd into
 * io->dst (io->done: nothing to read, a shard in memory; a shard at a URL
 * has io->remote instead of fd: a ranged read of that object). end takes
 * the result of that read (bytes read, or -errno; remote: len, or the
 * SL_E* code with the message in why), reads synchronously what a short
 * read of a file left, then decompresses and checks as
 * sl__shard_read_admit. sl__shard_read_admit is begin, the read, end. */
struct sl__remote;
typedef struct sl__shard_io {
    int fd;
    struct sl__remote *remote;
    uint8_t *dst;
    size_t len;
    uint64_t off;
    int done;
} sl__shard_io_t;
int sl__shard_read_begin(const sl__shard_t *s, uint64_t i, sl__bytes_t *out,
                         sl__bytes_t *scratch, const sl__admit_t *admit,
                         sl__shard_io_t *io, char *err, size_t errlen);
int sl__shard_read_end(const sl__shard_t *s, uint64_t i, sl__bytes_t *out,
                       sl__bytes_t *scratch, int64_t res, const char *why,
                       uint64_t *stored_bytes, char *err, size_t errlen);

/* ---- a record read in order, a piece at a time (data/shard_stream.c)
 *
 * For a record too large to hold twice (a pack's volume case): its stored
 * bytes are fetched SL__SHARD_STREAM_PIECE at a time and, when it is zstd,
 * decompressed as they come (codec's stream), the xxh3-64 updated over
 * each raw byte given, so a stream holds a piece and zstd's window
 * instead of the stored and raw record. At the record's last byte the
 * frame's end and the checksum are checked: a caller uses the bytes as
 * they come, and learns that they were the record's at the end, with the
 * same error sl__shard_read gives (naming the shard, the record and the
 * cause). An LZ4 record, or a zstd frame whose window is larger than the
 * stream allows, is read whole instead (sl__shard_read_admit) and handed
 * out from memory. One thread at a time per stream; any number of
 * streams over one shard. */
#define SL__SHARD_STREAM_PIECE ((size_t)1 << 20)
/* The most a streamed record holds: its pieces (stored, and passed over)
 * and zstd's. sl__shard_stream_open asks admit for that, or less for a
 * record smaller than a piece or a window. */
#define SL__SHARD_STREAM_BYTES                                                 \
    (2 * (int64_t)SL__SHARD_STREAM_PIECE + SL__CODEC_STREAM_BYTES)
typedef struct sl__shard_stream sl__shard_stream_t;
/* Opens record i; admit (may be NULL) is asked for what the stream holds
 * (at most SL__SHARD_STREAM_BYTES; a record read whole: its
 * sl__shard_read_admit bytes) before anything is allocated. */
int sl__shard_stream_open(const sl__shard_t *s, uint64_t i,
                          const sl__admit_t *admit, sl__shard_stream_t **out,
                          char *err, size_t errlen);
/* The next n raw bytes into dst (NULL: passed over, still checked);
 * asking more than are left is SL_ECORRUPT. The read that reaches the
 * record's end checks it. @return 0, or SL_E* naming shard and record. */
int sl__shard_stream_read(sl__shard_stream_t *st, void *dst, size_t n,
                          char *err, size_t errlen);
/* Raw bytes not yet read. */
uint64_t sl__shard_stream_left(const sl__shard_stream_t *st);
/* 1 when the record streams (0: it was read whole). */
int sl__shard_stream_streaming(const sl__shard_stream_t *st);
void sl__shard_stream_close(sl__shard_stream_t *st);

/* For data/shard_stream: n bytes at off of s's storage (file, memory or
 * URL); `what` names them in the message. */
int sl__shard_fetch(const sl__shard_t *s, void *buf, size_t n, uint64_t off,
                    const char *what, char *err, size_t errlen);
/* s's zstd dictionary (NULL: none). */
const struct sl__codec_dict *sl__shard_dict(const sl__shard_t *s);

#endif
