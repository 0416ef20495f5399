/* data/manifest: the files of a pack folder besides its shards (docs/
 * FORMAT.md, "A packed dataset"): sluice-manifest.txt, which says what a
 * complete pack holds (its shards by name, each one's size, record count
 * and header checksum; the record total; classes.txt's line count and
 * checksum), and classes.txt. The parsers take text, so the fuzz target
 * (fuzz/fuzz_manifest.c) reaches them. Depends on base. */
#ifndef SL_MANIFEST_H
#define SL_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#define SL__MANIFEST_NAME "sluice-manifest.txt"
#define SL__MANIFEST_MAGIC "sluice-pack 1"
#define SL__MANIFEST_MAX_BYTES (64 << 20) /* a larger one is refused */
#define SL__MANIFEST_MAX_SHARDS (1 << 20)
#define SL__CLASSES_MAX_BYTES (256 << 20) /* classes.txt */
#define SL__CLASS_NAME_MAX 65535          /* bytes of one class name */

typedef struct sl__manifest_shard {
    char *name; /* file name in the pack folder: [A-Za-z0-9._-]+.sls */
    uint64_t bytes, records;
    uint64_t digest; /* the shard's header checksum (sl__shard_digest) */
} sl__manifest_shard_t;

typedef struct sl__manifest {
    uint64_t records;     /* the sum over the shards */
    int64_t classes;      /* lines of classes.txt; -1: the pack has none */
    uint64_t classes_sum; /* XXH3-64 of classes.txt's bytes */
    int nshards;
    sl__manifest_shard_t *shards; /* in pack order */
} sl__manifest_t;

/** Parses a manifest's text (n bytes, no NUL needed). `what` (its path)
 *  starts every message. @return 0, SL_ECORRUPT naming the line and the
 *  fault, or SL_ENOMEM. */
int sl__manifest_parse(const char *text, size_t n, const char *what,
                       sl__manifest_t *m, char *err, size_t errlen);
/** The text of m (malloc'd, *n bytes). @return 0 or SL_ENOMEM. */
int sl__manifest_format(const sl__manifest_t *m, char **text, size_t *n);
/** Reads and parses DIR/sluice-manifest.txt. @return 0, SL_ENOTFOUND when
 *  there is none (nothing in err), or an error with its message. */
int sl__manifest_read(const char *dir, sl__manifest_t *m, char *err,
                      size_t errlen);
/** Writes DIR/sluice-manifest.txt through a temp file, fsync and rename.
 *  @return 0 or an SL_E* with the message in err. */
int sl__manifest_write(const char *dir, const sl__manifest_t *m, char *err,
                       size_t errlen);
void sl__manifest_free(sl__manifest_t *m);

/** Class names from the text of a classes.txt: one per line, "\n" or
 *  "\r\n" ended, a last line without newline counted, lines of any length
 *  up to SL__CLASS_NAME_MAX bytes (longer: SL_ECORRUPT naming the line).
 *  Free with sl__strv_free(*names, *n). */
int sl__classes_parse(const char *text, size_t len, const char *what,
                      char ***names, int *n, char *err, size_t errlen);
/** Reads DIR/classes.txt: its names and *sum, the XXH3-64 of its bytes
 *  (sum may be NULL). @return 0, SL_ENOTFOUND when there is none (nothing
 *  in err), or an error with its message. */
int sl__classes_read(const char *dir, char ***names, int *n, uint64_t *sum,
                     char *err, size_t errlen);

#endif
