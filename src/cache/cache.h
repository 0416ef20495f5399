/* cache: samples kept in memory across epochs, keyed by sample index (so
 * an entry serves every epoch, whatever the order), within a byte limit
 * (issue 15 item 4; docs/DESIGN.md, "Sample cache").
 *
 * Policies:
 *   MinIO (CoorDL, Mohan et al., VLDB 2021): an entry is admitted while it
 *       fits and is never evicted within the job. Under a fresh random
 *       order each epoch every sample is equally likely to be cached, so
 *       the hit rate from the second epoch on is the cached fraction.
 *   LRU: every entry is admitted, the least recently used ones evicted to
 *       make room (what the page cache does). Under a fresh permutation
 *       each epoch, what it holds when a sample comes round again is what
 *       was read most recently, not what is asked next: it does worse.
 * An entry holds bytes as given (an encoded sample, or decoded pixels with
 * `aux` describing them), stored through a codec (codec/: none, lz4,
 * zstd at a level) chosen per put. Entries are immutable once in; a hit is
 * pinned until unpinned, so eviction never frees bytes a reader is using
 * (an evicted pinned entry is freed at its last unpin; its bytes count
 * until then).
 *
 * Thread safety: any thread may call any function; one mutex guards the
 * index, the lists and the counters; copying / decompressing a hit and
 * compressing a put run outside it. Depends on base, codec. */
#ifndef SL_CACHE_H
#define SL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum sl__cache_policy {
    SL__CACHE_MINIO = 0,
    SL__CACHE_LRU = 1,
} sl__cache_policy_t;

/* Bytes an entry costs beyond what it stores (its header). */
#define SL__CACHE_ENTRY_OVERHEAD 64

typedef struct sl__cache sl__cache_t;

typedef struct sl__cache_stats {
    int64_t hits, misses;   /* finds since create */
    int64_t entries, bytes; /* held now: entries, bytes charged (stored
                               bytes + overhead + the index) */
    int64_t raw_bytes;      /* held now: the entries' bytes before the codec */
    int64_t inserts, evictions, rejects; /* rejects: puts that did not fit
                                            (MinIO full) or came twice */
    int64_t limit;
    int64_t by_codec[3]; /* entries held now per codec (sl__codec_t) */
    int64_t lent_hits;   /* finds served by a lent entry */
    int64_t lent_entries, lent_bytes; /* lent, not yet found, held now */
} sl__cache_stats_t;

/* A cache for keys 0..nkeys-1 holding at most `limit` bytes (0: holds
 * nothing, counts misses). The index (8 bytes a key) is made at the first
 * put and counts against the limit. NULL when out of memory. */
sl__cache_t *sl__cache_create(int64_t nkeys, int64_t limit, int policy);
void sl__cache_destroy(sl__cache_t *c);

/* A pinned hit: valid until sl__cache_unpin. */
typedef struct sl__cache_ref {
    void *e;
    size_t raw_n; /* bytes sl__cache_copy writes */
    int64_t aux;  /* what the put gave */
    int codec;
} sl__cache_ref_t;

/* Looks key up: 1 and *ref pinned on a hit (LRU: it becomes the most
 * recent), 0 on a miss; counts either. */
int sl__cache_find(sl__cache_t *c, int64_t key, sl__cache_ref_t *ref);
/* A pinned entry's bytes without a copy, when stored without a codec;
 * NULL otherwise (then sl__cache_copy). */
const void *sl__cache_view(const sl__cache_ref_t *ref);
/* Writes the entry's raw_n bytes into dst (decompressing). 0 or SL_E*. */
int sl__cache_copy(const sl__cache_ref_t *ref, void *dst, char *err,
                   size_t errlen);
void sl__cache_unpin(sl__cache_t *c, sl__cache_ref_t *ref);

/* 1 when key is held now (not counted as a find, nothing pinned). */
int sl__cache_holds(sl__cache_t *c, int64_t key);
/* Would an entry of about n raw bytes be admitted now? (MinIO: it fits;
 * LRU: always, within the limit.) A hint: a put may still refuse. */
int sl__cache_wants(sl__cache_t *c, size_t n);
/* Offers n bytes for key, stored through codec (sl__codec_t; level: zstd's,
 * 0 its default). Returns 1 when kept, 0 when not (no room under MinIO,
 * larger than the limit, key already held, limit 0, out of memory). */
int sl__cache_put(sl__cache_t *c, int64_t key, const void *p, size_t n,
                  int64_t aux, int codec, int level);

/* Lent entries (a partitioned cache: sluice.ray partition=, docs/DESIGN.md
 * "Partitioned cache"): bytes of a sample another process's cache holds,
 * handed in for the batches about to be prepared. Kept apart from the
 * cached entries: not charged against the limit, never evicted, and
 * one-shot: the first find of the key takes it (a hit counted as
 * lent_hits, not hits), it is freed at that find's unpin. Bounded by the
 * caller, who clears what was not taken. sl__cache_lend copies n bytes
 * (stored without a codec); 1 when lent, 0 when the key is cached or
 * lent already, or out of range, or out of memory. */
int sl__cache_lend(sl__cache_t *c, int64_t key, const void *p, size_t n);
/* Frees the lent entries not taken; returns how many there were. */
int64_t sl__cache_lend_clear(sl__cache_t *c);

/* A new limit (a knob): lowering it evicts, under either policy (MinIO:
 * the newest entries first, so the set it keeps stays fixed). */
void sl__cache_set_limit(sl__cache_t *c, int64_t limit);
int64_t sl__cache_limit(sl__cache_t *c);
void sl__cache_get_stats(sl__cache_t *c, sl__cache_stats_t *s);

/* "minio" | "lru" -> policy; -1 if unknown. And back ("unknown"). */
int sl__cache_policy_from_name(const char *name);
const char *sl__cache_policy_name(int policy);

#endif
