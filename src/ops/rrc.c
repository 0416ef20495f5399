/* ops/rrc: where the crop comes from. RandomResizedCrop.get_params and
 * Resize+CenterCrop as torchvision define them, and the float box the
 * resampler works on. */
#include <math.h>

#include "ops/ops_internal.h"

sl__crop_t sl__rrc_sample(sl__rng_t *r, int width, int height,
                          const double scale[2], const double ratio[2])
{
    double area = (double)width * (double)height;
    double lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    for (int i = 0; i < 10; i++) {
        double target = area * sl__rng_uniform(r, scale[0], scale[1]);
        double aspect = exp(sl__rng_uniform(r, lr0, lr1));
        /* Python's round() is half-to-even, as rint() in the default mode. */
        double wd = rint(sqrt(target * aspect));
        double hd = rint(sqrt(target / aspect));
        if (wd > 0 && wd <= width && hd > 0 && hd <= height) {
            int w = (int)wd, h = (int)hd;
            sl__crop_t c;
            c.h = h;
            c.w = w;
            c.y = (int)sl__rng_below(r, (uint64_t)(height - h + 1));
            c.x = (int)sl__rng_below(r, (uint64_t)(width - w + 1));
            return c;
        }
    }
    /* Fallback to a central crop, clamped to the ratio range. */
    double in_ratio = (double)width / (double)height;
    double rmin = fmin(ratio[0], ratio[1]), rmax = fmax(ratio[0], ratio[1]);
    int w, h;
    if (in_ratio < rmin) {
        w = width;
        h = (int)rint(w / rmin);
    } else if (in_ratio > rmax) {
        h = height;
        w = (int)rint(h * rmax);
    } else {
        w = width;
        h = height;
    }
    if (w < 1)
        w = 1;
    if (h < 1)
        h = 1;
    if (w > width)
        w = width;
    if (h > height)
        h = height;
    sl__crop_t c = {(width - w) / 2, (height - h) / 2, w, h};
    return c;
}

/* torchvision Resize(int): shorter side -> size, longer side
 * int(size * long / short) (truncated). */
static void resized_dims(int width, int height, int size, int *rw, int *rh)
{
    if (width <= height) {
        *rw = size;
        *rh = (int)((double)size * height / width);
    } else {
        *rh = size;
        *rw = (int)((double)size * width / height);
    }
}

/* CenterCrop offset: int(round((len - size) / 2.0)), Python rounding. */
static int center_off(int len, int size)
{
    return (int)rint((len - size) / 2.0);
}

static void center_fbox(int width, int height, int resize_size, int out_w,
                        int out_h, sl__fbox_t *b)
{
    int rw, rh;
    resized_dims(width, height, resize_size, &rw, &rh);
    /* A crop larger than the resized image would pad in torchvision; we
     * clamp instead (never happens with resize_size >= size). */
    int cw = out_w < rw ? out_w : rw, ch = out_h < rh ? out_h : rh;
    int left = center_off(rw, cw), top = center_off(rh, ch);
    double sx = (double)width / rw, sy = (double)height / rh;
    b->x0 = left * sx;
    b->x1 = (left + cw) * sx;
    b->y0 = top * sy;
    b->y1 = (top + ch) * sy;
    b->clip_box = 0;
    b->pil_w = width;
    b->pil_h = height;
    b->pil_ow = rw;
    b->pil_oh = rh;
}

sl__crop_t sl__center_box(int width, int height, int resize_size, int size)
{
    sl__fbox_t b;
    center_fbox(width, height, resize_size, size, size, &b);
    sl__crop_t c;
    c.x = (int)floor(b.x0 + 0.5);
    c.y = (int)floor(b.y0 + 0.5);
    c.w = (int)floor(b.x1 + 0.5) - c.x;
    c.h = (int)floor(b.y1 + 0.5) - c.y;
    if (c.w < 1)
        c.w = 1;
    if (c.h < 1)
        c.h = 1;
    return c;
}

int sl__geom_resolve(const sl__xform_t *x, int W, int H, sl__rng_t *crop_rng,
                     sl__rng_t *flip_rng, sl__geom_t *g, char *err,
                     size_t errlen)
{
    g->flip = 0;
    switch (x->mode) {
    case SL_XF_BOX: {
        sl__crop_t c = x->box;
        if (c.w == 0 || c.h == 0) {
            c.x = c.y = 0;
            c.w = W;
            c.h = H;
        }
        if (c.x < 0 || c.y < 0 || c.w < 0 || c.h < 0 || c.x > W - c.w ||
            c.y > H - c.h)
            return sl__fail(err, errlen, SL_ERANGE,
                            "crop box %dx%d+%d+%d outside the %dx%d image", c.w,
                            c.h, c.x, c.y, W, H);
        g->box = (sl__fbox_t){c.x, c.y, c.x + c.w, c.y + c.h, 1,
                              c.w, c.h, x->out_w,  x->out_h};
        g->flip = x->flip != 0;
        return 0;
    }
    case SL_XF_RRC: {
        if (!crop_rng)
            return sl__fail(err, errlen, SL_EINVAL, "RRC without an rng");
        sl__crop_t c = sl__rrc_sample(crop_rng, W, H, x->scale, x->ratio);
        g->box = (sl__fbox_t){c.x, c.y, c.x + c.w, c.y + c.h, 1,
                              c.w, c.h, x->out_w,  x->out_h};
        if (x->flip) {
            sl__rng_t *r = flip_rng ? flip_rng : crop_rng;
            g->flip = sl__rng_double(r) < 0.5;
        }
        return 0;
    }
    case SL_XF_CENTER: {
        int size = x->out_w < x->out_h ? x->out_w : x->out_h;
        int rs = x->resize_size > 0 ? x->resize_size : size * 256 / 224;
        center_fbox(W, H, rs, x->out_w, x->out_h, &g->box);
        return 0;
    }
    default:
        return sl__fail(err, errlen, SL_EINVAL, "bad transform mode %d",
                        x->mode);
    }
}

int sl__pick_denom(const sl__fbox_t *b, int out_w, int out_h)
{
    double bw = b->x1 - b->x0, bh = b->y1 - b->y0;
    for (int d = 8; d > 1; d /= 2)
        if (bw / d >= out_w && bh / d >= out_h)
            return d;
    return 1;
}
