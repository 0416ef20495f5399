/* `sluice verify DIR|SHARD`: reads every record of every shard (decompress +
 * checksum) and reports what is damaged. Exit 0 clean, 1 damage, 2 usage. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "data/shard.h"
#include "data/shard_walk.h"
#include "opts.h"

static const sl__opt_t verify_opts[] = {
    {"quiet", 0, SL__OPT_FLAG, 0, 0, 0, NULL,
     "print only damage and the final line"},
    {NULL},
};
static const sl__opts_t verify_usage = {
    "DIR|SHARD [--quiet]",
    "  DIR: every *.sls in it (labels are also checked against\n"
    "       DIR/classes.txt when present)\n",
    {verify_opts},
    "one DIR|SHARD",
    1,
    1};

static void print_damage(void *ctx, const char *msg)
{
    (void)ctx;
    printf("DAMAGED %s\n", msg);
}

int sl__cmd_verify(int argc, char **argv)
{
    int quiet = 0, rc = sl__opts_parse(&verify_usage, &quiet, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    const char *target = argv[optind];
    struct stat st;
    if (stat(target, &st)) {
        fprintf(stderr, "verify: %s: %s\n", target, strerror(errno));
        return 2;
    }
    char **paths = NULL;
    int nshards = 1, dir = S_ISDIR(st.st_mode);
    long classes = dir ? sl__classes_count(target) : -1;
    if (dir && sl__shard_list(target, &paths, &nshards)) {
        fprintf(stderr, "verify: %s: %s\n", target, strerror(errno));
        return 2;
    }
    if (dir && nshards == 0) {
        fprintf(stderr, "verify: %s: no *.sls files\n", target);
        free(paths);
        return 1;
    }
    const char **list = dir ? (const char **)paths : &target;
    char err[1024];
    uint64_t records = 0, damaged = 0, bad_shards = 0, bytes = 0;
    int64_t t0 = sl__now_ns();
    for (int k = 0; k < nshards; k++) {
        sl__shard_t *s = NULL;
        if (sl__shard_open(list[k], &s, err, sizeof err)) {
            print_damage(NULL, err);
            bad_shards++;
            continue;
        }
        uint64_t n = sl__shard_count(s);
        uint64_t bad = sl__shard_check(s, classes, print_damage, NULL, &bytes);
        records += n;
        damaged += bad;
        if (!quiet)
            printf("%s %s: %" PRIu64 " records\n", bad ? "BAD" : "ok",
                   sl__shard_path(s), n);
        sl__shard_close(s);
    }
    if (dir)
        sl__shard_list_free(paths, nshards);

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
