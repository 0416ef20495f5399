/* cli/pack_out: the --codec / --shard-size / --force options both pack
 * commands take (the shards they write: data/shard_out.c). */
#include "pack_out.h"

#include <math.h>

#include "base/base.h"
#include "codec/codec.h"
#include "stopsig.h"

static const char *const codecs[] = {"none",      "lz4",  "zstd",
                                     "zstd-dict", "auto", NULL};
static const int codec_v[] = {SL_CODEC_NONE, SL_CODEC_LZ4, SL_CODEC_ZSTD,
                              SL_CODEC_ZSTD_DICT, SL__PACK_CODEC_AUTO};

#define F(f) offsetof(sl__pack_out_t, f)
const sl__opt_t sl__pack_out_opts[] = {
    {"codec", 0, SL__OPT_CHOICE, F(codec), 0, 0, NULL,
     "how records are stored; zstd-dict: zstd with a dictionary trained on "
     "each shard's records (kept in the shard); auto: per shard, measured on "
     "a 16 MiB sample of its records, the smallest of none, lz4, zstd-1/3/9, "
     "zstd-dict whose decode costs at most --auto-max-decode ns a byte (a "
     "simpler codec within 2 % of its ratio is preferred); both hold a "
     "shard's records in memory until it is full",
     NULL, codecs, codec_v},
    {"auto-max-decode", 0, SL__OPT_DOUBLE, F(auto_max_dec), 0.01, 1e6, "NS",
     "--codec auto: the decode bound, ns per raw byte", "10"},
    {"shard-size", 0, SL__OPT_SIZE, F(shard_size), 1, HUGE_VAL, "SIZE",
     "largest shard, e.g. 64M, 1G", "256M"},
    {"force", 0, SL__OPT_FLAG, F(force), 0, 0, NULL,
     "replace the pack OUT already holds (the new one is written beside it "
     "and swapped in when complete)"},
    {NULL},
};

const char *sl__pack_out_codec_name(int codec)
{
    for (int i = 0; codecs[i]; i++)
        if (codec_v[i] == codec)
            return codecs[i];
    return sl__codec_name(codec);
}

void sl__pack_catch_stop(void)
{
    sl__stop_catch("\nsluice pack: stopping: removing what was written "
                   "(again to quit at once)\n");
}

int sl__pack_stopped(char *err, size_t errlen)
{
    int sig = sl__stop_signal();
    return sig ? sl__fail(err, errlen, SL_ESTATE, "interrupted (%s)",
                          sl__stop_name(sig))
               : 0;
}

int sl__pack_fail_status(void)
{
    int sig = sl__stop_signal();
    return sig ? 128 + sig : 1;
}
