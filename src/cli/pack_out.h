/* cli/pack_out: the options both pack commands take (--codec,
 * --shard-size, --force), filling the shard output of data/shard_out.h. */
#ifndef SL_CLI_PACK_OUT_H
#define SL_CLI_PACK_OUT_H

#include "data/shard_out.h"
#include "opts.h"

extern const sl__opt_t sl__pack_out_opts[];

/* --codec's value as the user wrote it ("auto", or the codec's name). */
const char *sl__pack_out_codec_name(int codec);

/* Ctrl-C / SIGTERM / SIGHUP during a pack (stopsig.h): caught from before
 * OUT is touched; the pack calls sl__pack_stopped before each record and, once
 * a signal came, fails as on an output error, so its abort removes what it
 * wrote (the staging folder, the finished .tar / .tfrecord files and their
 * temp files) and OUT is left as it was. Killed outright (SIGKILL, or a
 * second signal) it cannot: the temp names say what is left.
 * sl__pack_stopped: 0, or SL_ESTATE with "interrupted (SIGINT)" in err.
 * sl__pack_fail_status: a failed pack's exit status, 128 + the signal
 * when one stopped it (130 / 143 / 129), else 1. */
void sl__pack_catch_stop(void);
int sl__pack_stopped(char *err, size_t errlen);
int sl__pack_fail_status(void);

#endif
