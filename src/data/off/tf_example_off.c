/* data/tf_example without protobuf-c (SL_TFRECORD=OFF): the same calls,
 * failing; sl__tfrecord_index refuses TFRecord files first with "built
 * without TFRecord support". */
#include <stdio.h>

#include "data/tfrecord.h"

int sl__tfexample_parse(const uint8_t *p, size_t n, const uint8_t **img,
                        size_t *img_len, int64_t *label, char *why,
                        size_t whylen)
{
    (void)p;
    (void)n;
    (void)img;
    (void)img_len;
    (void)label;
    snprintf(why, whylen, "sluice was built without TFRecord support");
    return -1;
}

int sl__tfexample_build(const void *img, size_t n, int64_t label,
                        const char *format, sl__bytes_t *out)
{
    (void)img;
    (void)n;
    (void)label;
    (void)format;
    (void)out;
    return SL_EUNSUPPORTED;
}
