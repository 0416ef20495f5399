/* exec/vloader_offline: the offline stage of a volume case, streamed a
 * slice at a time (vloader_offline.h). */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "vloader_offline.h"

/* The offline stage streamed a slice (axis 0) at a time: image slices are
 * read, resampled, normalised and padded straight into the padded output,
 * then the label's the same way; neither volume is ever held whole. */
typedef struct ostream {
    sl_volume_reader_t *r;
    int64_t raw[3], rd[3], pd[3], before[3];
    const int64_t *patch;
    float *fslice; /* a label slice as read (float) */
    void *out;     /* the padded volume being filled */
    size_t esize;
    char *err;
    size_t errlen;
} ostream_t;

static int pull_image(void *ctx, int64_t i, void *slice)
{
    ostream_t *s = ctx;
    (void)i;
    return sl_volume_reader_read(s->r, slice, s->raw[1] * s->raw[2], s->err,
                                 s->errlen);
}

static int pull_label(void *ctx, int64_t i, void *slice)
{
    ostream_t *s = ctx;
    (void)i;
    size_t n = (size_t)(s->raw[1] * s->raw[2]);
    int rc =
        sl_volume_reader_read(s->r, s->fslice, (int64_t)n, s->err, s->errlen);
    uint8_t *lb = slice;
    for (size_t k = 0; !rc && k < n; k++) {
        float v = s->fslice[k] + 0.5f;
        lb[k] = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
    }
    return rc;
}

/* Output slice o (rd[1] x rd[2]) edge-padded into its place. */
static void put_slice(ostream_t *s, int64_t o, const void *slice)
{
    const int64_t d[3] = {1, s->rd[1], s->rd[2]};
    const int64_t m[3] = {1, s->patch[1], s->patch[2]};
    int64_t od[3];
    size_t plane = (size_t)(s->pd[1] * s->pd[2]) * s->esize;
    sl_vol_pad_edge(slice, d, s->esize, m,
                    (char *)s->out + (size_t)(o + s->before[0]) * plane, od);
}

static int push_image(void *ctx, int64_t o, void *slice)
{
    ostream_t *s = ctx;
    sl_vol_normalize(slice, (size_t)(s->rd[1] * s->rd[2]), SL_VOL_KITS_CLIP_LO,
                     SL_VOL_KITS_CLIP_HI, SL_VOL_KITS_MEAN, SL_VOL_KITS_STD);
    put_slice(s, o, slice);
    return 0;
}

static int push_label(void *ctx, int64_t o, void *slice)
{
    put_slice(ctx, o, slice);
    return 0;
}

/* Axis 0's padding: the first and last slices repeated (np.pad "edge"). */
static void pad_axis0(const ostream_t *s)
{
    size_t plane = (size_t)(s->pd[1] * s->pd[2]) * s->esize;
    char *v = s->out;
    int64_t first = s->before[0], last = s->before[0] + s->rd[0] - 1;
    for (int64_t z = 0; z < s->pd[0]; z++)
        if (z < first || z > last)
            memcpy(v + (size_t)z * plane,
                   v + (size_t)(z < first ? first : last) * plane, plane);
}

int64_t sl__voff_bytes(const int64_t raw[3], const int64_t rs[3],
                       const int64_t dims[3], double packed)
{
    double vox = (double)dims[0] * (double)dims[1] * (double)dims[2];
    double in_sl = (double)raw[1] * (double)raw[2];
    double out_sl = (double)rs[1] * (double)rs[2];
    double b = vox * 5 + (double)sizeof(sl_vol_fg_t) + vox / 8;
    b += in_sl * 4 + (double)raw[1] * (double)rs[2] * 4 + out_sl * 16 +
         (double)raw[0];         /* linear */
    b += in_sl * 5 + out_sl * 2; /* nearest, the label read as float */
    b += 4.0 * (1 << 20);        /* two readers: pieces, zlib */
    b += 2 * packed;             /* a pack's record, and read scratch */
    return (int64_t)b;
}

int sl__voff_run(const sl_volume_dataset_t *ds, int64_t c, const int64_t raw[3],
                 const int64_t rs[3], const int64_t dims[3],
                 const int64_t patch[3], float **img_out, uint8_t **lbl_out,
                 sl_vol_fg_t **fg_out, char *err, size_t errlen)
{
    const char *ip = sl_volume_dataset_image(ds, c);
    if (!ip) /* a pack: messages name the case */
        ip = sl_volume_dataset_name(ds, c);
    sl_volume_reader_t *ir = NULL, *lr = NULL;
    float *pi = NULL;
    uint8_t *pl = NULL;
    sl_vol_fg_t *fg = NULL;
    ostream_t s = {.patch = patch, .err = err, .errlen = errlen};
    int rc = sl_volume_dataset_readers(ds, c, NULL, &ir, &lr, err, errlen);
    if (rc)
        goto out;
    for (int i = 0; i < 3; i++) {
        const sl_volume_t *iv = sl_volume_reader_volume(ir);
        const sl_volume_t *lv = lr ? sl_volume_reader_volume(lr) : NULL;
        if (iv->ndim != 3 || iv->dim[2 - i] != raw[i] ||
            (lv && (lv->ndim != 3 || lv->dim[2 - i] != raw[i]))) {
            const char *lp = sl_volume_dataset_label(ds, c);
            rc = sl__fail(err, errlen, SL_ECORRUPT,
                          "%s: the label's or image's shape differs from "
                          "the image header's",
                          lp ? lp : ip);
            goto out;
        }
        s.raw[i] = raw[i];
        s.rd[i] = rs[i];
        s.pd[i] = dims[i];
        s.before[i] = (dims[i] - rs[i]) / 2;
    }
    size_t pn = (size_t)(dims[0] * dims[1] * dims[2]);
    pi = malloc(pn * sizeof *pi);
    pl = malloc(pn);
    fg = malloc(sizeof *fg);
    s.fslice = malloc((size_t)(raw[1] * raw[2]) * sizeof *s.fslice);
    if (!pi || !pl || !fg || !s.fslice) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", ip);
        goto out;
    }
    s.r = ir;
    s.out = pi;
    s.esize = sizeof *pi;
    err[0] = 0;
    rc = sl_vol_resample_linear_slices(raw, rs, pull_image, push_image, &s);
    sl_volume_reader_close(ir);
    ir = NULL;
    if (!rc) {
        pad_axis0(&s);
        s.out = pl;
        s.esize = 1;
        if (lr) {
            s.r = lr;
            rc = sl_vol_resample_nearest_slices(raw, rs, pull_label, push_label,
                                                &s);
        } else {
            memset(pl, 0, pn);
        }
    }
    if (rc) {
        if (!err[0])
            sl__fail(err, errlen, rc, "%s: resampling failed", ip);
        goto out;
    }
    if (lr)
        pad_axis0(&s);
    /* The components, once: every epoch's foreground crop reads them. */
    if ((rc = sl_vol_foreground(pl, dims, fg, err, errlen)))
        goto out;
    *img_out = pi;
    *lbl_out = pl;
    *fg_out = fg;
    pi = NULL;
    pl = NULL;
    fg = NULL;
out:
    sl_volume_reader_close(ir);
    sl_volume_reader_close(lr);
    free(s.fslice);
    free(fg);
    free(pi);
    free(pl);
    return rc;
}
