/* sluice: the command line. Dispatches to one file per sub-command. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli.h"
#include "opts.h"
#include "sluice/sluice.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cmds[] = {
    {"run", sl__cmd_run, "stream batches from a folder or shards (the job)"},
    {"bench", sl__cmd_run, "measure throughput, stalls, CPU, memory"},
    {"pack", sl__cmd_pack,
     "pack images, text or volumes into shards (or tars, TFRecords)"},
    {"inspect", sl__cmd_inspect,
     "summarise a shard, or WebDataset / TFRecord files"},
    {"volume", sl__cmd_volume, "NIfTI volumes: header facts, datasets"},
    {"verify", sl__cmd_verify, "check every record's checksum"},
    {"index", sl__cmd_index, "sidecar indexes of WebDataset / TFRecord files"},
    {"make-dataset", sl__cmd_make_dataset, "write a synthetic ImageFolder"},
    {"analyze", sl__cmd_analyze, "which bound stalls the job, and the cure"},
    {"plot", sl__cmd_plot,
     "draw --telemetry files as SVG or PNG (runs compared)"},
    {"top", sl__cmd_top, "live view of a running job (its --metrics-port)"},
    {"tokenize", sl__cmd_tokenize, "token ids of a text file (BPE, WordPiece)"},
    {"calibrate", sl__cmd_calibrate, "fit a simulator profile to telemetry"},
    {"simulate", sl__cmd_simulate, "run the pipeline model on a profile"},
    {"train-policy", sl__cmd_train_policy,
     "train the rl scheduler in the simulator"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice COMMAND [options]   (sluice COMMAND --help)\n\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-13s %s\n", cmds[i].name, cmds[i].help);
    fprintf(f, "\nsluice %s\n", sl_version_string());
}

#define NCMDS (sizeof cmds / sizeof cmds[0])

static int find(const char *name)
{
    for (size_t i = 0; i < NCMDS; i++)
        if (!strcmp(name, cmds[i].name))
            return (int)i;
    return -1;
}

/* "unknown command 'X'" (and the closest name when one is close), exit 2. */
static int unknown(const char *name)
{
    int best = 3;
    const char *closest = NULL;
    for (size_t i = 0; i < NCMDS; i++) {
        int d = sl__opts_distance(name, cmds[i].name);
        if (d < best && 3 * d <= (int)strlen(name)) {
            best = d;
            closest = cmds[i].name;
        }
    }
    char *shown = sl__msg_escape_dup(name);
    fprintf(stderr, "sluice: unknown command '%s'%s%s%s\nsee 'sluice --help'\n",
            shown ? shown : "?", closest ? "; did you mean '" : "",
            closest ? closest : "", closest ? "'?" : "");
    free(shown);
    return 2;
}

/* `sluice help CMD [ARGS...]`: CMD's help, as `sluice CMD [ARGS...] --help`
 * (ARGS: e.g. `help run --task lm`, whose options are others). */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        usage(stdout);
        return 0;
    }
    int k = find(argv[2]);
    if (k < 0)
        return unknown(argv[2]);
    char **av = malloc((size_t)argc * sizeof *av);
    if (!av) {
        fprintf(stderr, "sluice: out of memory\n");
        return 1;
    }
    int n = 0;
    for (int i = 2; i < argc; i++)
        av[n++] = argv[i];
    av[n++] = "--help";
    av[n] = NULL;
    int rc = cmds[k].fn(n, av);
    free(av);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    /* `sluice --help run` too */
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help"))
        return help(argc, argv);
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("sluice %s\n", sl_version_string());
        return 0;
    }
    /* A file-size limit (ulimit -f) reached while writing (a shard, a
     * --state or --telemetry file) fails that write with EFBIG, said and
     * cleaned up as a full disk is, instead of SIGXFSZ killing the process
     * with its temp files left behind. */
    signal(SIGXFSZ, SIG_IGN);
    int k = find(argv[1]);
    if (k < 0)
        return unknown(argv[1]);
    int rc = cmds[k].fn(argc - 1, argv + 1);
    /* What a command printed (the --json figures, a listing) may not have
     * reached stdout's file (a full disk: printf's errors are not checked
     * at each call): said, and the exit status says it, once here (a
     * command that failed has said why already). */
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && !rc) {
        int e = errno;
        fprintf(stderr, "sluice %s: cannot write its output: %s\n", argv[1],
                e ? strerror(e) : "write error");
        rc = 1;
    }
    return rc;
}
