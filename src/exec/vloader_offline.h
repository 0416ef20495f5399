/* exec/vloader_offline: the volume loader's offline stage of one case
 * (sluice/vloader.h): its image and label read, resampled to the target
 * spacing, clip + z-scored and edge-padded to the patch a slice at a time
 * (sl_volume_reader_t, the streaming resample ops), so neither volume is
 * ever held whole, and the label's components labelled once.
 *
 * A stage is split into jobs any thread can make (sl__voff_begin, then
 * every job, sl__voff_slab, in any order, on any threads, at once, then
 * sl__voff_end), so one huge case does not hold a batch back behind one
 * thread: the image and the label are separate jobs, and each volume is
 * split further into slabs of output slices along axis 0 (the slowest),
 * each reading its own slices. A gzip stream cannot seek: a gzip volume is
 * split only by an index of access points into it (volume/gzindex.h),
 * which its first whole read builds and the case keeps; without one its
 * slabs would inflate the slices before them again, so it stays one job.
 * The result is the same bytes for any number of slabs. Depends on volume
 * (public API, gzindex.h) and ops (volops, ops/vol3d.h). */
#ifndef SL_VLOADER_OFFLINE_H
#define SL_VLOADER_OFFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/volops.h"
#include "sluice/volume.h"

typedef struct sl__voff sl__voff_t;
struct sl__gzindex;

/* The most bytes a stage of `nslab` slabs holds at once for a case of
 * stored dims raw, resampled rs and padded dims (C order): the padded
 * image and label, the components, the labelling's two bitsets and its
 * bounded stack (ops/vol3d.h), and per job in flight (at most nslab at
 * once) the streaming ops' slices, two readers' buffers and, when `packed`
 * (a pack's case), their two record streams (data/shard.h,
 * SL__SHARD_STREAM_BYTES each: the record is never held whole). What the
 * loader charges its memory budget before a stage starts. */
int64_t sl__voff_bytes(const int64_t raw[3], const int64_t rs[3],
                       const int64_t dims[3], int packed, int nslab);

/* Whether a volume is 3-D to the stage: three dimensions, or four with the
 * fourth 1 (ITK's and MONAI's one-channel exports): its values are then
 * the 3-D array's, in the same order, and it is read as that. */
int sl__voff_is_3d(const sl_volume_t *v);

/* A stage of case c of ds (stored dims raw, resampled rs, padded dims: C
 * order; the patch, C order) with up to `nslab` (1 .. rs[0]) slabs per
 * plain volume: the headers checked against raw, the outputs allocated.
 * gzi (NULL: gzip volumes are one job, no index kept) is the case's
 * indexes of its gzip image and label files: a volume with one (of its
 * file as it is now) is split into nslab slabs like a plain one (each
 * reads from the last point before its first slice); one without is one
 * job whose whole read builds one, stored into gzi by sl__voff_end (in
 * place of a stale one; gzi's owner frees them: sl__gzindex_free). The stage
 * only reads gzi until its end.
 * @return 0 and *out, or SL_E* naming the file in err. */
int sl__voff_begin(const sl_volume_dataset_t *ds, int64_t c,
                   const int64_t raw[3], const int64_t rs[3],
                   const int64_t dims[3], const int64_t patch[3], int nslab,
                   struct sl__gzindex *gzi[2], sl__voff_t **out, char *err,
                   size_t errlen);

/* Output bytes between a gzip index's access points (SL__GZ_SPAN):
 * settable by tests, so small volumes get several. */
extern int64_t sl__voff_gz_span;

/* The stage's jobs: the image's parts (nslab, or 1 for a gzip volume
 * without an index), then the label's (the same rule; an absent label's
 * zero slices). */
int sl__voff_jobs(const sl__voff_t *v);

/* Job k: its volume's output slices [p rs[0] / n, (p + 1) rs[0] / n) for
 * part p of n, read through a reader of its own (the slices before them
 * passed over unconverted; the last part reads to the end, so a gzip
 * file's checksum is checked), resampled, normalised (the image) and
 * padded into place. Jobs write disjoint slices. @return 0, or SL_E* with
 * the file and the cause in err. */
int sl__voff_slab(sl__voff_t *v, int k, char *err, size_t errlen);

/* After every job: axis 0's padding and the label's components; moves the
 * outputs to *img (float32), *lbl (uint8) and *fg, malloc'd, the caller's.
 * A case without a label gets an all-zero one. @return 0, or SL_E*. */
int sl__voff_end(sl__voff_t *v, float **img, uint8_t **lbl, sl_vol_fg_t **fg,
                 char *err, size_t errlen);

/* Frees a stage (its outputs unless sl__voff_end took them); NULL: none. */
void sl__voff_free(sl__voff_t *v);

/* The whole stage on this thread: begin, every job in order, end. */
int sl__voff_run(const sl_volume_dataset_t *ds, int64_t c, const int64_t raw[3],
                 const int64_t rs[3], const int64_t dims[3],
                 const int64_t patch[3], int nslab, float **img, uint8_t **lbl,
                 sl_vol_fg_t **fg, char *err, size_t errlen);

#endif
