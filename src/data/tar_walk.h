/* data/tar_walk: the members of a tar file, from their headers alone, over
 * a byte-range source (data/bytesrc): each regular file's full name, data
 * offset and size, so that a reader can index a shard once and later read
 * any member with one ranged read.
 *
 * Why not libarchive: it is a streaming decoder (read header, read or skip
 * data); it does not report where a member's data starts in the file, and
 * that offset is the whole point of the index (random access, and ranged
 * reads for remote shards later). A tar header is a 512-byte block with a
 * few fields to check, so this reader is small and fuzzed instead.
 *
 * Formats: v7, POSIX ustar (prefix + name), GNU (long names 'L', long links
 * 'K', base-256 sizes), pax ('x' records "path" and "size" apply to the next
 * member; 'g' global headers are skipped). Only regular files ('0', NUL,
 * '7') are reported; directories, links, devices and the rest are skipped.
 * The archive ends at the first all-zero block or at the end of the file
 * on a block boundary. Every header's checksum is checked; sizes are
 * checked against the file, and long names and pax headers are bounded
 * before anything is allocated. Depends on base and data/bytesrc. */
#ifndef SL_TAR_WALK_H
#define SL_TAR_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "data/bytesrc.h"

#define SL__TAR_NAME_MAX 4096     /* longest member name accepted */
#define SL__TAR_PAX_MAX (1 << 20) /* largest pax extended header */

typedef struct sl__tar_member {
    const char *name; /* full name; valid during the callback only */
    uint64_t header;  /* offset of its first header block (pax, 'L' ones) */
    uint64_t data;    /* offset of its data */
    uint64_t size;    /* its data's bytes, all inside the file */
} sl__tar_member_t;

/* Called for each regular member in file order. Nonzero stops the walk,
 * which returns it; 1 is a clean stop. */
typedef int (*sl__tar_fn)(void *ctx, const sl__tar_member_t *m, char *err,
                          size_t errlen);

/* Where a walk met damage. */
typedef struct sl__tar_stop {
    uint64_t at; /* offset of the bad header */
    /* The damaged member's full name where it is known: a regular member
     * whose header is whole and sound but whose data runs past the end of
     * the file, or one whose GNU long name or pax path was read before the
     * damage. "" where it is not (a header cut short or with a bad
     * checksum: its bytes cannot be trusted): a reader grouping members by
     * name (data/wds) then cannot tell whose member was lost. */
    char name[SL__TAR_NAME_MAX + 1];
} sl__tar_stop_t;

/* Walks the archive from offset `from` (0, or a member's `header`).
 * @return 0 at the archive's end; the callback's nonzero; SL_ECORRUPT for
 *         damage ("NAME: tar header at offset X: cause"; a member running
 *         past the end is "truncated"), with *stop (may be NULL) saying
 *         where; SL_EIO / SL_ESYSTEM / SL_ENOMEM. */
int sl__tar_walk(const sl__bytesrc_t *src, uint64_t from, sl__tar_fn fn,
                 void *ctx, sl__tar_stop_t *stop, char *err, size_t errlen);

/* 1 when h (512 bytes) is a regular member's header — its checksum right —
 * whose data is `size` bytes: what lies just before a member's data as an
 * index recorded it, so a reader can tell the file changed since (a
 * sidecar made for another file of the same size). */
int sl__tar_member_at(const uint8_t *h, uint64_t size);

#endif
