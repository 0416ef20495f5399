/* sluice: the command line. Dispatches to one file per sub-command. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "sluice/sluice.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cmds[] = {
    {"run", sl__cmd_run, "stream batches from a folder or shards (the job)"},
    {"bench", sl__cmd_run, "measure throughput, stalls, CPU, memory"},
    {"pack", sl__cmd_pack, "pack an ImageFolder tree into shards"},
    {"inspect", sl__cmd_inspect, "summarise a shard"},
    {"volume", sl__cmd_volume, "NIfTI volumes: header facts, datasets"},
    {"verify", sl__cmd_verify, "check every record's checksum"},
    {"index", sl__cmd_index, "sidecar indexes of WebDataset / TFRecord files"},
    {"make-dataset", sl__cmd_make_dataset, "write a synthetic ImageFolder"},
    {"analyze", sl__cmd_analyze, "which bound stalls the job, and the cure"},
    {"plot", sl__cmd_plot, "draw a --telemetry file as SVG or PNG"},
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("sluice %s\n", sl_version_string());
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name))
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "sluice: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
