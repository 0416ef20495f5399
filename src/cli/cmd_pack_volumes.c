/* `sluice pack --volumes SRC OUT`: packs a volume dataset (a KiTS19-layout
 * folder or a list file: sluice/volume.h) into native shards, one record
 * per case holding its NIfTI volumes as stored, headers included
 * (docs/FORMAT.md, "Volume records"), zstd by default. The record's label
 * field is 1 when the case has a label volume. A case that cannot be read
 * fails the pack (--on-error skip: reported, left out). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "codec/codec.h"
#include "pack_out.h"
#include "sluice/volume.h"
#include "volume/volrec.h"

typedef struct pack_vol_args {
    int volumes, unlabeled, skip;
    int64_t max_bytes;
} pack_vol_args_t;

#define F(f) offsetof(pack_vol_args_t, f)
static const char *const on_error_names[] = {"fail", "skip", NULL};
static const sl__opt_t pack_vol_opts[] = {
    {"volumes", 0, SL__OPT_FLAG, F(volumes), 0, 0, NULL,
     "pack NIfTI volumes (one record per case)"},
    {"unlabeled", 0, SL__OPT_FLAG, F(unlabeled), 0, 0, NULL,
     "cases without a label volume are packed, not an error"},
    {"on-error", 0, SL__OPT_CHOICE, F(skip), 0, 0, NULL,
     "fail: stop at a case that cannot be read; skip: report it, leave it "
     "out, go on",
     "fail", on_error_names},
    {"max-bytes", 0, SL__OPT_SIZE, F(max_bytes), 1, 1e18, "N",
     "largest volume data read into memory", "4G"},
    {NULL},
};

static const sl__opts_t pack_vol_usage = {
    "--volumes SRC OUT [options]",
    "  SRC: CASE/imaging.nii.gz + CASE/segmentation.nii.gz folders (KiTS19)\n"
    "       or a list file of 'IMAGE [LABEL]' lines\n"
    "  OUT: output folder: shard-00000.sls, ..., sluice-manifest.txt\n",
    {pack_vol_opts, sl__pack_out_opts},
    "SRC and OUT",
    2,
    2,
    "  (--codec: zstd unless given)\n"};

int sl__cmd_pack_volumes(int argc, char **argv)
{
    sl__pack_out_t po = {.codec = SL_CODEC_ZSTD,
                         .shard_size = SL__PACK_SHARD_SIZE};
    pack_vol_args_t a = {0};
    int st = sl__opts_parse(&pack_vol_usage, &a, &po, argc, argv);
    if (st >= 0)
        return st;
    const char *src = argv[optind];
    po.dir = argv[optind + 1];
    sl__pack_catch_stop();
    char err[4096];
    sl_volume_options_t o;
    sl_volume_options_init(&o);
    o.unlabeled = a.unlabeled;
    sl_volume_dataset_t *d = NULL;
    if (sl_volume_dataset_open(src, &o, &d, err, sizeof err)) {
        fprintf(stderr, "sluice pack: %s\n", err);
        return 1;
    }
    if (sl__pack_out_begin(&po, err, sizeof err)) {
        fprintf(stderr, "sluice pack: %s\n", err);
        sl_volume_dataset_destroy(d);
        return 1;
    }
    sl__bytes_t rec = {0};
    int64_t n = sl_volume_dataset_count(d), packed = 0, skipped = 0;
    uint64_t raw_total = 0;
    int rc = 0;
    for (int64_t i = 0; !rc && i < n; i++) {
        if ((rc = sl__pack_stopped(err, sizeof err)))
            break;
        const char *name = sl_volume_dataset_name(d, i);
        rc = sl__volrec_build(sl_volume_dataset_image(d, i),
                              sl_volume_dataset_label(d, i), a.max_bytes, &rec,
                              err, sizeof err);
        int fatal = 0;
        if (!rc)
            rc = sl__pack_out_add(&po, rec.p, rec.n,
                                  sl_volume_dataset_label(d, i) != NULL, name,
                                  &fatal, err, sizeof err);
        if (rc && a.skip && !fatal && sl__err_is_data(rc)) {
            fprintf(stderr, "sluice pack: skipped %s: %s\n", name, err);
            skipped++;
            rc = 0;
            continue;
        }
        if (!rc) {
            packed++;
            raw_total += rec.n;
        }
    }
    if (!rc && packed == 0)
        rc = sl__fail(err, sizeof err, SL_ENOTFOUND, "no case could be packed");
    if (!rc)
        rc = sl__pack_stopped(err, sizeof err);
    if (!rc)
        rc = sl__pack_out_commit(&po, err, sizeof err);
    else
        sl__pack_out_abort(&po);
    sl__bytes_free(&rec);
    sl_volume_dataset_destroy(d);
    if (rc) {
        fprintf(stderr, "sluice pack: %s\n", err);
        fprintf(stderr, "sluice pack: failed; %s is as it was\n", po.dir);
        sl__pack_out_free(&po);
        return sl__pack_fail_status();
    }
    printf("packed %" PRId64 " volume cases into %ld shard(s) in %s [codec "
           "%s]: %" PRIu64 " -> %" PRIu64 " bytes",
           packed, po.shards, po.dir, sl__pack_out_codec_name(po.codec),
           raw_total, po.bytes_out);
    if (skipped)
        printf(", %" PRId64 " skipped", skipped);
    printf("\n");
    for (long k = 0; k < po.ninfo; k++)
        printf("  %s\n", po.info[k].line);
    sl__pack_out_free(&po);
    return 0;
}
