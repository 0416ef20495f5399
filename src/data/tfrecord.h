/* data/tfrecord: TFRecord framing and the tf.train.Example payload of image
 * datasets (the layout of the common ImageNet TFRecords: "image/encoded"
 * bytes, "image/class/label" int64). The indexer is sl__tfrecord_index
 * (data/recfile.h).
 *
 * A record is: uint64 length (little-endian), uint32 masked CRC-32C of
 * those 8 bytes, the data, uint32 masked CRC-32C of the data. Examples are
 * parsed with protobuf-c (the schema: data/proto/tf_example.proto), its
 * allocations bounded by a budget proportional to the record. Depends on
 * base, data/crc32c, protobuf-c. */
#ifndef SL_TFRECORD_H
#define SL_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define SL__TFRECORD_HEAD 12 /* length + its CRC */
#define SL__TFRECORD_FOOT 4  /* the data's CRC */

/* The 12 bytes before a record of len data bytes. */
void sl__tfrecord_head(uint8_t h[SL__TFRECORD_HEAD], uint64_t len);
/* 0 if h's length CRC matches (*len set), -1 if not. */
int sl__tfrecord_head_check(const uint8_t h[SL__TFRECORD_HEAD], uint64_t *len);
/* The 4 bytes after the data. */
void sl__tfrecord_foot(uint8_t f[SL__TFRECORD_FOOT], const void *data,
                       size_t len);

/* Parses a serialized Example: *img points into p at the "image/encoded"
 * bytes (the first value), *label is "image/class/label"'s first value.
 * @return 0, or -1 with the cause in why (not an Example, a feature
 *         missing or of another kind, empty). */
int sl__tfexample_parse(const uint8_t *p, size_t n, const uint8_t **img,
                        size_t *img_len, int64_t *label, char *why,
                        size_t whylen);

/* Serializes an Example with "image/encoded" = img, "image/class/label" =
 * label and, when format is not NULL, "image/format" = format ("jpeg",
 * "png") into out (out->n set). @return 0 or SL_ENOMEM. */
int sl__tfexample_build(const void *img, size_t n, int64_t label,
                        const char *format, sl__bytes_t *out);

#endif
