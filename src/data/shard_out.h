/* data/shard_out: a run of shards written into one folder, as `sluice
 * pack` (images) and `pack --text` write them: the output folder (old
 * shards refused, or replaced with force; classes.txt) and its shards
 * (shard-00000.sls, ...), each started when the next record would take the
 * one open over the size limit. */
#ifndef SL_SHARD_OUT_H
#define SL_SHARD_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "data/shard.h"

/** The shards being written into `dir`. Set the first three fields; the
 *  rest start at zero. */
typedef struct sl__pack_out {
    const char *dir;
    int codec;          /* SL_CODEC_* */
    int64_t shard_size; /* largest shard, bytes */
    int force;          /* replace shards already there */
    sl__shard_writer_t *w;
    long shards;        /* shards finished or open */
    uint64_t bytes_out; /* stored bytes of the finished shards */
} sl__pack_out_t;

#define SL__PACK_SHARD_SIZE (256LL << 20) /* default largest shard */

/** Makes o->dir (when missing) and refuses one that already holds shards
 *  (shard-NNNNN.sls) unless o->force; then they are replaced: each as its
 *  new one is finished, and sl__pack_out_tidy removes the rest.
 *  @return 0, or SL_EIO / SL_ESTATE with the message in err. */
int sl__pack_out_begin(sl__pack_out_t *o, char *err, size_t errlen);
/** After a successful sl__pack_out_finish: removes the shards an earlier,
 *  larger pack left behind (numbered >= o->shards; only with force). */
void sl__pack_out_tidy(const sl__pack_out_t *o);
/** Writes o->dir/classes.txt, line i naming class i, through a temp file
 *  and a rename. @return 0, or a negative SL_E* with the message in err. */
int sl__pack_out_classes(const sl__pack_out_t *o, char *const *names, int n,
                         char *err, size_t errlen);

/** Adds one record, starting a new shard first when the open one would go
 *  over the size limit (a record larger than the limit gets a shard
 *  alone). *fatal is set when the fault lies with the output, not with
 *  this record (a bad name or an oversized record is the record's alone).
 *  @return 0, or a negative SL_E* code with the message in err. */
int sl__pack_out_add(sl__pack_out_t *o, const void *p, size_t n, int64_t label,
                     const char *name, int *fatal, char *err, size_t errlen);
/** Finishes the open shard, if any. @return 0, or a negative SL_E*. */
int sl__pack_out_finish(sl__pack_out_t *o, char *err, size_t errlen);
/** Drops the open shard, if any (after a failure). */
void sl__pack_out_abort(sl__pack_out_t *o);

#endif
