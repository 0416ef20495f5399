/* The run shared by the record-file fuzz targets (fuzz_wds, fuzz_tfrecord):
 * the bytes indexed as fmt (strictly, or with skip), every sample read and
 * described, and one read past the end. Every sample the walk finds must
 * keep the rule a sidecar's samples are held to (sl__recidx_check: its
 * bytes inside the input, its image in its format's place): a sidecar
 * holds exactly what the walk finds. */
#ifndef SL_FUZZ_RECFILE_RUN_H
#define SL_FUZZ_RECFILE_RUN_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "data/recfile.h"
#include "data/recidx.h"

static void fuzz_recfile_run(const uint8_t *data, size_t size, int fmt,
                             const char *name, int skip)
{
    char err[1024], d[4352];
    sl__bytesrc_t *src;
    if (sl__bytesrc_open_mem(data, size, name, &src, err, sizeof err))
        return;
    sl__recfile_t *f;
    if (sl__recfile_open_src(src, fmt, skip, &f, err, sizeof err))
        return;
    sl__bytes_t out = {0};
    for (int64_t k = 0; k < f->n; k++) {
        if (sl__recidx_check(&f->recs[k], fmt, size))
            abort();
        (void)sl__recfile_read(f, k, &out, NULL, NULL, err, sizeof err);
        (void)sl__recfile_describe(f, k, d, sizeof d);
    }
    (void)sl__recfile_read(f, f->n, &out, NULL, NULL, err, sizeof err);
    sl__bytes_free(&out);
    sl__recfile_close(f);
}
#endif
