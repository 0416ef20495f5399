/* Fuzz target: any bytes as a TFRecord file (data/tfrecord: framing, both
 * CRCs, the tf.train.Example parse by protobuf-c), strictly and with skip,
 * every record read; and the bytes as one Example alone. Mutations almost
 * never keep a CRC right, so a copy with every CRC rewritten to match
 * (where the framing holds) is run too, to reach the Example parser and the
 * bounds on lengths. Nothing may crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/crc32c.h"
#include "data/recfile.h"
#include "data/tfrecord.h"

static void run(const uint8_t *data, size_t size, int skip)
{
    char err[1024], d[512];
    sl__bytesrc_t *src;
    if (sl__bytesrc_open_mem(data, size, "fuzz.tfrecord", &src, err,
                             sizeof err))
        return;
    sl__recfile_t *f;
    if (sl__recfile_open_src(src, SL__FMT_TFRECORD, skip, &f, err, sizeof err))
        return;
    sl__bytes_t out = {0};
    for (int64_t k = 0; k < f->n; k++) {
        const sl__rec_t *r = &f->recs[k];
        if (r->label >= 0 && (r->img_off > r->len || r->img_len > r->len ||
                              r->off > size || r->len > size - r->off))
            abort();
        (void)sl__recfile_read(f, k, &out, NULL, NULL, err, sizeof err);
        (void)sl__recfile_describe(f, k, d, sizeof d);
    }
    sl__bytes_free(&out);
    sl__recfile_close(f);
}

/* Rewrites each record's CRCs to match while the lengths stay in the
 * input. Returns 1 if anything changed. */
static int reseal(uint8_t *p, size_t n)
{
    size_t off = 0;
    int changed = 0;
    while (n - off >= 16) {
        uint64_t len = sl__get_u64(p + off);
        if (len > n - off - 16)
            break;
        uint8_t h[12];
        sl__tfrecord_head(h, len);
        sl__tfrecord_foot(p + off + 12 + len, p + off + 12, (size_t)len);
        changed |= memcmp(p + off + 8, h + 8, 4) != 0;
        memcpy(p + off + 8, h + 8, 4);
        off += 16 + (size_t)len;
        changed = 1;
    }
    return changed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    run(copy, size, 0);
    run(copy, size, 1);
    const uint8_t *img;
    size_t len;
    int64_t label;
    char why[256];
    if (!sl__tfexample_parse(copy, size, &img, &len, &label, why, sizeof why) &&
        (img < copy || len > size || img + len > copy + size))
        abort();
    if (reseal(copy, size)) {
        run(copy, size, 0);
        run(copy, size, 1);
    }
    free(copy);
    return 0;
}
