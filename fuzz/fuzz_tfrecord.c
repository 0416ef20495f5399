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
#include "data/tfrecord.h"
#include "recfile_run.h"

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
    fuzz_recfile_run(copy, size, SL__FMT_TFRECORD, "fuzz.tfrecord", 0);
    fuzz_recfile_run(copy, size, SL__FMT_TFRECORD, "fuzz.tfrecord", 1);
    const uint8_t *img;
    size_t len;
    int64_t label;
    char why[256];
    if (!sl__tfexample_parse(copy, size, &img, &len, &label, why, sizeof why) &&
        (img < copy || len > size || img + len > copy + size))
        abort();
    if (reseal(copy, size)) {
        fuzz_recfile_run(copy, size, SL__FMT_TFRECORD, "fuzz.tfrecord", 0);
        fuzz_recfile_run(copy, size, SL__FMT_TFRECORD, "fuzz.tfrecord", 1);
    }
    free(copy);
    return 0;
}
