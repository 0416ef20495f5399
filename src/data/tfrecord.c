#include "tfrecord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "data/recfile.h"
#include "data/shard.h"
#include "tf_example.pb-c.h"

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

/* protobuf-c allocations charged against a bound: an Example's parse
 * needs a few times its size (repeated fields are counted before they are
 * allocated), so a hostile record cannot ask for more. */
typedef struct pb_budget {
    size_t left;
} pb_budget_t;

static void *pb_alloc(void *ctx, size_t n)
{
    pb_budget_t *b = ctx;
    if (n > b->left)
        return NULL;
    size_t *p = malloc(n + sizeof(size_t));
    if (!p)
        return NULL;
    b->left -= n;
    *p = n;
    return p + 1;
}

static void pb_free(void *ctx, void *p)
{
    if (!p)
        return;
    size_t *q = (size_t *)p - 1;
    ((pb_budget_t *)ctx)->left += *q;
    free(q);
}

static const Tensorflow__Feature *find(const Tensorflow__Example *ex,
                                       const char *key)
{
    if (!ex->features)
        return NULL;
    const Tensorflow__Feature *hit = NULL;
    /* A map: the last entry with a key wins, as in protobuf. */
    for (size_t i = 0; i < ex->features->n_feature; i++) {
        const Tensorflow__Features__FeatureEntry *e = ex->features->feature[i];
        if (e->key && !strcmp(e->key, key))
            hit = e->value;
    }
    return hit;
}

int sl__tfexample_parse(const uint8_t *p, size_t n, const uint8_t **img,
                        size_t *img_len, int64_t *label, char *why,
                        size_t whylen)
{
    pb_budget_t bud = {4 * n + 4096};
    ProtobufCAllocator a = {pb_alloc, pb_free, &bud};
    Tensorflow__Example *ex = tensorflow__example__unpack(&a, n, p);
    if (!ex) {
        snprintf(why, whylen, "not a tf.train.Example (protobuf parse failed)");
        return -1;
    }
    int rc = -1;
    const Tensorflow__Feature *fi = find(ex, "image/encoded");
    const Tensorflow__Feature *fl = find(ex, "image/class/label");
    if (!fi || fi->kind_case != TENSORFLOW__FEATURE__KIND_BYTES_LIST ||
        !fi->bytes_list || !fi->bytes_list->n_value) {
        snprintf(why, whylen, "no \"image/encoded\" bytes feature");
    } else if (!fl || fl->kind_case != TENSORFLOW__FEATURE__KIND_INT64_LIST ||
               !fl->int64_list || !fl->int64_list->n_value) {
        snprintf(why, whylen, "no \"image/class/label\" int64 feature");
    } else {
        const ProtobufCBinaryData *v = &fi->bytes_list->value[0];
        /* protobuf-c copies bytes fields; the same bytes lie verbatim in
         * the record, and any place holding them holds the image. */
        const uint8_t *at = v->len ? memmem(p, n, v->data, v->len) : NULL;
        if (!v->len) {
            snprintf(why, whylen, "\"image/encoded\" is empty");
        } else if (!at) {
            snprintf(why, whylen, "\"image/encoded\" not found in the record");
        } else {
            *img = at;
            *img_len = v->len;
            *label = fl->int64_list->value[0];
            rc = 0;
        }
    }
    tensorflow__example__free_unpacked(ex, &a);
    return rc;
}

int sl__tfexample_build(const void *img, size_t n, int64_t label,
                        const char *format, sl__bytes_t *out)
{
    ProtobufCBinaryData iv = {n, (uint8_t *)img};
    ProtobufCBinaryData fv = {format ? strlen(format) : 0,
                              (uint8_t *)(format ? format : "")};
    Tensorflow__BytesList ib = TENSORFLOW__BYTES_LIST__INIT,
                          fb = TENSORFLOW__BYTES_LIST__INIT;
    ib.n_value = 1;
    ib.value = &iv;
    fb.n_value = 1;
    fb.value = &fv;
    Tensorflow__Int64List lb = TENSORFLOW__INT64_LIST__INIT;
    lb.n_value = 1;
    lb.value = &label;
    Tensorflow__Feature f[3] = {TENSORFLOW__FEATURE__INIT,
                                TENSORFLOW__FEATURE__INIT,
                                TENSORFLOW__FEATURE__INIT};
    f[0].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
    f[0].bytes_list = &ib;
    f[1].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
    f[1].int64_list = &lb;
    f[2].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
    f[2].bytes_list = &fb;
    Tensorflow__Features__FeatureEntry e[3] = {
        TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT,
        TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT,
        TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT};
    const char *keys[3] = {"image/class/label", "image/encoded",
                           "image/format"};
    Tensorflow__Feature *vals[3] = {&f[1], &f[0], &f[2]};
    Tensorflow__Features__FeatureEntry *ep[3];
    for (int i = 0; i < 3; i++) {
        e[i].key = (char *)keys[i];
        e[i].value = vals[i];
        ep[i] = &e[i];
    }
    Tensorflow__Features fs = TENSORFLOW__FEATURES__INIT;
    fs.n_feature = format ? 3 : 2;
    fs.feature = ep;
    Tensorflow__Example ex = TENSORFLOW__EXAMPLE__INIT;
    ex.features = &fs;
    size_t len = tensorflow__example__get_packed_size(&ex);
    if (sl__bytes_reserve(out, len))
        return SL_ENOMEM;
    out->n = tensorflow__example__pack(&ex, out->p);
    return 0;
}

/* The indexer: every record framed, both CRCs checked, its Example parsed
 * for the image's place and the label. */
int sl__tfrecord_index(sl__recfile_t *f, int skip_bad, char *err, size_t errlen)
{
    const char *name = sl__bytesrc_name(f->src);
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
                rc = sl__fail(err, errlen,
                              strstr(why, "CRC") ? SL_ECHECKSUM : SL_ECORRUPT,
                              "%s", msg);
                break;
            }
        }
        if (sl__recfile_add(f, &r, why[0] ? msg : NULL)) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
            break;
        }
        off = data + len + SL__TFRECORD_FOOT;
    }
    sl__bytes_free(&buf);
    return rc;
}
