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
#include "pack_out.h"

typedef struct pack_args {
    int skip;
    int format; /* 0: sluice shards, else SL__FMT_* */
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
    "  manifest are for sluice shards only\n"};

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
        fprintf(stderr, "pack: --codec is for sluice shards only\n");
        return 2;
    }
    if (args.format ? sl__ext_out_begin(&xo, err, sizeof err)
                    : sl__pack_out_begin(&ps, err, sizeof err)) {
        fprintf(stderr, "pack: %s\n", err);
        return 1;
    }

    sl__folder_t *f = NULL;
    int rc = sl__folder_scan(src, skip, &f, err, sizeof err);
    if (rc) {
        fprintf(stderr, "pack: %s\n", err);
        ABORT();
        return 1;
    }
    int64_t skipped = 0;
    for (int i = 0; i < f->nnotes; i++) {
        fprintf(stderr, "pack: %s: %s\n",
                f->notes[i].lost ? "skipped" : "warning", f->notes[i].msg);
        skipped += f->notes[i].lost;
    }
    for (int i = 0; i < f->nclasses; i++)
        for (const char *p = f->classes[i]; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                fprintf(stderr,
                        "pack: class folder name with a control byte: %s\n",
                        f->classes[i]);
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
        free(path);
        if (asprintf(&path, "%s/%s", src, f->paths[i]) < 0) {
            path = NULL;
            rc = sl__fail(err, sizeof err, SL_ENOMEM, "out of memory");
            break;
        }
        int fatal = 0;
        rc = read_file(path, &buf, err, sizeof err);
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
            fprintf(stderr, "pack: skipped: %s\n", err);
            skipped++;
            rc = 0;
            continue;
        }
        if (rc)
            break;
        records++;
        bytes_in += buf.n;
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
    if (!rc && records == 0)
        rc = sl__fail(err, sizeof err, SL_ENOTFOUND,
                      "no record could be packed");
    if (!rc)
        rc = args.format ? sl__ext_out_commit(&xo, err, sizeof err)
                         : sl__pack_out_commit(&ps, err, sizeof err);
    if (rc)
        ABORT();
    if (rc) {
        fprintf(stderr, "pack: %s\n", err);
        fprintf(stderr, "pack: failed; %s is as it was\n", out_dir);
        sl__pack_out_free(&ps);
        sl__folder_free(f);
        return 1;
    }

    double secs = (double)(sl__now_ns() - t0) / 1e9;
    if (args.format) {
        ps.shards = xo.files;
        ps.bytes_out = xo.bytes_out;
    }
    printf("packed %" PRId64 " records (%d classes) into %ld %s file(s) in %s "
           "[codec %s]\n",
           records, f->nclasses, ps.shards,
           format_names[args.format == SL__FMT_WDS        ? 1
                        : args.format == SL__FMT_TFRECORD ? 2
                                                          : 0],
           out_dir,
           ps.codec == SL__PACK_CODEC_AUTO ? "auto" : sl__codec_name(ps.codec));
    for (long k = 0; k < ps.ninfo; k++)
        printf("  %s\n", ps.info[k].line);
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
