#include "recfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "crc32c.h"
#include "recidx.h"
#include "tar_walk.h"

/* A tar block: a member's header. */
#define TAR_BLOCK 512

/* Record r is read with the tar header before its image (and checked). */
static int with_header(const sl__recfile_t *f, const sl__rec_t *r)
{
    return f->fmt == SL__FMT_WDS && f->from_sidecar && r->off >= TAR_BLOCK;
}

int sl__recfile_add(sl__recfile_t *f, const sl__rec_t *r, int code,
                    const char *msg)
{
    if (sl__array_reserve(&f->recs, &f->cap, (size_t)f->n + 1, sizeof *f->recs,
                          256))
        return SL_ENOMEM;
    if (code) {
        char *m = strdup(msg);
        if (!m ||
            sl__array_reserve(&f->bad_idx, &f->bad_cap, (size_t)f->nbad + 1,
                              sizeof *f->bad_idx, 8)) {
            free(m);
            return SL_ENOMEM;
        }
        /* bad_msg grows with bad_idx: the same capacity. */
        char **v = realloc(f->bad_msg, f->bad_cap * sizeof *v);
        if (!v) {
            free(m);
            return SL_ENOMEM;
        }
        f->bad_msg = v;
        f->bad_idx[f->nbad] = f->n;
        f->bad_msg[f->nbad++] = m;
    }
    f->recs[f->n] = *r;
    if (code)
        f->recs[f->n].label = code;
    f->n++;
    return 0;
}

/* The index from the sidecar: 0; SL_ENOTFOUND to walk the file (none, or
 * one that cannot be used: why kept in sidecar_note); another SL_E* when
 * the index says the open fails (a bad sample or damage without skip_bad:
 * the walk's first error, word for word). */
static int from_sidecar(sl__recfile_t *f, int skip_bad, char *err,
                        size_t errlen)
{
    char why[1024];
    int rc = sl__recidx_load(f, why, sizeof why);
    if (rc == SL_ENOMEM)
        return sl__fail(err, errlen, rc, "%s", why);
    if (rc) {
        if (rc != SL_ENOTFOUND && !(f->sidecar_note = strdup(why)))
            return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        return SL_ENOTFOUND;
    }
    f->from_sidecar = 1;
    if (skip_bad)
        return 0;
    if (f->nbad) /* the walk stops at the first bad sample */
        return sl__fail(err, errlen, f->recs[f->bad_idx[0]].label, "%s",
                        f->bad_msg[0]);
    if (f->damage)
        return sl__fail(err, errlen, SL_ECORRUPT, "%s", f->damage);
    return 0;
}

static int open_src(sl__bytesrc_t *src, int fmt, int skip_bad, int sidecar,
                    sl__recfile_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sl__recfile_t *f = calloc(1, sizeof *f);
    if (!f) {
        sl__bytesrc_close(src);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    f->src = src;
    f->fmt = fmt;
    int rc = sidecar && sl__bytesrc_is_remote(src)
                 ? from_sidecar(f, skip_bad, err, errlen)
                 : SL_ENOTFOUND;
    if (rc == 0) {
        *out = f;
        return 0;
    }
    if (rc != SL_ENOTFOUND) {
        sl__recfile_close(f);
        return rc;
    }
    /* The indexers walk the file once, in order: one request per window
     * for a remote file (a failed allocation leaves the reads direct). */
    (void)sl__bytesrc_sequential(src, 1);
    rc = fmt == SL__FMT_WDS ? sl__wds_index(f, skip_bad, err, errlen)
                            : sl__tfrecord_index(f, skip_bad, err, errlen);
    (void)sl__bytesrc_sequential(src, 0);
    if (rc) {
        sl__recfile_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

int sl__recfile_open_src(sl__bytesrc_t *src, int fmt, int skip_bad,
                         sl__recfile_t **out, char *err, size_t errlen)
{
    return open_src(src, fmt, skip_bad, 1, out, err, errlen);
}

int sl__recfile_walk(const char *path, int fmt, sl__recfile_t **out, char *err,
                     size_t errlen)
{
    sl__bytesrc_t *src;
    *out = NULL;
    int rc = sl__bytesrc_open_file(path, &src, err, errlen);
    return rc ? rc : open_src(src, fmt, 1, 0, out, err, errlen);
}

int sl__recfile_open(const char *path, int fmt, int skip_bad,
                     sl__recfile_t **out, char *err, size_t errlen)
{
    sl__bytesrc_t *src;
    *out = NULL;
    int rc = sl__bytesrc_open_file(path, &src, err, errlen);
    return rc ? rc : sl__recfile_open_src(src, fmt, skip_bad, out, err, errlen);
}

void sl__recfile_close(sl__recfile_t *f)
{
    if (!f)
        return;
    sl__bytesrc_close(f->src);
    sl__strv_free(f->bad_msg, f->nbad);
    free(f->bad_idx);
    free(f->recs);
    free(f->damage);
    free(f->sidecar_note);
    free(f);
}

const char *sl__recfile_bad(const sl__recfile_t *f, int64_t k)
{
    if (k < 0 || k >= f->n || f->recs[k].label >= 0)
        return NULL;
    int64_t lo = 0, hi = f->nbad - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        if (f->bad_idx[mid] == k)
            return f->bad_msg[mid];
        if (f->bad_idx[mid] < k)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const char *sl__recfile_describe(const sl__recfile_t *f, int64_t k, char *buf,
                                 size_t len)
{
    const char *name = sl__bytesrc_name(f->src);
    if (f->fmt == SL__FMT_WDS && k >= 0 && k < f->n) {
        char key[256];
        snprintf(buf, len, "%s: sample %lld (key %s)", name, (long long)k,
                 sl__wds_key(f, f->recs[k].hdr, key, sizeof key));
    } else {
        snprintf(buf, len, "%s: record %lld", name, (long long)k);
    }
    return buf;
}

int sl__recfile_read(const sl__recfile_t *f, int64_t k, sl__bytes_t *out,
                     const sl__admit_t *admit, uint64_t *stored, char *err,
                     size_t errlen)
{
    if (stored)
        *stored = 0;
    sl__recfile_io_t io;
    int rc = sl__recfile_read_begin(f, k, out, admit, &io, err, errlen);
    if (rc)
        return rc;
    if (io.len &&
        (rc = sl__bytesrc_read(f->src, io.off, io.dst, io.len, err, errlen)))
        return rc;
    return sl__recfile_read_end(f, k, out, (int64_t)io.len, NULL, stored, err,
                                errlen);
}

int sl__recfile_read_begin(const sl__recfile_t *f, int64_t k, sl__bytes_t *out,
                           const sl__admit_t *admit, sl__recfile_io_t *io,
                           char *err, size_t errlen)
{
    memset(io, 0, sizeof *io);
    if (k < 0 || k >= f->n)
        return sl__fail(err, errlen, SL_ERANGE, "%s: no sample %lld",
                        sl__bytesrc_name(f->src), (long long)k);
    const sl__rec_t *r = &f->recs[k];
    const char *why = sl__recfile_bad(f, k);
    if (why)
        return sl__fail(err, errlen, r->label, "%s", why);
    char msg[256];
    int rc;
    /* A tar member indexed by a sidecar is read with its header, checked
     * at the end: the file may have changed since the sidecar was made
     * (one of the same size passes the sidecar's own checks). A walked
     * file was read at open. */
    uint64_t off = r->off, len = r->len;
    if (with_header(f, r))
        off -= TAR_BLOCK, len += TAR_BLOCK;
    /* One byte more than the data, as for image files (source.c). */
    if ((rc = sl__admit(admit, (int64_t)len + 1, msg, sizeof msg)))
        return sl__fail(err, errlen, rc, "%s: %s", sl__bytesrc_name(f->src),
                        msg);
    if (sl__bytes_reserve(out, (size_t)len + 1))
        return sl__fail(err, errlen, SL_ENOMEM,
                        "%s: out of memory (%llu bytes)",
                        sl__bytesrc_name(f->src), (unsigned long long)len);
    io->dst = out->p;
    io->off = off;
    io->len = (size_t)len;
    io->remote = sl__bytesrc_remote(f->src);
    if (io->remote) /* the caller's: a ranged request */
        return 0;
    io->len = 0;
    return sl__bytesrc_read(f->src, off, out->p, (size_t)len, err, errlen);
}

int sl__recfile_read_end(const sl__recfile_t *f, int64_t k, sl__bytes_t *out,
                         int64_t res, const char *why, uint64_t *stored,
                         char *err, size_t errlen)
{
    const sl__rec_t *r = &f->recs[k];
    if (stored)
        *stored = 0;
    if (res < 0) /* the ranged request's own message names the URL */
        return sl__fail(err, errlen, (int)res, "%s", why ? why : "");
    if (with_header(f, r)) {
        if (stored)
            *stored = r->len + TAR_BLOCK;
        if (!sl__tar_member_at(out->p, r->img_len))
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: sample %lld (key %s): no tar header of its "
                            "%u-byte image at byte %llu: the file changed "
                            "since it was indexed",
                            sl__bytesrc_name(f->src), (long long)k,
                            sl__wds_key(f, r->hdr, (char[128]){0}, 128),
                            r->img_len,
                            (unsigned long long)(r->off - TAR_BLOCK));
        memmove(out->p, out->p + TAR_BLOCK, r->img_len);
        out->n = r->img_len;
        return 0;
    }
    if (stored)
        *stored = r->len;
    if (f->fmt == SL__FMT_TFRECORD) {
        /* The record's data, then its masked CRC: checked again, as the
         * file may have changed since it was indexed. */
        uint32_t dlen = r->len - 4;
        if (sl__crc32c_mask(sl__crc32c(0, out->p, dlen)) !=
            sl__get_u32(out->p + dlen))
            return sl__fail(err, errlen, SL_ECHECKSUM,
                            "%s: record %lld: data CRC mismatch",
                            sl__bytesrc_name(f->src), (long long)k);
        memmove(out->p, out->p + r->img_off, r->img_len);
    }
    out->n = r->img_len;
    return 0;
}
