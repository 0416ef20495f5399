/* exec/vloader_offline: the volume loader's offline stage of one case
 * (sluice/vloader.h): its image and label read, resampled to the target
 * spacing, clip + z-scored and edge-padded to the patch a slice at a time
 * (sl_volume_reader_t, the streaming resample ops), so neither volume is
 * ever held whole, and the label's components labelled once.
 *
 * A stage is split into slabs of output slices along axis 0 (the slowest),
 * each made by any thread with readers of its own, so one huge case does
 * not hold a batch back behind one thread: sl__voff_begin, then every slab
 * (sl__voff_slab, any order, any threads, at once), then sl__voff_end.
 * The result is the same bytes for any number of slabs. Depends on volume
 * (public API) and ops (volops, ops/vol3d.h). */
#ifndef SL_VLOADER_OFFLINE_H
#define SL_VLOADER_OFFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/volops.h"
#include "sluice/volume.h"

typedef struct sl__voff sl__voff_t;

/* The most bytes a stage of `nslab` slabs holds at once for a case of
 * stored dims raw, resampled rs and padded dims (C order): the padded
 * image and label, the components, the labelling's two bitsets and its
 * bounded stack (ops/vol3d.h), and per slab the streaming ops' slices, two
 * readers' buffers and `packed` (a pack's stored bytes, read whole) twice
 * (the record and its read scratch). What the loader charges its memory
 * budget before a stage starts. */
int64_t sl__voff_bytes(const int64_t raw[3], const int64_t rs[3],
                       const int64_t dims[3], double packed, int nslab);

/* A stage of case c of ds (stored dims raw, resampled rs, padded dims: C
 * order; the patch, C order) in nslab slabs (1 .. rs[0]): its outputs
 * allocated. @return 0 and *out, or SL_ENOMEM / SL_EINVAL naming the case
 * in err. */
int sl__voff_begin(const sl_volume_dataset_t *ds, int64_t c,
                   const int64_t raw[3], const int64_t rs[3],
                   const int64_t dims[3], const int64_t patch[3], int nslab,
                   sl__voff_t **out, char *err, size_t errlen);

/* Slab k of the stage: output slices [k rs[0] / nslab, (k + 1) rs[0] /
 * nslab) of the image and the label, read through readers of its own
 * (slices before the slab read and passed over; the last slab reads to the
 * end, so a gzip file's checksum is checked), resampled, normalised and
 * padded into place. Slabs write disjoint slices. @return 0, or SL_E* with
 * the file and the cause in err. */
int sl__voff_slab(sl__voff_t *v, int k, char *err, size_t errlen);

/* After every slab: axis 0's padding and the label's components; moves the
 * outputs to *img (float32), *lbl (uint8) and *fg, malloc'd, the caller's.
 * A case without a label gets an all-zero one. @return 0, or SL_E*. */
int sl__voff_end(sl__voff_t *v, float **img, uint8_t **lbl, sl_vol_fg_t **fg,
                 char *err, size_t errlen);

/* Frees a stage (its outputs unless sl__voff_end took them); NULL: none. */
void sl__voff_free(sl__voff_t *v);

/* The whole stage on this thread: begin, every slab in order, end. */
int sl__voff_run(const sl_volume_dataset_t *ds, int64_t c, const int64_t raw[3],
                 const int64_t rs[3], const int64_t dims[3],
                 const int64_t patch[3], int nslab, float **img, uint8_t **lbl,
                 sl_vol_fg_t **fg, char *err, size_t errlen);

#endif
