/* data/shard_out: a pack written whole or not at all, as `sluice pack`
 * (images) and `pack --text` write it: shards (shard-00000.sls, ...; each
 * started when the next record would take the one open over the size
 * limit), classes.txt and the manifest (data/manifest) go into a temporary
 * folder beside the output (.NAME.tmp-PID), which is renamed into place
 * only when everything is written; an old pack there (with force) is
 * swapped out and removed. A pack that fails or is killed leaves the
 * output as it was (a killed one's temp folder is removed by the next pack
 * into the same output). */
#ifndef SL_SHARD_OUT_H
#define SL_SHARD_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "data/shard.h"

/* The codec value that asks for a choice per shard (codec/choose.h). */
#define SL__PACK_CODEC_AUTO 256

/* One finished shard's codec, as chosen (pack's output, pack-info.txt). */
typedef struct sl__pack_shard_info {
    char line[256]; /* "shard-00000.sls: zstd-dict (...)" */
} sl__pack_shard_info_t;

/* The pack's own notes, beside the manifest (written by commit). */
#define SL__PACK_INFO_NAME "pack-info.txt"

/** The pack being written to `dir`. Set the first four fields; the rest
 *  start at zero. With codec SL_CODEC_ZSTD_DICT or SL__PACK_CODEC_AUTO
 *  each shard's records are held in memory until the shard is full (at
 *  most shard_size bytes), then its codec is chosen (and its dictionary
 *  trained) on them, and the shard written. */
typedef struct sl__pack_out {
    const char *dir;
    int codec;          /* SL_CODEC_* or SL__PACK_CODEC_AUTO */
    int64_t shard_size; /* largest shard, bytes */
    int force;          /* replace a pack already there */
    sl__shard_writer_t *w;
    long shards;         /* shards finished or open */
    uint64_t bytes_out;  /* stored bytes of the finished shards */
    char *final;         /* where the pack goes: dir, or where it links */
    char *tmp;           /* the folder being written (sibling of final) */
    double auto_max_dec; /* auto's decode bound, ns/byte (0: the default) */
    const char *extra;   /* lines for pack-info.txt (lossy packing), or NULL */
    /* records held for the shard being chosen */
    sl__bytes_t pend;
    size_t *pend_n;
    int64_t *pend_label;
    char **pend_name;
    size_t npend, cap_pend;
    uint64_t pend_cost;
    sl__pack_shard_info_t *info; /* one per finished shard (auto/dict) */
    long ninfo;
} sl__pack_out_t;

#define SL__PACK_SHARD_SIZE (256LL << 20) /* default largest shard */

/** Checks o->dir: missing, empty, or holding a pack (only with o->force;
 *  a folder holding anything else is refused, as replacing it would lose
 *  those files); then makes the temporary folder.
 *  @return 0, or SL_EIO / SL_ESTATE with the message in err. */
int sl__pack_out_begin(sl__pack_out_t *o, char *err, size_t errlen);
/** Writes classes.txt, line i naming class i, into the pack.
 *  @return 0, or a negative SL_E* with the message in err. */
int sl__pack_out_classes(const sl__pack_out_t *o, char *const *names, int n,
                         char *err, size_t errlen);
/** Adds one record, starting a new shard first when the open one would go
 *  over the size limit (a record larger than the limit gets a shard
 *  alone). *fatal is set when the fault lies with the output, not with
 *  this record (a bad name or an oversized record is the record's alone).
 *  @return 0, or a negative SL_E* code with the message in err. */
int sl__pack_out_add(sl__pack_out_t *o, const void *p, size_t n, int64_t label,
                     const char *name, int *fatal, char *err, size_t errlen);
/** Finishes the open shard, writes the manifest (every shard's size,
 *  record count and header checksum; classes.txt's) and renames the pack
 *  into place, replacing an old one. On failure the temporary folder is
 *  removed and o->dir is left as it was. @return 0, or a negative SL_E*. */
int sl__pack_out_commit(sl__pack_out_t *o, char *err, size_t errlen);
/** Drops the pack being written (after a failure): the open shard and the
 *  temporary folder. o->dir is left as it was. */
void sl__pack_out_abort(sl__pack_out_t *o);
/** Frees o->info (after commit or abort). */
void sl__pack_out_free(sl__pack_out_t *o);

#endif
