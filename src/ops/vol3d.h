/* ops/vol3d: internals of the volume ops (sluice/volops.h) that the
 * volume loader's offline stage uses to split one case across threads. */
#ifndef SL_OPS_VOL3D_H
#define SL_OPS_VOL3D_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/volops.h"

/* sl_vol_resample_linear_slices (nearest: _nearest_slices) for output
 * slices q0 .. q1 - 1 only: input slices are pulled from 0 in order up to
 * the last the range needs (those before the range read and passed over:
 * a stream has no other way to them), and with `through` on to the end;
 * push gets q0 .. q1 - 1 in order. Each output slice equals the whole op's
 * bit for bit, so ranges that cover the output make the same volume. */
int sl__vol_resample_linear_range(const int64_t in_dims[3],
                                  const int64_t out_dims[3], int64_t q0,
                                  int64_t q1, int through, sl_vol_slice_fn pull,
                                  sl_vol_slice_fn push, void *ctx);
int sl__vol_resample_nearest_range(const int64_t in_dims[3],
                                   const int64_t out_dims[3], int64_t q0,
                                   int64_t q1, int through,
                                   sl_vol_slice_fn pull, sl_vol_slice_fn push,
                                   void *ctx);

#endif
