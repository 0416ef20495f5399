/* volume/volume: the public volume API (sluice/volume.h) and the steps
 * from a checked header to a volume that do not need the NIfTI library:
 * the affine nibabel would choose, the orientation, the plan that places
 * each stored value. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/abi.h"
#include "base/base.h"
#include "orient.h"
#include "vol_internal.h"

SL__ABI_INIT_PAIR(sl_volume_options_init, sl_volume_options_t)

int sl__vol_call_in(const char *fn, int ok, const char *why,
                    const sl_volume_options_t *opt, sl_volume_options_t *o,
                    char *err, size_t errlen)
{
    if (!ok)
        return sl__fail(err, errlen, SL_EINVAL, "%s: %s", fn, why);
    sl_volume_options_init(o);
    if (opt && sl__abi_in(o, sizeof *o, opt, SL__VOLUME_OPTIONS_V1_SIZE,
                          "sl_volume_options", err, errlen))
        return SL_EINVAL;
    return 0;
}

const char *sl_volume_dtype_name(int dtype)
{
    static const char *const names[] = {"unknown", "uint8",   "int16",
                                        "int32",   "float32", "float64",
                                        "int8",    "uint16",  "uint32"};
    return dtype >= 1 && dtype <= 8 ? names[dtype] : names[0];
}

size_t sl_volume_dtype_size(int dtype)
{
    static const size_t sizes[] = {0, 1, 2, 4, 4, 8, 1, 2, 4};
    return dtype >= 1 && dtype <= 8 ? sizes[dtype] : 0;
}

void sl_volume_free(sl_volume_t *v)
{
    if (!v)
        return;
    free(v->data);
    free(v);
}

int sl__volume_make(const sl__volhdr_t *h, const sl_volume_options_t *o,
                    sl_volume_t **out, sl__vol_plan_t *plan, char *err,
                    size_t errlen)
{
    *out = NULL;
    double aff[4][4];
    int source;
    if (h->sform_code != 0) { /* nibabel's get_best_affine */
        memset(aff, 0, sizeof aff);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                aff[i][j] = h->srow[i][j];
        aff[3][3] = 1;
        source = SL_VOLUME_AFFINE_SFORM;
    } else if (h->qform_code != 0) {
        if (sl__vol_qform(h->quatern, h->qoffset, &h->pixdim[1], h->pixdim[0],
                          h->quat_eps_f32, aff))
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "the qform quaternion (b, c, d) = (%g, %g, %g) is "
                            "longer than 1",
                            h->quatern[0], h->quatern[1], h->quatern[2]);
        source = SL_VOLUME_AFFINE_QFORM;
    } else {
        sl__vol_base_affine(h->ndim, h->dim, &h->pixdim[1], aff);
        source = SL_VOLUME_AFFINE_PIXDIM;
    }
    int axis[3], flip[3];
    sl__vol_io_orientation(aff, axis, flip);
    int identity = 1;
    for (int i = 0; i < 3; i++)
        identity &= axis[i] == i && flip[i] == 1;

    sl_volume_t *v = calloc(1, sizeof *v);
    if (!v)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    v->size = sizeof *v;
    v->ndim = h->ndim;
    for (int i = 0; i < 4; i++) {
        v->dim[i] = h->dim[i];
        v->spacing[i] = i < h->ndim ? h->pixdim[i + 1] : 1;
    }
    memcpy(v->affine, aff, sizeof aff);
    v->stored_dtype = h->dtype;
    v->dtype = o->native ? h->dtype : SL_VOLUME_FLOAT32;
    v->nifti_datatype = h->datatype;
    v->nifti_version = h->version;
    v->scl_slope = h->slope;
    v->scl_inter = h->inter;
    v->qform_code = h->qform_code;
    v->sform_code = h->sform_code;
    v->affine_source = source;
    v->vox_offset = h->vox_offset;
    v->big_endian = h->big_endian;
    v->xyz_units = h->xyz_units;
    v->time_units = h->time_units;
    memcpy(v->descrip, h->descrip, sizeof v->descrip);
    sl__vol_axcodes(axis, flip, v->axcodes);

    memset(plan, 0, sizeof *plan);
    int64_t os[4], n = 1; /* output strides */
    for (int i = 0; i < 4; i++)
        plan->in_dim[i] = h->dim[i];
    if (o->orient == SL_VOLUME_RAS && !identity) {
        /* nibabel's as_closest_canonical: apply_orientation needs every
         * axis to land somewhere, and 3 of them. */
        if (h->ndim < 3)
            return sl_volume_free(v),
                   sl__fail(err, errlen, SL_EUNSUPPORTED,
                            "reorienting to RAS needs 3 or 4 dimensions, "
                            "not %d",
                            h->ndim);
        for (int i = 0; i < 3; i++)
            if (axis[i] < 0)
                return sl_volume_free(v),
                       sl__fail(err, errlen, SL_ECORRUPT,
                                "the affine is degenerate (voxel axis %d maps "
                                "to no world axis): cannot reorient to RAS",
                                i);
        double na[4][4];
        sl__vol_reorient_affine(aff, axis, flip, h->dim, na);
        memcpy(v->affine, na, sizeof na);
        for (int i = 0; i < 3; i++) {
            v->dim[axis[i]] = h->dim[i];
            v->spacing[axis[i]] = h->pixdim[i + 1];
        }
        int ax[3] = {0, 1, 2}, fl[3] = {1, 1, 1};
        sl__vol_axcodes(ax, fl, v->axcodes);
        v->reoriented = 1;
    }
    for (int i = 0; i < 4; i++) {
        os[i] = n;
        n *= v->dim[i];
    }
    for (int i = 0; i < 4; i++)
        plan->stride[i] = os[i];
    if (v->reoriented)
        for (int i = 0; i < 3; i++) {
            plan->stride[i] = flip[i] * os[axis[i]];
            if (flip[i] < 0)
                plan->start += (h->dim[i] - 1) * os[axis[i]];
        }
    plan->in_dtype = h->dtype;
    plan->out_dtype = v->dtype;
    plan->slope = h->slope;
    plan->inter = h->inter;
    plan->scale = !o->native && (h->slope != 1 || h->inter != 0);
    *out = v;
    return 0;
}

int sl_volume_load(const char *path, const sl_volume_options_t *opt,
                   sl_volume_t **out, char *err, size_t errlen)
{
    char scratch[1];
    if (!err)
        err = scratch, errlen = sizeof scratch;
    if (out)
        *out = NULL;
    sl_volume_options_t o;
    if (sl__vol_call_in("sl_volume_load", path && out,
                        "path and out are required", opt, &o, err, errlen))
        return SL_EINVAL;
    if (o.orient != SL_VOLUME_AS_STORED && o.orient != SL_VOLUME_RAS)
        return sl__fail(err, errlen, SL_EINVAL,
                        "sl_volume_load: orient %d is not an "
                        "sl_volume_orient_t",
                        o.orient);
    if (o.max_bytes < 0)
        return sl__fail(err, errlen, SL_EINVAL,
                        "sl_volume_load: max_bytes %lld < 0",
                        (long long)o.max_bytes);
    int64_t size = 0;
    int fd = sl__open_regular(path, &size, err, errlen);
    if (fd < 0)
        return fd;
    int rc = sl__nifti_read(fd, path, size, &o, NULL, out, err, errlen);
    close(fd);
    return rc;
}
