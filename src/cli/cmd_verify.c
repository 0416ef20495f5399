/* `sluice verify DIR|SHARD`: checks a pack against its manifest (missing,
 * extra or foreign shards, classes.txt), reads every record of every shard
 * (decompress + checksum + label) and reports what is damaged. Exit 0
 * clean, 1 damage, 2 usage. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "data/manifest.h"
#include "data/pack_dir.h"
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
    "  DIR: a pack: checked against its sluice-manifest.txt, then every\n"
    "       shard read (labels checked against DIR/classes.txt)\n",
    {verify_opts},
    "one DIR|SHARD",
    1,
    1};

static void print_damage(void *ctx, const char *msg)
{
    (void)ctx;
    printf("DAMAGED %s\n", msg);
}

/* One shard: every record read and its label checked. */
static void check_shard(sl__shard_t *s, long classes, int quiet,
                        uint64_t *records, uint64_t *damaged, uint64_t *bytes)
{
    uint64_t n = sl__shard_count(s);
    uint64_t bad = sl__shard_check(s, classes, print_damage, NULL, bytes);
    *records += n;
    *damaged += bad;
    if (!quiet)
        printf("%s %s: %" PRIu64 " records\n", bad ? "BAD" : "ok",
               sl__shard_path(s), n);
}

int sl__cmd_verify(int argc, char **argv)
{
    int quiet = 0, rc = sl__opts_parse(&verify_usage, &quiet, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    const char *target = argv[optind];
    struct stat st;
    if (stat(target, &st)) {
        sl__cli_error("verify", "%s: %s", target, strerror(errno));
        return 2;
    }
    char err[2048];
    uint64_t records = 0, damaged = 0, bytes = 0;
    int nshards = 0, unreadable = 0, problems = 0;
    int64_t t0 = sl__now_ns();
    if (S_ISDIR(st.st_mode)) {
        if (!sl__pack_dir_holds(target)) {
            sl__cli_error("verify", "%s: no *.sls files", target);
            return 1;
        }
        sl__pack_dir_t p;
        if (sl__pack_dir_open(target, SL__PACK_REPORT_ALL, &p, err,
                              sizeof err)) {
            sl__cli_error("verify", "%s", err);
            return 2;
        }
        for (int i = 0; i < p.nbad; i++)
            print_damage(NULL, p.bad[i]);
        if (!p.manifest)
            printf("note: %s has no %s (an older pack): its "
                   "shards are checked by their numbering only; re-pack it "
                   "to add one\n",
                   target, SL__MANIFEST_NAME);
        for (int k = 0; k < p.nshards; k++)
            check_shard(p.shards[k], p.nclasses, quiet, &records, &damaged,
                        &bytes);
        nshards = p.nshards + p.nunreadable;
        unreadable = p.nunreadable;
        problems = p.nbad - p.nunreadable;
        sl__pack_dir_close(&p);
    } else {
        sl__shard_t *s = NULL;
        nshards = 1;
        if (sl__shard_open(target, &s, err, sizeof err)) {
            print_damage(NULL, err);
            unreadable = 1;
        } else {
            check_shard(s, -1, quiet, &records, &damaged, &bytes);
            sl__shard_close(s);
        }
    }

    double secs = (double)(sl__now_ns() - t0) / 1e9;
    if (!quiet)
        printf("read %.1f MiB in %.2f s\n", (double)bytes / (1 << 20), secs);
    printf("verified %" PRIu64 " records in %d shards: %" PRIu64 " damaged",
           records, nshards, damaged + (uint64_t)(unreadable + problems));
    if (unreadable)
        printf(" (%d unreadable shard%s)", unreadable,
               unreadable == 1 ? "" : "s");
    if (problems)
        printf(" (%d pack problem%s: an unfinished or mixed pack)", problems,
               problems == 1 ? "" : "s");
    printf("\n");
    return damaged + (uint64_t)(unreadable + problems) ? 1 : 0;
}
