/* `sluice inspect SHARD [--records]`: what a shard holds, from its index
 * alone (records are not read; `sluice verify` does that). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codec/codec.h"
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
    "SHARD [--records]", NULL, {inspect_opts}, "one SHARD", 1, 1};

int sl__cmd_inspect(int argc, char **argv)
{
    int all = 0, st = sl__opts_parse(&inspect_usage, &all, NULL, argc, argv);
    if (st >= 0)
        return st;
    char err[1024];
    sl__shard_t *s = NULL;
    if (sl__shard_open(argv[optind], &s, err, sizeof err)) {
        fprintf(stderr, "inspect: %s\n", err);
        return 1;
    }
    sl__shard_summary_t sum;
    if (sl__shard_summarize(s, &sum)) {
        fprintf(stderr, "inspect: out of memory\n");
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
