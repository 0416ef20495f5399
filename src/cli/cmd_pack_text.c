/* `sluice pack --text SOURCE... -o DIR`: packs text documents (plain text
 * lines or files, JSON Lines "text" fields, other text shards) into native
 * shards, one record per document (UTF-8 bytes, name FILE:LINE), zstd by
 * default. Bad documents are reported, counted and left out. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codec/codec.h"
#include "data/shard.h"
#include "pack_out.h"
#include "text/textsrc.h"

#define PACK_TEXT_MAX_SOURCES 4096

typedef struct pack_text_args {
    const char *out;
    int text, per_file;
} pack_text_args_t;

#define F(f) offsetof(pack_text_args_t, f)
static const sl__opt_t pack_text_opts[] = {
    {"text", 0, SL__OPT_FLAG, F(text), 0, 0, NULL, "pack text documents"},
    {"out", 'o', SL__OPT_STR, F(out), 0, 0, "DIR",
     "output folder: shard-00000.sls, ..., sluice-manifest.txt", .need = 1},
    {"doc-per-file", 0, SL__OPT_FLAG, F(per_file), 0, 0, NULL,
     "a plain text file is one document"},
    {NULL},
};

static const sl__opts_t pack_text_usage = {
    "--text SOURCE... -o DIR [options]",
    "  SOURCE: text files (a document per line), *.jsonl (\"text\" field),\n"
    "          text shards, or directories of them\n",
    {pack_text_opts, sl__pack_out_opts},
    "a SOURCE",
    1,
    -1,
    "  (--codec: zstd unless given)\n"};

int sl__cmd_pack_text(int argc, char **argv)
{
    sl__pack_out_t po = {.codec = SL_CODEC_ZSTD,
                         .shard_size = SL__PACK_SHARD_SIZE};
    pack_text_args_t a = {0};
    int st = sl__opts_parse(&pack_text_usage, &a, &po, argc, argv);
    if (st >= 0)
        return st;
    po.dir = a.out;
    sl__pack_catch_stop();
    int per_file = a.per_file;
    int nsrc = argc - optind;
    char err[4096];
    sl__textsrc_t *src = NULL;
    int rc = sl__textsrc_open((const char *const *)(argv + optind), nsrc,
                              per_file, 0, &src, err, sizeof err);
    if (rc) {
        fprintf(stderr, "sluice pack: %s\n", err);
        return 1;
    }
    if (sl__pack_out_begin(&po, err, sizeof err)) {
        fprintf(stderr, "sluice pack: %s\n", err);
        sl__textsrc_close(src);
        return 1;
    }
    sl__bytes_t buf = {0}, scratch = {0};
    int64_t n = sl__textsrc_count(src), packed = 0, skipped = 0;
    uint64_t raw_total = 0;
    char name[4096];
    for (int64_t i = 0; !rc && i < n; i++) {
        if ((rc = sl__pack_stopped(err, sizeof err)))
            break;
        const char *p;
        size_t len;
        if (sl__textsrc_get(src, i, &buf, &scratch, &p, &len, err,
                            sizeof err)) {
            fprintf(stderr, "skipped: %s\n", err);
            skipped++;
            continue;
        }
        if (!len)
            continue;
        /* FILE:LINE without the folders: the index holds one per record */
        const char *full = sl__textsrc_describe(src, i, name, sizeof name);
        const char *slash = strrchr(full, '/');
        if (slash)
            memmove(name, slash + 1, strlen(slash + 1) + 1);
        int fatal;
        rc = sl__pack_out_add(&po, p, len, 0, name, &fatal, err, sizeof err);
        raw_total += len;
        packed++;
    }
    if (!rc)
        rc = sl__pack_stopped(err, sizeof err);
    if (!rc)
        rc = sl__pack_out_commit(&po, err, sizeof err);
    else
        sl__pack_out_abort(&po);
    sl__bytes_free(&buf);
    sl__bytes_free(&scratch);
    sl__textsrc_close(src);
    if (rc) {
        fprintf(stderr, "sluice pack: %s\n", err);
        fprintf(stderr, "sluice pack: failed; %s is as it was\n", po.dir);
        sl__pack_out_free(&po);
        return sl__pack_fail_status();
    }
    fprintf(stderr,
            "sluice pack: %" PRId64 " documents in %d shards (%s), %" PRIu64
            " -> %" PRIu64 " bytes, %" PRId64 " skipped\n",
            packed, (int)po.shards, sl__pack_out_codec_name(po.codec),
            raw_total, po.bytes_out, skipped);
    for (long k = 0; k < po.ninfo; k++)
        fprintf(stderr, "sluice pack:   %s\n", po.info[k].line);
    sl__pack_out_free(&po);
    return 0;
}
