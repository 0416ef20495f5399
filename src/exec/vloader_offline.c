/* exec/vloader_offline: the offline stage of a volume case, streamed a
 * slice at a time, in slabs any thread can make (vloader_offline.h). */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "data/shard.h"
#include "ops/vol3d.h"
#include "vloader_offline.h"
#include "volume/gzindex.h"

struct sl__voff {
    const sl_volume_dataset_t *ds;
    int64_t c;
    const char *name; /* the image's path, or a pack's case name */
    int64_t raw[3], rd[3], pd[3], before[3], patch[3];
    int nslab, has_label;
    int nimg, nlbl; /* jobs: the image's parts, then the label's */
    /* gzip volumes' access points (image, label): the case's, read by
     * every slab (NULL: none); those being built by a whole read, given
     * to the case's at the end */
    sl__gzindex_t **gzi, *build[2];
    float *img; /* the padded outputs being filled */
    uint8_t *lbl;
};

/* One slab's stream: slices (axis 0) are read, resampled, normalised and
 * padded straight into the padded output; neither volume is held whole. */
typedef struct ostream {
    const sl__voff_t *v;
    sl_volume_reader_t *r;
    float *fslice; /* a label slice as read (float) */
    void *out;     /* the padded volume being filled */
    size_t esize;
    char *err;
    size_t errlen;
} ostream_t;

/* A slice the slab does not need (NULL) is passed over unconverted. */
static int pull_image(void *ctx, int64_t i, void *slice)
{
    ostream_t *s = ctx;
    (void)i;
    int64_t n = s->v->raw[1] * s->v->raw[2];
    return slice ? sl_volume_reader_read(s->r, slice, n, s->err, s->errlen)
                 : sl_volume_reader_skip(s->r, n, s->err, s->errlen);
}

static int pull_label(void *ctx, int64_t i, void *slice)
{
    ostream_t *s = ctx;
    size_t n = (size_t)(s->v->raw[1] * s->v->raw[2]);
    if (!slice)
        return sl_volume_reader_skip(s->r, (int64_t)n, s->err, s->errlen);
    int rc =
        sl_volume_reader_read(s->r, s->fslice, (int64_t)n, s->err, s->errlen);
    /* A class index: an integer in 0..255 (the reference's astype(uint8)
     * would wrap 256 to 0 and truncate 0.5 to 0: neither is a label). */
    uint8_t *lb = slice;
    for (size_t k = 0; !rc && k < n; k++) {
        float v = s->fslice[k];
        if (!(v >= 0 && v <= 255 && v == (float)(int)v)) {
            const char *lp = sl_volume_dataset_label(s->v->ds, s->v->c);
            return sl__fail(
                s->err, s->errlen, SL_ECORRUPT,
                "%s: label value %g (slice z = %lld): a label is an "
                "integer 0..255",
                lp ? lp : s->v->name, (double)v, (long long)i);
        }
        lb[k] = (uint8_t)v;
    }
    return rc;
}

/* Output slice o (rd[1] x rd[2]) edge-padded into its place. */
static void put_slice(ostream_t *s, int64_t o, const void *slice)
{
    const sl__voff_t *v = s->v;
    const int64_t d[3] = {1, v->rd[1], v->rd[2]};
    const int64_t m[3] = {1, v->patch[1], v->patch[2]};
    int64_t od[3];
    size_t plane = (size_t)(v->pd[1] * v->pd[2]) * s->esize;
    sl_vol_pad_edge(slice, d, s->esize, m,
                    (char *)s->out + (size_t)(o + v->before[0]) * plane, od);
}

static int push_image(void *ctx, int64_t o, void *slice)
{
    ostream_t *s = ctx;
    sl_vol_normalize(slice, (size_t)(s->v->rd[1] * s->v->rd[2]),
                     SL_VOL_KITS_CLIP_LO, SL_VOL_KITS_CLIP_HI, SL_VOL_KITS_MEAN,
                     SL_VOL_KITS_STD);
    put_slice(s, o, slice);
    return 0;
}

static int push_label(void *ctx, int64_t o, void *slice)
{
    put_slice(ctx, o, slice);
    return 0;
}

/* Axis 0's padding: the first and last slices repeated (np.pad "edge"). */
static void pad_axis0(const sl__voff_t *v, void *out, size_t esize)
{
    size_t plane = (size_t)(v->pd[1] * v->pd[2]) * esize;
    char *p = out;
    int64_t first = v->before[0], last = v->before[0] + v->rd[0] - 1;
    for (int64_t z = 0; z < v->pd[0]; z++)
        if (z < first || z > last)
            memcpy(p + (size_t)z * plane,
                   p + (size_t)(z < first ? first : last) * plane, plane);
}

int64_t sl__voff_bytes(const int64_t raw[3], const int64_t rs[3],
                       const int64_t dims[3], int packed, int nslab)
{
    double vox = (double)dims[0] * (double)dims[1] * (double)dims[2];
    double in_sl = (double)raw[1] * (double)raw[2];
    double out_sl = (double)rs[1] * (double)rs[2];
    /* outputs, components; labelling: two bitsets and the stack */
    double b = vox * 5 + (double)sizeof(sl_vol_fg_t) + vox / 4 +
               (double)SL__VOL_FILL_CAP * sizeof(size_t);
    double slab = in_sl * 4 + (double)raw[1] * (double)rs[2] * 4 + out_sl * 16 +
                  (double)raw[0];   /* linear */
    slab += in_sl * 5 + out_sl * 2; /* nearest, the label read as float */
    slab += 4.0 * (1 << 20);        /* two readers: pieces, zlib */
    /* a pack's: the two readers' record streams */
    slab += packed ? 2.0 * (double)SL__SHARD_STREAM_BYTES : 0;
    return (int64_t)(b + (nslab > 1 ? nslab : 1) * slab);
}

int sl__voff_is_3d(const sl_volume_t *v)
{
    return v->ndim == 3 || (v->ndim == 4 && v->dim[3] == 1);
}

/* The readers' shapes against the header's (read at create: a file
 * changed since differs) and the label's against the image's; shapes as
 * nibabel gives them, (x, y, z). */
static int check_shape(const sl__voff_t *v, sl_volume_reader_t *ir,
                       sl_volume_reader_t *lr, char *err, size_t errlen)
{
    const sl_volume_t *iv = sl_volume_reader_volume(ir);
    const sl_volume_t *lv = lr ? sl_volume_reader_volume(lr) : NULL;
    int ok_i = sl__voff_is_3d(iv), ok_l = !lv || sl__voff_is_3d(lv);
    for (int i = 0; i < 3; i++) {
        ok_i = ok_i && iv->dim[2 - i] == v->raw[i];
        ok_l = ok_l && (!lv || lv->dim[2 - i] == v->raw[i]);
    }
    if (ok_i && ok_l)
        return 0;
    const sl_volume_t *bad = ok_i ? lv : iv;
    const char *lp = sl_volume_dataset_label(v->ds, v->c);
    return sl__fail(
        err, errlen, SL_ECORRUPT,
        "%s: the %s is %lld x %lld x %lld%s, the image %s%lld x "
        "%lld x %lld",
        ok_i && lp ? lp : v->name, ok_i ? "label" : "image",
        (long long)bad->dim[0], (long long)bad->dim[1], (long long)bad->dim[2],
        sl__voff_is_3d(bad) ? "" : " (not 3-D)",
        ok_i ? "" : "header read at open said ", (long long)v->raw[2],
        (long long)v->raw[1], (long long)v->raw[0]);
}

int64_t sl__voff_gz_span = SL__GZ_SPAN;

/* Job parts of a volume: a plain one nslab; a gzip one nslab by its
 * index (of the file as it is now), else one whole read that builds an
 * index when the case keeps them (gzi) and the volume is a file (a pack's
 * record is not gzip). */
static int parts(sl__voff_t *v, int k, const sl_volume_reader_t *r,
                 const char *path)
{
    if (!sl_volume_reader_volume(r)->compressed ||
        (v->gzi && path && sl__gzindex_current(v->gzi[k], path)))
        return v->nslab;
    if (v->gzi && path)
        v->build[k] = sl__gzindex_new(sl__voff_gz_span); /* NULL: none */
    return 1;
}

int sl__voff_begin(const sl_volume_dataset_t *ds, int64_t c,
                   const int64_t raw[3], const int64_t rs[3],
                   const int64_t dims[3], const int64_t patch[3], int nslab,
                   sl__gzindex_t *gzi[2], sl__voff_t **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    sl__voff_t *v = calloc(1, sizeof *v);
    const char *name = sl_volume_dataset_image(ds, c);
    if (!name) /* a pack: messages name the case */
        name = sl_volume_dataset_name(ds, c);
    if (!v)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    v->ds = ds;
    v->c = c;
    v->name = name;
    v->has_label = sl_volume_dataset_has_label(ds, c);
    for (int i = 0; i < 3; i++) {
        v->raw[i] = raw[i];
        v->rd[i] = rs[i];
        v->pd[i] = dims[i];
        v->patch[i] = patch[i];
        v->before[i] = (dims[i] - rs[i]) / 2;
    }
    if (nslab < 1 || nslab > rs[0]) {
        free(v);
        return sl__fail(err, errlen, SL_EINVAL, "%s: %d slabs for %lld slices",
                        name, nslab, (long long)rs[0]);
    }
    v->nslab = nslab;
    v->gzi = gzi;
    /* The headers, checked once; a gzip volume without an index is one
     * job (a later part would inflate the slices before it again). */
    sl_volume_reader_t *ir = NULL, *lr = NULL;
    int rc = sl_volume_dataset_readers(ds, c, NULL, &ir,
                                       v->has_label ? &lr : NULL, err, errlen);
    if (!rc)
        rc = check_shape(v, ir, lr, err, errlen);
    if (!rc) {
        v->nimg = parts(v, 0, ir, sl_volume_dataset_image(ds, c));
        v->nlbl = lr ? parts(v, 1, lr, sl_volume_dataset_label(ds, c)) : nslab;
    }
    sl_volume_reader_close(ir);
    sl_volume_reader_close(lr);
    size_t pn = (size_t)(dims[0] * dims[1] * dims[2]);
    if (!rc) {
        v->img = malloc(pn * sizeof *v->img);
        v->lbl = malloc(pn);
        if (!v->img || !v->lbl)
            rc = sl__fail(err, errlen, SL_ENOMEM,
                          "%s: out of memory for its offline stage: %lld x "
                          "%lld x %lld voxels resampled and padded (x, y, z; "
                          "%.1f MB; see target_spacing)",
                          name, (long long)dims[2], (long long)dims[1],
                          (long long)dims[0], (double)pn * 5 / 1e6);
    }
    if (rc) {
        sl__voff_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

int sl__voff_jobs(const sl__voff_t *v)
{
    return v->nimg + v->nlbl;
}

/* Job's reader of the image or the label: through the volume's index
 * when it has one or builds one. */
static int open_reader(const sl__voff_t *v, int label, sl_volume_reader_t **r,
                       char *err, size_t errlen)
{
    const char *path = label ? sl_volume_dataset_label(v->ds, v->c)
                             : sl_volume_dataset_image(v->ds, v->c);
    const sl__gzindex_t *use = v->gzi ? v->gzi[label] : NULL;
    if (path && (use || v->build[label]))
        return sl__volume_reader_indexed(path, use, v->build[label], r, err,
                                         errlen);
    sl_volume_reader_t *ir = NULL;
    int rc = sl_volume_dataset_readers(v->ds, v->c, NULL, &ir, label ? r : NULL,
                                       err, errlen);
    if (label)
        sl_volume_reader_close(ir);
    else
        *r = ir;
    return rc;
}

int sl__voff_slab(sl__voff_t *v, int k, char *err, size_t errlen)
{
    if (k < 0 || k >= v->nimg + v->nlbl)
        return sl__fail(err, errlen, SL_EINVAL, "%s: no job %d", v->name, k);
    int label = k >= v->nimg, n = label ? v->nlbl : v->nimg;
    int part = label ? k - v->nimg : k;
    int64_t q0 = v->rd[0] * part / n, q1 = v->rd[0] * (part + 1) / n;
    int through = part == n - 1;
    sl_volume_reader_t *r = NULL;
    ostream_t s = {.v = v, .err = err, .errlen = errlen};
    if (label && !v->has_label) { /* an all-zero label */
        size_t plane = (size_t)(v->pd[1] * v->pd[2]);
        memset(v->lbl + (size_t)(v->before[0] + q0) * plane, 0,
               (size_t)(q1 - q0) * plane);
        return 0;
    }
    int rc = open_reader(v, label, &r, err, errlen);
    if (!rc && label &&
        !(s.fslice =
              malloc((size_t)(v->raw[1] * v->raw[2]) * sizeof *s.fslice)))
        rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", v->name);
    if (rc)
        goto out;
    err[0] = 0;
    if (!label) {
        s.r = r;
        s.out = v->img;
        s.esize = sizeof *v->img;
        rc = sl__vol_resample_linear_range(v->raw, v->rd, q0, q1, through, 1,
                                           pull_image, push_image, &s);
    } else {
        s.r = r;
        s.out = v->lbl;
        s.esize = 1;
        rc = sl__vol_resample_nearest_range(v->raw, v->rd, q0, q1, through, 1,
                                            pull_label, push_label, &s);
    }
    if (rc && !err[0])
        sl__fail(err, errlen, rc, "%s: resampling failed", v->name);
out:
    sl_volume_reader_close(r);
    free(s.fslice);
    return rc;
}

int sl__voff_end(sl__voff_t *v, float **img, uint8_t **lbl, sl_vol_fg_t **fg,
                 char *err, size_t errlen)
{
    pad_axis0(v, v->img, sizeof *v->img);
    pad_axis0(v, v->lbl, 1);
    sl_vol_fg_t *f = malloc(sizeof *f);
    if (!f)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", v->name);
    /* The components, once: every epoch's foreground crop reads them. */
    int rc = sl_vol_foreground(v->lbl, v->pd, f, err, errlen);
    if (rc) {
        free(f);
        return rc;
    }
    *img = v->img;
    *lbl = v->lbl;
    *fg = f;
    v->img = NULL;
    v->lbl = NULL;
    for (int k = 0; k < 2; k++) /* read whole: the index is complete */
        if (v->build[k]) {
            sl__gzindex_free(v->gzi[k]); /* one of a file since changed */
            v->gzi[k] = v->build[k];
            v->build[k] = NULL;
        }
    return 0;
}

void sl__voff_free(sl__voff_t *v)
{
    if (!v)
        return;
    free(v->img);
    free(v->lbl);
    sl__gzindex_free(v->build[0]);
    sl__gzindex_free(v->build[1]);
    free(v);
}

int sl__voff_run(const sl_volume_dataset_t *ds, int64_t c, const int64_t raw[3],
                 const int64_t rs[3], const int64_t dims[3],
                 const int64_t patch[3], int nslab, float **img, uint8_t **lbl,
                 sl_vol_fg_t **fg, char *err, size_t errlen)
{
    sl__voff_t *v = NULL;
    int rc = sl__voff_begin(ds, c, raw, rs, dims, patch, nslab, NULL, &v, err,
                            errlen);
    for (int k = 0; !rc && k < sl__voff_jobs(v); k++)
        rc = sl__voff_slab(v, k, err, errlen);
    if (!rc)
        rc = sl__voff_end(v, img, lbl, fg, err, errlen);
    sl__voff_free(v);
    return rc;
}
