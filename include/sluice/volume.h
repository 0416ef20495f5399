/*
 * sluice/volume.h: 3-D and 4-D medical volumes (NIfTI-1 and NIfTI-2, .nii
 * and .nii.gz) and datasets of them (docs/DESIGN.md, "Volumes").
 *
 * A volume loads as nibabel loads it: the array of nibabel's
 * `img.get_fdata()` (float32 here; scl_slope / scl_inter applied, a slope
 * of 0 or not finite meaning none) and its `img.affine` (sform when
 * sform_code != 0, else qform when qform_code != 0, else the affine from the
 * voxel sizes). With SL_VOLUME_RAS the array and affine are those of
 * nibabel's `as_closest_canonical(img)` instead (axes permuted and flipped
 * to the closest RAS+ orientation; no resampling).
 *
 * Built without the NIfTI library (SL_HAVE_NIFTI 0), sl_volume_load fails
 * with SL_EUNSUPPORTED ("sluice was built without NIfTI support"); the
 * dataset calls, which only list files, work in every build.
 *
 * Threads: every function may be called from any number of threads at
 * once; a volume or dataset is used by one thread at a time (reading one
 * from several threads at once is fine).
 */
#ifndef SLUICE_VOLUME_H
#define SLUICE_VOLUME_H

#include "sluice/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Element types of a volume's data. */
typedef enum sl_volume_dtype {
    SL_VOLUME_UINT8 = 1,
    SL_VOLUME_INT16 = 2,
    SL_VOLUME_INT32 = 3,
    SL_VOLUME_FLOAT32 = 4,
    SL_VOLUME_FLOAT64 = 5,
    SL_VOLUME_INT8 = 6,
    SL_VOLUME_UINT16 = 7, /**< common in MRI */
    SL_VOLUME_UINT32 = 8
} sl_volume_dtype_t;

/** Orientation of the array handed out. */
typedef enum sl_volume_orient {
    SL_VOLUME_AS_STORED = 0, /**< the file's axes, as nibabel.load gives */
    SL_VOLUME_RAS = 1        /**< closest canonical RAS+, as nibabel's
                                  as_closest_canonical (3 or 4 dims) */
} sl_volume_orient_t;

/** Where a volume's affine came from (nibabel's get_best_affine). */
typedef enum sl_volume_affine_source {
    SL_VOLUME_AFFINE_SFORM = 1,
    SL_VOLUME_AFFINE_QFORM = 2,
    SL_VOLUME_AFFINE_PIXDIM = 3 /**< neither code set: voxel sizes, x
                                     flipped, origin at the centre */
} sl_volume_affine_source_t;

/** How to load; a zero field takes the default in brackets. Make one with
 *  sl_volume_options_init(). */
typedef struct sl_volume_options {
    size_t size;       /**< sizeof(sl_volume_options_t), by _init */
    int orient;        /**< sl_volume_orient_t [SL_VOLUME_AS_STORED] */
    int native;        /**< 1: data in the file's type, unscaled
                            (scl_slope / scl_inter say how to scale it)
                            [0: float32, scaled] */
    int header_only;   /**< 1: header, dims, affine; no data [0] */
    int64_t max_bytes; /**< most memory one load may allocate (the data and
                            its read buffer); a volume needing more fails
                            before anything is allocated [4 GiB] */
    int unlabeled;     /**< datasets: a case without a label volume is
                            listed with label NULL [0: an error naming it] */
} sl_volume_options_t;

/** Zeroes *o (every field its default) and sets o->size. */
SL_API void sl_volume_options_init(sl_volume_options_t *o);
SL_API void sl_volume_options_init_sized(sl_volume_options_t *o, size_t size);
#define sl_volume_options_init(o) sl_volume_options_init_sized((o), sizeof *(o))

/** A loaded volume, allocated by the library (fields are only ever added at
 *  the end; `size` is the library's sizeof, so a caller built against a
 *  newer header can tell whether a field is there). Free it with
 *  sl_volume_free(). */
typedef struct sl_volume {
    size_t size;         /**< sizeof(sl_volume_t) of the library */
    int ndim;            /**< dimensions of the array, 1..4 (nibabel's
                              len(shape)) */
    int64_t dim[4];      /**< sizes, the first varying fastest in data;
                              1 past ndim */
    double spacing[4];   /**< voxel size along each axis of data (pixdim,
                              nibabel's get_zooms(): 0 or not finite read
                              as 1, spatial ones as their absolute value);
                              1 past ndim */
    double affine[4][4]; /**< row-major: world (x, y, z, 1) = affine x
                              (i, j, k, 1) for voxel (i, j, k) of data */
    int dtype;           /**< sl_volume_dtype_t of data */
    void *data;          /**< dim[0] x dim[1] x dim[2] x dim[3] values,
                              index i + dim[0] * (j + dim[1] * (k + ...))
                              (numpy: order='F'); NULL with header_only */
    size_t data_bytes;   /**< bytes of data */
    int stored_dtype;    /**< sl_volume_dtype_t of the file's data */
    int nifti_datatype;  /**< the header's datatype code */
    int nifti_version;   /**< 1 or 2 */
    double scl_slope;    /**< scaling in force (value = stored x slope +
                              inter): 1 and 0 when the header has none */
    double scl_inter;
    int qform_code, sform_code;
    int affine_source;  /**< sl_volume_affine_source_t */
    char axcodes[4];    /**< orientation of data's first 3 axes, as
                             nibabel's aff2axcodes: "RAS", "LPS", ... */
    int reoriented;     /**< 1 when SL_VOLUME_RAS moved the axes */
    int64_t vox_offset; /**< where the data starts in the (uncompressed)
                             file */
    int big_endian;     /**< 1 when the file is big-endian */
    int xyz_units;      /**< NIfTI unit codes (2: mm, 8: s, ...) */
    int time_units;
    char descrip[80]; /**< the header's description, terminated */
    int compressed;   /**< 1 when the file is gzip (.nii.gz) */
} sl_volume_t;

/**
 * Loads one NIfTI-1 or NIfTI-2 volume (.nii, or .nii.gz: gzip is told by
 * its magic bytes). Data types uint8, int8, int16, uint16, int32, uint32,
 * float32 and float64 (float32 holds every int8/uint16/int16 value exactly;
 * uint32 and int32 round as nibabel's float32 cast does);
 * 1 to 4 dimensions. Every size in the header is checked against the file
 * (and, compressed, against what its bytes can inflate to) and against
 * opt->max_bytes before anything is allocated. `opt` may be NULL (the
 * defaults).
 * @return 0 and *out (free with sl_volume_free), or SL_ENOTFOUND /
 *         SL_EIO / SL_ESYSTEM (the file), SL_ECORRUPT (a damaged, truncated
 *         or lying header or data), SL_EUNSUPPORTED (another data type, 5 or
 *         more dimensions, a two-file .hdr/.img pair, no NIfTI support
 *         built), SL_ENOMEM (over max_bytes, or out of memory), SL_EINVAL;
 *         the message (the file and the cause) goes to err (may be NULL).
 */
SL_API int sl_volume_load(const char *path, const sl_volume_options_t *opt,
                          sl_volume_t **out, char *err, size_t errlen);

/** Frees a volume and its data; NULL does nothing. */
SL_API void sl_volume_free(sl_volume_t *v);

/** @return "uint8", "int16", "int32", "float32", "float64", "int8",
 *  "uint16", "uint32", or "unknown"; static. */
SL_API const char *sl_volume_dtype_name(int dtype);
/** @return bytes of one element of a dtype (0 for an unknown one). */
SL_API size_t sl_volume_dtype_size(int dtype);

/* ---------------------------------------------------------------- reader */

/** A volume read in storage order, a piece at a time: a large volume never
 *  needs its whole array in memory (the volume loader streams its offline
 *  stage through one, a slice at a time). */
typedef struct sl_volume_reader sl_volume_reader_t;

/**
 * Opens `path` to read its data in order: the header is read and checked
 * as sl_volume_load does (the same errors), the data is left unread.
 * opt->orient must be SL_VOLUME_AS_STORED (reorienting needs the whole
 * array); opt->native gives the stored type unscaled, else float32 scaled;
 * header_only and max_bytes do not apply (a reader holds a 1 MiB piece and
 * zlib's buffers). `opt` may be NULL.
 * @return 0 and *out (close with sl_volume_reader_close), or as
 *         sl_volume_load.
 */
SL_API int sl_volume_reader_open(const char *path,
                                 const sl_volume_options_t *opt,
                                 sl_volume_reader_t **out, char *err,
                                 size_t errlen);

/** @return the volume's header facts (an sl_volume_t whose data is NULL),
 *  valid until the reader is closed. */
SL_API const sl_volume_t *sl_volume_reader_volume(const sl_volume_reader_t *r);

/**
 * The next `count` values in storage order (dim[0] fastest) into out: one
 * dim[0] x dim[1] slice at a time is count = dim[0] * dim[1]. float32
 * (scaled), or the stored type with opt->native. After the last value a
 * gzip file's checksum is checked.
 * @return 0, SL_EINVAL (more values than are left), or SL_ECORRUPT /
 *         SL_EIO (truncated or damaged data: the file and the cause in err).
 */
SL_API int sl_volume_reader_read(sl_volume_reader_t *r, void *out,
                                 int64_t count, char *err, size_t errlen);

/** Passes over the next `count` values without converting them: a plain
 *  file seeks, a gzip file inflates them without keeping them (its
 *  checksum is still checked after the last value). Errors as
 *  sl_volume_reader_read (a stream cut short inside them fails here or at
 *  the next read). */
SL_API int sl_volume_reader_skip(sl_volume_reader_t *r, int64_t count,
                                 char *err, size_t errlen);

/** Closes a reader; NULL does nothing. */
SL_API void sl_volume_reader_close(sl_volume_reader_t *r);

/* --------------------------------------------------------------- dataset */

/** A list of volume cases: an image and, usually, its label volume. */
typedef struct sl_volume_dataset sl_volume_dataset_t;

/**
 * Lists a dataset without reading any volume:
 *  - a folder in the KiTS19 layout: every sub-folder that holds an
 *    imaging.nii.gz (or imaging.nii) is a case, named by the sub-folder,
 *    with segmentation.nii.gz (or .nii) as its label; cases sorted by name;
 *  - a list file: one case per line, "IMAGE" or "IMAGE LABEL" (paths
 *    relative to the list's folder unless absolute; blank lines and lines
 *    starting with '#' skipped), named by the image path;
 *  - a pack of volumes (`sluice pack --volumes`): one record per case,
 *    checked whole as every pack is (docs/FORMAT.md), named as packed.
 * A case without a label is an error naming it, unless opt->unlabeled; a
 * named file that does not exist is an error naming it and its line.
 * @return 0 and *out, or SL_ENOTFOUND / SL_EIO / SL_ECORRUPT / SL_ENOMEM /
 *         SL_EINVAL with the message in err.
 */
SL_API int sl_volume_dataset_open(const char *path,
                                  const sl_volume_options_t *opt,
                                  sl_volume_dataset_t **out, char *err,
                                  size_t errlen);
/** Frees the list; NULL does nothing. */
SL_API void sl_volume_dataset_destroy(sl_volume_dataset_t *d);
/** @return the number of cases. */
SL_API int64_t sl_volume_dataset_count(const sl_volume_dataset_t *d);
/** @return case i's name, its image path, its label path (NULL: none;
 *  both NULL in a pack); NULL when i is out of range. Valid until the
 *  dataset is destroyed. */
SL_API const char *sl_volume_dataset_name(const sl_volume_dataset_t *d,
                                          int64_t i);
SL_API const char *sl_volume_dataset_image(const sl_volume_dataset_t *d,
                                           int64_t i);
SL_API const char *sl_volume_dataset_label(const sl_volume_dataset_t *d,
                                           int64_t i);
/** @return 1 when case i has a label volume, else 0. */
SL_API int sl_volume_dataset_has_label(const sl_volume_dataset_t *d, int64_t i);

/**
 * Loads case i: its image into *image and, when `label` is not NULL and the
 * case has one, its label volume into *label (else *label = NULL), each as
 * sl_volume_load with `opt` would (a pack's record is read and checked,
 * refused unread if it needs more than opt->max_bytes). Any thread, also
 * at once on one dataset. `opt` may be NULL.
 * @return 0, or SL_E* with the file (or pack, shard, record) and the cause
 *         in err; nothing is returned on failure.
 */
SL_API int sl_volume_dataset_load(const sl_volume_dataset_t *d, int64_t i,
                                  const sl_volume_options_t *opt,
                                  sl_volume_t **image, sl_volume_t **label,
                                  char *err, size_t errlen);

/**
 * Case i's image and (when `label` is not NULL and the case has one) label
 * as readers (sl_volume_reader_open); *label = NULL otherwise. A pack's
 * record is read and checked once and held while either reader is open
 * (its stored bytes: a pack's volumes are not streamed from the shard);
 * files are read as the readers are consumed. The two readers are separate
 * objects (close them in any order, from any thread).
 * @return 0, or SL_E* with the file (or pack, record) and the cause.
 */
SL_API int sl_volume_dataset_readers(const sl_volume_dataset_t *d, int64_t i,
                                     const sl_volume_options_t *opt,
                                     sl_volume_reader_t **image,
                                     sl_volume_reader_t **label, char *err,
                                     size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_VOLUME_H */
