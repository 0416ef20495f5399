/* volume/nifti: NIfTI-1 and NIfTI-2 files (.nii, .nii.gz), read with
 * Debian's NIfTI C library (nifti2_io: version, byte order, the header's
 * swap, the data type table, the data's swap) over bytes sluice reads
 * itself through zlib from a file opened by base/file.
 *
 * Why not nifti_image_read: it opens by name (a FIFO named .nii would block
 * it; it also looks for other names), writes to stderr, reads ASCII
 * headers, multiplies dims without an overflow check and callocs what the
 * header claims before reading a byte. Here every size is checked against
 * the file (and, gzip, against the most its bytes can inflate to) and the
 * caller's budget first, and the data goes from the stream in 1 MiB pieces
 * straight into the output (no full-size stored copy). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <nifti2_io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base.h"
#include "gzindex.h"
#include "vol_internal.h"

#define PIECE (1 << 20) /* bytes of stored data read at a time */

/* The fields sluice uses, in one width whatever the version. */
typedef struct raw {
    int64_t dim[8];
    double pixdim[8], vox_offset, slope, inter;
    double quatern[3], qoffset[3], srow[3][4];
    int datatype, qform_code, sform_code, xyzt_units;
    char descrip[80];
    const char *magic;
} raw_t;

static void from_n1(const nifti_1_header *n, raw_t *r)
{
    for (int i = 0; i < 8; i++)
        r->dim[i] = n->dim[i], r->pixdim[i] = n->pixdim[i];
    r->vox_offset = n->vox_offset;
    r->slope = n->scl_slope, r->inter = n->scl_inter;
    r->quatern[0] = n->quatern_b, r->quatern[1] = n->quatern_c;
    r->quatern[2] = n->quatern_d;
    r->qoffset[0] = n->qoffset_x, r->qoffset[1] = n->qoffset_y;
    r->qoffset[2] = n->qoffset_z;
    for (int j = 0; j < 4; j++)
        r->srow[0][j] = n->srow_x[j], r->srow[1][j] = n->srow_y[j],
        r->srow[2][j] = n->srow_z[j];
    r->datatype = n->datatype;
    r->qform_code = n->qform_code, r->sform_code = n->sform_code;
    r->xyzt_units = (unsigned char)n->xyzt_units;
    memcpy(r->descrip, n->descrip, 80);
}

static void from_n2(const nifti_2_header *n, raw_t *r)
{
    for (int i = 0; i < 8; i++)
        r->dim[i] = n->dim[i], r->pixdim[i] = n->pixdim[i];
    r->vox_offset = (double)n->vox_offset;
    r->slope = n->scl_slope, r->inter = n->scl_inter;
    r->quatern[0] = n->quatern_b, r->quatern[1] = n->quatern_c;
    r->quatern[2] = n->quatern_d;
    r->qoffset[0] = n->qoffset_x, r->qoffset[1] = n->qoffset_y;
    r->qoffset[2] = n->qoffset_z;
    for (int j = 0; j < 4; j++)
        r->srow[0][j] = n->srow_x[j], r->srow[1][j] = n->srow_y[j],
        r->srow[2][j] = n->srow_z[j];
    r->datatype = n->datatype;
    r->qform_code = n->qform_code, r->sform_code = n->sform_code;
    r->xyzt_units = n->xyzt_units;
    memcpy(r->descrip, n->descrip, 80);
}

static int dtype_of(int datatype)
{
    switch (datatype) {
    case DT_UINT8:
        return SL_VOLUME_UINT8;
    case DT_INT16:
        return SL_VOLUME_INT16;
    case DT_INT32:
        return SL_VOLUME_INT32;
    case DT_FLOAT32:
        return SL_VOLUME_FLOAT32;
    case DT_FLOAT64:
        return SL_VOLUME_FLOAT64;
    case DT_INT8:
        return SL_VOLUME_INT8;
    case DT_UINT16:
        return SL_VOLUME_UINT16;
    case DT_UINT32:
        return SL_VOLUME_UINT32;
    }
    return 0;
}

static int xform_ok(int code) /* nibabel: 0..5, anything else read as 0 */
{
    return code >= 0 && code <= 5 ? code : 0;
}

int sl__nifti_header(const void *buf, size_t n, sl__volhdr_t *h, char *err,
                     size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (n < SL__NIFTI1_HDR)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "not a NIfTI file: %zu bytes, shorter than a header "
                        "(348)",
                        n);
    /* sizeof_hdr first, in either byte order: the library's version check
     * would print to stderr on anything else. */
    int32_t sz;
    memcpy(&sz, buf, 4);
    uint32_t sw = __builtin_bswap32((uint32_t)sz);
    if (sz != SL__NIFTI1_HDR && sz != SL__NIFTI2_HDR && sw != SL__NIFTI1_HDR &&
        sw != SL__NIFTI2_HDR)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "not a NIfTI file (sizeof_hdr %" PRId32
                        " is neither 348 nor 540)",
                        sz);
    int ver = nifti_header_version((const char *)buf, n);
    if (ver == 0)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "an Analyze 7.5 header (no NIfTI magic): not "
                        "supported");
    if (ver != 1 && ver != 2)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "not a NIfTI file (sizeof_hdr and magic disagree)");
    if (ver == 2 && n < SL__NIFTI2_HDR)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "truncated NIfTI-2 header: %zu of 540 bytes", n);
    raw_t r;
    memset(&r, 0, sizeof r);
    if (ver == 1) {
        nifti_1_header n1;
        memcpy(&n1, buf, sizeof n1);
        h->swapped = n1.sizeof_hdr != SL__NIFTI1_HDR;
        if (h->swapped)
            swap_nifti_header(&n1, 1);
        if (n1.magic[1] != '+')
            return sl__fail(err, errlen, SL_EUNSUPPORTED,
                            "a two-file NIfTI-1 header (.hdr/.img pair): "
                            "not supported");
        from_n1(&n1, &r);
    } else {
        nifti_2_header n2;
        memcpy(&n2, buf, sizeof n2);
        h->swapped = n2.sizeof_hdr != SL__NIFTI2_HDR;
        if (h->swapped)
            swap_nifti_header(&n2, 2);
        if (n2.magic[1] != '+')
            return sl__fail(err, errlen, SL_EUNSUPPORTED,
                            "a two-file NIfTI-2 header (.hdr/.img pair): "
                            "not supported");
        from_n2(&n2, &r);
    }
    h->version = ver;
    h->big_endian = h->swapped ^ (nifti_short_order() == 2) /* MSB_FIRST */;

    /* dims: 1..4 of them, each >= 1, the product and its bytes without
     * overflow. */
    if (r.dim[0] < 1 || r.dim[0] > 7)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "dim[0] = %" PRId64 " (the number of dimensions must "
                        "be 1..7)",
                        r.dim[0]);
    for (int i = 1; i <= r.dim[0]; i++)
        if (r.dim[i] < 1)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "dim[%d] = %" PRId64 " (a size must be >= 1)", i,
                            r.dim[i]);
    if (r.dim[0] > 4)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "%" PRId64 " dimensions (1 to 4 are supported)",
                        r.dim[0]);
    h->ndim = (int)r.dim[0];
    h->dtype = dtype_of(r.datatype);
    h->datatype = r.datatype;
    if (!h->dtype) {
        const char *name = nifti_datatype_string(r.datatype);
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "datatype %d (%s) is not supported (uint8, int8, "
                        "int16, uint16, int32, uint32, float32, float64)",
                        r.datatype,
                        strcmp(name, "**ILLEGAL**") ? name
                                                    : "not a NIfTI code");
    }
    int swapsize;
    nifti_datatype_sizes(r.datatype, &h->nbyper, &swapsize);
    uint64_t nvox = 1;
    for (int i = 0; i < 4; i++) {
        h->dim[i] = i < h->ndim ? r.dim[i + 1] : 1;
        if (__builtin_mul_overflow(nvox, (uint64_t)h->dim[i], &nvox) ||
            nvox > (UINT64_C(1) << 60))
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "dims %" PRId64 " x %" PRId64 " x %" PRId64
                            " x %" PRId64 " overflow (more than 2^60 voxels)",
                            r.dim[1], h->ndim > 1 ? r.dim[2] : 1,
                            h->ndim > 2 ? r.dim[3] : 1,
                            h->ndim > 3 ? r.dim[4] : 1);
    }
    h->nvox = (int64_t)nvox;
    /* Under 2^62 bytes, so vox_offset + nbytes (each < 2^62) cannot wrap
     * and every size check after this one compares real sizes. */
    uint64_t nbytes;
    if (__builtin_mul_overflow(nvox, (uint64_t)h->nbyper, &nbytes) ||
        nbytes >= (UINT64_C(1) << 62))
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "header declares %" PRIu64 " x %d bytes: too large "
                        "(less than 2^62 bytes)",
                        nvox, h->nbyper);
    h->nbytes = (int64_t)nbytes;

    /* Data offset: past the header, finite, not absurd. */
    int64_t min_off = ver == 1 ? 352 : 544;
    if (!isfinite(r.vox_offset) || r.vox_offset < 0 || r.vox_offset > 4e18)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "vox_offset %g is not a file offset", r.vox_offset);
    h->vox_offset = (int64_t)r.vox_offset; /* nibabel: int() */
    if (h->vox_offset < min_off)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "vox_offset %" PRId64 " lies inside the header "
                        "(the data of a .nii starts at %" PRId64 " or later)",
                        h->vox_offset, min_off);

    /* Scaling, as nibabel's get_slope_inter. */
    if (r.slope == 0 || !isfinite(r.slope)) {
        h->slope = 1, h->inter = 0;
    } else if (!isfinite(r.inter)) {
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "scl_inter %g is not finite (scl_slope %g)", r.inter,
                        r.slope);
    } else {
        h->slope = r.slope, h->inter = r.inter;
    }

    /* Voxel sizes and qfac, fixed as nibabel fixes them on load. */
    for (int i = 0; i < 8; i++)
        h->pixdim[i] = r.pixdim[i];
    if (h->pixdim[0] != 1 && h->pixdim[0] != -1)
        h->pixdim[0] = 1;
    for (int i = 1; i <= 3; i++) {
        if (!isfinite(h->pixdim[i]))
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "pixdim[%d] = %g is not a voxel size", i,
                            h->pixdim[i]);
        h->pixdim[i] = h->pixdim[i] == 0 ? 1 : fabs(h->pixdim[i]);
    }
    h->qform_code = xform_ok(r.qform_code);
    h->sform_code = xform_ok(r.sform_code);
    for (int i = 0; i < 3; i++) {
        h->quatern[i] = r.quatern[i], h->qoffset[i] = r.qoffset[i];
        for (int j = 0; j < 4; j++)
            h->srow[i][j] = r.srow[i][j];
    }
    h->quat_eps_f32 = ver == 1;
    h->xyz_units = r.xyzt_units & 0x07;
    h->time_units = r.xyzt_units & 0x38;
    memcpy(h->descrip, r.descrip, 79);
    h->descrip[79] = 0;
    for (int i = 0; i < 79; i++) /* a message or a terminal: no controls */
        if (h->descrip[i] && (unsigned char)h->descrip[i] < 0x20)
            h->descrip[i] = ' ';
    return 0;
}

/* Reads up to n bytes; @return bytes read, or -1 with the cause in err. */
static int64_t gz_read(gzFile gz, void *p, size_t n, const char *name,
                       char *err, size_t errlen, int *code)
{
    int r = gzread(gz, p, (unsigned)n), zerr;
    const char *msg = gzerror(gz, &zerr);
    if (!strncmp(msg, "<fd:", 4) && strstr(msg, ": ")) /* gzdopen's name */
        msg = strstr(msg, ": ") + 2;
    /* zlib reports a gzip stream cut short (Z_BUF_ERROR) only here: gzread
     * returns what it got, then 0, as at a proper end. */
    if (r >= 0 && zerr != Z_BUF_ERROR)
        return r;
    if (zerr == Z_BUF_ERROR) {
        *code = SL_ECORRUPT;
        sl__fail(err, errlen, *code, "%s: truncated gzip file (%s)", name, msg);
    } else if (zerr == Z_ERRNO) {
        int e = errno;
        *code = sl__errno_code(e, SL_EIO);
        sl__fail(err, errlen, *code, "%s: read failed: %s", name, strerror(e));
    } else {
        *code = SL_ECORRUPT;
        sl__fail(err, errlen, *code, "%s: damaged gzip data (%s)", name, msg);
    }
    return -1;
}

/* Whether the file starts with gzip's magic (else it is read plain). */
static int is_gzip(int fd)
{
    unsigned char m[2] = {0, 0};
    return pread(fd, m, 2, 0) == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

/* A gzip file's header against the most its bytes can inflate to. */
static int gz_bound(const sl__volhdr_t *h, const char *name, int64_t file_size,
                    char *err, size_t errlen)
{
    int64_t need = h->vox_offset + h->nbytes; /* each < 2^62 */
    if (need / SL__GZ_MAX_RATIO > file_size)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: a header that lies: its %" PRId64 " x %" PRId64
                        " x %" PRId64 " x %" PRId64 " %s values need %" PRId64
                        " bytes, more than a gzip file of %" PRId64
                        " bytes can hold (%d:1 at most)",
                        name, h->dim[0], h->dim[1], h->dim[2], h->dim[3],
                        sl_volume_dtype_name(h->dtype), need, file_size,
                        SL__GZ_MAX_RATIO);
    return 0;
}

/* An open NIfTI file: the header read, decoded and checked against the
 * file's size (and the gzip bound); the stream stands just past the
 * header. */
typedef struct nstream {
    gzFile gz;
    int gzip;
    sl__volhdr_t h;
    unsigned char hb[SL__NIFTI2_HDR]; /* the header's bytes, as stored */
    size_t hlen;                      /* 348 or 540 */
} nstream_t;

static int ns_open(int fd, const char *name, int64_t file_size, nstream_t *s,
                   char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->gzip = is_gzip(fd);
    int dfd = dup(fd); /* gzclose closes it; it shares fd's offset */
    if (dfd >= 0 && lseek(dfd, 0, SEEK_SET) != 0) {
        close(dfd);
        dfd = -1;
    }
    if (dfd < 0)
        return sl__fail(err, errlen, sl__errno_code(errno, SL_EIO), "%s: %s",
                        name, strerror(errno));
    s->gz = gzdopen(dfd, "rb");
    if (!s->gz) {
        close(dfd);
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    }
    gzbuffer(s->gz, 128 << 10);
    int code = 0;
    int64_t got = gz_read(s->gz, s->hb, sizeof s->hb, name, err, errlen, &code);
    if (got < 0)
        return code;
    sl__volhdr_t *h = &s->h;
    char why[512];
    if ((code = sl__nifti_header(s->hb, (size_t)got, h, why, sizeof why)))
        return sl__fail(err, errlen, code, "%s: %s", name, why);
    s->hlen = h->version == 1 ? SL__NIFTI1_HDR : SL__NIFTI2_HDR;
    /* The data must fit in the file before anything is allocated. */
    int64_t need = h->vox_offset + h->nbytes; /* each < 2^62 */
    if (!s->gzip && need > file_size)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: truncated, or a header that lies: its %" PRId64
                        " x %" PRId64 " x %" PRId64 " x %" PRId64
                        " %s values need %" PRId64 " bytes from offset %" PRId64
                        ", the file has %" PRId64,
                        name, h->dim[0], h->dim[1], h->dim[2], h->dim[3],
                        sl_volume_dtype_name(h->dtype), h->nbytes,
                        h->vox_offset, file_size);
    return s->gzip ? gz_bound(h, name, file_size, err, errlen) : 0;
}

static void ns_close(nstream_t *s)
{
    if (s->gz)
        gzclose(s->gz);
    s->gz = NULL;
}

/* Reads the data into dst (nbytes, as stored: the file's byte order), in
 * pieces, then reaches the gzip member's end so its CRC-32 is checked. */
static int ns_data(nstream_t *s, const char *name, unsigned char *dst,
                   char *err, size_t errlen)
{
    const sl__volhdr_t *h = &s->h;
    int code = 0;
    if (gzseek(s->gz, h->vox_offset, SEEK_SET) < 0)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: cannot reach the data at offset %" PRId64, name,
                        h->vox_offset);
    int64_t done = 0;
    while (done < h->nbytes) {
        int64_t left = h->nbytes - done;
        size_t want = (size_t)(left < PIECE ? left : PIECE);
        int64_t r = gz_read(s->gz, dst + done, want, name, err, errlen, &code);
        if (r < 0)
            return code;
        if (r == 0)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: truncated: the data ends after %" PRId64
                            " of its %" PRId64 " bytes (offset %" PRId64 ")",
                            name, done, h->nbytes, h->vox_offset);
        done += r;
    }
    if (s->gzip) {
        unsigned char one;
        if (gz_read(s->gz, &one, 1, name, err, errlen, &code) < 0)
            return code;
    }
    return 0;
}

/* What a load allocates, checked against max_bytes and admit. */
static int budget(const sl_volume_options_t *o, const sl__admit_t *admit,
                  int64_t total, const sl_volume_t *v, const char *name,
                  char *err, size_t errlen)
{
    int64_t cap = o->max_bytes > 0 ? o->max_bytes : (INT64_C(4) << 30);
    if (total > cap)
        return sl__fail(err, errlen, SL_ENOMEM,
                        "%s: loading it needs %.1f MB (%" PRId64 " x %" PRId64
                        " x %" PRId64 " x %" PRId64 " %s), max_bytes allows "
                        "%.1f MB",
                        name, (double)total / 1e6, v->dim[0], v->dim[1],
                        v->dim[2], v->dim[3], sl_volume_dtype_name(v->dtype),
                        (double)cap / 1e6);
    char why[512];
    int code = sl__admit(admit, total, why, sizeof why);
    return code ? sl__fail(err, errlen, code, "%s: %s", name, why) : 0;
}

/* Converts stored values (count of them from element `first`) into v by
 * the plan, swapping bytes first when the file's order is not ours (in
 * place: p is scratch). */
static void feed(const sl__volhdr_t *h, const sl__vol_plan_t *plan,
                 unsigned char *p, int64_t first, int64_t count, void *out)
{
    if (h->swapped && h->nbyper > 1)
        nifti_swap_Nbytes(count, h->nbyper, p);
    sl__vol_convert(plan, p, first, count, out);
}

/* An open volume read in order: its stored bytes come from a gzip/plain
 * stream (a file) or from memory (a pack's record), a piece at a time,
 * and are converted by a plan straight into the caller's output. */
struct sl__nifti_stream {
    nstream_t s;              /* a file's stream (s.gz NULL: memory) */
    const unsigned char *mem; /* memory: the data, dlen bytes */
    sl__vol_src_t src;        /* or from a source (src.read not NULL) */
    size_t mlen, mpos;
    unsigned char *piece; /* PIECE bytes (+ a split value) */
    size_t have, pos;     /* bytes in piece, bytes converted */
    int64_t done;         /* values converted */
    int64_t fetched;      /* data bytes read into piece so far */
    int ended;            /* the gzip member's end reached */
    char name[1024];
};

const sl__volhdr_t *sl__nifti_stream_header(const sl__nifti_stream_t *n)
{
    return &n->s.h;
}

int sl__nifti_stream_gzip(const sl__nifti_stream_t *n)
{
    return n->s.gzip;
}

static int stream_alloc(sl__nifti_stream_t **out, const char *name)
{
    sl__nifti_stream_t *n = calloc(1, sizeof *n);
    if (!n)
        return SL_ENOMEM;
    snprintf(n->name, sizeof n->name, "%s", name);
    *out = n;
    return 0;
}

int sl__nifti_stream_file(int fd, const char *name, int64_t file_size,
                          sl__nifti_stream_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sl__nifti_stream_t *n;
    if (stream_alloc(&n, name))
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    int code = ns_open(fd, name, file_size, &n->s, err, errlen);
    if (!code && gzseek(n->s.gz, n->s.h.vox_offset, SEEK_SET) < 0)
        code = sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: cannot reach the data at offset %" PRId64, name,
                        n->s.h.vox_offset);
    if (code) {
        sl__nifti_stream_close(n);
        return code;
    }
    *out = n;
    return 0;
}

/* A stream over a header in memory whose data (dlen bytes) comes from
 * elsewhere: the header decoded and checked against dlen. */
static int stream_hdr(const void *hdr, size_t hlen, uint64_t dlen,
                      const char *name, sl__nifti_stream_t **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    sl__nifti_stream_t *n;
    if (stream_alloc(&n, name))
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    sl__volhdr_t *h = &n->s.h;
    char why[512];
    int code = sl__nifti_header(hdr, hlen, h, why, sizeof why);
    if (code) {
        sl__nifti_stream_close(n);
        return sl__fail(err, errlen, code, "%s: %s", name, why);
    }
    if (hlen != (h->version == 1 ? SL__NIFTI1_HDR : SL__NIFTI2_HDR) ||
        (uint64_t)h->nbytes != dlen) {
        code = sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: a NIfTI-%d header of %zu bytes and %" PRIu64
                        " bytes of data, where it needs %d and %" PRId64,
                        name, h->version, hlen, dlen,
                        h->version == 1 ? SL__NIFTI1_HDR : SL__NIFTI2_HDR,
                        h->nbytes);
        sl__nifti_stream_close(n);
        return code;
    }
    *out = n;
    return 0;
}

int sl__nifti_stream_mem(const void *hdr, size_t hlen, const void *data,
                         size_t dlen, const char *name,
                         sl__nifti_stream_t **out, char *err, size_t errlen)
{
    int code = stream_hdr(hdr, hlen, dlen, name, out, err, errlen);
    if (!code) {
        (*out)->mem = data;
        (*out)->mlen = dlen;
    }
    return code;
}

int sl__nifti_stream_src(const void *hdr, size_t hlen, uint64_t dlen,
                         const char *name, const sl__vol_src_t *src,
                         sl__nifti_stream_t **out, char *err, size_t errlen)
{
    int code = stream_hdr(hdr, hlen, dlen, name, out, err, errlen);
    if (code)
        src->close(src->ctx);
    else
        (*out)->src = *src;
    return code;
}

void sl__nifti_stream_close(sl__nifti_stream_t *n)
{
    if (!n)
        return;
    ns_close(&n->s);
    if (n->src.read)
        n->src.close(n->src.ctx);
    free(n->piece);
    free(n);
}

/* A gzip file's data through a gzr (volume/gzindex): exactly n bytes
 * (dst NULL: passed over, by its index), then, after the last, on to the
 * member's end so its CRC-32 is checked (when inflated from its start). */
typedef struct gzsrc {
    sl__gzr_t *g;
    const char *name;
} gzsrc_t;

static int gzsrc_read(void *ctx, void *dst, size_t n, char *err, size_t errlen)
{
    gzsrc_t *s = ctx;
    int code = 0;
    int64_t got = sl__gzr_read(s->g, dst, n, &code, err, errlen);
    if (got < 0)
        return code;
    if ((size_t)got < n)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: truncated: the gzip data ends before the "
                        "volume's",
                        s->name);
    return 0;
}

static int gzsrc_finish(void *ctx, char *err, size_t errlen)
{
    gzsrc_t *s = ctx;
    unsigned char one;
    int code = 0;
    return sl__gzr_read(s->g, &one, 1, &code, err, errlen) < 0 ? code : 0;
}

static void gzsrc_close(void *ctx)
{
    gzsrc_t *s = ctx;
    sl__gzr_close(s->g);
    free(s);
}

int sl__nifti_stream_indexed(int fd, const char *name, int64_t file_size,
                             const sl__gzindex_t *use, sl__gzindex_t *build,
                             sl__nifti_stream_t **out, char *err, size_t errlen)
{
    if (!is_gzip(fd))
        return sl__nifti_stream_file(fd, name, file_size, out, err, errlen);
    *out = NULL;
    gzsrc_t *s = calloc(1, sizeof *s);
    if (!s)
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    s->name = name;
    int code = sl__gzr_open(fd, name, use, build, &s->g, err, errlen);
    if (code) {
        free(s);
        return code;
    }
    sl__vol_src_t src = {gzsrc_read, gzsrc_finish, gzsrc_close, s};
    /* The header: NIfTI-1's bytes, NIfTI-2's when its size says 540 (in
     * either byte order); the data starts past it (sl__nifti_header). */
    unsigned char hb[SL__NIFTI2_HDR];
    int64_t got = sl__gzr_read(s->g, hb, SL__NIFTI1_HDR, &code, err, errlen);
    uint32_t sz = 0;
    if (got == SL__NIFTI1_HDR)
        memcpy(&sz, hb, 4);
    if (sz == 540 || sz == 0x1c020000u) {
        int64_t more =
            sl__gzr_read(s->g, hb + got, SL__NIFTI2_HDR - SL__NIFTI1_HDR, &code,
                         err, errlen);
        got = more < 0 ? more : got + more;
    }
    sl__volhdr_t h;
    char why[512];
    if (got >= 0 &&
        (code = sl__nifti_header(hb, (size_t)got, &h, why, sizeof why)))
        sl__fail(err, errlen, code, "%s: %s", name, why);
    if (!code)
        code = gz_bound(&h, name, file_size, err, errlen);
    if (!code)
        code = gzsrc_read(s, NULL, (size_t)(h.vox_offset - got), err, errlen);
    if (code) {
        gzsrc_close(s);
        return code;
    }
    size_t hlen = h.version == 1 ? SL__NIFTI1_HDR : SL__NIFTI2_HDR;
    /* the stream names the file in its messages; s->name points there */
    code = sl__nifti_stream_src(hb, hlen, (uint64_t)h.nbytes, name, &src, out,
                                err, errlen);
    if (!code) {
        s->name = (*out)->name;
        (*out)->s.gzip = 1;
    }
    return code;
}

/* Up to `want` more data bytes into p. @return bytes (0: the data ended
 * early), or -1 with *code. */
static int64_t stream_fetch(sl__nifti_stream_t *n, unsigned char *p,
                            size_t want, char *err, size_t errlen, int *code)
{
    if (n->src.read) {
        *code = n->src.read(n->src.ctx, p, want, err, errlen);
        return *code ? -1 : (int64_t)want;
    }
    if (!n->s.gz) {
        size_t k = n->mlen - n->mpos < want ? n->mlen - n->mpos : want;
        memcpy(p, n->mem + n->mpos, k);
        n->mpos += k;
        return (int64_t)k;
    }
    return gz_read(n->s.gz, p, want, n->name, err, errlen, code);
}

/* After the last value of a gzip file: its member's end reached, so its
 * CRC-32 is checked. */
static int stream_end(sl__nifti_stream_t *n, char *err, size_t errlen)
{
    int code = 0;
    if (n->done == n->s.h.nvox && n->src.read && !n->ended) {
        n->ended = 1;
        return n->src.finish(n->src.ctx, err, errlen);
    }
    if (n->done == n->s.h.nvox && n->s.gz && n->s.gzip && !n->ended) {
        n->ended = 1;
        unsigned char one;
        if (gz_read(n->s.gz, &one, 1, n->name, err, errlen, &code) < 0)
            return code;
    }
    return 0;
}

/* Passes over the next `count` values unconverted (count checked): what
 * the piece holds, then the stream's bytes (gzseek: a plain file seeks, a
 * gzip one inflates without keeping; memory moves on). A stream cut short
 * inside them fails at the next read, as a read would have. */
static int stream_skip(sl__nifti_stream_t *n, int64_t count, char *err,
                       size_t errlen)
{
    int64_t bytes = count * n->s.h.nbyper, held = (int64_t)(n->have - n->pos);
    int64_t take = held < bytes ? held : bytes;
    n->pos += (size_t)take;
    bytes -= take;
    int code;
    if (bytes > 0 && n->src.read) {
        if ((code = n->src.read(n->src.ctx, NULL, (size_t)bytes, err, errlen)))
            return code;
    } else if (bytes > 0 && !n->s.gz) {
        if ((uint64_t)bytes > n->mlen - n->mpos)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s: truncated: the data ends after %zu bytes",
                            n->name, n->mlen);
        n->mpos += (size_t)bytes;
    } else if (bytes > 0 && gzseek(n->s.gz, (z_off_t)bytes, SEEK_CUR) < 0) {
        int zerr;
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: cannot skip %" PRId64 " bytes of data (%s)",
                        n->name, bytes, gzerror(n->s.gz, &zerr));
    }
    n->fetched += bytes;
    n->done += count;
    return stream_end(n, err, errlen);
}

int sl__nifti_stream_pull(sl__nifti_stream_t *n, int64_t count,
                          const sl__vol_plan_t *plan, void *out, char *err,
                          size_t errlen)
{
    const sl__volhdr_t *h = &n->s.h;
    int code = 0;
    if (count < 0 || count > h->nvox - n->done)
        return sl__fail(err, errlen, SL_EINVAL,
                        "%s: %" PRId64 " values asked, %" PRId64 " left",
                        n->name, count, h->nvox - n->done);
    if (!out)
        return stream_skip(n, count, err, errlen);
    if (!n->piece && count > 0) {
        n->piece = malloc(PIECE + 8);
        if (!n->piece)
            return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory",
                            n->name);
    }
    size_t nb = (size_t)h->nbyper;
    while (count > 0) {
        int64_t ready = (int64_t)((n->have - n->pos) / nb);
        if (ready == 0) {
            /* Keep a value split between two pieces, read on. */
            size_t keep = n->have - n->pos;
            memmove(n->piece, n->piece + n->pos, keep);
            n->have = keep;
            n->pos = 0;
            int64_t left = h->nbytes - n->fetched;
            size_t want = (size_t)(left < PIECE ? left : PIECE);
            int64_t r =
                stream_fetch(n, n->piece + keep, want, err, errlen, &code);
            if (r < 0)
                return code;
            if (r == 0)
                return sl__fail(err, errlen, SL_ECORRUPT,
                                "%s: truncated: the data ends after %" PRId64
                                " of its %" PRId64 " bytes (offset %" PRId64
                                ")",
                                n->name, n->fetched, h->nbytes, h->vox_offset);
            n->have += (size_t)r;
            n->fetched += r;
            continue;
        }
        int64_t k = ready < count ? ready : count;
        feed(h, plan, n->piece + n->pos, n->done, k, out);
        n->pos += (size_t)k * nb;
        n->done += k;
        count -= k;
    }
    return stream_end(n, err, errlen);
}

/* A stream's whole volume as a new volume (sl__nifti_read, _load_mem). */
int sl__nifti_stream_load(sl__nifti_stream_t *n, const sl_volume_options_t *o,
                          const sl__admit_t *admit, sl_volume_t **out,
                          char *err, size_t errlen)
{
    const sl__volhdr_t *h = &n->s.h;
    sl_volume_t *v = NULL;
    sl__vol_plan_t plan;
    char why[512];
    int code = sl__volume_make(h, o, &v, &plan, why, sizeof why);
    if (code)
        return sl__fail(err, errlen, code, "%s: %s", n->name, why);
    v->compressed = n->s.gzip;
    if (o->header_only) {
        *out = v;
        return 0;
    }
    int64_t out_bytes = h->nvox * (int64_t)sl_volume_dtype_size(v->dtype);
    int64_t piece_bytes = h->nbytes < PIECE ? h->nbytes : PIECE;
    if ((code = budget(o, admit, out_bytes + piece_bytes, v, n->name, err,
                       errlen))) {
        sl_volume_free(v);
        return code;
    }
    v->data = malloc(out_bytes ? (size_t)out_bytes : 1);
    if (!v->data) {
        sl_volume_free(v);
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory (%.1f MB)",
                        n->name, (double)(out_bytes + piece_bytes) / 1e6);
    }
    v->data_bytes = (size_t)out_bytes;
    /* The data straight into the output, a piece at a time: no full-size
     * copy of the stored values. */
    if ((code =
             sl__nifti_stream_pull(n, h->nvox, &plan, v->data, err, errlen))) {
        sl_volume_free(v);
        return code;
    }
    *out = v;
    return 0;
}

int sl__nifti_read(int fd, const char *name, int64_t file_size,
                   const sl_volume_options_t *o, const sl__admit_t *admit,
                   sl_volume_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sl__nifti_stream_t *n = NULL;
    int code = sl__nifti_stream_file(fd, name, file_size, &n, err, errlen);
    if (!code)
        code = sl__nifti_stream_load(n, o, admit, out, err, errlen);
    sl__nifti_stream_close(n);
    return code;
}

int sl__nifti_read_stored(int fd, const char *name, int64_t file_size,
                          int64_t max_bytes, sl__bytes_t *out, size_t *hlen,
                          int64_t *dlen, char *err, size_t errlen)
{
    nstream_t s;
    int code = ns_open(fd, name, file_size, &s, err, errlen);
    if (!code) {
        int64_t cap = max_bytes > 0 ? max_bytes : (INT64_C(4) << 30);
        size_t need = s.hlen + (size_t)s.h.nbytes;
        if (s.h.nbytes > cap - (int64_t)s.hlen)
            code = sl__fail(err, errlen, SL_ENOMEM,
                            "%s: its data is %.1f MB, max_bytes allows %.1f MB",
                            name, (double)s.h.nbytes / 1e6, (double)cap / 1e6);
        else if (sl__bytes_reserve(out, out->n + need))
            code =
                sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory (%.1f MB)",
                         name, (double)need / 1e6);
    }
    if (!code) {
        memcpy(out->p + out->n, s.hb, s.hlen);
        code = ns_data(&s, name, out->p + out->n + s.hlen, err, errlen);
    }
    if (!code) {
        out->n += s.hlen + (size_t)s.h.nbytes;
        *hlen = s.hlen;
        *dlen = s.h.nbytes;
    }
    ns_close(&s);
    return code;
}

int sl__nifti_load_mem(const void *hdr, size_t hlen, const void *data,
                       size_t dlen, const char *name,
                       const sl_volume_options_t *o, const sl__admit_t *admit,
                       sl_volume_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sl__nifti_stream_t *n = NULL;
    int code =
        sl__nifti_stream_mem(hdr, hlen, data, dlen, name, &n, err, errlen);
    if (!code)
        code = sl__nifti_stream_load(n, o, admit, out, err, errlen);
    sl__nifti_stream_close(n);
    return code;
}
