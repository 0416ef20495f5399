/* gpu/sample_plan: a sample's refusal rule, plan and region (see
 * sample_plan.h). */
#include "gpu/sample_plan.h"

const char *sl__gpu_jpeg_refusal(const sl__jpeg_frame_t *f)
{
    if (f->sof != 0xC0 && f->sof != 0xC1)
        return f->sof == 0xC2 || f->sof == 0xC6 || f->sof == 0xCA ||
                       f->sof == 0xCE
                   ? "progressive JPEG (the hardware decoder takes baseline)"
                   : "not a baseline Huffman JPEG (lossless, arithmetic or "
                     "hierarchical)";
    if (f->precision != 8)
        return "a JPEG of more than 8 bits per sample";
    if (f->ncomp == 1)
        return "grayscale JPEG";
    if (f->ncomp != 3)
        return "a JPEG of 4 components (CMYK or YCCK)";
    if (f->adobe == 0)
        return "an Adobe RGB JPEG (no YCbCr transform)";
    /* Without JFIF or Adobe markers, components named R, G, B are RGB to
     * libjpeg (the CPU path), which nvJPEG would read as YCbCr. */
    if (f->adobe < 0 && !f->jfif && f->cid[0] == 'R' && f->cid[1] == 'G' &&
        f->cid[2] == 'B')
        return "an RGB JPEG (components R, G, B: no YCbCr transform)";
    if (f->scan_comps != 3)
        return "a JPEG whose first scan is not interleaved";
    /* Chroma at one sampling; luma 1x1, 2x1, 1x2 or 2x2 of it (4:4:4,
     * 4:2:2, 4:4:0, 4:2:0). 4:1:1 and 4:1:0 the hardware refuses. */
    if (f->hs[1] != 1 || f->vs[1] != 1 || f->hs[2] != 1 || f->vs[2] != 1 ||
        f->hs[0] < 1 || f->hs[0] > 2 || f->vs[0] < 1 || f->vs[0] > 2)
        return "a chroma subsampling the hardware decoder does not take";
    return NULL;
}

void sl__gpu_plan_geometry(sl__gpu_plan_t *p, const sl__image_plan_t *ip,
                           const sl__xform_t *x, int width)
{
    p->pitch = width * 3;
    p->ox = ip->ox, p->oy = ip->oy;
    p->out_w = ip->out_w, p->out_h = ip->out_h;
    p->hk = ip->hk, p->vk = ip->vk;
    p->hn = ip->hn, p->vn = ip->vn;
    p->vfirst = ip->vfirst, p->flip = ip->flip;
    p->f32 = x->dtype == SL_DTYPE_FLOAT32;
    p->chw = x->layout == SL_LAYOUT_CHW;
}

void sl__gpu_roi(int w, int h, int mw, int mh, int x0, int y0, int n, int m,
                 int *rx, int *ry, int *rw, int *rh)
{
    int ax = x0 / mw * mw - mw, ay = y0 / mh * mh - mh;
    int x1 = (x0 + n + mw - 1) / mw * mw + mw;
    int y1 = (y0 + m + mh - 1) / mh * mh + mh;
    *rx = ax > 0 ? ax : 0;
    *ry = ay > 0 ? ay : 0;
    *rw = (x1 < w ? x1 : w) - *rx;
    *rh = (y1 < h ? y1 : h) - *ry;
}
