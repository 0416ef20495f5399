/* `sluice volume info FILE...` (a NIfTI volume's header facts: format,
 * shape, type, spacing, scaling, the affine and where it came from, the
 * orientation; --stats reads the data too) and `sluice volume list PATH`
 * (the cases of a volume dataset: a KiTS19-layout folder or a list file).
 * The work is sluice/volume.h's. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "sluice/volume.h"

typedef struct volume_args {
    int ras, stats, unlabeled;
} volume_args_t;

#define F(f) offsetof(volume_args_t, f)
static const sl__opt_t info_opts[] = {
    {"ras", 0, SL__OPT_FLAG, F(ras), 0, 0, NULL,
     "as reoriented to the closest RAS+ (nibabel's as_closest_canonical)"},
    {"stats", 0, SL__OPT_FLAG, F(stats), 0, 0, NULL,
     "read the data too: min, max, mean of the scaled values"},
    {NULL},
};
static const sl__opt_t list_opts[] = {
    {"unlabeled", 0, SL__OPT_FLAG, F(unlabeled), 0, 0, NULL,
     "cases without a label volume are listed, not an error"},
    {NULL},
};
static const sl__opts_t info_usage = {
    "FILE... [--ras] [--stats]",
    "  FILE: a NIfTI-1 or NIfTI-2 volume, .nii or .nii.gz\n",
    {info_opts},
    "a FILE",
    1,
    -1,
    NULL};
static const sl__opts_t list_usage = {
    "PATH [--unlabeled]",
    "  PATH: a folder of CASE/imaging.nii.gz + CASE/segmentation.nii.gz\n"
    "        (KiTS19), a list file of 'IMAGE [LABEL]' lines, or a pack\n"
    "        (sluice pack --volumes)\n",
    {list_opts},
    "one PATH",
    1,
    1,
    NULL};

static const char *xform_name(int code)
{
    static const char *const n[] = {"unknown",   "scanner", "aligned",
                                    "talairach", "mni",     "template"};
    return code >= 0 && code <= 5 ? n[code] : "?";
}

static const char *units_name(int xyz, int t)
{
    if (t) /* time units: 8 s, 16 ms, 24 us */
        return t == 8 ? "s" : t == 16 ? "ms" : t == 24 ? "us" : "?";
    return xyz == 1 ? "m" : xyz == 2 ? "mm" : xyz == 3 ? "um" : "unknown";
}

static int info_one(const char *path, const volume_args_t *a)
{
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.orient = a->ras ? SL_VOLUME_RAS : SL_VOLUME_AS_STORED;
    o.header_only = !a->stats;
    sl_volume_t *v = NULL;
    char err[1024];
    if (sl_volume_load(path, &o, &v, err, sizeof err)) {
        fprintf(stderr, "sluice volume info: %s\n", err);
        return 1;
    }
    static const char *const src[] = {"", "sform", "qform",
                                      "pixdim (no sform or qform)"};
    printf("path:        %s\n", path);
    printf("format:      NIfTI-%d%s, %s-endian, data at byte %" PRId64 "\n",
           v->nifti_version, v->compressed ? " (gzip)" : "",
           v->big_endian ? "big" : "little", v->vox_offset);
    printf("shape:      ");
    for (int i = 0; i < v->ndim; i++)
        printf("%s %" PRId64, i ? " x" : "", v->dim[i]);
    printf("%s\n", v->reoriented ? "  (reoriented)" : "");
    printf("dtype:       %s (NIfTI datatype %d)\n",
           sl_volume_dtype_name(v->stored_dtype), v->nifti_datatype);
    printf("spacing:    ");
    for (int i = 0; i < v->ndim; i++)
        printf("%s %g %s", i ? " x" : "", v->spacing[i],
               units_name(v->xyz_units, i == 3 ? v->time_units : 0));
    printf("\n");
    if (v->scl_slope == 1 && v->scl_inter == 0)
        printf("scaling:     none\n");
    else
        printf("scaling:     stored x %.9g + %.9g\n", v->scl_slope,
               v->scl_inter);
    printf("xforms:      qform_code %d (%s), sform_code %d (%s)\n",
           v->qform_code, xform_name(v->qform_code), v->sform_code,
           xform_name(v->sform_code));
    printf("affine:      from the %s\n", src[v->affine_source & 3]);
    for (int i = 0; i < 4; i++)
        printf("  [%12.6f %12.6f %12.6f %12.6f]\n", v->affine[i][0],
               v->affine[i][1], v->affine[i][2], v->affine[i][3]);
    printf("orientation: %s\n", v->axcodes);
    if (v->descrip[0])
        printf("description: %s\n", v->descrip);
    if (a->stats) {
        const float *f = v->data;
        size_t n = v->data_bytes / sizeof(float);
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        size_t nan = 0;
        for (size_t i = 0; i < n; i++) {
            if (isnan(f[i])) {
                nan++;
                continue;
            }
            lo = f[i] < lo ? f[i] : lo;
            hi = f[i] > hi ? f[i] : hi;
            sum += f[i];
        }
        printf("values:      min %g, max %g, mean %g", lo, hi,
               n > nan ? sum / (double)(n - nan) : 0.0);
        if (nan)
            printf(", %zu NaN", nan);
        printf(" (%zu voxels)\n", n);
    }
    sl_volume_free(v);
    return 0;
}

static int cmd_info(int argc, char **argv)
{
    volume_args_t a = {0};
    int st = sl__opts_parse(&info_usage, &a, NULL, argc, argv);
    if (st >= 0)
        return st;
    int rc = 0;
    for (int i = optind; i < argc; i++) {
        if (i > optind)
            printf("\n");
        rc |= info_one(argv[i], &a);
    }
    return rc;
}

static int cmd_list(int argc, char **argv)
{
    volume_args_t a = {0};
    int st = sl__opts_parse(&list_usage, &a, NULL, argc, argv);
    if (st >= 0)
        return st;
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.unlabeled = a.unlabeled;
    sl_volume_dataset_t *d = NULL;
    char err[1024];
    if (sl_volume_dataset_open(argv[optind], &o, &d, err, sizeof err)) {
        fprintf(stderr, "sluice volume list: %s\n", err);
        return 1;
    }
    int64_t n = sl_volume_dataset_count(d), labeled = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *img = sl_volume_dataset_image(d, i);
        const char *lab = sl_volume_dataset_label(d, i);
        int has = sl_volume_dataset_has_label(d, i);
        labeled += has;
        printf("%s\t%s\t%s\n", sl_volume_dataset_name(d, i),
               img ? img : "(packed)",
               lab   ? lab
               : has ? "(packed)"
                     : "-");
    }
    fprintf(stderr, "%" PRId64 " cases, %" PRId64 " with a label\n", n,
            labeled);
    sl_volume_dataset_destroy(d);
    return 0;
}

int sl__cmd_volume(int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : "";
    char name[32];
    snprintf(name, sizeof name, "volume %s", sub);
    argv[1] = name; /* "sluice volume info: ..." in messages and usage */
    if (!strcmp(sub, "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(sub, "list"))
        return cmd_list(argc - 1, argv + 1);
    FILE *f = strcmp(sub, "--help") && strcmp(sub, "-h") ? stderr : stdout;
    fprintf(f, "usage: sluice volume info FILE... [--ras] [--stats]\n"
               "       sluice volume list PATH [--unlabeled]\n"
               "  NIfTI-1/-2 volumes (.nii, .nii.gz): header facts; the "
               "cases of a dataset\n");
    return f == stdout ? 0 : 2;
}
