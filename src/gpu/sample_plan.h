/* gpu/sample_plan: what the GPU stage asks of the GPU for one sample,
 * as pure functions (tested without a GPU): whether the hardware JPEG
 * decoder takes it (from sl__jpeg_frame's header walk, which the
 * fuzzer checks), the kernels' plan from the CPU path's, and the region
 * nvJPEG decodes. */
#ifndef SL_GPU_SAMPLE_PLAN_H
#define SL_GPU_SAMPLE_PLAN_H

#include "gpu/resample.h"
#include "ops/image.h"

/* Why the hardware decoder would not take a JPEG with this frame: a
 * reason, or NULL when it would. */
const char *sl__gpu_jpeg_refusal(const sl__jpeg_frame_t *f);

/* A sample's plan for the kernels (gpu/resample.h) from the CPU's
 * planner (sl__image_plan) for an image `width` pixels wide decoded to
 * interleaved RGB: everything but the pointers, which are the caller's
 * (device memory for the stage, host memory in tests). */
void sl__gpu_plan_geometry(sl__gpu_plan_t *p, const sl__image_plan_t *ip,
                           const sl__xform_t *x, int width);

/* The region of a w x h image (MCUs of mw x mh pixels) that a plan
 * reading columns [x0, x0 + n) and rows [y0, y0 + m) needs: out to whole
 * MCUs (the decoder's unit), then one MCU more on each side, within the
 * image: the ROI the stage asks nvJPEG to decode. The extra MCU keeps
 * the pixels read away from the region's edge, where a decoder's chroma
 * upsampling would lack the neighbouring MCU's samples (the CPU's crop
 * decode keeps such a margin too). */
void sl__gpu_roi(int w, int h, int mw, int mh, int x0, int y0, int n, int m,
                 int *rx, int *ry, int *rw, int *rh);

#endif
