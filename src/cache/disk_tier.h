/* cache/disk_tier: the sample cache's second tier, a local directory on
 * fast disk with its own byte budget (issue 15 item 4; docs/DESIGN.md
 * "Sample cache"). It holds encoded samples the memory tier had no room
 * for, under the MinIO rule: an entry is admitted while it fits and never
 * evicted within the job, so from epoch 2 on a sample is read from the
 * source only when neither tier holds it.
 *
 * Storage: one file written at increasing offsets, in a fresh
 * subdirectory of the given directory (DIR/sluice-cache-XXXXXX, mkdtemp),
 * so the job's files are its own; both are removed at destroy. Entries are
 * stored as given (encoded images do not shrink through our codecs). The
 * index (key -> offset, length; 16 bytes a key, made at the first put) is
 * in memory and is not charged to the budget. An entry's bytes are
 * reserved under the lock, written outside it and published when the
 * write completed, so a find never sees a half-written entry; an entry is
 * never moved or freed, so a read needs no pin.
 *
 * Failures never lose a sample: what the tier does not give, the source
 * does. A write that fails (ENOSPC, EFBIG, EIO, a short write) stops the
 * tier admitting for the rest of the job (what it holds stays in use), is
 * counted in errors, and its message is kept (sl__dtier_error); writes
 * that were already under way then (other threads', into the same full
 * disk) and fail too are the same event: they count in late_write_errors,
 * not errors, so a job's errors hold at most one write failure however
 * many threads wrote at that moment. A read that fails or comes short is
 * counted in errors too, the entry dropped, and the caller reads the
 * source instead.
 *
 * Thread safety: any function but create / destroy from any thread; one
 * mutex guards the index and the counters, the file I/O runs outside it.
 * Depends on base. */
#ifndef SL_CACHE_DISK_TIER_H
#define SL_CACHE_DISK_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct sl__dtier sl__dtier_t;

typedef struct sl__dtier_stats {
    int64_t hits, misses;   /* finds since create */
    int64_t entries, bytes; /* held now; bytes: of the file reserved so
                               far (a failed write's included) */
    int64_t limit;
    int64_t inserts, rejects;  /* puts kept / not kept (no room, held
                                  already, not admitting) */
    int64_t errors;            /* reads that failed, plus the one write failure
                                  that stopped admitting (0 or 1 of them) */
    int64_t late_write_errors; /* writes under way when admitting stopped
                                  that failed too (not in errors) */
    int admitting;             /* 0 once a write failed */
} sl__dtier_stats_t;

/* A tier for keys 0..nkeys-1 of at most `limit` bytes (> 0) in a new
 * subdirectory of dir. Returns 0 and *out, or SL_EIO / SL_EINVAL /
 * SL_ENOMEM with a message naming dir and the cause (it does not exist,
 * is not a directory, cannot be written). */
int sl__dtier_create(const char *dir, int64_t nkeys, int64_t limit,
                     sl__dtier_t **out, char *err, size_t errlen);
/* Closes and removes the file and the subdirectory. NULL ok. */
void sl__dtier_destroy(sl__dtier_t *d);
/* The subdirectory it made; valid until destroy. */
const char *sl__dtier_path(const sl__dtier_t *d);

/* Looks key up: 1 and *n (its bytes) when held; 0 when not, counted as a
 * miss. A find that says 1 is followed by sl__dtier_read (which counts
 * the hit) or by sl__dtier_count_miss (the caller reads the source after
 * all), or by nothing when the caller will look again later. */
int sl__dtier_find(sl__dtier_t *d, int64_t key, size_t *n);
/* Reads the n bytes of key (found held) into dst: 0, counted as a hit; or
 * SL_EIO with the cause in err: the read failed or came short, counted as
 * an error and a miss, and the entry dropped. */
int sl__dtier_read(sl__dtier_t *d, int64_t key, void *dst, size_t n, char *err,
                   size_t errlen);
void sl__dtier_count_miss(sl__dtier_t *d);
/* Would n bytes be admitted now? (A hint: a put may still refuse.) */
int sl__dtier_wants(sl__dtier_t *d, size_t n);
/* Offers n bytes for key. Returns 1 when kept, 0 when not (no room, held
 * already, not admitting, out of memory), -1 when the write failed now:
 * the tier stopped admitting (the caller may say so once: the message is
 * sl__dtier_error's). */
int sl__dtier_put(sl__dtier_t *d, int64_t key, const void *p, size_t n);
void sl__dtier_get_stats(sl__dtier_t *d, sl__dtier_stats_t *s);
/* The first failed write's message into buf ("" while none). */
void sl__dtier_error(sl__dtier_t *d, char *buf, size_t len);

#endif
