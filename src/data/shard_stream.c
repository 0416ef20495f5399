/* data/shard_stream: a shard record read in order, a piece at a time, its
 * checksum updated as it goes and checked at its end (see shard.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "shard.h"

struct sl__shard_stream {
    const sl__shard_t *s;
    uint64_t i;
    const sl__shard_entry_t *e;
    uint64_t pos; /* raw bytes given */
    int whole;    /* read whole: `rec` holds it, checked */
    sl__bytes_t rec;
    XXH3_state_t *sum;
    sl__codec_stream_t *z; /* zstd records */
    uint8_t *in;           /* stored bytes: in[in_pos, in_n) not yet used */
    size_t in_n, in_pos;
    uint64_t fetched; /* stored bytes fetched */
    uint8_t *pass;    /* raw bytes passed over land here */
    size_t in_cap, pass_cap;
    int frame_end;     /* the last step ended a frame */
    sl__admit_t admit; /* the caller's, for a record read whole */
    int has_admit;
};

/* A piece for a record part of n bytes (at least 1). */
static size_t piece(uint64_t n)
{
    return n == 0                       ? 1
           : n < SL__SHARD_STREAM_PIECE ? (size_t)n
                                        : SL__SHARD_STREAM_PIECE;
}

/* "SHARD: record I (NAME): " + the cause. */
static int fail_at(const sl__shard_stream_t *st, int code, const char *why,
                   char *err, size_t errlen)
{
    return sl__fail(err, errlen, code, "%s: record %" PRIu64 " (%s): %s",
                    sl__shard_path(st->s), st->i, st->e->name, why);
}

int sl__shard_stream_open(const sl__shard_t *s, uint64_t i,
                          const sl__admit_t *admit, sl__shard_stream_t **out,
                          char *err, size_t errlen)
{
    *out = NULL;
    const sl__shard_entry_t *e = sl__shard_entry(s, i);
    if (!e)
        return sl__fail(err, errlen, SL_ERANGE,
                        "%s: record %" PRIu64 " out of range (%" PRIu64
                        " records)",
                        sl__shard_path(s), i, sl__shard_count(s));
    sl__shard_stream_t *st = calloc(1, sizeof *st);
    if (!st)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory",
                        sl__shard_path(s));
    st->s = s;
    st->i = i;
    st->e = e;
    if (admit) {
        st->admit = *admit;
        st->has_admit = 1;
    }
    char why[512];
    int rc = 0;
    if (e->codec == SL_CODEC_NONE || sl__codec_streams(e->codec)) {
        /* Pieces no larger than the record; zstd's window no larger
         * than its content (plus its context and a block). */
        st->in_cap = piece(e->stored_size);
        st->pass_cap = piece(e->raw_size);
        int64_t need = (int64_t)(st->in_cap + st->pass_cap);
        if (e->codec != SL_CODEC_NONE)
            need += (int64_t)e->raw_size + (512 << 10) < SL__CODEC_STREAM_BYTES
                        ? (int64_t)e->raw_size + (512 << 10)
                        : SL__CODEC_STREAM_BYTES;
        if ((rc = sl__admit(admit, need, why, sizeof why)))
            rc = fail_at(st, rc, why, err, errlen);
        else if (!(st->sum = XXH3_createState()) ||
                 XXH3_64bits_reset(st->sum) != XXH_OK ||
                 !(st->in = malloc(st->in_cap)) ||
                 !(st->pass = malloc(st->pass_cap)))
            rc = fail_at(st, SL_ENOMEM, "out of memory", err, errlen);
        else if (e->codec != SL_CODEC_NONE &&
                 (rc = sl__codec_stream_open(e->codec, sl__shard_dict(s),
                                             &st->z, why, sizeof why)))
            rc = fail_at(st, rc, why, err, errlen);
    } else { /* an LZ4 block: one unit */
        sl__bytes_t scratch = {0};
        st->whole = 1;
        rc = sl__shard_read_admit(s, i, &st->rec, &scratch, admit, NULL, err,
                                  errlen);
        sl__bytes_free(&scratch);
    }
    if (rc) {
        sl__shard_stream_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

/* A zstd frame whose window the stream cannot hold (found at its header,
 * before any byte was given): the record read whole instead. */
static int go_whole(sl__shard_stream_t *st, char *err, size_t errlen)
{
    sl__bytes_t scratch = {0};
    int rc = sl__shard_read_admit(st->s, st->i, &st->rec, &scratch,
                                  st->has_admit ? &st->admit : NULL, NULL, err,
                                  errlen);
    sl__bytes_free(&scratch);
    st->whole = 1;
    return rc;
}

/* Fills the stored piece when it is used up (0 bytes more: the stored
 * bytes are all fetched). */
static int refill(sl__shard_stream_t *st, char *err, size_t errlen)
{
    if (st->in_pos < st->in_n || st->fetched == st->e->stored_size)
        return 0;
    uint64_t left = st->e->stored_size - st->fetched;
    size_t n = left < st->in_cap ? (size_t)left : st->in_cap;
    char what[1024];
    snprintf(what, sizeof what, "record %" PRIu64 " (%s)", st->i, st->e->name);
    int rc = sl__shard_fetch(st->s, st->in, n, st->e->offset + st->fetched,
                             what, err, errlen);
    if (rc)
        return rc;
    st->fetched += n;
    st->in_n = n;
    st->in_pos = 0;
    return 0;
}

/* n raw bytes (n <= what is left) into dst, from the stored bytes. */
static int produce(sl__shard_stream_t *st, uint8_t *dst, size_t n, char *err,
                   size_t errlen)
{
    char why[256];
    size_t got = 0;
    while (got < n) {
        int rc = refill(st, err, errlen);
        if (rc)
            return rc;
        if (!st->z) { /* stored raw: straight through */
            size_t k = st->in_n - st->in_pos < n - got ? st->in_n - st->in_pos
                                                       : n - got;
            memcpy(dst + got, st->in + st->in_pos, k);
            st->in_pos += k;
            got += k;
            continue;
        }
        size_t before_in = st->in_pos, before_out = got;
        rc = sl__codec_stream_step(st->z, st->in, st->in_n, &st->in_pos, dst, n,
                                   &got, &st->frame_end, why, sizeof why);
        if (rc == SL_EUNSUPPORTED && st->pos == 0 && got == 0)
            return go_whole(st, err, errlen);
        if (rc)
            return fail_at(st, rc, why, err, errlen);
        if (st->in_pos == before_in && got == before_out &&
            st->fetched == st->e->stored_size) {
            snprintf(why, sizeof why,
                     "truncated zstd data: it ends after %" PRIu64
                     " of the %" PRIu32 " bytes its index gives",
                     st->pos + got, st->e->raw_size);
            return fail_at(st, SL_ECORRUPT, why, err, errlen);
        }
    }
    return 0;
}

/* At the record's last raw byte: nothing more in the stored bytes (a
 * frame that goes on is a record longer than its index says), then the
 * checksum. */
static int check_end(sl__shard_stream_t *st, char *err, size_t errlen)
{
    char why[256];
    while (st->z && !(st->frame_end && st->in_pos == st->in_n &&
                      st->fetched == st->e->stored_size)) {
        int rc = refill(st, err, errlen);
        if (rc)
            return rc;
        size_t before = st->in_pos, got = 0;
        uint8_t one;
        rc = sl__codec_stream_step(st->z, st->in, st->in_n, &st->in_pos, &one,
                                   1, &got, &st->frame_end, why, sizeof why);
        if (rc)
            return fail_at(st, rc, why, err, errlen);
        if (got)
            return fail_at(st, SL_ECORRUPT,
                           "zstd data holds more bytes than its index gives",
                           err, errlen);
        if (st->in_pos == before && !st->frame_end)
            return fail_at(st, SL_ECORRUPT, "truncated zstd data", err, errlen);
    }
    uint64_t sum = XXH3_64bits_digest(st->sum);
    if (sum != st->e->checksum) {
        snprintf(why, sizeof why,
                 "checksum mismatch (index %016" PRIx64 ", data %016" PRIx64
                 ")",
                 st->e->checksum, sum);
        return fail_at(st, SL_ECHECKSUM, why, err, errlen);
    }
    return 0;
}

int sl__shard_stream_read(sl__shard_stream_t *st, void *dst, size_t n,
                          char *err, size_t errlen)
{
    uint64_t left = st->e->raw_size - st->pos;
    if (n > left) {
        char why[160];
        snprintf(why, sizeof why,
                 "%zu bytes asked at byte %" PRIu64 ", the record has %" PRIu32,
                 n, st->pos, st->e->raw_size);
        return fail_at(st, SL_ECORRUPT, why, err, errlen);
    }
    uint8_t *d = dst;
    while (n) {
        if (st->whole) {
            if (d)
                memcpy(d, st->rec.p + st->pos, n);
            st->pos += n;
            return 0;
        }
        size_t k = n;
        uint8_t *to = d;
        if (!to) { /* passed over: through the pass piece */
            to = st->pass;
            k = n < st->pass_cap ? n : st->pass_cap;
        }
        int rc = produce(st, to, k, err, errlen);
        if (rc)
            return rc;
        if (st->whole) /* went whole before giving anything */
            continue;
        XXH3_64bits_update(st->sum, to, k);
        st->pos += k;
        n -= k;
        if (d)
            d += k;
        if (st->pos == st->e->raw_size && (rc = check_end(st, err, errlen)))
            return rc;
    }
    return 0;
}

uint64_t sl__shard_stream_left(const sl__shard_stream_t *st)
{
    return st->e->raw_size - st->pos;
}

int sl__shard_stream_streaming(const sl__shard_stream_t *st)
{
    return !st->whole;
}

void sl__shard_stream_close(sl__shard_stream_t *st)
{
    if (!st)
        return;
    sl__bytes_free(&st->rec);
    XXH3_freeState(st->sum);
    sl__codec_stream_free(st->z);
    free(st->in);
    free(st->pass);
    free(st);
}
