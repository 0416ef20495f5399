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

/* The first place in hay holding needle (len <= n): candidates by a short
 * prefix (memmem), each checked whole. glibc's memmem with a whole image
 * as the needle (two-way, long-needle tables) took 80 % of indexing. */
static const uint8_t *find(const uint8_t *hay, size_t n, const uint8_t *needle,
                           size_t len)
{
    if (len > n)
        return NULL;
    size_t pre = len < 16 ? len : 16, last = n - len; /* last start */
    for (size_t at = 0; at <= last;) {
        const uint8_t *hit = memmem(hay + at, last - at + pre, needle, pre);
        if (!hit)
            return NULL;
        at = (size_t)(hit - hay);
        if (!memcmp(hit + pre, needle + pre, len - pre))
            return hit;
        at++;
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
        const uint8_t *at = v->len ? find(p, n, v->data, v->len) : NULL;
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
