/* Fuzz target: any bytes as a WebDataset tar shard (data/tar_walk,
 * data/wds): indexed strictly and with skip, every sample read and
 * described (which walks its header again). The index must agree with
 * itself: a good sample's bytes lie inside the input. Nothing may crash,
 * leak, read out of bounds or allocate from an unchecked size. The seed
 * corpus (fuzz/corpus/fuzz_wds/) holds tars as Python's tarfile writes
 * them (pax, GNU, ustar) and damaged variants. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/recfile.h"

static void run(const uint8_t *data, size_t size, int skip)
{
    char err[1024], d[4352];
    sl__bytesrc_t *src;
    if (sl__bytesrc_open_mem(data, size, "fuzz.tar", &src, err, sizeof err))
        return;
    sl__recfile_t *f;
    if (sl__recfile_open_src(src, SL__FMT_WDS, skip, &f, err, sizeof err))
        return;
    sl__bytes_t out = {0};
    for (int64_t k = 0; k < f->n; k++) {
        const sl__rec_t *r = &f->recs[k];
        if (r->label >= 0 && (r->off > size || r->len > size - r->off))
            abort();
        (void)sl__recfile_read(f, k, &out, NULL, NULL, err, sizeof err);
        (void)sl__recfile_describe(f, k, d, sizeof d);
    }
    (void)sl__recfile_read(f, f->n, &out, NULL, NULL, err, sizeof err);
    sl__bytes_free(&out);
    sl__recfile_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exactly sized copy, so ASan sees any read past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    run(copy, size, 0);
    run(copy, size, 1);
    free(copy);
    return 0;
}
