#include "tfrecord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "data/recfile.h"
#include "data/shard.h"
#include "sluice/version.h"

void sl__tfrecord_head(uint8_t h[SL__TFRECORD_HEAD], uint64_t len)
{
    sl__put_u64(h, len);
    sl__put_u32(h + 8, sl__crc32c_mask(sl__crc32c(0, h, 8)));
}

int sl__tfrecord_head_check(const uint8_t h[SL__TFRECORD_HEAD], uint64_t *len)
{
    if (sl__crc32c_mask(sl__crc32c(0, h, 8)) != sl__get_u32(h + 8))
        return -1;
    *len = sl__get_u64(h);
    return 0;
}

void sl__tfrecord_foot(uint8_t f[SL__TFRECORD_FOOT], const void *data,
                       size_t len)
{
    sl__put_u32(f, sl__crc32c_mask(sl__crc32c(0, data, len)));
}

/* The indexer: every record framed, both CRCs checked, its Example parsed
 * for the image's place and the label. */
int sl__tfrecord_index(sl__recfile_t *f, int skip_bad, char *err, size_t errlen)
{
    const char *name = sl__bytesrc_name(f->src);
    if (!SL_HAVE_TFRECORD)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "%s: sluice was built without TFRecord support "
                        "(protobuf-c)",
                        name);
    uint64_t size = sl__bytesrc_size(f->src), off = 0;
    sl__bytes_t buf = {0};
    int rc = 0;
    char msg[512], why[256];
    while (off < size && !rc) {
        int64_t k = f->n;
        uint8_t h[SL__TFRECORD_HEAD];
        uint64_t len;
        int damage = 1;
        if (size - off < SL__TFRECORD_HEAD) {
            snprintf(msg, sizeof msg,
                     "%s: record %lld at offset %llu: truncated (%llu bytes "
                     "left, a record header needs 12)",
                     name, (long long)k, (unsigned long long)off,
                     (unsigned long long)(size - off));
        } else if ((rc = sl__bytesrc_read(f->src, off, h, sizeof h, err,
                                          errlen))) {
            break;
        } else if (sl__tfrecord_head_check(h, &len)) {
            snprintf(msg, sizeof msg,
                     "%s: record %lld at offset %llu: length CRC mismatch",
                     name, (long long)k, (unsigned long long)off);
        } else if (len > size - off - SL__TFRECORD_HEAD ||
                   size - off - SL__TFRECORD_HEAD - len < SL__TFRECORD_FOOT) {
            snprintf(msg, sizeof msg,
                     "%s: record %lld at offset %llu: truncated (length %llu, "
                     "%llu bytes left)",
                     name, (long long)k, (unsigned long long)off,
                     (unsigned long long)len,
                     (unsigned long long)(size - off - SL__TFRECORD_HEAD));
        } else {
            damage = 0;
        }
        if (damage) {
            /* The framing is lost: nothing after this point can be found. */
            if (!skip_bad) {
                rc = sl__fail(err, errlen, SL_ECORRUPT, "%s", msg);
            } else if (!(f->damage = strdup(msg))) {
                rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            }
            break;
        }
        uint64_t data = off + SL__TFRECORD_HEAD;
        sl__rec_t r = {.off = data, .len = (uint32_t)(len + SL__TFRECORD_FOOT)};
        why[0] = 0;
        int code = SL_ECORRUPT; /* of a bad record */
        const uint8_t *img = NULL;
        size_t img_len = 0;
        int64_t label = -1;
        if (len > SL__REC_MAX - SL__TFRECORD_FOOT) {
            snprintf(why, sizeof why, "record of %llu bytes (the limit is %u)",
                     (unsigned long long)len, SL__REC_MAX);
        } else if (sl__bytes_reserve(&buf, (size_t)len + SL__TFRECORD_FOOT)) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
            break;
        } else if ((rc = sl__bytesrc_read(f->src, data, buf.p,
                                          (size_t)len + SL__TFRECORD_FOOT, err,
                                          errlen))) {
            break;
        } else if (sl__crc32c_mask(sl__crc32c(0, buf.p, (size_t)len)) !=
                   sl__get_u32(buf.p + len)) {
            snprintf(why, sizeof why, "data CRC mismatch");
            code = SL_ECHECKSUM;
        } else if (sl__tfexample_parse(buf.p, (size_t)len, &img, &img_len,
                                       &label, why, sizeof why)) {
            /* why set */
        } else if (label < 0 || label >= SL__SHARD_CLASSES_MAX) {
            snprintf(why, sizeof why, "label %lld out of range [0, %d)",
                     (long long)label, SL__SHARD_CLASSES_MAX);
        } else {
            r.img_off = (uint32_t)(img - buf.p);
            r.img_len = (uint32_t)img_len;
            r.label = (int32_t)label;
        }
        if (why[0]) {
            snprintf(msg, sizeof msg, "%s: record %lld at offset %llu: %s",
                     name, (long long)k, (unsigned long long)off, why);
            if (!skip_bad) {
                rc = sl__fail(err, errlen, code, "%s", msg);
                break;
            }
        }
        if (sl__recfile_add(f, &r, why[0] ? code : 0, msg)) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            break;
        }
        off = data + len + SL__TFRECORD_FOOT;
    }
    sl__bytes_free(&buf);
    return rc;
}
