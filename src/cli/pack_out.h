/* cli/pack_out: the options both pack commands take (--codec,
 * --shard-size, --force), filling the shard output of data/shard_out.h. */
#ifndef SL_CLI_PACK_OUT_H
#define SL_CLI_PACK_OUT_H

#include "data/shard_out.h"
#include "opts.h"

extern const sl__opt_t sl__pack_out_opts[];

/* --codec's value as the user wrote it ("auto", or the codec's name). */
const char *sl__pack_out_codec_name(int codec);

#endif
