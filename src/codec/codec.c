/* codec: none / lz4 / zstd / zstd-dict over whole records. Every call is
 * independent (no shared state; a dictionary is read-only once loaded),
 * so any thread may call any function. */
#include "codec.h"

#include <inttypes.h>
#include <limits.h>
#include <lz4.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>
#include <zstd.h>
#include <zstd_errors.h>

/* zstd level for packing: level 3 is zstd's default, a good ratio at
 * hundreds of MB/s; records are small, so higher levels buy little. */
#define SL_ZSTD_LEVEL 3

/* The codecs' names, by id: the one table both directions read. */
static const char *const codec_names[] = {
    [SL_CODEC_NONE] = "none",
    [SL_CODEC_LZ4] = "lz4",
    [SL_CODEC_ZSTD] = "zstd",
    [SL_CODEC_ZSTD_DICT] = "zstd-dict",
};

/* Smallest dictionary capacity to train (zdict's own floor is 256). */
#define SL__DICT_MIN 1024

/* One zstd decompression context per thread, made on first use and freed
 * when the thread ends: a fresh context per record (what ZSTD_decompress
 * does) costs an allocation of ~100 KiB each time, more than decoding a
 * small record. */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static int dctx_key_ok;

static void dctx_free(void *p)
{
    ZSTD_freeDCtx(p);
}

static void dctx_init(void)
{
    dctx_key_ok = pthread_key_create(&dctx_key, dctx_free) == 0;
}

/* The calling thread's context, or NULL when out of memory. */
static ZSTD_DCtx *thread_dctx(void)
{
    pthread_once(&dctx_once, dctx_init);
    ZSTD_DCtx *dc = dctx_key_ok ? pthread_getspecific(dctx_key) : NULL;
    if (!dc && (dc = ZSTD_createDCtx()) && dctx_key_ok &&
        pthread_setspecific(dctx_key, dc)) {
        ZSTD_freeDCtx(dc);
        dc = NULL;
    }
    return dc;
}

struct sl__codec_dict {
    ZSTD_DDict *dd;
    ZSTD_CDict *cd; /* NULL unless loaded to compress */
    unsigned id;
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
    case SL_CODEC_ZSTD:
    case SL_CODEC_ZSTD_DICT: {
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
    return sl__codec_compress_dict(codec, level, NULL, src, n, out, err,
                                   errlen);
}

int sl__codec_compress_dict(int codec, int level, const sl__codec_dict_t *d,
                            const void *src, size_t n, sl__bytes_t *out,
                            char *err, size_t errlen)
{
    size_t bound = sl__codec_bound(codec, n);
    if (codec < SL_CODEC_NONE || codec > SL__CODEC_LAST)
        return sl__fail(err, errlen, SL_EINVAL, "unknown codec %d", codec);
    if (codec == SL_CODEC_ZSTD_DICT && (!d || !d->cd))
        return sl__fail(err, errlen, SL_EINVAL,
                        "zstd-dict needs a dictionary loaded to compress");
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
    case SL_CODEC_ZSTD_DICT: {
        ZSTD_CCtx *cc = ZSTD_createCCtx();
        if (!cc)
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        size_t r = ZSTD_compress_usingCDict(cc, out->p, bound, src, n, d->cd);
        ZSTD_freeCCtx(cc);
        if (ZSTD_isError(r))
            return sl__fail(err, errlen, SL_EIO,
                            "zstd-dict compression failed: %s",
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
    return sl__codec_decompress_dict(codec, NULL, src, n, dst, raw_n, err,
                                     errlen);
}

int sl__codec_check_raw(int codec, const void *src, size_t n, uint64_t raw_n,
                        char *err, size_t errlen)
{
    switch (codec) {
    case SL_CODEC_NONE:
        if (n != raw_n)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "stored size %zu differs from raw size %" PRIu64, n,
                            raw_n);
        return 0;
    case SL_CODEC_LZ4:
        if (raw_n > (uint64_t)n * SL__CODEC_LZ4_RATIO + 64)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "an lz4 block of %zu bytes cannot give %" PRIu64
                            " (%d:1 at most)",
                            n, raw_n, SL__CODEC_LZ4_RATIO);
        return 0;
    case SL_CODEC_ZSTD:
    case SL_CODEC_ZSTD_DICT: {
        unsigned long long fcs = ZSTD_getFrameContentSize(src, n);
        if (fcs == ZSTD_CONTENTSIZE_ERROR)
            return sl__fail(err, errlen, SL_ECORRUPT, "not a zstd frame");
        size_t frame = ZSTD_findFrameCompressedSize(src, n);
        if (ZSTD_isError(frame))
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "malformed zstd frame: %s",
                            ZSTD_getErrorName(frame));
        if (fcs != ZSTD_CONTENTSIZE_UNKNOWN &&
            (fcs > raw_n || (frame == n && fcs != raw_n)))
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "zstd frame declares %llu bytes, %s the "
                            "record's %" PRIu64,
                            fcs, fcs > raw_n ? "more than" : "less than",
                            raw_n);
        if (raw_n > (uint64_t)n * SL__CODEC_ZSTD_RATIO)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "zstd data of %zu bytes cannot give %" PRIu64
                            " (%d:1 at most)",
                            n, raw_n, SL__CODEC_ZSTD_RATIO);
        return 0;
    }
    }
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "unknown codec tag %d",
                    codec);
}

int sl__codec_decompress_dict(int codec, const sl__codec_dict_t *d,
                              const void *src, size_t n, void *dst,
                              size_t raw_n, char *err, size_t errlen)
{
    /* Libraries may not be handed NULL even for empty buffers. */
    uint8_t dummy = 0;
    if (!dst)
        dst = &dummy;
    if (!src)
        src = &dummy;
    int rc = sl__codec_check_raw(codec, src, n, raw_n, err, errlen);
    if (rc)
        return rc;
    switch (codec) {
    case SL_CODEC_NONE:
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
    case SL_CODEC_ZSTD:
    case SL_CODEC_ZSTD_DICT: {
        if (codec == SL_CODEC_ZSTD_DICT && !d)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "zstd-dict data but no dictionary");
        /* A frame that does not declare its size is still bounded, as
         * ZSTD_decompress never writes past raw_n. */
        ZSTD_DCtx *dc = thread_dctx();
        if (!dc)
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        /* A frame made with another dictionary fails here
         * (dictionary_wrong): its ID is checked. A plain frame gets no
         * dictionary (ZSTD_decompressDCtx drops any earlier one). */
        size_t r =
            codec == SL_CODEC_ZSTD_DICT
                ? ZSTD_decompress_usingDDict(dc, dst, raw_n, src, n, d->dd)
                : ZSTD_decompressDCtx(dc, dst, raw_n, src, n);
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

int sl__codec_dict_train(const void *samples, const size_t *sizes, unsigned n,
                         size_t capacity, sl__bytes_t *dict, char *err,
                         size_t errlen)
{
    if (capacity < SL__DICT_MIN || capacity > SL__CODEC_DICT_MAX)
        return sl__fail(err, errlen, SL_EINVAL,
                        "dictionary capacity %zu outside [%d, %zu]", capacity,
                        SL__DICT_MIN, SL__CODEC_DICT_MAX);
    if (sl__bytes_reserve(dict, capacity))
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    size_t r = ZDICT_trainFromBuffer(dict->p, capacity, samples, sizes, n);
    if (ZDICT_isError(r))
        return sl__fail(err, errlen, SL_EINVAL,
                        "cannot train a dictionary on %u record(s): %s", n,
                        ZDICT_getErrorName(r));
    dict->n = r;
    return 0;
}

int sl__codec_dict_load(const void *p, size_t n, int level,
                        sl__codec_dict_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!p || n < 8 || n > SL__CODEC_DICT_MAX)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "dictionary of %zu bytes (a zstd dictionary has 8 to "
                        "%zu)",
                        n, SL__CODEC_DICT_MAX);
    /* 0: not a zstd dictionary (no magic), which zstd would otherwise
     * take as raw content; the ID written in frames must be checkable. */
    unsigned id = ZSTD_getDictID_fromDict(p, n);
    if (id == 0)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "not a zstd dictionary (bad magic or ID 0)");
    sl__codec_dict_t *d = calloc(1, sizeof *d);
    if (!d)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    d->id = id;
    /* With the magic checked, zstd loads it as a full dictionary: the
     * entropy tables must parse, or it is refused now rather than at the
     * first record. */
    d->dd = ZSTD_createDDict(p, n);
    if (d->dd && level > 0) {
        d->cd = ZSTD_createCDict(p, n, level);
    }
    if (!d->dd || (level > 0 && !d->cd)) {
        sl__codec_dict_free(d);
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "malformed zstd dictionary (its tables do not load)");
    }
    *out = d;
    return 0;
}

void sl__codec_dict_free(sl__codec_dict_t *d)
{
    if (!d)
        return;
    ZSTD_freeDDict(d->dd);
    ZSTD_freeCDict(d->cd);
    free(d);
}

unsigned sl__codec_dict_id(const sl__codec_dict_t *d)
{
    return d ? d->id : 0;
}

/* ---- streaming decompression */

struct sl__codec_stream {
    ZSTD_DCtx *dc;
};

int sl__codec_streams(int codec)
{
    return codec == SL_CODEC_ZSTD || codec == SL_CODEC_ZSTD_DICT;
}

int sl__codec_stream_open(int codec, const sl__codec_dict_t *d,
                          sl__codec_stream_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!sl__codec_streams(codec) || (codec == SL_CODEC_ZSTD_DICT && !d))
        return sl__fail(
            err, errlen, SL_EINVAL, "%s records cannot be streamed%s",
            sl__codec_name(codec),
            codec == SL_CODEC_ZSTD_DICT ? " without a dictionary" : "");
    sl__codec_stream_t *z = calloc(1, sizeof *z);
    if (!z || !(z->dc = ZSTD_createDCtx())) {
        free(z);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    size_t r = ZSTD_DCtx_setParameter(z->dc, ZSTD_d_windowLogMax,
                                      SL__CODEC_STREAM_WINDOW_LOG);
    if (!ZSTD_isError(r) && codec == SL_CODEC_ZSTD_DICT)
        r = ZSTD_DCtx_refDDict(z->dc, d->dd);
    if (ZSTD_isError(r)) {
        sl__codec_stream_free(z);
        return sl__fail(err, errlen, SL_EIO, "zstd: %s", ZSTD_getErrorName(r));
    }
    *out = z;
    return 0;
}

int sl__codec_stream_step(sl__codec_stream_t *z, const void *in, size_t in_n,
                          size_t *in_pos, void *out, size_t out_n,
                          size_t *out_pos, int *frame_end, char *err,
                          size_t errlen)
{
    uint8_t dummy = 0;
    ZSTD_inBuffer ib = {in ? in : &dummy, in_n, *in_pos};
    ZSTD_outBuffer ob = {out ? out : &dummy, out_n, *out_pos};
    size_t r = ZSTD_decompressStream(z->dc, &ob, &ib);
    *in_pos = ib.pos;
    *out_pos = ob.pos;
    *frame_end = r == 0;
    if (!ZSTD_isError(r))
        return 0;
    if (ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "a zstd frame whose window is larger than the %d MiB "
                        "a stream allows",
                        1 << (SL__CODEC_STREAM_WINDOW_LOG - 20));
    return sl__fail(err, errlen, SL_ECORRUPT, "malformed zstd data: %s",
                    ZSTD_getErrorName(r));
}

void sl__codec_stream_free(sl__codec_stream_t *z)
{
    if (!z)
        return;
    ZSTD_freeDCtx(z->dc);
    free(z);
}
