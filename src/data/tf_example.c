/* data/tf_example: tf.train.Example parsed and built with protobuf-c
 * (data/tfrecord.h declares it; the schema: data/proto/tf_example.proto).
 * Without protobuf-c (SL_TFRECORD=OFF) data/off/tf_example_off.c stands in
 * for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_example.pb-c.h"
#include "tfrecord.h"

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

static const Tensorflow__Feature *feature(const Tensorflow__Example *ex,
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

/* A protobuf varint at *p (at most 10 bytes, within end). */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Where the image's bytes lie in the record: the Example's wire format
 * walked down the path features (1) / feature entry (1) / value (2) /
 * bytes_list (1) / value (1), and the first bytes field there that holds
 * the needle. protobuf-c copies bytes fields, and the same bytes lie
 * verbatim at one of these places; any that holds them holds the image.
 * Linear in the record: each level is walked once and the fields
 * compared lie side by side, so a hostile record cannot make the search
 * quadratic (a search of the whole record for the image was, with a
 * decoy of almost the image before it). */
static const uint8_t *find(const uint8_t *p, const uint8_t *end, int depth,
                           const uint8_t *needle, size_t len)
{
    static const uint64_t path[] = {1, 1, 2, 1, 1};
    while (p < end) {
        uint64_t key, n;
        if (varint(&p, end, &key))
            return NULL;
        switch (key & 7) {
        case 0: /* varint */
            if (varint(&p, end, &n))
                return NULL;
            continue;
        case 1: /* fixed64 */
            n = 8;
            break;
        case 5: /* fixed32 */
            n = 4;
            break;
        case 2: /* length-delimited */
            if (varint(&p, end, &n))
                return NULL;
            break;
        default: /* groups: not in an Example */
            return NULL;
        }
        if (n > (uint64_t)(end - p))
            return NULL;
        const uint8_t *b = p;
        p += n;
        if ((key & 7) != 2 || key >> 3 != path[depth])
            continue;
        if (depth == 4) {
            if (n == len && !memcmp(b, needle, len))
                return b;
        } else {
            const uint8_t *hit = find(b, b + n, depth + 1, needle, len);
            if (hit)
                return hit;
        }
    }
    return NULL;
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
    const Tensorflow__Feature *fi = feature(ex, "image/encoded");
    const Tensorflow__Feature *fl = feature(ex, "image/class/label");
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
        const uint8_t *at = v->len ? find(p, p + n, 0, v->data, v->len) : NULL;
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
