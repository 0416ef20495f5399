/* ops/image: decode (JPEG via libjpeg-turbo, PNG via libpng) + crop +
 * resize + flip + convert, fused, one sample at a time, straight into the
 * caller's output slot. Depends on base only; knows nothing of pipelines. */
#ifndef SL_IMAGE_H
#define SL_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/membudget.h"
#include "base/rng.h"

/* Per-thread reusable buffers (decode rows, resize temporaries). Grows to
 * what the images need, then allocation-free; sl__scratch_trim gives back
 * what an outlier left. */
typedef struct sl__scratch sl__scratch_t;
sl__scratch_t *sl__scratch_create(void);
void sl__scratch_destroy(sl__scratch_t *s);
/* Each sample's large buffers (the decoder's own memory, the decoded rows
 * or PNG image, the resample temporaries) are counted from the header
 * before any is allocated and handed to `admit` in one call (NULL: none;
 * the pointer is kept, so it must outlive the scratch's use). A refusal
 * fails the sample with admit's message. */
void sl__scratch_set_admit(sl__scratch_t *s, const sl__admit_t *admit);
/* Frees every buffer when together they hold more than keep bytes. */
void sl__scratch_trim(sl__scratch_t *s, size_t keep);
/* What a decoder keeps between samples by default. */
#define SL__SCRATCH_KEEP ((size_t)8 << 20)

typedef struct sl__crop {
    int x, y, w, h;
} sl__crop_t;

/* torchvision RandomResizedCrop.get_params on a width x height image, with
 * draws from r: 10 tries of (area in scale, log-uniform aspect in ratio),
 * then the central fallback. */
sl__crop_t sl__rrc_sample(sl__rng_t *r, int width, int height,
                          const double scale[2], const double ratio[2]);

/* torchvision Resize(resize_size) + CenterCrop(size) expressed as one box in
 * source pixels (scaled back from the resized image). */
sl__crop_t sl__center_box(int width, int height, int resize_size, int size);

typedef enum { SL_XF_BOX = 0, SL_XF_RRC = 1, SL_XF_CENTER = 2 } sl__xf_mode_t;

typedef struct sl__xform {
    int mode;        /* sl__xf_mode_t */
    sl__crop_t box;  /* SL_XF_BOX: the crop (w or h 0: whole image) */
    double scale[2]; /* SL_XF_RRC */
    double ratio[2]; /* SL_XF_RRC */
    int resize_size; /* SL_XF_CENTER */
    int flip;        /* SL_XF_BOX: 0/1; SL_XF_RRC: 1 = random p=0.5 */
    int out_w, out_h;
    int dtype;     /* sl_dtype_t */
    int layout;    /* sl_layout_t */
    float mean[3]; /* resolved (never all-zero here) */
    float std[3];
    int dct_scale; /* 1: may decode at 1/2, 1/4, 1/8 scale */
    int strict;    /* 1: the first corrupt-data warning fails the image */
} sl__xform_t;

/* Decodes `bytes`, draws what is random from `crop_rng` / `flip_rng` (may be
 * NULL in SL_XF_BOX mode), and writes out_w*out_h*3 samples into out.
 * Returns 0 or SL_EDECODE / SL_EUNSUPPORTED / SL_ECORRUPT with a message
 * (the cause only; the caller adds the file name). Never crashes on bad
 * bytes. */
int sl__image_process(const uint8_t *bytes, size_t n, const sl__xform_t *x,
                      sl__rng_t *crop_rng, sl__rng_t *flip_rng,
                      sl__scratch_t *s, void *out, char *err, size_t errlen);

/* A decoded cache's two halves (ops/decoded.c): the whole image at full
 * size as RGB (W x H x 3 bytes, rows packed, then SL__IMAGE_SLACK zero
 * bytes: out->n counts them), its memory admitted first; and the
 * transform from such pixels, byte for byte what sl__image_process writes
 * for the encoded image with dct_scale 0 (the same draws from the same
 * RNGs). rgb must have the SL__IMAGE_SLACK bytes after it (SIMD loads). */
#define SL__IMAGE_SLACK 32
int sl__image_decode_full(const uint8_t *bytes, size_t n, int strict,
                          sl__scratch_t *s, sl__bytes_t *out, int *w, int *h,
                          char *err, size_t errlen);
int sl__image_process_rgb(const uint8_t *rgb, int w, int h,
                          const sl__xform_t *x, sl__rng_t *crop_rng,
                          sl__rng_t *flip_rng, sl__scratch_t *s, void *out,
                          char *err, size_t errlen);

/* Width/height from the header only (a JPEG is also checked for an EOI
 * marker after its first scan: a truncated one is SL_ECORRUPT). */
int sl__image_info(const uint8_t *bytes, size_t n, int *w, int *h, char *err,
                   size_t errlen);

/* What a JPEG's header says up to its first scan, from a walk of its
 * markers (no decoder): what a GPU decoder must know to take it. */
typedef struct sl__jpeg_frame {
    int sof;       /* the SOF marker's low byte: 0xC0 baseline, 0xC1
                      extended, 0xC2 progressive, 0xC3 lossless, 0xC9..
                      arithmetic */
    int precision; /* bits per sample */
    int w, h, ncomp;
    int hs[4], vs[4]; /* sampling factors of the first four components */
    int adobe;        /* APP14 Adobe transform (0: RGB or CMYK, 1: YCbCr,
                         2: YCCK), -1 without the marker */
    int jfif;         /* 1: an APP0 JFIF marker (its colours are YCbCr) */
    int cid[4];       /* the first four components' identifiers */
    int scan_comps;   /* components in the first scan */
} sl__jpeg_frame_t;
/* Returns 0, or the error sl__image_info would give (a file that ends
 * before its first scan, or has no EOI marker after it, is truncated:
 * SL_ECORRUPT, as in the decode). */
int sl__jpeg_frame(const uint8_t *p, size_t n, sl__jpeg_frame_t *f, char *err,
                   size_t errlen);

/* The geometry sl__image_process would use for these bytes, from the
 * header only: the box in source pixels (x0, y0, x1, y1; whole pixels in
 * train and box modes, fractional in eval's Resize+CenterCrop) and the
 * flip, drawn from the same RNGs in the same order (so a stage that
 * places the sample elsewhere, the GPU stage, crops and flips exactly as
 * the CPU would: docs/DESIGN.md "GPU stage"). Returns 0 or the header's
 * error. */
int sl__image_geometry(const uint8_t *bytes, size_t n, const sl__xform_t *x,
                       sl__rng_t *crop_rng, sl__rng_t *flip_rng, double box[4],
                       int *flip, char *err, size_t errlen);

/* The resample of sl__image_process_rgb as data, for a stage that runs it
 * elsewhere (the GPU stage: gpu/resample.h applies it): the crop, resize
 * and flip of a W x H image for `box` and `flip` as sl__image_geometry
 * gave them (train and box modes: the box in whole pixels; eval's centre
 * crop is recomputed from x, needing no draws). ox, oy: the source pixel
 * of local (0, 0); hb/vb: (first, count) per output of each axis, relative
 * to it; hkk/vkk: hk or vk int32 weights per output (SL__RS_BITS fixed
 * point); hn, vn: the local extents; vfirst: the pass order. The arrays
 * live in s until its next use. Returns 0 or SL_EINVAL / SL_ERANGE /
 * SL_ENOMEM with a message. */
typedef struct sl__image_plan {
    int ox, oy, out_w, out_h, hk, vk, hn, vn, vfirst, flip;
    const int32_t *hb, *hkk, *vb, *vkk;
} sl__image_plan_t;
int sl__image_plan(const sl__xform_t *x, int W, int H, const double box[4],
                   int flip, sl__scratch_t *s, sl__image_plan_t *p, char *err,
                   size_t errlen);

/* The float32 output's table: lut[c][v] = (v / 255 - mean[c]) / std[c] in
 * float32, as ToTensor + Normalize compute it. */
void sl__norm_lut(const float mean[3], const float std[3], float lut[3][256]);

/* Encodes RGB pixels as a baseline JPEG (make-dataset, tests). */
int sl__jpeg_encode(const uint8_t *rgb, int w, int h, int quality,
                    sl__bytes_t *out, char *err, size_t errlen);

#endif
