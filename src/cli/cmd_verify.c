/* `sluice verify DIR|SHARD`: reads every record of every shard (decompress +
 * checksum) and reports what is damaged. Exit 0 clean, 1 damage, 2 usage. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "data/shard.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: sluice verify DIR|SHARD [--quiet]\n"
            "  DIR      every *.sls in it (labels are also checked against\n"
            "           DIR/classes.txt when present)\n"
            "  --quiet  print only damage and the final line\n");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted paths of the *.sls files in dir (not dot files: temp files of a
 * writer at work). Returns the count, or -1 with errno. */
static int list_shards(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **v = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 5 ||
            strcmp(e->d_name + len - 4, ".sls"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        if (asprintf(&v[n], "%s/%s", dir, e->d_name) < 0)
            break;
        n++;
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    return n;
}

/* Lines of DIR/classes.txt, or -1 when absent. */
static long count_classes(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/classes.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long n = 0;
    int ch, last = '\n';
    while ((ch = getc(f)) != EOF) {
        n += ch == '\n';
        last = ch;
    }
    fclose(f);
    return n + (last != '\n');
}

int sl__cmd_verify(int argc, char **argv)
{
    static const struct option opts[] = {
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int quiet = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
        if (c == 'q') {
            quiet = 1;
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
    const char *target = argv[optind];
    struct stat st;
    if (stat(target, &st)) {
        fprintf(stderr, "verify: %s: %s\n", target, strerror(errno));
        return 2;
    }
    char **paths = NULL;
    int nshards = 0;
    long classes = -1;
    if (S_ISDIR(st.st_mode)) {
        nshards = list_shards(target, &paths);
        if (nshards < 0) {
            fprintf(stderr, "verify: %s: %s\n", target, strerror(errno));
            return 2;
        }
        if (nshards == 0) {
            fprintf(stderr, "verify: %s: no *.sls files\n", target);
            free(paths);
            return 1;
        }
        classes = count_classes(target);
    } else {
        paths = malloc(sizeof *paths);
        if (!paths || !(paths[0] = strdup(target))) {
            free(paths);
            fprintf(stderr, "verify: out of memory\n");
            return 1;
        }
        nshards = 1;
    }

    char err[1024];
    sl__bytes_t out = {0}, scratch = {0};
    uint64_t records = 0, damaged = 0, bad_shards = 0, bytes = 0;
    int64_t t0 = sl__now_ns();
    for (int k = 0; k < nshards; k++) {
        sl__shard_t *s = NULL;
        if (sl__shard_open(paths[k], &s, err, sizeof err)) {
            printf("DAMAGED %s\n", err);
            bad_shards++;
            continue;
        }
        uint64_t n = sl__shard_count(s), bad = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t stored = 0;
            int rc =
                sl__shard_read(s, i, &out, &scratch, &stored, err, sizeof err);
            const sl__shard_entry_t *e = sl__shard_entry(s, i);
            if (!rc && classes >= 0 && (e->label < 0 || e->label >= classes))
                rc = sl__fail(err, sizeof err, SL_ECORRUPT,
                              "%s: record %" PRIu64 " (%s): label %" PRId64
                              " outside classes.txt (%ld classes)",
                              sl__shard_path(s), i, e->name, e->label, classes);
            if (rc) {
                printf("DAMAGED %s\n", err);
                bad++;
            }
            bytes += stored;
        }
        records += n;
        damaged += bad;
        if (!quiet)
            printf("%s %s: %" PRIu64 " records\n", bad ? "BAD" : "ok",
                   sl__shard_path(s), n);
        sl__shard_close(s);
    }
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    for (int k = 0; k < nshards; k++)
        free(paths[k]);
    free(paths);

    double secs = (double)(sl__now_ns() - t0) / 1e9;
    if (!quiet)
        printf("read %.1f MiB in %.2f s\n", (double)bytes / (1 << 20), secs);
    printf("verified %" PRIu64 " records in %d shards: %" PRIu64 " damaged",
           records, nshards, damaged + bad_shards);
    if (bad_shards)
        printf(" (%" PRIu64 " unreadable shard%s)", bad_shards,
               bad_shards == 1 ? "" : "s");
    printf("\n");
    return damaged + bad_shards ? 1 : 0;
}
