/* volume/gzindex: random access into a gzip file, by zlib's zran technique
 * through zlib's public API. A reader inflates a file from its start and,
 * asked to, records access points on the way: at deflate block boundaries
 * at least `span` output bytes apart, the compressed offset (to the bit),
 * the uncompressed offset and the window (the 32 KiB of output before it,
 * which later back-references may reach). A later reader of the same file
 * given that index passes over data by restarting a raw inflate at the
 * last point at or before where it is going (inflatePrime,
 * inflateSetDictionary) instead of inflating everything before it: what
 * lets several threads inflate different parts of one .nii.gz.
 *
 * Read as gzread reads: concatenated members one after the other, bytes
 * after the last member that do not start another ignored. A member's
 * CRC-32 and length are checked when it was inflated from its start (a
 * reader that jumped into a member cannot check it; the index's own pass
 * checked every member). An index is built from the file's bytes: a
 * damaged or truncated stream fails with "NAME: cause", and an index is
 * only used for the file it was built from, unchanged (size and mtime).
 * Depends on base and zlib. */
#ifndef SL_VOLUME_GZINDEX_H
#define SL_VOLUME_GZINDEX_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/volume.h"

/* The output between access points: 4 MiB (a point costs 32 KiB, so
 * 0.8 % of the data; a reader inflates up to this much it does not keep). */
#define SL__GZ_SPAN (INT64_C(4) << 20)

typedef struct sl__gzindex sl__gzindex_t;
typedef struct sl__gzr sl__gzr_t;

/* An empty index to build, points at least span (> 0) output bytes apart.
 * @return NULL when out of memory. */
sl__gzindex_t *sl__gzindex_new(int64_t span);
/* Bytes the index holds (the windows mostly); 0 for NULL. */
int64_t sl__gzindex_bytes(const sl__gzindex_t *ix);
int sl__gzindex_points(const sl__gzindex_t *ix);
/* Whether ix (NULL: no) was built from the file at path as it is now
 * (size and mtime; a reader ignores an index that is not). */
int sl__gzindex_current(const sl__gzindex_t *ix, const char *path);
void sl__gzindex_free(sl__gzindex_t *ix);

/* A reader of the gzip file fd (fd stays the caller's; read by offset, so
 * readers may share one) at its start; `name` for messages. With `build`
 * (empty, NULL: none) it records access points into it as it inflates;
 * build is the reader's until it is closed, and then usable by readers of
 * the same file. With `use` (NULL: none) passing over data jumps by it,
 * unless the file's size or mtime differ from when use was built (then it
 * is read through). Memory: 192 KiB of buffers and zlib's state. One
 * thread at a time. @return 0 and *out, or SL_E* with "NAME: cause". */
int sl__gzr_open(int fd, const char *name, const sl__gzindex_t *use,
                 sl__gzindex_t *build, sl__gzr_t **out, char *err,
                 size_t errlen);

/* Up to n more uncompressed bytes into dst. @return the bytes (fewer than
 * n only at the end of the file's data), or -1 with *code and "NAME:
 * cause" in err (a truncated or damaged stream: SL_ECORRUPT). dst NULL
 * passes over n bytes (@return n) lazily: the next read gets there, by
 * the index where it has a point ahead, and returns 0 when the data ends
 * on the way (or fails as a read would). */
int64_t sl__gzr_read(sl__gzr_t *r, void *dst, size_t n, int *code, char *err,
                     size_t errlen);

/* Bytes the reader has inflated, kept or passed over (what its index
 * saved: tests). */
int64_t sl__gzr_inflated(const sl__gzr_t *r);

void sl__gzr_close(sl__gzr_t *r);

/* volume/reader.c: a volume reader (sl_volume_reader_open, default
 * options) of the NIfTI file at path that, when the file is gzip, reads it
 * through a gzr with `use` and `build` as above (either NULL). */
int sl__volume_reader_indexed(const char *path, const sl__gzindex_t *use,
                              sl__gzindex_t *build, sl_volume_reader_t **out,
                              char *err, size_t errlen);

#endif
