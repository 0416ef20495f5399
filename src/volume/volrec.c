/* volume/volrec: a volume case as one shard record (see volrec.h). */
#include "volrec.h"

#include <inttypes.h>
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
    return rc;
}

/* The record's head (SL__VOLREC_HEAD bytes of n): magic, version, count. */
static int check_head(const uint8_t *b, size_t n, unsigned *count, char *err,
                      size_t errlen)
{
    if (n < SL__VOLREC_HEAD || memcmp(b, SL__VOLREC_MAGIC, 8))
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "not a volume record (no \\x89SLV magic): a pack of "
                        "images or text, not of volumes?");
    unsigned version = sl__get_u16(b + 8);
    *count = sl__get_u16(b + 10);
    if (version != SL__VOLREC_VERSION)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "volume record version %u (this sluice reads %d)",
                        version, SL__VOLREC_VERSION);
    if (*count < 1 || *count > 2)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "volume record of %u volumes (1 or 2)", *count);
    return 0;
}

/* Volume i's entry q, with `left` record bytes after it. */
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

int sl__volrec_parse(const void *p, size_t n, sl__volrec_t *r, char *err,
                     size_t errlen)
{
    const uint8_t *b = p;
    memset(r, 0, sizeof *r);
    unsigned count = 0;
    int rc = check_head(b, n, &count, err, errlen);
    if (rc)
        return rc;
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

int sl__volrec_seek(const sl__vol_src_t *src, uint64_t n, const char *name,
                    unsigned k, unsigned *count, uint8_t hdr[SL__NIFTI2_HDR],
                    size_t *hlen, uint64_t *dlen, char *err, size_t errlen)
{
    uint8_t b[SL__VOLREC_HEAD];
    char why[512];
    int src_failed = 0, rc = 0;
    *count = 0;
    if (n >= SL__VOLREC_HEAD &&
        (rc = src->read(src->ctx, b, sizeof b, err, errlen)))
        return rc;
    rc = check_head(b, n < SL__VOLREC_HEAD ? 0 : SL__VOLREC_HEAD, count, why,
                    sizeof why);
    if (!rc && k >= *count)
        rc =
            sl__fail(why, sizeof why, SL_ECORRUPT,
                     "volume record of %u volumes, volume %u asked", *count, k);
    if (!rc)
        rc = seek_part(src, n, k, *count, hdr, hlen, dlen, &src_failed, why,
                       sizeof why, err, errlen);
    if (rc && !src_failed)
        sl__fail(err, errlen, rc, "%s: %s", name, why);
    return rc;
}
