/* `sluice inspect SHARD [--records]`: what a shard holds, from its index
 * alone (records are not read; `sluice verify` does that). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codec/codec.h"
#include "data/shard.h"

#define INSPECT_FIRST 5 /* record names shown without --records */
#define INSPECT_CODECS 256

static void usage(void)
{
    fprintf(stderr, "usage: sluice inspect SHARD [--records]\n"
                    "  --records   list every record: index, label, codec, "
                    "offset, sizes,\n"
                    "              xxh3 checksum, name\n");
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Lines of classes.txt beside the shard, or -1 when there is none. */
static long count_classes(const char *shard_path)
{
    const char *slash = strrchr(shard_path, '/');
    char path[4096];
    snprintf(path, sizeof path, "%.*sclasses.txt",
             slash ? (int)(slash - shard_path + 1) : 0, shard_path);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long n = 0;
    int ch, last = '\n';
    while ((ch = getc(f)) != EOF) {
        if (ch == '\n')
            n++;
        last = ch;
    }
    if (last != '\n')
        n++;
    fclose(f);
    return n;
}

int sl__cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = {
        {"records", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int all = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'r') {
            all = 1;
        } else if (c == 'h') {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (argc - optind != 1) {
        usage();
        return 2;
    }
    char err[1024];
    sl__shard_t *s = NULL;
    if (sl__shard_open(argv[optind], &s, err, sizeof err)) {
        fprintf(stderr, "inspect: %s\n", err);
        return 1;
    }
    uint64_t n = sl__shard_count(s), raw = 0, stored = 0;
    uint64_t per_codec[INSPECT_CODECS] = {0};
    int64_t *labels = malloc((n ? n : 1) * sizeof *labels);
    if (!labels) {
        fprintf(stderr, "inspect: out of memory\n");
        sl__shard_close(s);
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        const sl__shard_entry_t *e = sl__shard_entry(s, i);
        raw += e->raw_size;
        stored += e->stored_size;
        per_codec[e->codec & (INSPECT_CODECS - 1)]++;
        labels[i] = e->label;
    }
    qsort(labels, n, sizeof *labels, cmp_i64);
    uint64_t distinct = 0;
    for (uint64_t i = 0; i < n; i++)
        distinct += i == 0 || labels[i] != labels[i - 1];

    int major, minor;
    sl__shard_version(s, &major, &minor);
    printf("path:     %s\n", sl__shard_path(s));
    printf("version:  %d.%d\n", major, minor);
    printf("records:  %" PRIu64 "\n", n);
    printf("codecs:  ");
    for (int k = 0; k < INSPECT_CODECS; k++)
        if (per_codec[k])
            printf(" %s (%" PRIu64 ")", sl__codec_name(k), per_codec[k]);
    printf("%s\n", n ? "" : " -");
    printf("raw:      %" PRIu64 " bytes (%.1f MiB)\n", raw,
           (double)raw / (1 << 20));
    printf("stored:   %" PRIu64 " bytes (%.1f MiB, %.1f%% of raw)\n", stored,
           (double)stored / (1 << 20),
           raw ? 100.0 * (double)stored / (double)raw : 100.0);
    if (n)
        printf("labels:   %" PRId64 "..%" PRId64 " (%" PRIu64 " distinct)\n",
               labels[0], labels[n - 1], distinct);
    else
        printf("labels:   -\n");
    long classes = count_classes(sl__shard_path(s));
    if (classes >= 0)
        printf("classes:  %ld (classes.txt)\n", classes);
    free(labels);

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
