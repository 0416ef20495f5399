/* volume/volrec: a volume case as one shard record (see volrec.h). */
#include "volrec.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vol_internal.h"

static int add_part(const char *path, int role, int64_t max_bytes,
                    sl__bytes_t *rec, char *err, size_t errlen)
{
    int64_t size = 0;
    int fd = sl__open_regular(path, &size, err, errlen);
    if (fd < 0)
        return fd;
    size_t at = rec->n;
    if (sl__bytes_reserve(rec, at + SL__VOLREC_PART)) {
        close(fd);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    rec->n += SL__VOLREC_PART;
    size_t hlen = 0;
    int64_t dlen = 0;
    int rc = sl__nifti_read_stored(fd, path, size, max_bytes, rec, &hlen, &dlen,
                                   err, errlen);
    close(fd);
    if (rc)
        return rc;
    uint8_t *q = rec->p + at;
    memset(q, 0, SL__VOLREC_PART);
    q[0] = (uint8_t)role;
    sl__put_u32(q + 4, (uint32_t)hlen);
    sl__put_u64(q + 8, (uint64_t)dlen);
    return 0;
}

/* [entry0 hdr0 data0][entry1 hdr1 data1] as add_part leaves them, made
 * version 2's [entry0 entry1][hdr0 hdr1][data0 data1] in place: the
 * small pieces saved, data0 moved up past entry1 + hdr1; data1 stays. */
static void headers_first(sl__bytes_t *rec)
{
    uint8_t *b = rec->p + SL__VOLREC_HEAD, e0[SL__VOLREC_PART],
            e1[SL__VOLREC_PART], h0[SL__NIFTI2_HDR], h1[SL__NIFTI2_HDR];
    memcpy(e0, b, sizeof e0);
    size_t hl0 = sl__get_u32(e0 + 4), dl0 = (size_t)sl__get_u64(e0 + 8);
    memcpy(h0, b + SL__VOLREC_PART, hl0);
    uint8_t *p1 = b + SL__VOLREC_PART + hl0 + dl0;
    memcpy(e1, p1, sizeof e1);
    size_t hl1 = sl__get_u32(e1 + 4);
    memcpy(h1, p1 + SL__VOLREC_PART, hl1);
    memmove(b + 2 * SL__VOLREC_PART + hl0 + hl1, b + SL__VOLREC_PART + hl0,
            dl0);
    memcpy(b, e0, sizeof e0);
    memcpy(b + SL__VOLREC_PART, e1, sizeof e1);
    memcpy(b + 2 * SL__VOLREC_PART, h0, hl0);
    memcpy(b + 2 * SL__VOLREC_PART + hl0, h1, hl1);
}

/* The label's spatial shape (its first three dimensions) is the image's
 * (as add_part leaves them: [entry0 hdr0 data0][entry1 hdr1 data1]): a
 * pack refuses the case the loader would fail on every epoch. A 4th
 * dimension may differ (a label of several channels is a volume too). */
static int same_shape(const sl__bytes_t *rec, const char *image,
                      const char *label, char *err, size_t errlen)
{
    const uint8_t *b = rec->p + SL__VOLREC_HEAD;
    size_t hl0 = sl__get_u32(b + 4), dl0 = (size_t)sl__get_u64(b + 8);
    const uint8_t *p1 = b + SL__VOLREC_PART + hl0 + dl0;
    size_t hl1 = sl__get_u32(p1 + 4);
    sl__volhdr_t hi, hl;
    char e[256];
    if (sl__nifti_header(b + SL__VOLREC_PART, hl0, &hi, e, sizeof e))
        return sl__fail(err, errlen, SL_ECORRUPT, "%s: %s", image, e);
    if (sl__nifti_header(p1 + SL__VOLREC_PART, hl1, &hl, e, sizeof e))
        return sl__fail(err, errlen, SL_ECORRUPT, "%s: %s", label, e);
    for (int i = 0; i < 3; i++)
        if (hi.dim[i] != hl.dim[i])
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: the label is %lld x %lld x %lld, its image "
                            "(%s) %lld x %lld x %lld",
                            label, (long long)hl.dim[0], (long long)hl.dim[1],
                            (long long)hl.dim[2], image, (long long)hi.dim[0],
                            (long long)hi.dim[1], (long long)hi.dim[2]);
    return 0;
}

int sl__volrec_build(const char *image, const char *label, int64_t max_bytes,
                     sl__bytes_t *rec, char *err, size_t errlen)
{
    rec->n = 0;
    if (sl__bytes_reserve(rec, SL__VOLREC_HEAD))
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    memset(rec->p, 0, SL__VOLREC_HEAD);
    memcpy(rec->p, SL__VOLREC_MAGIC, 8);
    sl__put_u16(rec->p + 8, SL__VOLREC_VERSION);
    sl__put_u16(rec->p + 10, label ? 2 : 1);
    rec->n = SL__VOLREC_HEAD;
    int rc = add_part(image, SL__VOLREC_IMAGE, max_bytes, rec, err, errlen);
    if (!rc && label)
        rc = add_part(label, SL__VOLREC_LABEL, max_bytes, rec, err, errlen);
    if (!rc && label)
        rc = same_shape(rec, image, label, err, errlen);
    if (!rc && label)
        headers_first(rec);
    return rc;
}

/* The record's head (SL__VOLREC_HEAD bytes of n): magic, version (1 or
 * 2, *version), count. */
static int check_head(const uint8_t *b, size_t n, unsigned *version,
                      unsigned *count, char *err, size_t errlen)
{
    if (n < SL__VOLREC_HEAD || memcmp(b, SL__VOLREC_MAGIC, 8))
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "not a volume record (no \\x89SLV magic): a pack of "
                        "images or text, not of volumes?");
    *version = sl__get_u16(b + 8);
    *count = sl__get_u16(b + 10);
    if (*version < 1 || *version > SL__VOLREC_VERSION)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "volume record version %u (this sluice reads 1 to %d)",
                        *version, SL__VOLREC_VERSION);
    if (*count < 1 || *count > 2)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "volume record of %u volumes (1 or 2)", *count);
    return 0;
}

/* Volume i's entry q, with `left` record bytes after it (version 2: after
 * the entries, for this volume's header and data and those after it). */
static int check_part(const uint8_t *q, unsigned i, uint64_t left,
                      uint32_t *hlen, uint64_t *dlen, char *err, size_t errlen)
{
    *hlen = sl__get_u32(q + 4);
    *dlen = sl__get_u64(q + 8);
    if (q[0] != i)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "volume %u of a record has role %u (0 image, "
                        "then 1 label)",
                        i, q[0]);
    if (*hlen != 348 && *hlen != 540)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "volume %u: a NIfTI header of %" PRIu32
                        " bytes (348 or 540)",
                        i, *hlen);
    if (left < *hlen || left - *hlen < *dlen)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "volume %u: %" PRIu32 " + %" PRIu64
                        " bytes of header and data, the record has %" PRIu64
                        " left",
                        i, *hlen, *dlen, left);
    return 0;
}

/* Version 2: the entries, then the headers, then the data. */
static int parse_v2(const uint8_t *b, size_t n, unsigned count, sl__volrec_t *r,
                    char *err, size_t errlen)
{
    size_t at = SL__VOLREC_HEAD + (size_t)count * SL__VOLREC_PART;
    if (n < at)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "volume record cut short in its entries");
    uint64_t left = n - at;
    for (unsigned i = 0; i < count; i++) {
        const uint8_t *q = b + SL__VOLREC_HEAD + (size_t)i * SL__VOLREC_PART;
        uint32_t hlen;
        uint64_t dlen;
        int rc = check_part(q, i, left, &hlen, &dlen, err, errlen);
        if (rc)
            return rc;
        left -= hlen + dlen;
        r->part[i].role = q[0];
        r->part[i].hlen = hlen;
        r->part[i].dlen = dlen;
    }
    if (left)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%" PRIu64 " bytes after the record's last volume",
                        left);
    for (unsigned i = 0; i < count; i++) {
        r->part[i].hdr = b + at;
        at += r->part[i].hlen;
    }
    for (unsigned i = 0; i < count; i++) {
        r->part[i].data = b + at;
        at += (size_t)r->part[i].dlen;
    }
    r->count = (int)count;
    return 0;
}

int sl__volrec_parse(const void *p, size_t n, sl__volrec_t *r, char *err,
                     size_t errlen)
{
    const uint8_t *b = p;
    memset(r, 0, sizeof *r);
    unsigned version = 0, count = 0;
    int rc = check_head(b, n, &version, &count, err, errlen);
    if (rc)
        return rc;
    if (version >= 2)
        return parse_v2(b, n, count, r, err, errlen);
    size_t at = SL__VOLREC_HEAD;
    for (unsigned i = 0; i < count; i++) {
        if (n - at < SL__VOLREC_PART)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "volume record cut short in volume %u", i);
        const uint8_t *q = b + at;
        uint32_t hlen;
        uint64_t dlen;
        at += SL__VOLREC_PART;
        if ((rc = check_part(q, i, n - at, &hlen, &dlen, err, errlen)))
            return rc;
        r->part[i].role = q[0];
        r->part[i].hdr = b + at;
        r->part[i].hlen = hlen;
        r->part[i].data = b + at + hlen;
        r->part[i].dlen = dlen;
        at += hlen + (size_t)dlen;
    }
    if (at != n)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%zu bytes after the record's last volume", n - at);
    r->count = (int)count;
    return 0;
}

/* volume k's entry, header and data size, read from src at `at` (just
 * past the head); own errors in why, src's in err (*src_failed set). */
static int seek_part(const sl__vol_src_t *src, uint64_t n, unsigned k,
                     unsigned count, uint8_t *hdr, size_t *hlen, uint64_t *dlen,
                     int *src_failed, char *why, size_t whylen, char *err,
                     size_t errlen)
{
    uint64_t at = SL__VOLREC_HEAD;
    for (unsigned i = 0;; i++) {
        if (n - at < SL__VOLREC_PART)
            return sl__fail(why, whylen, SL_ECORRUPT,
                            "volume record cut short in volume %u", i);
        uint8_t q[SL__VOLREC_PART];
        uint32_t h;
        int rc = src->read(src->ctx, q, sizeof q, err, errlen);
        if (rc)
            return *src_failed = 1, rc;
        at += SL__VOLREC_PART;
        if ((rc = check_part(q, i, n - at, &h, dlen, why, whylen)))
            return rc;
        if (i == k) {
            if (i + 1 == count && n - at - h != *dlen)
                return sl__fail(why, whylen, SL_ECORRUPT,
                                "%" PRIu64
                                " bytes after the record's last volume",
                                n - at - h - *dlen);
            *hlen = h;
            *src_failed = 1;
            return src->read(src->ctx, hdr, h, err, errlen);
        }
        *src_failed = 1;
        if ((rc = src->read(src->ctx, NULL, h + (size_t)*dlen, err, errlen)))
            return rc;
        *src_failed = 0;
        at += h + *dlen;
    }
}

/* Version 2 in order: the entries and the headers (volume k's kept), not
 * the data: *skip is what lies before volume k's data. */
static int seek_v2(const sl__vol_src_t *src, uint64_t n, unsigned k,
                   unsigned count, uint8_t *hdr, size_t *hlen, uint64_t *dlen,
                   uint64_t *skip, int *src_failed, char *why, size_t whylen,
                   char *err, size_t errlen)
{
    uint8_t q[2][SL__VOLREC_PART];
    uint32_t hl[2];
    uint64_t dl[2];
    uint64_t at = SL__VOLREC_HEAD + (uint64_t)count * SL__VOLREC_PART;
    if (n < at)
        return sl__fail(why, whylen, SL_ECORRUPT,
                        "volume record cut short in its entries");
    int rc =
        src->read(src->ctx, q, (size_t)count * SL__VOLREC_PART, err, errlen);
    if (rc)
        return *src_failed = 1, rc;
    uint64_t left = n - at;
    for (unsigned i = 0; i < count; i++) {
        if ((rc = check_part(q[i], i, left, &hl[i], &dl[i], why, whylen)))
            return rc;
        left -= hl[i] + dl[i];
    }
    if (left)
        return sl__fail(why, whylen, SL_ECORRUPT,
                        "%" PRIu64 " bytes after the record's last volume",
                        left);
    *src_failed = 1;
    *skip = 0;
    for (unsigned i = 0; i < count; i++) {
        if ((rc = src->read(src->ctx, i == k ? hdr : NULL, hl[i], err, errlen)))
            return rc;
        if (i < k)
            *skip += dl[i];
    }
    *hlen = hl[k];
    *dlen = dl[k];
    return 0;
}

int sl__volrec_seek(const sl__vol_src_t *src, uint64_t n, const char *name,
                    unsigned k, unsigned *count, uint8_t hdr[SL__NIFTI2_HDR],
                    size_t *hlen, uint64_t *dlen, uint64_t *skip, char *err,
                    size_t errlen)
{
    uint8_t b[SL__VOLREC_HEAD];
    char why[512];
    int src_failed = 0, rc = 0;
    unsigned version = 0;
    *count = 0;
    *skip = 0;
    if (n >= SL__VOLREC_HEAD &&
        (rc = src->read(src->ctx, b, sizeof b, err, errlen)))
        return rc;
    rc = check_head(b, n < SL__VOLREC_HEAD ? 0 : SL__VOLREC_HEAD, &version,
                    count, why, sizeof why);
    if (!rc && k >= *count)
        rc =
            sl__fail(why, sizeof why, SL_ECORRUPT,
                     "volume record of %u volumes, volume %u asked", *count, k);
    if (!rc && version >= 2)
        rc = seek_v2(src, n, k, *count, hdr, hlen, dlen, skip, &src_failed, why,
                     sizeof why, err, errlen);
    else if (!rc)
        rc = seek_part(src, n, k, *count, hdr, hlen, dlen, &src_failed, why,
                       sizeof why, err, errlen);
    if (rc && !src_failed)
        sl__fail(err, errlen, rc, "%s: %s", name, why);
    return rc;
}

/* A source that passes over `skip` bytes before its first read (or its
 * finish): volume k's data in a version-2 record, the volumes' data
 * before it read only when k's is. */
typedef struct skip_src {
    sl__vol_src_t in;
    uint64_t skip;
} skip_src_t;

static int pass_over(skip_src_t *s, char *err, size_t errlen)
{
    while (s->skip) {
        size_t step =
            s->skip > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)s->skip;
        int rc = s->in.read(s->in.ctx, NULL, step, err, errlen);
        if (rc)
            return rc;
        s->skip -= step;
    }
    return 0;
}

static int skip_read(void *ctx, void *dst, size_t n, char *err, size_t errlen)
{
    skip_src_t *s = ctx;
    int rc = pass_over(s, err, errlen);
    return rc ? rc : s->in.read(s->in.ctx, dst, n, err, errlen);
}

static int skip_finish(void *ctx, char *err, size_t errlen)
{
    skip_src_t *s = ctx;
    int rc = pass_over(s, err, errlen);
    return rc ? rc : s->in.finish(s->in.ctx, err, errlen);
}

static void skip_close(void *ctx)
{
    skip_src_t *s = ctx;
    if (s->in.close)
        s->in.close(s->in.ctx);
    free(s);
}

int sl__volrec_skipping(sl__vol_src_t *src, uint64_t skip)
{
    if (!skip)
        return 0;
    skip_src_t *s = malloc(sizeof *s);
    if (!s)
        return SL_ENOMEM;
    s->in = *src;
    s->skip = skip;
    *src = (sl__vol_src_t){skip_read, skip_finish, skip_close, s};
    return 0;
}
