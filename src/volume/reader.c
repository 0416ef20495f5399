/* volume/reader: sl_volume_reader_t (sluice/volume.h), a volume's data in
 * storage order a piece at a time, over a NIfTI stream (nifti.c) from a
 * file or from a pack's record streamed. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "gzindex.h"
#include "vol_internal.h"

struct sl_volume_reader {
    sl__nifti_stream_t *n;
    sl_volume_t *v; /* header facts, data NULL */
    sl__vol_plan_t plan;
    int64_t done; /* values read */
};

int sl__volume_reader_make(sl__nifti_stream_t *n, const char *name,
                           const sl_volume_options_t *o,
                           sl_volume_reader_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int code = 0;
    sl_volume_reader_t *r = NULL;
    char why[512];
    if (o->orient != SL_VOLUME_AS_STORED)
        code = sl__fail(err, errlen, SL_EINVAL,
                        "%s: a reader gives the stored order "
                        "(SL_VOLUME_AS_STORED); reorienting needs the whole "
                        "array (sl_volume_load)",
                        name);
    else if (!(r = calloc(1, sizeof *r)))
        code = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    else if ((code = sl__volume_make(sl__nifti_stream_header(n), o, &r->v,
                                     &r->plan, why, sizeof why)))
        sl__fail(err, errlen, code, "%s: %s", name, why);
    if (code) {
        free(r);
        sl__nifti_stream_close(n);
        return code;
    }
    r->v->compressed = sl__nifti_stream_gzip(n);
    r->n = n;
    *out = r;
    return 0;
}

int sl_volume_reader_open(const char *path, const sl_volume_options_t *opt,
                          sl_volume_reader_t **out, char *err, size_t errlen)
{
    char scratch[1];
    if (!err)
        err = scratch, errlen = sizeof scratch;
    if (out)
        *out = NULL;
    sl_volume_options_t o;
    if (sl__vol_call_in("sl_volume_reader_open", path && out,
                        "path and out are required", opt, &o, err, errlen))
        return SL_EINVAL;
    int64_t size = 0;
    int fd = sl__open_regular(path, &size, err, errlen);
    if (fd < 0)
        return fd;
    sl__nifti_stream_t *n = NULL;
    int rc = sl__nifti_stream_file(fd, path, size, &n, err, errlen);
    close(fd); /* the stream holds its own descriptor */
    if (rc)
        return rc;
    return sl__volume_reader_make(n, path, &o, out, err, errlen);
}

int sl__volume_reader_indexed(const char *path, const sl__gzindex_t *use,
                              sl__gzindex_t *build, sl_volume_reader_t **out,
                              char *err, size_t errlen)
{
    *out = NULL;
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    int64_t size = 0;
    int fd = sl__open_regular(path, &size, err, errlen);
    if (fd < 0)
        return fd;
    sl__nifti_stream_t *n = NULL;
    int rc =
        sl__nifti_stream_indexed(fd, path, size, use, build, &n, err, errlen);
    close(fd); /* the stream holds its own descriptor */
    if (rc)
        return rc;
    return sl__volume_reader_make(n, path, &o, out, err, errlen);
}

const sl_volume_t *sl_volume_reader_volume(const sl_volume_reader_t *r)
{
    return r ? r->v : NULL;
}

int sl_volume_reader_read(sl_volume_reader_t *r, void *out, int64_t count,
                          char *err, size_t errlen)
{
    char scratch[1];
    if (!err)
        err = scratch, errlen = sizeof scratch;
    if (!r || (!out && count))
        return sl__fail(err, errlen, SL_EINVAL,
                        "sl_volume_reader_read: bad arguments");
    /* The plan places stored element e at e (stored order); from this
     * read's first value on, at e - done in out. */
    sl__vol_plan_t p = r->plan;
    p.start = -r->done;
    int rc = sl__nifti_stream_pull(r->n, count, &p, out, err, errlen);
    if (!rc)
        r->done += count;
    return rc;
}

int sl_volume_reader_skip(sl_volume_reader_t *r, int64_t count, char *err,
                          size_t errlen)
{
    char scratch[1];
    if (!err)
        err = scratch, errlen = sizeof scratch;
    if (!r)
        return sl__fail(err, errlen, SL_EINVAL,
                        "sl_volume_reader_skip: no reader");
    int rc = sl__nifti_stream_pull(r->n, count, &r->plan, NULL, err, errlen);
    if (!rc)
        r->done += count;
    return rc;
}

void sl_volume_reader_close(sl_volume_reader_t *r)
{
    if (!r)
        return;
    sl__nifti_stream_close(r->n);
    sl_volume_free(r->v);
    free(r);
}
