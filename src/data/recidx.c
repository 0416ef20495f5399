#include "recidx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/alloc.h"
#include "data/remote.h"
#include "data/remote_parse.h"
#include "data/shard.h"
#include "data/tfrecord.h"

#define MAGIC "SLUICEIX"
#define VERSION 1
#define HEAD 48
#define REC 32

/* The message without its leading "NAME: ". */
static const char *unnamed(const sl__recfile_t *f, const char *msg)
{
    const char *name = sl__bytesrc_name(f->src);
    size_t n = strlen(name);
    if (!strncmp(msg, name, n) && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

static size_t msg_len(const char *m)
{
    size_t n = strlen(m);
    return n > SL__RECIDX_MSG_MAX ? SL__RECIDX_MSG_MAX : n;
}

int sl__recidx_encode(const sl__recfile_t *f, sl__bytes_t *out)
{
    size_t need = HEAD + (size_t)f->n * REC + 8;
    for (int64_t b = 0; b < f->nbad; b++)
        need += 12 + msg_len(unnamed(f, f->bad_msg[b]));
    const char *dmg = f->damage ? unnamed(f, f->damage) : "";
    need += msg_len(dmg);
    if (sl__bytes_reserve(out, need))
        return SL_ENOMEM;
    uint8_t *p = out->p;
    memcpy(p, MAGIC, 8);
    sl__put_u32(p + 8, VERSION);
    sl__put_u32(p + 12, (uint32_t)f->fmt);
    sl__put_u64(p + 16, sl__bytesrc_size(f->src));
    sl__put_u64(p + 24, (uint64_t)f->n);
    sl__put_u64(p + 32, (uint64_t)f->nbad);
    sl__put_u32(p + 40, (uint32_t)msg_len(dmg));
    sl__put_u32(p + 44, 0);
    p += HEAD;
    for (int64_t k = 0; k < f->n; k++, p += REC) {
        const sl__rec_t *r = &f->recs[k];
        sl__put_u64(p, r->off);
        sl__put_u64(p + 8, r->hdr);
        sl__put_u32(p + 16, r->len);
        sl__put_u32(p + 20, r->img_off);
        sl__put_u32(p + 24, r->img_len);
        sl__put_u32(p + 28, (uint32_t)r->label);
    }
    for (int64_t b = 0; b < f->nbad; b++) {
        const char *m = unnamed(f, f->bad_msg[b]);
        size_t n = msg_len(m);
        sl__put_u64(p, (uint64_t)f->bad_idx[b]);
        sl__put_u32(p + 8, (uint32_t)n);
        memcpy(p + 12, m, n);
        p += 12 + n;
    }
    memcpy(p, dmg, msg_len(dmg));
    p += msg_len(dmg);
    sl__put_u64(p, XXH3_64bits(out->p, (size_t)(p - out->p)));
    out->n = need;
    return 0;
}

const char *sl__recidx_check(const sl__rec_t *r, int fmt, uint64_t fsize)
{
    if (r->hdr >= fsize)
        return "a header offset past the end of the file";
    if (r->label < 0)
        return r->label == SL_ECORRUPT || r->label == SL_ECHECKSUM
                   ? NULL
                   : "a bad sample's code is not a data error";
    if (r->label >= SL__SHARD_CLASSES_MAX)
        return "a label out of range";
    if (r->len > SL__REC_MAX || r->off > fsize || r->len > fsize - r->off)
        return "a sample past the end of the file";
    if (fmt == SL__FMT_WDS)
        return r->img_off || r->img_len != r->len || r->hdr > r->off ||
                       r->off - r->hdr < 512
                   ? "an image member out of place"
                   : NULL;
    if (r->len < SL__TFRECORD_FOOT || r->off < SL__TFRECORD_HEAD || r->hdr ||
        r->img_off > r->len - SL__TFRECORD_FOOT ||
        r->img_len > r->len - SL__TFRECORD_FOOT - r->img_off)
        return "a record's image out of place";
    return NULL;
}

static int bad(sl__recfile_t *f, char *err, size_t errlen, int code,
               const char *why)
{
    /* back to no samples: the caller walks the file instead */
    sl__strv_free(f->bad_msg, f->nbad);
    free(f->bad_idx);
    free(f->recs);
    free(f->damage);
    f->bad_msg = NULL;
    f->bad_idx = NULL;
    f->recs = NULL;
    f->damage = NULL;
    f->n = f->nbad = 0;
    f->cap = f->bad_cap = 0;
    return sl__fail(err, errlen, code, "%s", why);
}

int sl__recidx_decode(sl__recfile_t *f, const uint8_t *p, size_t n, char *err,
                      size_t errlen)
{
    uint64_t fsize = sl__bytesrc_size(f->src);
    const char *name = sl__bytesrc_name(f->src);
    char why[160], *msg = NULL;
    if (n < HEAD + 8 || memcmp(p, MAGIC, 8))
        return bad(f, err, errlen, SL_ECORRUPT, "not a sluice index");
    if (sl__get_u32(p + 8) != VERSION || sl__get_u32(p + 44))
        return bad(f, err, errlen, SL_ECORRUPT, "an index version not known");
    if (XXH3_64bits(p, n - 8) != sl__get_u64(p + n - 8))
        return bad(f, err, errlen, SL_ECORRUPT, "checksum mismatch");
    if ((int)sl__get_u32(p + 12) != f->fmt)
        return bad(f, err, errlen, SL_ECORRUPT, "an index of the other format");
    if (sl__get_u64(p + 16) != fsize) {
        snprintf(why, sizeof why,
                 "stale: made for a file of %llu bytes, this one has %llu",
                 (unsigned long long)sl__get_u64(p + 16),
                 (unsigned long long)fsize);
        return bad(f, err, errlen, SL_ECORRUPT, why);
    }
    uint64_t ns = sl__get_u64(p + 24), nb = sl__get_u64(p + 32);
    uint32_t dlen = sl__get_u32(p + 40);
    size_t left = n - HEAD - 8;
    if (ns > left / REC || nb > ns || dlen > SL__RECIDX_MSG_MAX ||
        nb > (left - ns * REC) / 12)
        return bad(f, err, errlen, SL_ECORRUPT, "counts past its end");
    const uint8_t *q = p + HEAD, *end = p + n - 8;
    const uint8_t *m = q + ns * REC; /* the bad samples' messages */
    uint64_t nextbad = UINT64_MAX, seen = 0;
    if (nb) {
        if (end - m < 12)
            return bad(f, err, errlen, SL_ECORRUPT, "counts past its end");
        nextbad = sl__get_u64(m);
    }
    for (uint64_t k = 0; k < ns; k++, q += REC) {
        sl__rec_t r = {.off = sl__get_u64(q),
                       .hdr = sl__get_u64(q + 8),
                       .len = sl__get_u32(q + 16),
                       .img_off = sl__get_u32(q + 20),
                       .img_len = sl__get_u32(q + 24),
                       .label = (int32_t)sl__get_u32(q + 28)};
        const char *w = sl__recidx_check(&r, f->fmt, fsize);
        if (!w && (r.label < 0) != (k == nextbad))
            w = "bad samples and their messages disagree";
        if (w) {
            snprintf(why, sizeof why, "sample %llu: %s", (unsigned long long)k,
                     w);
            return bad(f, err, errlen, SL_ECORRUPT, why);
        }
        int rc = 0;
        if (r.label < 0) {
            uint32_t ml = sl__get_u32(m + 8);
            if (!ml || ml > SL__RECIDX_MSG_MAX || ml > (size_t)(end - m) - 12)
                return bad(f, err, errlen, SL_ECORRUPT,
                           "a message past its end");
            if (asprintf(&msg, "%s: %.*s", name, (int)ml, m + 12) < 0)
                return bad(f, err, errlen, SL_ENOMEM, "out of memory");
            int code = r.label;
            rc = sl__recfile_add(f, &r, code, msg);
            free(msg);
            m += 12 + ml;
            nextbad = UINT64_MAX;
            if (++seen < nb) {
                if (end - m < 12)
                    return bad(f, err, errlen, SL_ECORRUPT,
                               "counts past its end");
                nextbad = sl__get_u64(m);
                if (nextbad <= k)
                    return bad(f, err, errlen, SL_ECORRUPT,
                               "bad samples out of order");
            }
        } else {
            rc = sl__recfile_add(f, &r, 0, "");
        }
        if (rc)
            return bad(f, err, errlen, SL_ENOMEM, "out of memory");
    }
    if (seen != nb || (size_t)(end - m) != dlen)
        return bad(f, err, errlen, SL_ECORRUPT,
                   "bad samples and their messages disagree");
    if (dlen && asprintf(&f->damage, "%s: %.*s", name, (int)dlen, m) < 0) {
        f->damage = NULL;
        return bad(f, err, errlen, SL_ENOMEM, "out of memory");
    }
    return 0;
}

int sl__recidx_save(const sl__recfile_t *f, const char *path, char *err,
                    size_t errlen)
{
    sl__bytes_t b = {0};
    char *final = NULL, *tmp = NULL;
    int rc = 0, fd = -1;
    if (sl__recidx_encode(f, &b) ||
        asprintf(&final, "%s%s", path, SL__RECIDX_SUFFIX) < 0 ||
        asprintf(&tmp, "%s.tmp", final) < 0) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = sl__fail(err, errlen, SL_EIO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    for (size_t done = 0; done < b.n && !rc;) {
        ssize_t w = write(fd, b.p + done, b.n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            rc = sl__fail(err, errlen, SL_EIO, "%s: write failed: %s", tmp,
                          strerror(errno));
        else
            done += (size_t)w;
    }
    if (!rc && fsync(fd))
        rc = sl__fail(err, errlen, SL_EIO, "%s: fsync: %s", tmp,
                      strerror(errno));
    close(fd);
    if (!rc && rename(tmp, final))
        rc = sl__fail(err, errlen, SL_EIO, "%s: rename: %s", final,
                      strerror(errno));
    if (rc)
        unlink(tmp);
out:
    sl__bytes_free(&b);
    free(final);
    free(tmp);
    return rc;
}

/* NAME + SL__RECIDX_SUFFIX; at an http(s) URL, the suffix goes on the
 * path, before "?QUERY" or "#FRAGMENT". */
static char *sidecar_of(const char *name)
{
    size_t n = strlen(name);
    if (sl__remote_is_url(name) && strncasecmp(name, "s3://", 5))
        n = strcspn(name, "?#");
    char *out = NULL;
    if (asprintf(&out, "%.*s%s%s", (int)n, name, SL__RECIDX_SUFFIX, name + n) <
        0)
        return NULL;
    return out;
}

int sl__recidx_load(sl__recfile_t *f, char *err, size_t errlen)
{
    char *path = NULL, *shown = NULL, why[256];
    const struct sl__remote *r = sl__bytesrc_remote(f->src);
    /* A URL's sidecar is requested at the URL given, and named as its
     * object is (its secrets hidden). */
    if (!(path =
              sidecar_of(r ? sl__remote_given(r) : sl__bytesrc_name(f->src))) ||
        !(shown = sidecar_of(sl__bytesrc_name(f->src)))) {
        free(path);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    /* No honest index is larger than 48 bytes a sample (the smallest
     * sample: one tar header, or a TFRecord's 16 bytes of framing) plus
     * room for messages. */
    uint64_t fsize = sl__bytesrc_size(f->src);
    uint64_t most =
        (fsize / (f->fmt == SL__FMT_WDS ? 512 : 16) + 1) * 48 + (16u << 20);
    sl__bytes_t b = {0};
    int rc;
    if (r) {
        /* One GET, at most `most` bytes: no HEAD first (a round trip of
         * each file's open). */
        rc = sl__remote_get(path, (size_t)most, &b, err, errlen);
        if (rc == SL_ERANGE)
            sl__fail(err, errlen, SL_ECORRUPT,
                     "%s: more than %llu bytes, more than an index of this "
                     "file needs",
                     shown, (unsigned long long)most);
        else if (!rc && (rc = sl__recidx_decode(f, b.p, b.n, why, sizeof why)))
            sl__fail(err, errlen, rc, "%s: %s", shown, why);
        sl__bytes_free(&b);
        free(path);
        free(shown);
        return rc == SL_ERANGE ? SL_ECORRUPT : rc;
    }
    free(shown);
    sl__bytesrc_t *s;
    rc = sl__bytesrc_open_file(path, &s, err, errlen);
    if (rc) {
        free(path);
        return rc;
    }
    uint64_t size = sl__bytesrc_size(s);
    if (size > most) {
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "%s: %llu bytes, more than an index of this file needs",
                      path, (unsigned long long)size);
    } else if (sl__bytes_reserve(&b, (size_t)size + 1)) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
    } else if (!(rc = sl__bytesrc_read(s, 0, b.p, (size_t)size, err, errlen)) &&
               (rc =
                    sl__recidx_decode(f, b.p, (size_t)size, why, sizeof why))) {
        sl__fail(err, errlen, rc, "%s: %s", path, why);
    }
    sl__bytes_free(&b);
    sl__bytesrc_close(s);
    free(path);
    return rc;
}
