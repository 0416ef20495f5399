/* data/shard_walk: what the tools that go over whole shards share (sluice
 * inspect, sluice verify): the *.sls files of a folder, the number of
 * classes its classes.txt names, a shard's summary from its index, and a
 * checked read of every record. Depends on base, codec and data/shard. */
#ifndef SL_SHARD_WALK_H
#define SL_SHARD_WALK_H

#include <stdint.h>

#include "data/shard.h"

#define SL__SHARD_CODECS 256 /* codec ids a summary counts (0..255) */

/* Sorted paths "DIR/NAME" of the *.sls files in dir; dot files (a writer's
 * temp files) are left out. Free with sl__shard_list_free. @return 0,
 * SL_EIO (cannot open dir; errno set) or SL_ENOMEM. */
int sl__shard_list(const char *dir, char ***paths, int *n);
void sl__shard_list_free(char **paths, int n);

/* Class names in DIR/classes.txt (sl__classes_read); -1 when there is no
 * such file or it cannot be read. */
long sl__classes_count(const char *dir);

/* A shard's contents, from its index alone. */
typedef struct sl__shard_summary {
    uint64_t records, raw_bytes, stored_bytes;
    uint64_t per_codec[SL__SHARD_CODECS]; /* records by codec id */
    int64_t label_min, label_max;         /* 0 when no records */
    uint64_t labels_distinct;
} sl__shard_summary_t;

/* @return 0, or SL_ENOMEM. */
int sl__shard_summarize(const sl__shard_t *s, sl__shard_summary_t *out);

/* Receives the message of each damaged record (or unreadable shard). */
typedef void (*sl__shard_damage_fn)(void *ctx, const char *msg);

/* Reads every record of s (decompress + checksum) and checks its label
 * (sl__shard_label_check; classes < 0: no classes.txt). Each damaged record is
 * reported to on_damage; *bytes grows by the stored bytes read.
 * @return the number of damaged records. */
uint64_t sl__shard_check(const sl__shard_t *s, long classes,
                         sl__shard_damage_fn on_damage, void *ctx,
                         uint64_t *bytes);

#endif
