/* `sluice inspect SHARD [--records]`: what a shard holds, from its header
 * and index alone (version, codecs, its zstd dictionary when it has one;
 * records are not read: `sluice verify` does that). WebDataset tar
 * shards and TFRecord files (one or a brace pattern) are indexed as a
 * loader would (data/recset): format, files, samples, bad samples. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codec/codec.h"
#include "data/recset.h"
#include "data/remote.h"
#include "data/shard.h"
#include "data/shard_walk.h"
#include "opts.h"

#define INSPECT_FIRST 5 /* record names shown without --records */

static const sl__opt_t inspect_opts[] = {
    {"records", 0, SL__OPT_FLAG, 0, 0, 0, NULL,
     "list every record: index, label, codec, offset, sizes, xxh3, name"},
    {NULL},
};
static const sl__opts_t inspect_usage = {
    "SHARD [--records]",
    "  SHARD: a sluice shard, or WebDataset .tar / TFRecord files (a brace\n"
    "         pattern: 'shard-{000..009}.tar')\n",
    {inspect_opts},
    "one SHARD",
    1,
    1};

/* WebDataset / TFRecord files: indexed with skip, so bad samples are
 * counted rather than fatal. */
static int inspect_recset(const char *spec, int all)
{
    char err[1024];
    sl__recset_t *r = NULL;
    if (sl__recset_open(spec, 1, &r, err, sizeof err)) {
        sl__cli_error("inspect", "%s", err);
        return 1;
    }
    int64_t n = sl__recset_count(r), bad = 0, lo = INT64_MAX, hi = -1;
    uint64_t bytes = 0;
    for (int i = 0; i < r->nfiles; i++) {
        const sl__recfile_t *f = r->files[i];
        bad += f->nbad;
        for (int64_t k = 0; k < f->n; k++) {
            const sl__rec_t *e = &f->recs[k];
            if (e->label < 0)
                continue;
            bytes += e->img_len;
            lo = e->label < lo ? e->label : lo;
            hi = e->label > hi ? e->label : hi;
        }
    }
    char *shown = sl__remote_redact(spec); /* a URL's secrets hidden */
    printf("path:     %s\n", shown ? shown : "?");
    free(shown);
    printf("format:   %s\n", sl__recset_format_name(r->fmt));
    printf("files:    %d\n", r->nfiles);
    printf("samples:  %" PRId64 " (%" PRId64 " bad)\n", n, bad);
    printf("images:   %" PRIu64 " bytes (%.1f MiB)\n", bytes,
           (double)bytes / (1 << 20));
    if (hi >= 0)
        printf("labels:   %" PRId64 "..%" PRId64 "\n", lo, hi);
    for (int i = 0; i < r->nfiles; i++) {
        const sl__recfile_t *f = r->files[i];
        printf("  %s: %" PRId64 " samples\n", sl__bytesrc_name(f->src), f->n);
        char d[4352];
        for (int64_t k = 0; all && k < f->n; k++)
            printf("    %8" PRId64 " label %-6d %9u bytes  %s\n", k,
                   f->recs[k].label, f->recs[k].img_len,
                   sl__recfile_describe(f, k, d, sizeof d));
    }
    for (int i = 0; i < r->nfiles; i++)
        for (int64_t b = 0; b < r->files[i]->nbad; b++)
            printf("bad:      %s\n", r->files[i]->bad_msg[b]);
    for (int i = 0; i < r->nnotes; i++)
        printf("lost:     %s\n", r->notes[i]);
    for (int i = 0; i < r->nwarns; i++)
        printf("warning:  %s\n", r->warns[i]);
    sl__recset_close(r);
    return 0;
}

int sl__cmd_inspect(int argc, char **argv)
{
    int all = 0, st = sl__opts_parse(&inspect_usage, &all, NULL, argc, argv);
    if (st >= 0)
        return st;
    const char *files;
    if (sl__recset_format(argv[optind], &files))
        return inspect_recset(argv[optind], all);
    char err[1024];
    sl__shard_t *s = NULL;
    if (sl__shard_open(argv[optind], &s, err, sizeof err)) {
        sl__cli_error("inspect", "%s", err);
        return 1;
    }
    sl__shard_summary_t sum;
    if (sl__shard_summarize(s, &sum)) {
        sl__cli_error("inspect", "out of memory");
        sl__shard_close(s);
        return 1;
    }
    uint64_t n = sum.records, raw = sum.raw_bytes, stored = sum.stored_bytes;
    int major, minor;
    sl__shard_version(s, &major, &minor);
    printf("path:     %s\n", sl__shard_path(s));
    printf("version:  %d.%d\n", major, minor);
    printf("records:  %" PRIu64 "\n", n);
    printf("codecs:  ");
    for (int k = 0; k < SL__SHARD_CODECS; k++)
        if (sum.per_codec[k])
            printf(" %s (%" PRIu64 ")", sl__codec_name(k), sum.per_codec[k]);
    printf("%s\n", n ? "" : " -");
    if (sl__shard_dict_size(s))
        printf("dictionary: %zu bytes (zstd dictionary ID %u), for the "
               "zstd-dict records\n",
               sl__shard_dict_size(s), sl__shard_dict_id(s));
    printf("raw:      %" PRIu64 " bytes (%.1f MiB)\n", raw,
           (double)raw / (1 << 20));
    printf("stored:   %" PRIu64 " bytes (%.1f MiB, %.1f%% of raw)\n", stored,
           (double)stored / (1 << 20),
           raw ? 100.0 * (double)stored / (double)raw : 100.0);
    if (n)
        printf("labels:   %" PRId64 "..%" PRId64 " (%" PRIu64 " distinct)\n",
               sum.label_min, sum.label_max, sum.labels_distinct);
    else
        printf("labels:   -\n");
    /* classes.txt beside the shard */
    const char *path = sl__shard_path(s), *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1,
             slash ? path : ".");
    long classes = sl__classes_count(dir);
    if (classes >= 0)
        printf("classes:  %ld (classes.txt)\n", classes);

    if (all) {
        printf("%8s %-8s %-5s %12s %10s %10s  %-16s  %s\n", "index", "label",
               "codec", "offset", "stored", "raw", "xxh3", "name");
        for (uint64_t i = 0; i < n; i++) {
            const sl__shard_entry_t *e = sl__shard_entry(s, i);
            printf("%8" PRIu64 " %-8" PRId64 " %-5s %12" PRIu64 " %10" PRIu32
                   " %10" PRIu32 "  %016" PRIx64 "  %s\n",
                   i, e->label, sl__codec_name(e->codec), e->offset,
                   e->stored_size, e->raw_size, e->checksum, e->name);
        }
    } else if (n) {
        printf("first records:\n");
        for (uint64_t i = 0; i < n && i < INSPECT_FIRST; i++) {
            const sl__shard_entry_t *e = sl__shard_entry(s, i);
            printf("  %" PRIu64 "  %s  (label %" PRId64 ", %" PRIu32
                   " bytes)\n",
                   i, e->name, e->label, e->raw_size);
        }
        if (n > INSPECT_FIRST)
            printf("  ... (%" PRIu64 " more; --records lists all)\n",
                   n - INSPECT_FIRST);
    }
    sl__shard_close(s);
    return 0;
}
