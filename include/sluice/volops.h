/*
 * sluice/volops.h: the 3-D U-Net preprocessing of volumes, as the MLPerf
 * training reference does it for KiTS19 (image_segmentation/pytorch:
 * preprocess_dataset.py offline, data_loading/pytorch_loader.py online).
 *
 * A volume here is one channel in C order: dims[0] the slowest axis,
 * dims[2] the fastest (a NumPy array's shape). The ops are symmetric in
 * their axes, so an array stored x-fastest (NIfTI's order) is passed with
 * its dims reversed.
 *
 * Offline (once per volume): sl_vol_resample_shape + sl_vol_resample_linear
 * (image) / sl_vol_resample_nearest (label), sl_vol_normalize, sl_vol_pad_edge.
 * Online (per sample and epoch): sl_vol_draw picks every random parameter
 * from the counter RNG (seed, epoch, sample) — so thread counts and the
 * scheduler never change the stream — and sl_vol_apply makes the patch.
 */
#ifndef SLUICE_VOLOPS_H
#define SLUICE_VOLOPS_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The reference's constants (KiTS19). */
#define SL_VOL_KITS_CLIP_LO (-79.0f)
#define SL_VOL_KITS_CLIP_HI 304.0f
#define SL_VOL_KITS_MEAN 101.0f
#define SL_VOL_KITS_STD 76.9f

/** The resampled shape: trunc(spacing / target * dims) per axis, as the
 *  reference computes it in float64. SL_EINVAL when a spacing is not
 *  positive and finite or an axis would vanish (< 1) or pass 2^31. */
SL_API int sl_vol_resample_shape(const int64_t dims[3], const double spacing[3],
                                 const double target[3], int64_t out[3]);

/** Trilinear resampling with aligned corners (torch's
 *  interpolate(mode="trilinear", align_corners=True)): output voxel o of an
 *  axis samples input position o * (in - 1) / (out - 1). Separable; equal
 *  to torch within float rounding (see tests). */
SL_API int sl_vol_resample_linear(const float *in, const int64_t in_dims[3],
                                  float *out, const int64_t out_dims[3]);

/** Nearest resampling of a label volume, as torch's mode="nearest": source
 *  index floor(o * (in / out)) in float, clamped to in - 1. Exact. */
SL_API int sl_vol_resample_nearest(const uint8_t *in, const int64_t in_dims[3],
                                   uint8_t *out, const int64_t out_dims[3]);

/** A slice of a volume (axes 1 and 2: dims[1] x dims[2] values) handed to
 *  or asked from the caller by the streaming ops; nonzero stops the op. */
typedef int (*sl_vol_slice_fn)(void *ctx, int64_t index, void *slice);

/** sl_vol_resample_linear a slice at a time, for a volume too large to
 *  hold whole (the loader streams its offline stage through it): `pull`
 *  fills input slice i (in_dims[1] x in_dims[2] floats), called for
 *  i = 0 .. in_dims[0] - 1 in order, each once (slices no output needs
 *  too: a stream is read through); `push` takes output slice o
 *  (out_dims[1] x out_dims[2] floats) in order, and may change it. The
 *  output equals sl_vol_resample_linear's bit for bit. Memory: four
 *  output-sized slices and two input-sized ones. @return 0, SL_EINVAL,
 *  SL_ENOMEM, or what pull or push returned. */
SL_API int sl_vol_resample_linear_slices(const int64_t in_dims[3],
                                         const int64_t out_dims[3],
                                         sl_vol_slice_fn pull,
                                         sl_vol_slice_fn push, void *ctx);

/** sl_vol_resample_nearest a slice at a time (uint8 slices), as
 *  sl_vol_resample_linear_slices; equal to it exactly. */
SL_API int sl_vol_resample_nearest_slices(const int64_t in_dims[3],
                                          const int64_t out_dims[3],
                                          sl_vol_slice_fn pull,
                                          sl_vol_slice_fn push, void *ctx);

/** Clips x to [lo, hi], then (x - mean) / std, in float (the reference's
 *  float32 arithmetic: exact). */
SL_API void sl_vol_normalize(float *x, size_t n, float lo, float hi, float mean,
                             float std);

/** Pads each axis up to min_dims by repeating the edge (np.pad
 *  mode="edge"), floor(extra / 2) before, the rest after; axes already
 *  long enough are kept. `out` holds the padded volume (out_dims, filled
 *  in); esize is the element size (4: float image, 1: uint8 label). Call
 *  with out = NULL to learn out_dims. */
SL_API int sl_vol_pad_edge(const void *in, const int64_t dims[3], size_t esize,
                           const int64_t min_dims[3], void *out,
                           int64_t out_dims[3]);

/** The online augmentation's settings (the reference's values from
 *  sl_vol_aug_init). Its layout is fixed: it sits inside
 *  sl_vloader_options_t, so new fields go there, not here; `size` is set
 *  by sl_vol_aug_init and checked. */
typedef struct sl_vol_aug {
    size_t size;
    int64_t patch[3];         /**< patch shape [128, 128, 128] */
    double oversampling;      /**< foreground-biased crop chance [0.4] */
    double flip_prob;         /**< per axis [1/3] */
    double brightness_prob;   /**< [0.1] */
    double brightness_factor; /**< factor drawn in 1 +- this [0.3] */
    double noise_prob;        /**< [0.1] */
    double noise_std;         /**< noise sd drawn in [0, this) [0.1] */
} sl_vol_aug_t;

SL_API void sl_vol_aug_init(sl_vol_aug_t *a);

/** Every random decision for one (seed, epoch, sample), and the crop it
 *  leads to. The reference's choices: a foreground crop
 *  with chance `oversampling` (a class drawn among the label's non-zero
 *  values, ascending; its 6-connected components; of the two with the
 *  largest bounding boxes — ascending by box volume, ties by label order —
 *  one drawn; each axis' box adjusted to the patch by a drawn offset),
 *  else a uniform crop; a flip per axis; brightness; noise. The label-free
 *  draws come from one stream (sl_vol_predict), the crop's from another.
 *  A label without foreground gets the uniform crop (where the reference
 *  fails; `foreground` then reads 0). */
typedef struct sl_vol_draw {
    size_t size;
    int foreground;    /**< 1: crop around a foreground component */
    int cls;           /**< its class (foreground) */
    int ncomponents;   /**< components of that class */
    int component;     /**< index among the (up to) two largest */
    int64_t box_lo[3]; /**< that component's bounding box [lo, hi) */
    int64_t box_hi[3];
    int64_t adj[3]; /**< drawn adjustment per axis (reference "ladj") */
    int64_t lo[3];  /**< crop origin; the crop is lo .. lo + patch */
    int flip[3];
    int brightness;        /**< 1: image scaled by brightness_mul */
    double brightness_mul; /**< 1 + factor, factor in 1 +- brightness_factor */
    int noise;             /**< 1: Gaussian noise of sd noise_sd added */
    double noise_sd;
} sl_vol_draw_t;

/** The draws that need no label — foreground crop or not, flips,
 *  brightness, noise — into *d (crop fields zero): what a sample will cost
 *  is known before its volume is read (the loader's balancer uses it).
 *  sl_vol_draw makes the same draws, then the crop. */
SL_API int sl_vol_predict(const sl_vol_aug_t *a, uint64_t seed, uint64_t epoch,
                          uint64_t sample, sl_vol_draw_t *d);

/** Draws the parameters for sample `sample` of `epoch` from `label`
 *  (dims at least the patch on every axis: pad first). Memory: a bit per
 *  voxel and the largest component's voxel list. SL_EINVAL (dims smaller
 *  than the patch, a bad setting), SL_ENOMEM. */
SL_API int sl_vol_draw(const uint8_t *label, const int64_t dims[3],
                       const sl_vol_aug_t *a, uint64_t seed, uint64_t epoch,
                       uint64_t sample, sl_vol_draw_t *d, char *err,
                       size_t errlen);

/** A label volume's foreground, summarised once (labels do not change
 *  between epochs): its classes ascending, and for each the number of
 *  6-connected components and the (up to) two largest bounding boxes — a
 *  stable ascending sort's last two by box volume, ties in scipy's label
 *  order. What a foreground crop needs, so that each epoch's draw costs
 *  nothing more (sl_vol_draw_fg). */
typedef struct sl_vol_fg {
    size_t size;
    int ncls;
    uint8_t cls[255];
    int ncomp[255];
    int nbox[255];
    int64_t box_lo[255][2][3], box_hi[255][2][3];
    double box_vol[255][2];
} sl_vol_fg_t;

/** Labels the components of every class of `label` (one flood fill per
 *  component, a bit per voxel and the largest component's voxel list).
 *  SL_EINVAL, SL_ENOMEM. */
SL_API int sl_vol_foreground(const uint8_t *label, const int64_t dims[3],
                             sl_vol_fg_t *fg, char *err, size_t errlen);

/** sl_vol_draw from a foreground summary instead of the label: the same
 *  draw. */
SL_API int sl_vol_draw_fg(const sl_vol_fg_t *fg, const int64_t dims[3],
                          const sl_vol_aug_t *a, uint64_t seed, uint64_t epoch,
                          uint64_t sample, sl_vol_draw_t *d, char *err,
                          size_t errlen);

/** Makes the patch: crop at d->lo, flips, brightness, then noise from the
 *  counter RNG of (seed, epoch, sample) into out_image (float32) and
 *  out_label (uint8), patch-sized. Either output may be NULL. */
SL_API int sl_vol_apply(const float *image, const uint8_t *label,
                        const int64_t dims[3], const sl_vol_aug_t *a,
                        const sl_vol_draw_t *d, uint64_t seed, uint64_t epoch,
                        uint64_t sample, float *out_image, uint8_t *out_label);

/** float32 to bfloat16 bits, rounded to nearest even (torch's
 *  conversion: a NaN becomes the quiet NaN 0x7fc0). out may not overlap
 *  in. */
SL_API void sl_vol_to_bf16(const float *in, uint16_t *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_VOLOPS_H */
