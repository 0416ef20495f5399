/* volume/off/nifti_off: the NIfTI reader of a build configured with
 * -DSL_NIFTI=OFF (cmake/SluiceComponents.cmake), which needs neither the
 * NIfTI library nor zlib: every load fails with SL_EUNSUPPORTED. The
 * dataset listing and the rest of the module still work. */
#include "base/base.h"
#include "volume/gzindex.h"
#include "volume/vol_internal.h"

#define SL__NIFTI_OFF                                                          \
    "sluice was built without NIfTI support (configured with "                 \
    "-DSL_NIFTI=OFF; it needs libnifti2-dev and zlib)"

int sl__nifti_header(const void *buf, size_t n, sl__volhdr_t *h, char *err,
                     size_t errlen)
{
    (void)buf, (void)n, (void)h;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__NIFTI_OFF);
}

int sl__nifti_read(int fd, const char *name, int64_t file_size,
                   const sl_volume_options_t *o, const sl__admit_t *admit,
                   sl_volume_t **out, char *err, size_t errlen)
{
    (void)fd, (void)file_size, (void)o, (void)admit;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: %s", name,
                    SL__NIFTI_OFF);
}

int sl__nifti_read_stored(int fd, const char *name, int64_t file_size,
                          int64_t max_bytes, sl__bytes_t *out, size_t *hlen,
                          int64_t *dlen, char *err, size_t errlen)
{
    (void)fd, (void)file_size, (void)max_bytes, (void)out, (void)hlen,
        (void)dlen;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: %s", name,
                    SL__NIFTI_OFF);
}

int sl__nifti_load_mem(const void *hdr, size_t hlen, const void *data,
                       size_t dlen, const char *name,
                       const sl_volume_options_t *o, const sl__admit_t *admit,
                       sl_volume_t **out, char *err, size_t errlen)
{
    (void)hdr, (void)hlen, (void)data, (void)dlen, (void)o, (void)admit;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: %s", name,
                    SL__NIFTI_OFF);
}

int sl__nifti_stream_file(int fd, const char *name, int64_t file_size,
                          sl__nifti_stream_t **out, char *err, size_t errlen)
{
    (void)fd, (void)file_size;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: %s", name,
                    SL__NIFTI_OFF);
}

int sl__nifti_stream_indexed(int fd, const char *name, int64_t file_size,
                             const sl__gzindex_t *use, sl__gzindex_t *build,
                             sl__nifti_stream_t **out, char *err, size_t errlen)
{
    (void)fd, (void)file_size, (void)use, (void)build;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: %s", name,
                    SL__NIFTI_OFF);
}

/* volume/gzindex without zlib: no index is ever built. */
sl__gzindex_t *sl__gzindex_new(int64_t span)
{
    (void)span;
    return NULL;
}

int64_t sl__gzindex_bytes(const sl__gzindex_t *ix)
{
    (void)ix;
    return 0;
}

int sl__gzindex_points(const sl__gzindex_t *ix)
{
    (void)ix;
    return 0;
}

int sl__gzindex_current(const sl__gzindex_t *ix, const char *path)
{
    (void)ix, (void)path;
    return 0;
}

void sl__gzindex_free(sl__gzindex_t *ix)
{
    (void)ix;
}

int sl__gzr_open(int fd, const char *name, const sl__gzindex_t *use,
                 sl__gzindex_t *build, sl__gzr_t **out, char *err,
                 size_t errlen)
{
    (void)fd, (void)use, (void)build;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: %s", name,
                    SL__NIFTI_OFF);
}

int64_t sl__gzr_read(sl__gzr_t *r, void *dst, size_t n, int *code, char *err,
                     size_t errlen)
{
    (void)r, (void)dst, (void)n;
    *code = SL_EUNSUPPORTED;
    sl__fail(err, errlen, SL_EUNSUPPORTED, SL__NIFTI_OFF);
    return -1;
}

int64_t sl__gzr_inflated(const sl__gzr_t *r)
{
    (void)r;
    return 0;
}

void sl__gzr_close(sl__gzr_t *r)
{
    (void)r;
}

int sl__nifti_stream_mem(const void *hdr, size_t hlen, const void *data,
                         size_t dlen, const char *name,
                         sl__nifti_stream_t **out, char *err, size_t errlen)
{
    (void)hdr, (void)hlen, (void)data, (void)dlen;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: %s", name,
                    SL__NIFTI_OFF);
}

int sl__nifti_stream_src(const void *hdr, size_t hlen, uint64_t dlen,
                         const char *name, const sl__vol_src_t *src,
                         sl__nifti_stream_t **out, char *err, size_t errlen)
{
    (void)hdr, (void)hlen, (void)dlen;
    src->close(src->ctx);
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, "%s: %s", name,
                    SL__NIFTI_OFF);
}

int sl__nifti_stream_load(sl__nifti_stream_t *n, const sl_volume_options_t *o,
                          const sl__admit_t *admit, sl_volume_t **out,
                          char *err, size_t errlen)
{
    (void)n, (void)o, (void)admit;
    *out = NULL;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__NIFTI_OFF);
}

const sl__volhdr_t *sl__nifti_stream_header(const sl__nifti_stream_t *n)
{
    (void)n;
    return NULL;
}

int sl__nifti_stream_pull(sl__nifti_stream_t *n, int64_t count,
                          const struct sl__vol_plan *plan, void *out, char *err,
                          size_t errlen)
{
    (void)n, (void)count, (void)plan, (void)out;
    return sl__fail(err, errlen, SL_EUNSUPPORTED, SL__NIFTI_OFF);
}

void sl__nifti_stream_close(sl__nifti_stream_t *n)
{
    (void)n;
}

int sl__nifti_stream_gzip(const sl__nifti_stream_t *n)
{
    (void)n;
    return 0;
}
