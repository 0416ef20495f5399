/* ops/vol3d: internals of the volume ops (sluice/volops.h) that the
 * volume loader's offline stage uses to split one case across threads. */
#ifndef SL_OPS_VOL3D_H
#define SL_OPS_VOL3D_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/volops.h"

/* sl_vol_resample_linear_slices (nearest: _nearest_slices) for output
 * slices q0 .. q1 - 1 only: input slices are pulled from 0 in order up to
 * the last the range needs, and with `through` on to the end; with
 * `sparse` a slice the range does not need is pulled with a NULL slice
 * (the caller passes over it: a stream cannot seek, but it can skip
 * without converting). push gets q0 .. q1 - 1 in order. Each output slice
 * equals the whole op's bit for bit, so ranges that cover the output make
 * the same volume. */
int sl__vol_resample_linear_range(const int64_t in_dims[3],
                                  const int64_t out_dims[3], int64_t q0,
                                  int64_t q1, int through, int sparse,
                                  sl_vol_slice_fn pull, sl_vol_slice_fn push,
                                  void *ctx);
int sl__vol_resample_nearest_range(const int64_t in_dims[3],
                                   const int64_t out_dims[3], int64_t q0,
                                   int64_t q1, int through, int sparse,
                                   sl_vol_slice_fn pull, sl_vol_slice_fn push,
                                   void *ctx);

/* The flood fill's stack in sl_vol_foreground: at most this many voxels
 * (8 MiB); a component larger than the stack is finished from a pending
 * bitset (one bit a voxel), so labelling holds two bitsets and the stack,
 * never memory that grows with a component. */
#define SL__VOL_FILL_CAP ((size_t)1 << 20)
extern size_t sl__vol_fill_cap; /* SL__VOL_FILL_CAP; tests lower it */

/* sl_vol_foreground with a stack of at most `cap` voxels; *depth (may be
 * NULL): the deepest the stack went. The same result for any cap. */
int sl__vol_foreground_capped(const uint8_t *label, const int64_t d[3],
                              sl_vol_fg_t *fg, size_t cap, size_t *depth,
                              char *err, size_t errlen);

#endif
