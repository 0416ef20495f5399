/* data/pack_dir: a pack folder opened for reading (the image source, the
 * text source and `sluice verify` use it): its shards in pack order, each
 * checked against the folder's manifest, and its classes.txt. THE rule for
 * what makes a pack complete lives here:
 *   - with a manifest (packs written now): the *.sls files of the
 *     folder are exactly the manifest's shards, each of its size, record
 *     count and header checksum, and classes.txt is the one it names;
 *   - without one (older packs): the shards are shard-00000.sls ...
 *     shard-(N-1).sls, no gap and no other *.sls, accepted as they are
 *     (docs/FORMAT.md says why).
 * Anything else is an unfinished or mixed pack, refused with a message
 * naming the folder and the missing, extra or foreign shard. Depends on
 * base, data/shard, data/manifest, data/shard_walk. */
#ifndef SL_PACK_DIR_H
#define SL_PACK_DIR_H

#include <stddef.h>

#include "data/shard.h"

typedef struct sl__pack_dir {
    sl__shard_t **shards; /* opened, in pack order (NULL once taken) */
    int nshards;
    char **classes; /* classes.txt, or NULL */
    int nclasses;   /* -1: no classes.txt */
    int manifest;   /* 1: checked against its manifest; 0: an older pack */
    char **bad;     /* problems let through by the mode, each a message */
    int nbad;
    int nunreadable; /* of them, shards that could not be opened */
} sl__pack_dir_t;

enum {
    SL__PACK_STRICT = 0,       /* any problem fails the open */
    SL__PACK_SKIP_DAMAGED = 1, /* a shard that cannot be opened is left out
                                  (listed in bad); the pack's shape must
                                  still be whole */
    SL__PACK_REPORT_ALL = 2,   /* every problem listed in bad, none fatal
                                  (sluice verify) */
};

/** 1 when dir holds *.sls files or a manifest (a pack, whole or not). */
int sl__pack_dir_holds(const char *dir);
/** Opens the pack in dir under mode. @return 0, or an SL_E* with the
 *  message in err (p is then empty). */
int sl__pack_dir_open(const char *dir, int mode, sl__pack_dir_t *p, char *err,
                      size_t errlen);
/** Closes the shards still held and frees everything. */
void sl__pack_dir_close(sl__pack_dir_t *p);

#endif
