/* cli/run_args: the command line of `run` / `bench` over images (see
 * run_args.h). */
#include "run_args.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cli.h"

static void usage(FILE *f, const char *cmd)
{
    fprintf(f,
            "usage: sluice %s SOURCE [options]\n"
            "SOURCE: an ImageFolder directory, a directory of shards "
            "(sluice pack), or one shard\n"
            "  --batch N          samples per batch (64)\n"
            "  --size N           output N x N (224)\n"
            "  --threads N        decode+transform threads (cores)\n"
            "  --read-threads N   read threads (1)\n"
            "  --prefetch N       batch buffers in flight (2 x threads)\n"
            "  --epochs E         epochs (1)\n"
            "  --step-ms T        hold each batch T ms, as a training step "
            "would (0)\n"
            "  --out uint8|float  pixels, or normalised float32 (uint8)\n"
            "  --layout chw|hwc   (chw)\n"
            "  --eval             Resize+CenterCrop instead of "
            "RandomResizedCrop+flip\n"
            "  --seed S           (0)\n"
            "  --no-shuffle, --no-flip, --drop-last, --no-dct\n"
            "  --unordered        hand out batches as they complete\n"
            "  --rank R --world W this process's share of the data\n"
            "  --on-error fail|skip\n"
            "  --digest           xxh3-64 over every batch's bytes and labels\n"
            "  --stop-after N     stop after N batches (see --state)\n"
            "  --state FILE       write the position (and digest) reached\n"
            "  --resume FILE      continue from a --state file\n"
            "  --set K:KNOB=V     after K batches (Ks: K seconds) set "
            "threads|read-threads|"
            "prefetch|step-ms|\n"
            "                     read-latency-ms|read-bw to V\n"
            "  --duration S       stop after S seconds (epochs repeat as "
            "needed)\n"
            "  --telemetry FILE   one JSON line of telemetry per period "
            "(docs/TELEMETRY.md)\n"
            "  --telemetry-ms N   telemetry period (100)\n"
            "  --metrics-port P   serve Prometheus metrics on "
            "127.0.0.1:P/metrics\n"
            "  --policy heuristic|static|rl  tune the knobs not given "
            "(heuristic)\n"
            "  --policy-file F    rl: weights file (the built-in default)\n"
            "  --learn            rl: fine-tune online; falls back to the "
            "heuristic if reward degrades\n"
            "  --max-threads N    budget: decode threads + 1 (2 x cores); read "
            "threads are I/O depth (<= 4 x cores)\n"
            "  --max-memory SIZE  budget: batch buffers + read-ahead, e.g. "
            "512M\n"
            "  --read-latency-ms T  emulated slow storage: each read takes at "
            "least T ms (0)\n"
            "  --read-bw SIZE     emulated storage bandwidth in bytes/s, e.g. "
            "20M (no cap)\n"
            "  --json             a JSON object of the figures as last line\n"
            "  --quiet            no progress bar\n",
            cmd);
}

enum {
    O_SIZE = 256,
    O_RTHREADS,
    O_PREFETCH,
    O_STEP,
    O_OUT,
    O_LAYOUT,
    O_EVAL,
    O_NOFLIP,
    O_NODCT,
    O_UNORD,
    O_SET,
    O_TELEM,
    O_PORT,
    O_TMS,
    O_POLICY,
    O_PFILE,
    O_LEARN,
    O_MAXT,
    O_MAXM,
    O_RLAT,
    O_RBW
};

/* Picks `s` from the names of `names` (NULL-terminated) into *out, as the
 * values `vals` give. @return 0, or 1 (no such name). */
static int pick(const char *s, const char *const *names, const int *vals,
                int *out)
{
    for (int i = 0; names[i]; i++) {
        if (!strcmp(s, names[i])) {
            *out = vals[i];
            return 0;
        }
    }
    return 1;
}

/* The options only images take. @return 0 taken, 1 bad, -1 not ours. */
static int run_opt(int c, const char *s, void *ctx)
{
    static const char *const dtypes[] = {"uint8", "float", NULL};
    static const int dtype_v[] = {SL_DTYPE_UINT8, SL_DTYPE_FLOAT32};
    static const char *const layouts[] = {"chw", "hwc", NULL};
    static const int layout_v[] = {SL_LAYOUT_CHW, SL_LAYOUT_HWC};
    static const char *const policies[] = {"heuristic", "static", "rl", NULL};
    static const int policy_v[] = {SL_POLICY_HEURISTIC, SL_POLICY_STATIC,
                                   SL_POLICY_RL};
    sl__run_args_t *a = ctx;
    sl_options_t *o = &a->opt;
    long long v = 0;
    int bad = 0;
    switch (c) {
    case O_SIZE:
        bad = sl__parse_ll(s, 1, 8192, &v), o->image_size = (int)v;
        break;
    case O_RTHREADS:
        bad = sl__parse_ll(s, 1, 256, &v), o->read_threads = (int)v;
        break;
    case O_PREFETCH:
        bad = sl__parse_ll(s, 1, 4096, &v), o->prefetch = (int)v;
        break;
    case O_STEP:
        a->step_ms = strtod(s, NULL);
        bad = !(a->step_ms >= 0);
        break;
    case O_OUT:
        return pick(s, dtypes, dtype_v, &o->dtype);
    case O_LAYOUT:
        return pick(s, layouts, layout_v, &o->layout);
    case O_POLICY:
        return pick(s, policies, policy_v, &o->policy);
    case O_EVAL:
        o->mode = SL_MODE_EVAL;
        break;
    case O_NOFLIP:
        o->no_flip = 1;
        break;
    case O_NODCT:
        o->no_dct_scale = 1;
        break;
    case O_UNORD:
        o->unordered = 1;
        break;
    case O_SET:
        return sl__knob_sets_add(&a->sets, s) ? 1 : 0;
    case O_TELEM:
        o->telemetry_path = s;
        break;
    case O_PORT:
        bad = sl__parse_ll(s, 1, 65535, &v), o->metrics_port = (int)v;
        break;
    case O_TMS:
        bad = sl__parse_ll(s, 1, 60000, &v), o->telemetry_ms = (int)v;
        break;
    case O_PFILE:
        o->policy_file = s;
        break;
    case O_LEARN:
        o->learn = 1;
        break;
    case O_MAXT:
        bad = sl__parse_ll(s, 2, 256, &v), o->max_threads = (int)v;
        break;
    case O_RLAT:
        return sl__parse_latency_ms(s,
                                    &a->storage[SL_TESTING_READ_LATENCY_US])
                   ? 1
                   : 0;
    case O_RBW:
        a->storage[SL_TESTING_READ_BYTES_PER_S] = sl__parse_size(s);
        return a->storage[SL_TESTING_READ_BYTES_PER_S] < 0;
    case O_MAXM:
        o->max_memory_bytes = sl__parse_size(s);
        return o->max_memory_bytes <= 0;
    default:
        return -1;
    }
    return bad ? 1 : 0;
}

/* The operands, and the shared options into the loader's. @return 0, or
 * -1 after printing what was wrong and the usage. */
static int operands(int argc, char **argv, void *ctx)
{
    sl__run_args_t *a = ctx;
    if (optind != argc - 1)
        return sl__consume_bad(usage, argv[0], "expected one SOURCE");
    a->source = argv[optind];
    sl_options_t *o = &a->opt;
    SL__CONSUME_COPY_STREAM(o, &a->c);
    o->decode_threads = a->c.threads;
    o->on_error = a->c.on_error;
    return 0;
}

/* What a --state file must agree on to resume: everything that changes the
 * batch stream (thread counts and prefetch do not). */
static uint64_t config_hash(const void *ctx)
{
    const sl__run_args_t *a = ctx;
    const sl_options_t *o = &a->opt;
    char buf[1024];
    int n = snprintf(buf, sizeof buf,
                     "%s|%d|%d|%d|%d|%d|%d|%" PRIu64 "|%d|%d|%d|%d|%d|%d|%d",
                     a->source, o->batch_size, o->image_size, o->mode, o->dtype,
                     o->layout, o->no_flip, o->seed, o->no_shuffle,
                     o->drop_last, o->rank, o->world_size, o->unordered,
                     o->no_dct_scale, o->on_error);
    return XXH3_64bits(buf, (size_t)n);
}

/* Its options: its own, then those all consumers take. */
static const struct option run_options[] = {
    {"size", 1, 0, O_SIZE},         {"read-threads", 1, 0, O_RTHREADS},
    {"prefetch", 1, 0, O_PREFETCH}, {"step-ms", 1, 0, O_STEP},
    {"out", 1, 0, O_OUT},           {"layout", 1, 0, O_LAYOUT},
    {"eval", 0, 0, O_EVAL},         {"no-flip", 0, 0, O_NOFLIP},
    {"no-dct", 0, 0, O_NODCT},      {"unordered", 0, 0, O_UNORD},
    {"set", 1, 0, O_SET},           {"telemetry", 1, 0, O_TELEM},
    {"metrics-port", 1, 0, O_PORT}, {"telemetry-ms", 1, 0, O_TMS},
    {"policy", 1, 0, O_POLICY},     {"policy-file", 1, 0, O_PFILE},
    {"learn", 0, 0, O_LEARN},       {"max-threads", 1, 0, O_MAXT},
    {"max-memory", 1, 0, O_MAXM},   {"read-latency-ms", 1, 0, O_RLAT},
    {"read-bw", 1, 0, O_RBW},       SL__CONSUME_OPTIONS};

const sl__consume_cli_t sl__run_cli = {run_options, run_opt, operands, usage,
                                       config_hash};
