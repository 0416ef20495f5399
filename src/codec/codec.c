/* codec: none / lz4 / zstd over whole records. Every call is independent
 * (no shared state), so any thread may call any function. */
#include "codec.h"

#include <limits.h>
#include <lz4.h>
#include <string.h>
#include <zstd.h>

/* zstd level for packing: level 3 is zstd's default, a good ratio at
 * hundreds of MB/s; records are small, so higher levels buy little. */
#define SL_ZSTD_LEVEL 3

/* The codecs' names, by id: the one table both directions read. */
static const char *const codec_names[] = {
    [SL_CODEC_NONE] = "none",
    [SL_CODEC_LZ4] = "lz4",
    [SL_CODEC_ZSTD] = "zstd",
};
#define NCODECS (int)(sizeof codec_names / sizeof *codec_names)

int sl__codec_from_name(const char *name)
{
    for (int c = 0; name && c < NCODECS; c++)
        if (!strcmp(name, codec_names[c]))
            return c;
    return -1;
}

const char *sl__codec_name(int codec)
{
    return codec >= 0 && codec < NCODECS ? codec_names[codec] : "unknown";
}

size_t sl__codec_bound(int codec, size_t n)
{
    switch (codec) {
    case SL_CODEC_NONE:
        return n;
    case SL_CODEC_LZ4:
        if (n > LZ4_MAX_INPUT_SIZE)
            return 0;
        return (size_t)LZ4_compressBound((int)n);
    case SL_CODEC_ZSTD: {
        size_t b = ZSTD_compressBound(n);
        return ZSTD_isError(b) ? 0 : b;
    }
    }
    return 0;
}

int sl__codec_compress(int codec, const void *src, size_t n, sl__bytes_t *out,
                       char *err, size_t errlen)
{
    return sl__codec_compress_level(codec, 0, src, n, out, err, errlen);
}

int sl__codec_compress_level(int codec, int level, const void *src, size_t n,
                             sl__bytes_t *out, char *err, size_t errlen)
{
    size_t bound = sl__codec_bound(codec, n);
    if (codec < SL_CODEC_NONE || codec > SL_CODEC_ZSTD)
        return sl__fail(err, errlen, SL_EINVAL, "unknown codec %d", codec);
    if (bound == 0 && n != 0)
        return sl__fail(err, errlen, SL_ERANGE,
                        "%zu bytes is too large for codec %s", n,
                        sl__codec_name(codec));
    /* +1: never ask for a zero-byte buffer (lz4 of empty input is 1 byte). */
    if (sl__bytes_reserve(out, bound + 1))
        return sl__fail(err, errlen, SL_ENOMEM,
                        "out of memory compressing %zu bytes", n);
    switch (codec) {
    case SL_CODEC_NONE:
        if (n)
            memcpy(out->p, src, n);
        out->n = n;
        return 0;
    case SL_CODEC_LZ4: {
        int r = LZ4_compress_default(src, (char *)out->p, (int)n, (int)bound);
        if (r <= 0)
            return sl__fail(err, errlen, SL_EIO, "lz4 compression failed");
        out->n = (size_t)r;
        return 0;
    }
    case SL_CODEC_ZSTD: {
        size_t r =
            ZSTD_compress(out->p, bound, src, n, level ? level : SL_ZSTD_LEVEL);
        if (ZSTD_isError(r))
            return sl__fail(err, errlen, SL_EIO, "zstd compression failed: %s",
                            ZSTD_getErrorName(r));
        out->n = r;
        return 0;
    }
    }
    return SL_EINVAL; /* not reached */
}

int sl__codec_decompress(int codec, const void *src, size_t n, void *dst,
                         size_t raw_n, char *err, size_t errlen)
{
    /* Libraries may not be handed NULL even for empty buffers. */
    uint8_t dummy = 0;
    if (!dst)
        dst = &dummy;
    if (!src)
        src = &dummy;
    switch (codec) {
    case SL_CODEC_NONE:
        if (n != raw_n)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "stored size %zu differs from raw size %zu", n,
                            raw_n);
        if (n)
            memcpy(dst, src, n);
        return 0;
    case SL_CODEC_LZ4: {
        if (n > INT_MAX || raw_n > INT_MAX)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "lz4 block too large (%zu -> %zu bytes)", n, raw_n);
        /* decompress_safe never writes past raw_n: a stream that would
         * grow larger fails instead. */
        int r = LZ4_decompress_safe(src, dst, (int)n, (int)raw_n);
        if (r < 0)
            return sl__fail(err, errlen, SL_ECORRUPT, "malformed lz4 data");
        if ((size_t)r != raw_n)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "lz4 data gave %d bytes, expected %zu", r, raw_n);
        return 0;
    }
    case SL_CODEC_ZSTD: {
        /* A (first) frame that says it holds more than the record is
         * refused before any work; one that does not say is still
         * bounded, as ZSTD_decompress never writes past raw_n. */
        unsigned long long fcs = ZSTD_getFrameContentSize(src, n);
        if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != ZSTD_CONTENTSIZE_ERROR &&
            fcs > raw_n)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "zstd frame declares %llu bytes, more than the "
                            "record's %zu",
                            fcs, raw_n);
        size_t r = ZSTD_decompress(dst, raw_n, src, n);
        if (ZSTD_isError(r))
            return sl__fail(err, errlen, SL_ECORRUPT, "malformed zstd data: %s",
                            ZSTD_getErrorName(r));
        if (r != raw_n)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "zstd data gave %zu bytes, expected %zu", r, raw_n);
        return 0;
    }
    }
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "unknown codec tag %d",
                    codec);
}
