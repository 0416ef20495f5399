/* Fuzz target: any bytes as a sidecar index (data/recidx) of a WebDataset
 * tar and of a TFRecord file whose size is the one the bytes claim (up to
 * 16 MiB; zeros). A decoded index must agree with the file: every sample
 * keeps the rule of data/recidx (sl__recidx_check: inside it, its image in
 * place); then every sample is read and described, as a loader
 * would. Each input runs as is and resealed (its checksum made right,
 * so that mutations reach the checks behind it). Nothing may crash, leak, read
 * out of bounds or allocate from an unchecked count. Seeds
 * (fuzz/corpus/fuzz_recidx/): sidecars that `sluice pack` and `sluice index`
 * wrote (good tars, TFRecords, a tar with bad samples, a damaged one). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "data/recidx.h"

#define FILE_MAX (16u << 20)
static uint8_t zeros[FILE_MAX];

static void one(const uint8_t *p, size_t n, int fmt)
{
    uint64_t size = n >= 24 ? sl__get_u64(p + 16) : 0;
    if (size > FILE_MAX)
        size = FILE_MAX;
    char err[1024], d[4352];
    sl__bytesrc_t *src;
    if (sl__bytesrc_open_mem(zeros, (size_t)size, "fuzz", &src, err,
                             sizeof err))
        return;
    sl__recfile_t *f = calloc(1, sizeof *f);
    if (!f) {
        sl__bytesrc_close(src);
        return;
    }
    f->src = src;
    f->fmt = fmt;
    if (!sl__recidx_decode(f, p, n, err, sizeof err)) {
        sl__bytes_t out = {0};
        for (int64_t k = 0; k < f->n; k++) {
            if (sl__recidx_check(&f->recs[k], fmt, size))
                abort();  /* decoded, so it must keep the library's rule */
            if (k < 64) { /* reads of zeros: enough to exercise them */
                (void)sl__recfile_read(f, k, &out, NULL, NULL, err, sizeof err);
                (void)sl__recfile_describe(f, k, d, sizeof d);
            }
        }
        sl__bytes_t again = {0};
        if (sl__recidx_encode(f, &again) ||
            (again.n != n || memcmp(again.p, p, n))) {
            /* a decoded index encodes back to the same bytes, except
             * for messages (they come back with the name) */
            if (!f->nbad && !f->damage && again.p)
                abort();
        }
        sl__bytes_free(&again);
        sl__bytes_free(&out);
    }
    sl__recfile_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    one(copy, size, SL__FMT_WDS);
    one(copy, size, SL__FMT_TFRECORD);
    if (size >= 8) {
        sl__put_u64(copy + size - 8, XXH3_64bits(copy, size - 8));
        one(copy, size, SL__FMT_WDS);
        one(copy, size, SL__FMT_TFRECORD);
    }
    free(copy);
    return 0;
}
