/* volume/vol_internal: what the NIfTI reader (nifti.c, built with
 * SL_NIFTI) and the library-only parts of the module share: the header's
 * facts as nibabel reads them, and the steps from a header to a volume.
 * Depends on base. */
#ifndef SL_VOL_INTERNAL_H
#define SL_VOL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/membudget.h"
#include "sluice/volume.h"

/* The first layout of sl_volume_options_t (sluice 0.2): older callers'
 * structs are read with the missing tail zeroed. */
#define SL__VOLUME_OPTIONS_V1_SIZE                                             \
    (offsetof(sl_volume_options_t, unlabeled) + sizeof(int))

/* ---- volume.c: the public calls' entry */

/* A public call's arguments: refused (SL_EINVAL, "FN: WHY") unless `ok`,
 * then the options: the defaults with the caller's `opt` (may be NULL)
 * copied in by its size (sl__abi_in: SL_EINVAL naming them). */
int sl__vol_call_in(const char *fn, int ok, const char *why,
                    const sl_volume_options_t *opt, sl_volume_options_t *o,
                    char *err, size_t errlen);

/* A NIfTI header, decoded, byte-swapped and checked (sl__nifti_header). The
 * fixes nibabel makes on load are made: qfac not +-1 is 1, pixdim[1..3]
 * zero is 1 and negative its absolute value, an xform code outside 0..5 is
 * 0, a slope of 0 or not finite is no scaling (1, 0). */
typedef struct sl__volhdr {
    int version;        /* 1 or 2 */
    int big_endian;     /* 1 when the file is big-endian */
    int swapped;        /* the file's byte order is not this machine's */
    int ndim;           /* 1..4 */
    int64_t dim[4];     /* 1 past ndim */
    int64_t nvox;       /* product of dim */
    double pixdim[8];   /* [0] qfac (+-1), [1..7] voxel sizes (fixed) */
    int datatype;       /* NIfTI code */
    int dtype;          /* sl_volume_dtype_t */
    int nbyper;         /* bytes of one stored value */
    int64_t vox_offset; /* data start in the uncompressed stream */
    int64_t nbytes;     /* nvox * nbyper */
    double slope, inter;
    int qform_code, sform_code;
    double quatern[3], qoffset[3];
    double srow[3][4];
    int quat_eps_f32; /* 1: NIfTI-1 (float32 quaternion threshold) */
    int xyz_units, time_units;
    char descrip[80];
} sl__volhdr_t;

/* Bytes of a header of each version. */
#define SL__NIFTI1_HDR 348
#define SL__NIFTI2_HDR 540
/* Deflate inflates at most 1032:1 (RFC 1951's longest match for one
 * symbol); a gzip file's members are each deflate streams, so a .nii.gz
 * of S bytes holds less than this many uncompressed bytes. */
#define SL__GZ_MAX_RATIO 1032

/* Decodes and checks the header in buf[0..n) (at least 348 bytes; 540 for
 * NIfTI-2): the NIfTI library tells the version, swaps the bytes and names
 * the data type; every field sluice uses is then checked (dims, sizes that
 * overflow, data type, vox_offset, scaling). @return 0, or SL_ECORRUPT /
 * SL_EUNSUPPORTED with the cause (no file name) in err. */
int sl__nifti_header(const void *buf, size_t n, sl__volhdr_t *h, char *err,
                     size_t errlen);

/* Reads a volume from an open file from its start (fd stays the caller's,
 * its offset is moved; `name` for the
 * messages; file_size its bytes): header, checks against file_size (and
 * SL__GZ_MAX_RATIO when gzip), then `admit` is asked for the bytes the load
 * will allocate, then the data is read in pieces and converted straight
 * into the output. @return 0 and *out, or SL_E* with "NAME: cause". */
int sl__nifti_read(int fd, const char *name, int64_t file_size,
                   const sl_volume_options_t *o, const sl__admit_t *admit,
                   sl_volume_t **out, char *err, size_t errlen);

/* Reads a file's header and data as stored (the file's byte order, not
 * scaled) and appends them to out: the header's 348 (NIfTI-1) or 540
 * (NIfTI-2) bytes, then its data (*hlen, *dlen their sizes); extensions
 * are left out. The same checks as sl__nifti_read; max_bytes (0: 4 GiB)
 * bounds the data. For `sluice pack --volumes` (volume/volrec). */
int sl__nifti_read_stored(int fd, const char *name, int64_t file_size,
                          int64_t max_bytes, sl__bytes_t *out, size_t *hlen,
                          int64_t *dlen, char *err, size_t errlen);

/* A volume from a header and its data in memory (as sl__nifti_read_stored
 * appends them): the same checks, options and result as sl__nifti_read.
 * `name` for messages. */
int sl__nifti_load_mem(const void *hdr, size_t hlen, const void *data,
                       size_t dlen, const char *name,
                       const sl_volume_options_t *o, const sl__admit_t *admit,
                       sl_volume_t **out, char *err, size_t errlen);

/* A volume read in order, a piece at a time (nifti.c): from a file
 * (gzip or plain; the stream holds its own descriptor, fd stays the
 * caller's) or from a header and data in memory (a pack's record; the
 * memory must outlive the stream). Opening reads and checks the header as
 * sl__nifti_read does; pull converts the next `count` stored values by a
 * plan (sl__vol_convert: index `first` is the count pulled so far) into
 * out (NULL: passes over them unconverted, a plain file by seeking), and
 * after the last value checks a gzip file's CRC. Memory: a 1 MiB
 * piece and zlib's buffers. One thread at a time. */
typedef struct sl__nifti_stream sl__nifti_stream_t;
struct sl__vol_plan;
int sl__nifti_stream_file(int fd, const char *name, int64_t file_size,
                          sl__nifti_stream_t **out, char *err, size_t errlen);
int sl__nifti_stream_mem(const void *hdr, size_t hlen, const void *data,
                         size_t dlen, const char *name,
                         sl__nifti_stream_t **out, char *err, size_t errlen);
/* sl__nifti_stream_file, but a gzip file's data is read through a gzr
 * (volume/gzindex.h): its passes over data jump by `use`, and it records
 * access points into `build` (either NULL); the same checks. */
struct sl__gzindex;
int sl__nifti_stream_indexed(int fd, const char *name, int64_t file_size,
                             const struct sl__gzindex *use,
                             struct sl__gzindex *build,
                             sl__nifti_stream_t **out, char *err,
                             size_t errlen);
/* A volume's stored data from elsewhere, in order (a pack's record
 * streamed: volume/dataset): read gives exactly n bytes (dst NULL: passes
 * over them), finish is called once after the data's last byte (the
 * record read to its end, so its checksum is checked), close frees ctx.
 * Errors come with their message in err. */
typedef struct sl__vol_src {
    int (*read)(void *ctx, void *dst, size_t n, char *err, size_t errlen);
    int (*finish)(void *ctx, char *err, size_t errlen);
    void (*close)(void *ctx);
    void *ctx;
} sl__vol_src_t;
/* A stream over a header in memory and dlen data bytes from src (taken:
 * closed with the stream, or at once on failure). */
int sl__nifti_stream_src(const void *hdr, size_t hlen, uint64_t dlen,
                         const char *name, const sl__vol_src_t *src,
                         sl__nifti_stream_t **out, char *err, size_t errlen);
/* A stream's whole volume as a new volume, as sl__nifti_read makes it
 * (header_only, max_bytes and admit alike); the stream stays the
 * caller's. */
int sl__nifti_stream_load(sl__nifti_stream_t *n, const sl_volume_options_t *o,
                          const sl__admit_t *admit, sl_volume_t **out,
                          char *err, size_t errlen);
const sl__volhdr_t *sl__nifti_stream_header(const sl__nifti_stream_t *n);
int sl__nifti_stream_gzip(const sl__nifti_stream_t *n); /* 1: a .nii.gz */
int sl__nifti_stream_pull(sl__nifti_stream_t *n, int64_t count,
                          const struct sl__vol_plan *plan, void *out, char *err,
                          size_t errlen);
void sl__nifti_stream_close(sl__nifti_stream_t *n);

/* ---- reader.c: sl_volume_reader_t over a stream */

/* A reader over stream n (taken: closed on failure too). @return 0 and
 * *out, or SL_E* with "NAME: cause". */
int sl__volume_reader_make(sl__nifti_stream_t *n, const char *name,
                           const sl_volume_options_t *o,
                           sl_volume_reader_t **out, char *err, size_t errlen);

/* ---- volume.c: from a checked header to a volume (no data yet) */

/* Allocates *out and fills every field but data from h and o: the affine
 * (nibabel's get_best_affine), spacing, axcodes, and with SL_VOLUME_RAS the
 * reoriented dims and affine. `plan` gets where each stored axis goes
 * (sl__vol_plan_t). @return 0, or SL_ECORRUPT / SL_EUNSUPPORTED / SL_ENOMEM
 * with the cause in err. */
typedef struct sl__vol_plan {
    int64_t in_dim[4];   /* the stored array's sizes */
    int64_t stride[4];   /* element step in the output per step along each
                            stored axis (negative: flipped) */
    int64_t start;       /* output index of stored element 0 */
    int out_dtype;       /* sl_volume_dtype_t written */
    int in_dtype;        /* stored */
    int swap;            /* bytes to swap per stored value (0: none) */
    double slope, inter; /* applied when scale */
    int scale;
} sl__vol_plan_t;

int sl__volume_make(const sl__volhdr_t *h, const sl_volume_options_t *o,
                    sl_volume_t **out, sl__vol_plan_t *plan, char *err,
                    size_t errlen);

/* Converts `count` stored values (raw bytes, already in this machine's byte
 * order) that begin at stored element index `first` into out (the
 * volume's data) by the plan: scaled, cast, and placed where the plan's
 * strides put them. Pure; no allocation. */
void sl__vol_convert(const sl__vol_plan_t *p, const void *raw, int64_t first,
                     int64_t count, void *out);

#endif
