/* cli/pack_out: --codec / --shard-size arguments and the rolling shard
 * output shared by the pack commands. */
#include "pack_out.h"

#include <stdio.h>

#include "base/base.h"
#include "cli.h"
#include "codec/codec.h"

int sl__pack_codec_arg(const char *who, const char *arg, int *codec)
{
    int c = sl__codec_from_name(arg);
    if (c < 0) {
        fprintf(stderr, "%s: unknown codec '%s' (none|lz4|zstd)\n", who, arg);
        return -1;
    }
    *codec = c;
    return 0;
}

int sl__pack_size_arg(const char *who, const char *arg, long long *size)
{
    long long v = sl__parse_size(arg);
    if (v <= 0) {
        fprintf(stderr, "%s: bad --shard-size '%s'\n", who, arg);
        return -1;
    }
    *size = v;
    return 0;
}

int sl__pack_out_finish(sl__pack_out_t *o, char *err, size_t errlen)
{
    if (!o->w)
        return 0;
    o->bytes_out += sl__shard_writer_bytes(o->w);
    int rc = sl__shard_writer_finish(o->w, err, errlen);
    o->w = NULL;
    return rc;
}

void sl__pack_out_abort(sl__pack_out_t *o)
{
    if (o->w)
        sl__shard_writer_abort(o->w);
    o->w = NULL;
}

int sl__pack_out_add(sl__pack_out_t *o, const void *p, size_t n, int64_t label,
                     const char *name, int *fatal, char *err, size_t errlen)
{
    *fatal = 1;
    if (o->w && sl__shard_writer_count(o->w) > 0 &&
        sl__shard_writer_bytes(o->w) +
                sl__shard_record_cost(o->codec, n, name) >
            (uint64_t)o->shard_size) {
        int rc = sl__pack_out_finish(o, err, errlen);
        if (rc)
            return rc;
    }
    if (!o->w) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/shard-%05ld.sls", o->dir,
                     o->shards) >= (int)sizeof path)
            return sl__fail(err, errlen, SL_EINVAL, "%s: path too long",
                            o->dir);
        int rc = sl__shard_writer_open(path, o->codec, &o->w, err, errlen);
        if (rc)
            return rc;
        o->shards++;
    }
    int rc = sl__shard_writer_add(o->w, p, n, label, name, err, errlen);
    *fatal = rc != SL_EINVAL && rc != SL_ERANGE;
    return rc;
}
