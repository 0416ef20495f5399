/* text/textsrc: the documents of a text corpus (docs/TEXT.md).
 *   - plain text files: one document per line (default) or per file;
 *   - JSON Lines (*.jsonl, *.json): one object per line, its "text" string;
 *   - native shards (*.sls, or a directory of them): one record per
 *     document, as `sluice pack --text` writes them (zstd by default).
 * A directory is a pack of shards (checked whole by data/pack_dir: an
 * unfinished or mixed pack is refused), or else text/JSON Lines files
 * (sorted by name).
 * Opening indexes the documents (line offsets, in one streaming pass;
 * shard indexes) without parsing them or keeping their bytes: 16 bytes a
 * document. sl__textsrc_get reads one document (pread, through a bounded
 * set of open files: base/fdcache) and parses and validates it (JSON,
 * "text" field, UTF-8), so bad documents are found where they are read and
 * named by FILE:LINE (or shard record), a file truncated or rewritten
 * since open among them. Not mmap: mapped pages of the page cache count
 * in the process's RSS while mapped (a shuffled pass over a mapped corpus
 * grows RSS toward its size), and a mapping of a file truncated since
 * raises SIGBUS where a read returns short. Depends on base, data/shard,
 * data/pack_dir and jansson. Thread-safe after open. */
#ifndef SL_TEXTSRC_H
#define SL_TEXTSRC_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct sl__textsrc sl__textsrc_t;

/* Opens the paths (files or directories) in order. doc_per_file: a plain
 * text file is one document instead of one per line. Fails on a missing
 * or unreadable path, a shard whose header or index is damaged, or an
 * unfinished or mixed pack. skip_bad (SL_ON_ERROR_SKIP): a pack's shard
 * whose header or index cannot be read is left out instead and noted
 * (sl__textsrc_left_out), as an image pack's is (data/pack_dir
 * SL__PACK_SKIP_DAMAGED); the open fails only when nothing is left. */
int sl__textsrc_open(const char *const *paths, int npaths, int doc_per_file,
                     int skip_bad, sl__textsrc_t **out, char *err,
                     size_t errlen);
void sl__textsrc_close(sl__textsrc_t *s);

/* The shards the open left out: message i ("SHARD: cause (whole shard left
 * out)", control bytes escaped), NULL when i is out of range. */
int sl__textsrc_left_out_count(const sl__textsrc_t *s);
const char *sl__textsrc_left_out(const sl__textsrc_t *s, int i);

/* Documents (bad ones included: they are found by sl__textsrc_get). */
int64_t sl__textsrc_count(const sl__textsrc_t *s);
/* Stored bytes of document i (the raw line, file or record), >= 1: the
 * measure that cuts an epoch into chunks. */
uint64_t sl__textsrc_size(const sl__textsrc_t *s, int64_t i);

/* The UTF-8 text of document i: *p and *n point into buf (valid until the
 * next call with buf; scratch holds a JSON line or a compressed record).
 * Errors (SL_ECORRUPT, SL_EIO; SL_ESYSTEM for EMFILE, EIO...) name the
 * document ("FILE:LINE: cause", "SHARD: record K (NAME): cause"); a text
 * file shorter than when indexed, or whose line no longer ends where it
 * did, is SL_ECORRUPT "FILE:LINE: the file was truncated / changed after
 * the loader opened it: ...". Each thread passes its own buf and
 * scratch. */
int sl__textsrc_get(const sl__textsrc_t *s, int64_t i, sl__bytes_t *buf,
                    sl__bytes_t *scratch, const char **p, size_t *n, char *err,
                    size_t errlen);

/* "FILE:LINE", "FILE" or "SHARD: record K" for document i, into buf. */
const char *sl__textsrc_describe(const sl__textsrc_t *s, int64_t i, char *buf,
                                 size_t len);

/* Parses one JSON Lines record (no newline): the "text" string of an
 * object, into buf. `where` prefixes messages ("FILE:LINE"). */
int sl__textsrc_parse_jsonl(const char *line, size_t n, const char *where,
                            sl__bytes_t *buf, char *err, size_t errlen);

#endif
