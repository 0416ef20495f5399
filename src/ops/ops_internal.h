/* ops internals: the pieces of the fused decode -> crop -> resize -> write
 * path, shared by jpeg.c, png.c, resize.c, convert.c and transform.c.
 *
 * Data flow for one sample (no full-size image is ever materialised for
 * JPEG):
 *   decoder rows (only the needed rows/columns, maybe at 1/2..1/8 DCT scale)
 *     -> horizontal pass, a batch of decoded rows at a time (AVX2: each
 *        output's weights read once per batch), into tmp (out_w x used
 *        rows, uint8)
 *     -> vertical pass, one output row at a time (vertical-first order:
 *        vertical pass over the source columns, then the horizontal pass
 *        over batches of those rows)
 *     -> write (flip, layout, uint8 or float LUT) into the caller's slot.
 * The two passes are PIL's ImagingResample (bilinear, antialiased), with the
 * same fixed-point coefficients and rounding, so a full-scale decode matches
 * PIL's img.crop(box).resize(size, BILINEAR) bit for bit. */
#ifndef SL_OPS_INTERNAL_H
#define SL_OPS_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

#include "ops/image.h"

/* Largest accepted image: bounds memory and time on hostile headers. */
#define SL__IMG_MAX_SIDE 16384
#define SL__IMG_MAX_PIXELS ((int64_t)1 << 28)
/* Largest output side (tmp holds out_w x source rows). */
#define SL__OUT_MAX_SIDE 8192
/* Bytes of slack after every buffer the SIMD kernels read (they may load a
 * few bytes past the last pixel they use). */
#define SL__SLACK 32
_Static_assert(SL__SLACK == SL__IMAGE_SLACK, "one slack for all pixels");
/* Fixed-point bits of the resampling weights (PIL's PRECISION_BITS). */
#define SL__RS_BITS 22

/* One axis of a resample: PIL's precompute_coeffs + normalize_coeffs_8bpc
 * over a local input range [0, in). bounds are (first, count) pairs relative
 * to `lo`, the first input index any output uses; `hi` is one past the
 * last. */
typedef struct sl__axis {
    int out, ksize;
    int lo, hi;
    int *bounds;
    int32_t *kk;
    /* AVX2 horizontal pass only: kk split as k = kh * 2^11 + kl (both
     * int16) and laid out for pmaddwd, SL__KX_GROUP taps per group,
     * kgroups groups per output (see sl__axis_expand). */
    int kgroups;
    int16_t *kx;
    /* Outputs 0 .. kx_safe-1 may run all kgroups groups (their loads stay
     * within the row plus the usual slack); later ones stop after their
     * own taps. */
    int kx_safe;
} sl__axis_t;

/* Taps per group of the expanded weights, int16 per group (64 bytes). */
#define SL__KX_GROUP 4
#define SL__KX_WORDS 32

/* The crop as a float box in source pixels, plus how to clip the filter:
 * clip_box 1 = crop-then-resize (taps never leave the box; RRC and BOX),
 * 0 = resize-then-crop (taps may use pixels outside; CENTER). */
typedef struct sl__fbox {
    double x0, y0, x1, y1;
    int clip_box;
    /* The sizes PIL's resize call sees (input w, h; output w, h): they pick
     * its pass order (see sl__vertical_first). */
    int pil_w, pil_h, pil_ow, pil_oh;
} sl__fbox_t;

/* libjpeg error manager: longjmp back with the message captured. */
typedef struct sl__jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int code;         /* SL_E* to return */
    int warnings;     /* corrupt-data warnings seen in this image */
    int max_warnings; /* more than this fails the image */
    char msg[JMSG_LENGTH_MAX];
} sl__jerr_t;

struct sl__scratch {
    sl__bytes_t rows;         /* decoder output rows */
    sl__bytes_t tmp;          /* horizontal-pass output */
    sl__bytes_t coef;         /* axis bounds + weights */
    sl__bytes_t dbl;          /* double weights while computing one output */
    sl__bytes_t line;         /* one vertical-pass output row (+ int32 acc) */
    sl__bytes_t full;         /* PNG: whole decoded image */
    const sl__admit_t *admit; /* the sample's large buffers, counted */
    int jpeg_ready;
    struct jpeg_decompress_struct dinfo;
    sl__jerr_t jerr;
    struct jpeg_progress_mgr jprog;
    int lut_ok;
    float lut_mean[3], lut_std[3];
    float lut[3][256];
};

/* The geometry of one sample after decoding its header. */
typedef struct sl__geom {
    sl__fbox_t box; /* in source pixels */
    int flip;
} sl__geom_t;

/* Resolves the box (and draws crop/flip for RRC) for a W x H image. */
int sl__geom_resolve(const sl__xform_t *x, int W, int H, sl__rng_t *crop_rng,
                     sl__rng_t *flip_rng, sl__geom_t *g, char *err,
                     size_t errlen);

/* Picks the DCT scale denominator (1, 2, 4, 8) for a box and output. */
int sl__pick_denom(const sl__fbox_t *b, int out_w, int out_h);

/* Sets up both axes for a decoded image of dw x dh pixels that is the source
 * scaled by 1/denom. On return, (*cx0, *cy0) is the decoded-image position of
 * local index 0 of each axis; the needed pixels are columns cx0+h.lo ..
 * cx0+h.hi-1 and rows cy0+v.lo .. cy0+v.hi-1. */
int sl__plan_axes(sl__scratch_t *s, const sl__fbox_t *b, int denom, int dw,
                  int dh, int out_w, int out_h, sl__axis_t *h, sl__axis_t *v,
                  int *cx0, int *cy0);

/* Pillow (since PR #9549) runs the vertical pass first when the height
 * shrinks by more than twice as many pixels as the width:
 * oh < h && h - oh > 2 * (w - ow). The order changes the uint8 rounding
 * between the passes, so we follow it to stay bit-exact. */
int sl__vertical_first(const sl__fbox_t *b);

/* The two passes over the needed rows. Usage: sl__plan_axes into h and v,
 * sl__rs_begin, then sl__rs_row for each needed source row r (0 = row v.lo)
 * in any order, then sl__rs_finish. */
typedef struct sl__rs {
    sl__axis_t h, v;
    int vfirst;   /* 1: vertical pass first (buf holds source columns) */
    uint8_t *buf; /* horizontal first: h.out RGB pixels per row;
                     vertical first: the needed source columns */
    size_t stride;
    int avx2;
} sl__rs_t;

int sl__rs_begin(sl__scratch_t *s, sl__rs_t *rs, int vfirst);
/* The bytes sl__rs_begin and sl__rs_finish will reserve for planned axes
 * (tmp + line), so a sample can be admitted before they are allocated. */
size_t sl__rs_need(const sl__axis_t *h, const sl__axis_t *v, int vfirst);
/* src points at pixel h.lo of the row; ps bytes per pixel (3, or 4 with
 * the fourth dropped). */
void sl__rs_row(sl__rs_t *rs, int r, const uint8_t *src, int ps);
/* nrows consecutive rows r.. at src, sstride bytes apart (same as calling
 * sl__rs_row on each, faster). */
void sl__rs_rows(sl__rs_t *rs, int r, const uint8_t *src, size_t sstride,
                 int nrows, int ps);
int sl__rs_finish(sl__scratch_t *s, sl__rs_t *rs, const sl__xform_t *x,
                  int flip, void *out);

/* The plan for a source whose W x H pixels are all at hand (a PNG, a
 * decoded-cache entry): its size checked (sl__check_dims), the geometry
 * (sl__geom_resolve), both axes at scale 1 (sl__plan_axes, into rs->h and
 * rs->v) and the pass order (sl__vertical_first) into *vfirst. */
int sl__plan_full(const sl__xform_t *x, int W, int H, sl__rng_t *crop_rng,
                  sl__rng_t *flip_rng, sl__scratch_t *s, sl__geom_t *g,
                  sl__rs_t *rs, int *cx0, int *cy0, int *vfirst, char *err,
                  size_t errlen);

/* AVX2 kernels (resize_avx2.c); call only when sl__have_avx2(). Setting
 * the environment variable SL_NO_AVX2 (to anything but "0") before the
 * first call forces the scalar code, for tests. */
int sl__have_avx2(void);
/* Fills h->kx from h->kk (h->kx must hold out * kgroups * SL__KX_WORDS). */
void sl__axis_expand(sl__axis_t *h);
/* Writes one RGB row as three uint8 planes (flip: mirrored). */
void sl__chw8_avx2(const uint8_t *rgb, int w, int flip, uint8_t *d0,
                   uint8_t *d1, uint8_t *d2);
void sl__hpass3_avx2(const uint8_t *src, const sl__axis_t *h, uint8_t *dst);
void sl__hpass3_rows_avx2(const uint8_t *src, size_t sstride, int nrows,
                          const sl__axis_t *h, uint8_t *dst, size_t dstride);
void sl__vpass_avx2(const uint8_t *buf, size_t stride, const int32_t *k,
                    int first, int n, size_t w3, uint8_t *dst);

/* Writes one RGB output row y into out (flip, layout, dtype). */
void sl__write_row(sl__scratch_t *s, const sl__xform_t *x, int flip, int y,
                   const uint8_t *rgb, void *out);

/* Format back ends. */
int sl__jpeg_info(const uint8_t *p, size_t n, int *w, int *h, char *err,
                  size_t errlen);
int sl__jpeg_process(const uint8_t *p, size_t n, const sl__xform_t *x,
                     sl__rng_t *crop_rng, sl__rng_t *flip_rng, sl__scratch_t *s,
                     void *out, char *err, size_t errlen);
void sl__jpeg_release(sl__scratch_t *s);
int sl__jpeg_decode_full(const uint8_t *p, size_t n, int strict,
                         sl__scratch_t *s, sl__bytes_t *out, int *w, int *h,
                         char *err, size_t errlen);
int sl__png_decode_full(const uint8_t *p, size_t n, sl__scratch_t *s,
                        sl__bytes_t *out, int *w, int *h, char *err,
                        size_t errlen);
int sl__png_info(const uint8_t *p, size_t n, int *w, int *h, char *err,
                 size_t errlen);
int sl__png_process(const uint8_t *p, size_t n, const sl__xform_t *x,
                    sl__rng_t *crop_rng, sl__rng_t *flip_rng, sl__scratch_t *s,
                    void *out, char *err, size_t errlen);

/* Asks the scratch's admit hook for `need` bytes (see image.h). */
int sl__scratch_admit(sl__scratch_t *s, size_t need, char *err, size_t errlen);

/* Rejects sizes over the limits with SL_EUNSUPPORTED. */
int sl__check_dims(int w, int h, char *err, size_t errlen);

#endif
