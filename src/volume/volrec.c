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

int sl__volrec_parse(const void *p, size_t n, sl__volrec_t *r, char *err,
                     size_t errlen)
{
    const uint8_t *b = p;
    memset(r, 0, sizeof *r);
    if (n < SL__VOLREC_HEAD || memcmp(b, SL__VOLREC_MAGIC, 8))
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "not a volume record (no \\x89SLV magic): a pack of "
                        "images or text, not of volumes?");
    unsigned version = sl__get_u16(b + 8), count = sl__get_u16(b + 10);
    if (version != SL__VOLREC_VERSION)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "volume record version %u (this sluice reads %d)",
                        version, SL__VOLREC_VERSION);
    if (count < 1 || count > 2)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "volume record of %u volumes (1 or 2)", count);
    size_t at = SL__VOLREC_HEAD;
    for (unsigned i = 0; i < count; i++) {
        if (n - at < SL__VOLREC_PART)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "volume record cut short in volume %u", i);
        const uint8_t *q = b + at;
        uint32_t hlen = sl__get_u32(q + 4);
        uint64_t dlen = sl__get_u64(q + 8);
        if (q[0] != i)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "volume %u of a record has role %u (0 image, "
                            "then 1 label)",
                            i, q[0]);
        if (hlen != 348 && hlen != 540)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "volume %u: a NIfTI header of %" PRIu32
                            " bytes (348 or 540)",
                            i, hlen);
        at += SL__VOLREC_PART;
        if (n - at < hlen || n - at - hlen < dlen)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "volume %u: %" PRIu32 " + %" PRIu64
                            " bytes of header and data, the record has %zu "
                            "left",
                            i, hlen, dlen, n - at);
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
