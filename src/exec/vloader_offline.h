/* exec/vloader_offline: the volume loader's offline stage of one case
 * (sluice/vloader.h): its image and label read, resampled to the target
 * spacing, clip + z-scored and edge-padded to the patch a slice at a time
 * (sl_volume_reader_t, sl_vol_resample_*_slices), so neither volume is ever
 * held whole, and the label's components labelled once. Depends on
 * volume (public API) and ops (volops). */
#ifndef SL_VLOADER_OFFLINE_H
#define SL_VLOADER_OFFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/volops.h"
#include "sluice/volume.h"

/* The most bytes sl__voff_run holds for a case of stored dims raw,
 * resampled rs and padded dims (C order): the padded image and label, the
 * components, the labelling's bitset, the streaming ops' slices, the two
 * readers' buffers, and `packed` (a pack's stored bytes, read whole) twice
 * (the record and its read scratch). What the loader charges its memory
 * budget before a stage starts. Not counted: the flood fill's stack, which
 * grows with the largest component (8 bytes a voxel at most). */
int64_t sl__voff_bytes(const int64_t raw[3], const int64_t rs[3],
                       const int64_t dims[3], double packed);

/* Case c of ds (stored dims raw, resampled rs, padded dims: C order; the
 * patch, C order) into *img (float32), *lbl (uint8) and *fg (the
 * components), all malloc'd, the caller's. A case without a label gets an
 * all-zero one. @return 0, or SL_E* with the file and the cause in err. */
int sl__voff_run(const sl_volume_dataset_t *ds, int64_t c, const int64_t raw[3],
                 const int64_t rs[3], const int64_t dims[3],
                 const int64_t patch[3], float **img, uint8_t **lbl,
                 sl_vol_fg_t **fg, char *err, size_t errlen);

#endif
