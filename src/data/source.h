/* data/source: one interface over what the loader reads from:
 *   - an ImageFolder directory (root/<class>/<image>),
 *   - a pack: a directory of shards (shard-*.sls, classes.txt, the
 *     manifest), opened and checked whole by data/pack_dir,
 *   - a single shard file, or shards by a brace pattern (local or at
 *     URLs: "shard-{00000..00009}.sls"),
 *   - WebDataset tar shards or TFRecord files: one path or a brace pattern
 *     (data/recset), recognised by a "webdataset:"/"tfrecord:" prefix, the
 *     extension or the first bytes.
 * Sample i has a label and a name for messages, and its encoded bytes are
 * read with sl__source_read, which is thread-safe. Depends on base, codec
 * (through shard) and data/{folder,shard,recset}. */
#ifndef SL_SOURCE_H
#define SL_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/membudget.h"

typedef struct sl__source sl__source_t;

/* Opens path. With skip_bad, shards whose header or index cannot be read,
 * and ImageFolder entries that are not regular files, are left out and
 * described in sl__source_note (their records are unknown), and records
 * whose label is not a class index (the label rule: sl__shard_label_check)
 * fail when read; otherwise the first such shard, entry or record fails the
 * open. A pack that is unfinished or mixed (data/pack_dir) fails the open
 * either way. */
int sl__source_open(const char *path, int skip_bad, sl__source_t **out,
                    char *err, size_t errlen);
void sl__source_close(sl__source_t *s);

int64_t sl__source_count(const sl__source_t *s);
int sl__source_num_classes(const sl__source_t *s);
const char *sl__source_class_name(const sl__source_t *s, int c);
int64_t sl__source_label(const sl__source_t *s, int64_t i);
/* "ROOT/class/file.jpg" or "SHARD: record K (name)", into buf. */
const char *sl__source_describe(const sl__source_t *s, int64_t i, char *buf,
                                size_t len);
/* The files holding the samples: each image of an ImageFolder, each shard
 * of a packed source (shards left out under skip_bad are not counted). */
int64_t sl__source_file_count(const sl__source_t *s);
/* The path of file k (0 <= k < file_count) into buf; NULL when k is out of
 * range or the path does not fit in len bytes. */
const char *sl__source_file_path(const sl__source_t *s, int64_t k, char *buf,
                                 size_t len);
/* Reads sample i's encoded bytes into out (out->n set). *stored gets bytes
 * read from storage. Errors name the file/record and the cause. */
int sl__source_read(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                    sl__bytes_t *scratch, uint64_t *stored, char *err,
                    size_t errlen);
/* The same, first asking `admit` (may be NULL) for the bytes the sample's
 * buffers need, once its size is known and before any is allocated. */
int sl__source_read_admit(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                          sl__bytes_t *scratch, const sl__admit_t *admit,
                          uint64_t *stored, char *err, size_t errlen);

/* The same read in two halves, for a caller that keeps several reads in
 * flight and does the I/O itself (exec/aread): begin opens or locates
 * sample i, asks admit, makes the buffers and fills *rd: read rd->len
 * bytes at rd->off of rd->fd into rd->dst (len 0: nothing to read), or,
 * with rd->remote set (a shard at a URL), of that object (fd -1). end
 * takes that read's result (bytes read, or -errno; remote: len, or the
 * SL_E* code with its message in rd->why, which the caller sets), reads
 * synchronously what a short read left, finishes as sl__source_read does
 * (decompress,
 * checksum, out->n, *stored) and closes what begin opened; every begin
 * that returned 0 must be ended. sl__source_read_admit is begin, one
 * pread, end. */
typedef struct sl__source_rd {
    int64_t i;
    int fd, own_fd;
    struct sl__remote *remote;
    const char *why; /* remote: the failed read's message */
    uint8_t *dst;
    size_t len;
    uint64_t off;
} sl__source_rd_t;
int sl__source_read_begin(const sl__source_t *s, int64_t i, sl__bytes_t *out,
                          sl__bytes_t *scratch, const sl__admit_t *admit,
                          sl__source_rd_t *rd, char *err, size_t errlen);
int sl__source_read_end(const sl__source_t *s, sl__source_rd_t *rd, int64_t res,
                        sl__bytes_t *out, sl__bytes_t *scratch,
                        uint64_t *stored, char *err, size_t errlen);

/* What the open left out or warns about, in order: note i's message
 * ("PATH: cause"), and *lost = 1 when samples were left out (a shard, a
 * bad ImageFolder entry), 0 for a warning (a folder reached twice through
 * a link, not followed; a remote file's sidecar index not used). NULL when i is
 * out of range. */
int sl__source_note_count(const sl__source_t *s);
const char *sl__source_note(const sl__source_t *s, int i, int *lost);

/* The files' sample ranges for a streaming order (data/sampler): file k
 * holds [first[k], first[k+1]), *n files; NULL for an ImageFolder (one
 * group). Valid until the source is closed. */
const int64_t *sl__source_groups(const sl__source_t *s, int *n);

/* 1 when sl__source_read_begin hands out remote reads (sluice shards at
 * URLs): a caller with a multi engine (exec/aread) can keep many in
 * flight from one thread. */
int sl__source_reads_remote(const sl__source_t *s);
/* 1 when each read in flight holds a descriptor of its own: an
 * ImageFolder's file, opened for the read, or a connection for a record
 * at a URL (libcurl's, kept by the thread that read); 0 where reads go
 * through descriptors held since open (local shards, WebDataset,
 * TFRecord: counted among the files open). */
int sl__source_read_holds_fd(const sl__source_t *s);

/* Where sample i's read goes when it is one ranged request of a remote
 * object (what sl__source_read_begin would hand out in rd.remote, rd.off,
 * rd.len, without opening, charging or allocating anything): 1 with
 * *obj, *off, *len; 0 for anything else (a local file, a record in
 * memory, an empty or bad one). For a reader deciding what to fetch
 * together (exec/coalesce); any thread. */
int sl__source_where(const sl__source_t *s, int64_t i, const void **obj,
                     uint64_t *off, uint64_t *len);

/* "imagefolder", "sluice shards", "webdataset" or "tfrecord". */
const char *sl__source_format(const sl__source_t *s);

#endif
