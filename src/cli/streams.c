/* cli/streams: the image loader (sl_loader_*) and the text loader
 * (sl_text_loader_*) as the consumer loop drives them (sl__stream_t). The
 * two APIs have the same shape, so one macro writes the forwarding for
 * both; what differs (a batch's size and digest) is written beside it. */
#include <xxhash.h>

#include "consume.h"

/* The calls that only forward: LDR the loader type, P the API prefix, ST
 * its stats type. */
#define SL__STREAM_FORWARD(LDR, P, ST)                                         \
    static int P##_start_(void *l, const sl_position_t *from)                  \
    {                                                                          \
        return P##_start((LDR *)l, from);                                      \
    }                                                                          \
    static void P##_release_(void *l, const void *batch)                       \
    {                                                                          \
        P##_release((LDR *)l, batch);                                          \
    }                                                                          \
    static void P##_position_(void *l, sl_position_t *pos)                     \
    {                                                                          \
        P##_position((LDR *)l, pos);                                           \
    }                                                                          \
    static void P##_stats_(void *l, int64_t *skipped, int64_t *bytes_read)     \
    {                                                                          \
        ST s = {.size = sizeof(ST)};                                           \
        P##_stats((LDR *)l, &s);                                               \
        *skipped = s.errors_skipped;                                           \
        *bytes_read = s.bytes_read;                                            \
    }                                                                          \
    static int64_t P##_skipped_count_(void *l)                                 \
    {                                                                          \
        return P##_skipped_count((LDR *)l);                                    \
    }                                                                          \
    static const char *P##_skipped_message_(void *l, int64_t i)                \
    {                                                                          \
        return P##_skipped_message((LDR *)l, i);                               \
    }                                                                          \
    static const char *P##_last_error_(void *l)                                \
    {                                                                          \
        return P##_last_error((LDR *)l);                                       \
    }

/* An sl__stream_t of loader l, with P's forwarding and its own next and
 * digest. */
#define SL__STREAM_OF(l, P, next, digest)                                      \
    ((sl__stream_t){(l), P##_start_, (next), P##_release_, (digest),           \
                    P##_position_, P##_stats_, P##_skipped_count_,             \
                    P##_skipped_message_, P##_last_error_})

SL__STREAM_FORWARD(sl_loader_t, sl_loader, sl_stats_t)
SL__STREAM_FORWARD(sl_text_loader_t, sl_text_loader, sl_text_stats_t)

static int img_next(void *l, sl__item_t *it, int timeout_ms)
{
    const sl_batch_t *b;
    int rc = sl_loader_next_timeout(l, &b, timeout_ms);
    if (!rc)
        *it = (sl__item_t){b, b->n, b->epoch, 0};
    return rc;
}

/* Every sample's bytes, then the labels. */
static uint64_t img_digest(const void *batch, uint64_t h)
{
    const sl_batch_t *b = batch;
    h = XXH3_64bits_withSeed(b->data, (size_t)b->n * b->sample_bytes, h);
    return XXH3_64bits_withSeed(b->labels, (size_t)b->n * sizeof(int64_t), h);
}

sl__stream_t sl__stream_image(sl_loader_t *l)
{
    return SL__STREAM_OF(l, sl_loader, img_next, img_digest);
}

static int txt_next(void *l, sl__item_t *it, int timeout_ms)
{
    const sl_text_batch_t *b;
    int rc = sl_text_loader_next_timeout(l, &b, timeout_ms);
    if (!rc)
        *it = (sl__item_t){b, b->n, b->epoch, b->tokens};
    return rc;
}

/* input_ids, labels, and for mlm attention_mask and token_type_ids. */
static uint64_t txt_digest(const void *batch, uint64_t h)
{
    const sl_text_batch_t *b = batch;
    size_t n = (size_t)b->n * (size_t)b->seq_len * sizeof(int32_t);
    h = XXH3_64bits_withSeed(b->input_ids, n, h);
    h = XXH3_64bits_withSeed(b->labels, n, h);
    if (b->attention_mask) {
        h = XXH3_64bits_withSeed(b->attention_mask, n, h);
        h = XXH3_64bits_withSeed(b->token_type_ids, n, h);
    }
    return h;
}

sl__stream_t sl__stream_text(sl_text_loader_t *l)
{
    return SL__STREAM_OF(l, sl_text_loader, txt_next, txt_digest);
}
