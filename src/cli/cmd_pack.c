/* `sluice pack SRC OUT`: packs an ImageFolder tree into native shards
 * (docs/FORMAT.md), or with --format into WebDataset tar shards or TFRecord
 * files (data/ext_out). Files are stored as they are (encoded JPEG/PNG). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "codec/codec.h"
#include "data/ext_out.h"
#include "data/folder.h"
#include "data/recfile.h"
#include "data/shard.h"
#include "ops/repack.h"
#include "opts.h"
#include "pack_out.h"

typedef struct pack_args {
    int skip;
    int format;   /* 0: sluice shards, else SL__FMT_* */
    int max_side; /* lossy: longest side (0: keep) */
    int quality;  /* lossy: JPEG quality (0: not lossy, or the default) */
} pack_args_t;

static const char *const on_error_names[] = {"fail", "skip", NULL};
static const char *const format_names[] = {"sluice", "webdataset", "tfrecord",
                                           NULL};
static const int format_values[] = {0, SL__FMT_WDS, SL__FMT_TFRECORD};
static const sl__opt_t pack_opts[] = {
    {"on-error", 0, SL__OPT_CHOICE, offsetof(pack_args_t, skip), 0, 0, NULL,
     "fail: stop at an unreadable file; skip: report it, leave it out, go on",
     "fail", on_error_names},
    {"format", 0, SL__OPT_CHOICE, offsetof(pack_args_t, format), 0, 0, NULL,
     "sluice shards, WebDataset tar shards (shard-000000.tar, ...) or "
     "TFRecord files (data-00000.tfrecord, ...) with tf.train.Example",
     "sluice", format_names, format_values},
    {"max-side", 0, SL__OPT_INT, offsetof(pack_args_t, max_side), 1, 65500, "N",
     "lossy (FFCV-style): shrink images whose longer side is over N to N, "
     "re-encoded as JPEG (--jpeg-quality, 90 by default)"},
    {"jpeg-quality", 0, SL__OPT_INT, offsetof(pack_args_t, quality), 1, 100,
     "Q",
     "lossy: re-encode every image as a JPEG of quality Q (an image that "
     "fits --max-side and would not shrink is kept as it is); pack prints "
     "the PSNR this costs (mean / min over the re-encoded images), also "
     "stored in OUT/pack-info.txt"},
    {NULL},
};

static const sl__opts_t pack_usage = {
    "SRC OUT [options]",
    "  SRC: an ImageFolder tree: SRC/<class>/.../<image>\n"
    "  OUT: output folder: classes.txt, shard-00000.sls, ...,\n"
    "       sluice-manifest.txt (written whole or not at all)\n",
    {pack_opts, sl__pack_out_opts},
    "SRC and OUT",
    2,
    2,
    "  --codec: none unless given; sluice pack --text --help: text "
    "documents;\n  sluice pack --volumes --help: NIfTI volumes\n"
    "  --format webdataset|tfrecord: OUT new or empty; --codec and the\n"
    "  manifest are for sluice shards only\n"
    "  PSNR: of the stored image against the pixels given to the encoder\n"
    "  (after the resize), over all pixels and channels\n"};

/* Reads a whole file into b. */
static int read_file(const char *path, sl__bytes_t *b, char *err, size_t errlen)
{
    int64_t size = 0;
    int fd = sl__open_regular(path, &size, err, errlen); /* no FIFO wait */
    if (fd < 0)
        return fd;
    b->n = 0;
    size_t want = (size_t)size;
    for (;;) {
        /* Read to the end rather than trusting st_size: files may grow. */
        if (sl__bytes_reserve(b, (want > b->n ? want : b->n) + 4096)) {
            close(fd);
            return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
        }
        ssize_t r = read(fd, b->p + b->n, b->cap - b->n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return sl__fail(err, errlen, SL_EIO, "%s: read failed: %s", path,
                            strerror(e));
        }
        if (r == 0)
            break;
        b->n += (size_t)r;
    }
    close(fd);
    return 0;
}

/* What lossy packing cost, over the records it re-encoded. */
typedef struct lossy {
    int on, max_side, quality;
    sl__scratch_t *scratch;
    sl__bytes_t out;
    int64_t reencoded, resized, kept;
    double psnr_sum, psnr_min;
    uint64_t bytes_before, bytes_after;
    char info[512]; /* the lines for pack-info.txt */
} lossy_t;

/* Re-encodes buf in place (lossy packing). Errors name the file. */
static int lossy_apply(lossy_t *l, const char *path, sl__bytes_t *buf,
                       char *err, size_t errlen)
{
    sl__repack_t r;
    char why[512];
    int rc = sl__image_repack(buf->p, buf->n, l->max_side, l->quality,
                              l->scratch, &l->out, &r, why, sizeof why);
    if (rc)
        return sl__fail(err, errlen, rc, "%s: lossy packing: %s", path, why);
    l->bytes_before += buf->n;
    l->bytes_after += l->out.n;
    l->resized += r.resized;
    if (r.kept) {
        l->kept++;
    } else {
        if (l->reencoded == 0 || r.psnr < l->psnr_min)
            l->psnr_min = r.psnr;
        l->psnr_sum += r.psnr;
        l->reencoded++;
    }
    sl__bytes_t t = *buf;
    *buf = l->out;
    l->out = t;
    return 0;
}

/* The line pack prints, and pack-info.txt's. */
static void lossy_report(lossy_t *l)
{
    double mean = l->reencoded ? l->psnr_sum / (double)l->reencoded : 0;
    printf("lossy: max side %d, JPEG quality %d: %" PRId64
           " re-encoded (%" PRId64 " resized), %" PRId64
           " kept as they were; %.1f -> %.1f MiB; PSNR mean %.2f dB, "
           "min %.2f dB\n",
           l->max_side, l->quality ? l->quality : SL__REPACK_QUALITY,
           l->reencoded, l->resized, l->kept,
           (double)l->bytes_before / (1 << 20),
           (double)l->bytes_after / (1 << 20), mean, l->psnr_min);
}

static void lossy_info(lossy_t *l)
{
    double mean = l->reencoded ? l->psnr_sum / (double)l->reencoded : 0;
    snprintf(l->info, sizeof l->info,
             "lossy max_side %d jpeg_quality %d reencoded %" PRId64
             " resized %" PRId64 " kept %" PRId64 " bytes_before %" PRIu64
             " bytes_after %" PRIu64 " psnr_mean_db %.3f psnr_min_db %.3f\n",
             l->max_side, l->quality ? l->quality : SL__REPACK_QUALITY,
             l->reencoded, l->resized, l->kept, l->bytes_before, l->bytes_after,
             mean, l->psnr_min);
}

static void progress(int64_t done, int64_t total, uint64_t bytes, int64_t t0)
{
    double s = (double)(sl__now_ns() - t0) / 1e9;
    fprintf(stderr, "\rpack: %" PRId64 "/%" PRId64 " files, %.1f MiB, %.1f s",
            done, total, (double)bytes / (1 << 20), s);
}

/* Drops the output being written, in either format. */
#define ABORT() (args.format ? sl__ext_out_abort(&xo) : sl__pack_out_abort(&ps))

int sl__cmd_pack(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* text documents: cmd_pack_text.c */
        if (!strcmp(argv[i], "--text"))
            return sl__cmd_pack_text(argc, argv);
        else if (!strcmp(argv[i], "--volumes")) /* cmd_pack_volumes.c */
            return sl__cmd_pack_volumes(argc, argv);
    sl__pack_out_t ps = {.codec = SL_CODEC_NONE,
                         .shard_size = SL__PACK_SHARD_SIZE};
    pack_args_t args = {0};
    int st = sl__opts_parse(&pack_usage, &args, &ps, argc, argv);
    if (st >= 0)
        return st;
    int skip = args.skip;
    const char *src = argv[optind], *out_dir = argv[optind + 1];
    char err[1024];
    int64_t t0 = sl__now_ns();

    ps.dir = out_dir;
    sl__ext_out_t xo = {
        .dir = out_dir, .fmt = args.format, .shard_size = ps.shard_size};
    if (args.format && ps.codec != SL_CODEC_NONE) {
        sl__cli_error("pack", "--codec is for sluice shards only");
        return 2;
    }
    sl__pack_catch_stop();
    if (args.format ? sl__ext_out_begin(&xo, err, sizeof err)
                    : sl__pack_out_begin(&ps, err, sizeof err)) {
        sl__cli_error("pack", "%s", err);
        return 1;
    }

    sl__folder_t *f = NULL;
    int rc = sl__folder_scan(src, skip, &f, err, sizeof err);
    if (!rc && (rc = sl__pack_stopped(err, sizeof err))) {
        sl__folder_free(f);
        f = NULL;
    }
    if (rc) {
        sl__cli_error("pack", "%s", err);
        ABORT();
        return sl__pack_fail_status();
    }
    int64_t skipped = 0;
    for (int i = 0; i < f->nnotes; i++) {
        sl__cli_error("pack", "%s: %s",
                      f->notes[i].lost ? "skipped" : "warning",
                      f->notes[i].msg);
        skipped += f->notes[i].lost;
    }
    for (int i = 0; i < f->nclasses; i++)
        for (const char *p = f->classes[i]; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                sl__cli_error("pack",
                              "class folder name with a control byte: %s",
                              f->classes[i]);
                ABORT();
                sl__folder_free(f);
                return 1;
            }

    lossy_t lossy = {.on = args.max_side > 0 || args.quality > 0,
                     .max_side = args.max_side,
                     .quality = args.quality};
    if (lossy.on && !(lossy.scratch = sl__scratch_create())) {
        sl__cli_error("pack", "out of memory");
        ABORT();
        sl__folder_free(f);
        return 1;
    }
    sl__bytes_t buf = {0};
    uint64_t bytes_in = 0;
    int64_t records = 0, last_tick = 0;
    int tty = isatty(STDERR_FILENO);
    char *path = NULL;
    for (int64_t i = 0; i < f->n && !rc; i++) {
        if ((rc = sl__pack_stopped(err, sizeof err)))
            break;
        free(path);
        if (!(path = sl__path_join(src, f->paths[i]))) {
            path = NULL;
            rc = sl__fail(err, sizeof err, SL_ENOMEM, "out of memory");
            break;
        }
        int fatal = 0;
        rc = read_file(path, &buf, err, sizeof err);
        uint64_t raw_n = buf.n;
        if (!rc && lossy.on)
            rc = lossy_apply(&lossy, path, &buf, err, sizeof err);
        if (!rc && args.format) {
            rc = sl__ext_out_add(&xo, buf.p, buf.n, f->labels[i], f->paths[i],
                                 err, sizeof err);
            fatal = rc != 0; /* only output errors */
        } else if (!rc) {
            rc = sl__pack_out_add(&ps, buf.p, buf.n, f->labels[i], f->paths[i],
                                  &fatal, err, sizeof err);
        }
        if (rc && skip && !fatal) {
            if (tty)
                fputc('\n', stderr);
            sl__cli_error("pack", "skipped: %s", err);
            skipped++;
            rc = 0;
            continue;
        }
        if (rc)
            break;
        records++;
        bytes_in += raw_n;
        if (tty && sl__now_ns() - last_tick > 100000000) {
            last_tick = sl__now_ns();
            progress(i + 1, f->n, bytes_in, t0);
        }
    }
    free(path);
    sl__bytes_free(&buf);
    if (tty)
        fputc('\n', stderr);
    if (!rc && !args.format)
        rc =
            sl__pack_out_classes(&ps, f->classes, f->nclasses, err, sizeof err);
    sl__scratch_destroy(lossy.scratch);
    sl__bytes_free(&lossy.out);
    if (lossy.on) {
        lossy_info(&lossy);
        ps.extra = lossy.info;
    }
    if (!rc && records == 0)
        rc = sl__fail(err, sizeof err, SL_ENOTFOUND,
                      "no record could be packed");
    if (!rc)
        rc = sl__pack_stopped(err, sizeof err);
    if (!rc)
        rc = args.format ? sl__ext_out_commit(&xo, err, sizeof err)
                         : sl__pack_out_commit(&ps, err, sizeof err);
    if (rc)
        ABORT();
    if (rc) {
        sl__cli_error("pack", "%s", err);
        sl__cli_error("pack", "failed; %s is as it was", out_dir);
        sl__pack_out_free(&ps);
        sl__folder_free(f);
        return sl__pack_fail_status();
    }

    double secs = (double)(sl__now_ns() - t0) / 1e9;
    if (args.format) {
        ps.shards = xo.files;
        ps.bytes_out = xo.bytes_out;
    }
    char *shown = sl__msg_escape_dup(out_dir); /* a name, any bytes */
    printf("packed %" PRId64 " records (%d classes) into %ld %s file(s) in %s "
           "[codec %s]\n",
           records, f->nclasses, ps.shards,
           format_names[args.format == SL__FMT_WDS        ? 1
                        : args.format == SL__FMT_TFRECORD ? 2
                                                          : 0],
           shown ? shown : "OUT", sl__pack_out_codec_name(ps.codec));
    free(shown);
    for (long k = 0; k < ps.ninfo; k++)
        printf("  %s\n", ps.info[k].line);
    if (lossy.on)
        lossy_report(&lossy);
    printf("bytes in %" PRIu64 " (%.1f MiB), out %" PRIu64
           " (%.1f MiB, %.1f%%), %.2f s, %.1f MiB/s\n",
           bytes_in, (double)bytes_in / (1 << 20), ps.bytes_out,
           (double)ps.bytes_out / (1 << 20),
           bytes_in ? 100.0 * (double)ps.bytes_out / (double)bytes_in : 0.0,
           secs, secs > 0 ? (double)bytes_in / (1 << 20) / secs : 0.0);
    if (skipped)
        printf("skipped %" PRId64 " unreadable file(s)\n", skipped);
    sl__pack_out_free(&ps);
    sl__folder_free(f);
    return 0;
}
