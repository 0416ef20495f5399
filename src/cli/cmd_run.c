/* sluice run | bench: stream batches as a trainer would and report the
 * figures (throughput, stalls, waits, CPU, memory), optionally a digest of
 * every byte handed out, and a resumable position. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/base.h"
#include "cli.h"
#include "report.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"
#include "sluice/testing.h"

#define MAX_SETS 16

typedef struct knob_set {
    int64_t at;       /* after this many batches of this run */
    double at_s;      /* >= 0: instead, once this many seconds have passed
                         (checked before each batch) */
    int fired;        /* a timed set was applied */
    sl_param_t param; /* 0: the consumer's step time (step-ms), or: */
    int storage;      /* sl_testing_storage_t: emulated storage */
    int64_t value;
} knob_set_t;

typedef struct run_args {
    const char *source;
    sl_options_t opt;
    int64_t storage[3]; /* sl_testing_storage_t -> value (0: off) */
    double step_ms;
    sl__consume_args_t c; /* --digest, --json, --duration, --state, ... */
    int bench;
    knob_set_t sets[MAX_SETS];
    int nsets;
} run_args_t;

static void usage(FILE *f, const char *cmd)
{
    fprintf(
        f,
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

/* Emulated storage options in the CLI's units: latency in ms (fractions
 * allowed) to the API's microseconds; bandwidth as a size per second. */
static int parse_latency_ms(const char *s, int64_t *us)
{
    char *end;
    double ms = strtod(s, &end);
    if (!*s || *end || !(ms >= 0) || ms > 60000) /* API: <= 1 min */
        return -1;
    *us = (int64_t)llround(ms * 1000);
    return 0;
}

static int parse_set(const char *s, knob_set_t *k)
{
    char name[32], val[32], *end;
    long long v;
    double at = strtod(s, &end);
    if (end == s || !(at >= 0) || at > 1e15)
        return -1;
    k->at_s = *end == 's' ? at : -1; /* "20s:..." is a time */
    end += *end == 's';
    if ((k->at_s < 0 && at != floor(at)) ||
        sscanf(end, ":%31[a-z-]=%31s", name, val) != 2)
        return -1;
    k->at = (int64_t)at;
    if (!strcmp(name, "read-latency-ms")) {
        k->storage = SL_TESTING_READ_LATENCY_US;
        return parse_latency_ms(val, &k->value);
    }
    if (!strcmp(name, "read-bw")) {
        k->storage = SL_TESTING_READ_BYTES_PER_S;
        k->value = sl__parse_size(val);
        return k->value < 0 ? -1 : 0;
    }
    if (sl__parse_ll(val, INT64_MIN, INT64_MAX, &v))
        return -1;
    k->value = v;
    if (!strcmp(name, "threads"))
        k->param = SL_PARAM_DECODE_THREADS;
    else if (!strcmp(name, "read-threads"))
        k->param = SL_PARAM_READ_THREADS;
    else if (!strcmp(name, "prefetch"))
        k->param = SL_PARAM_PREFETCH;
    else if (!strcmp(name, "step-ms"))
        k->param = 0;
    else
        return -1;
    return 0;
}

static int parse_args(int argc, char **argv, run_args_t *a)
{
    enum {
        O_BATCH = 256,
        O_SIZE,
        O_THREADS,
        O_RTHREADS,
        O_PREFETCH,
        O_EPOCHS,
        O_STEP,
        O_OUT,
        O_LAYOUT,
        O_EVAL,
        O_SEED,
        O_NOSHUF,
        O_NOFLIP,
        O_DROP,
        O_NODCT,
        O_UNORD,
        O_RANK,
        O_WORLD,
        O_ONERR,
        O_SET,
        O_HELP,
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
    static const struct option lo[] = {{"batch", 1, 0, O_BATCH},
                                       {"size", 1, 0, O_SIZE},
                                       {"threads", 1, 0, O_THREADS},
                                       {"read-threads", 1, 0, O_RTHREADS},
                                       {"prefetch", 1, 0, O_PREFETCH},
                                       {"epochs", 1, 0, O_EPOCHS},
                                       {"step-ms", 1, 0, O_STEP},
                                       {"out", 1, 0, O_OUT},
                                       {"layout", 1, 0, O_LAYOUT},
                                       {"eval", 0, 0, O_EVAL},
                                       {"seed", 1, 0, O_SEED},
                                       {"no-shuffle", 0, 0, O_NOSHUF},
                                       {"no-flip", 0, 0, O_NOFLIP},
                                       {"drop-last", 0, 0, O_DROP},
                                       {"no-dct", 0, 0, O_NODCT},
                                       {"unordered", 0, 0, O_UNORD},
                                       {"rank", 1, 0, O_RANK},
                                       {"world", 1, 0, O_WORLD},
                                       {"on-error", 1, 0, O_ONERR},
                                       {"set", 1, 0, O_SET},
                                       {"help", 0, 0, O_HELP},
                                       {"telemetry", 1, 0, O_TELEM},
                                       {"metrics-port", 1, 0, O_PORT},
                                       {"telemetry-ms", 1, 0, O_TMS},
                                       {"policy", 1, 0, O_POLICY},
                                       {"policy-file", 1, 0, O_PFILE},
                                       {"learn", 0, 0, O_LEARN},
                                       {"max-threads", 1, 0, O_MAXT},
                                       {"max-memory", 1, 0, O_MAXM},
                                       {"read-latency-ms", 1, 0, O_RLAT},
                                       {"read-bw", 1, 0, O_RBW},
                                       SL__CONSUME_OPTIONS,
                                       {0, 0, 0, 0}};
    long long v = 0;
    int c, li = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        const char *s = optarg;
        int bad = 0;
        switch (c) {
        case O_BATCH:
            bad = sl__parse_ll(s, 1, 1 << 20, &v), a->opt.batch_size = (int)v;
            break;
        case O_SIZE:
            bad = sl__parse_ll(s, 1, 8192, &v), a->opt.image_size = (int)v;
            break;
        case O_THREADS:
            bad = sl__parse_ll(s, 1, 256, &v), a->opt.decode_threads = (int)v;
            break;
        case O_RTHREADS:
            bad = sl__parse_ll(s, 1, 256, &v), a->opt.read_threads = (int)v;
            break;
        case O_PREFETCH:
            bad = sl__parse_ll(s, 1, 4096, &v), a->opt.prefetch = (int)v;
            break;
        case O_EPOCHS:
            bad = sl__parse_ll(s, 1, 1000000, &v), a->opt.epochs = v;
            break;
        case O_STEP:
            a->step_ms = strtod(s, NULL);
            bad = !(a->step_ms >= 0);
            break;
        case O_OUT:
            if (!strcmp(s, "uint8"))
                a->opt.dtype = SL_DTYPE_UINT8;
            else if (!strcmp(s, "float"))
                a->opt.dtype = SL_DTYPE_FLOAT32;
            else
                bad = 1;
            break;
        case O_LAYOUT:
            if (!strcmp(s, "chw"))
                a->opt.layout = SL_LAYOUT_CHW;
            else if (!strcmp(s, "hwc"))
                a->opt.layout = SL_LAYOUT_HWC;
            else
                bad = 1;
            break;
        case O_EVAL:
            a->opt.mode = SL_MODE_EVAL;
            break;
        case O_SEED:
            bad = sl__parse_ll(s, 0, INT64_MAX, &v), a->opt.seed = (uint64_t)v;
            break;
        case O_NOSHUF:
            a->opt.no_shuffle = 1;
            break;
        case O_NOFLIP:
            a->opt.no_flip = 1;
            break;
        case O_DROP:
            a->opt.drop_last = 1;
            break;
        case O_NODCT:
            a->opt.no_dct_scale = 1;
            break;
        case O_UNORD:
            a->opt.unordered = 1;
            break;
        case O_RANK:
            bad = sl__parse_ll(s, 0, 1 << 20, &v), a->opt.rank = (int)v;
            break;
        case O_WORLD:
            bad = sl__parse_ll(s, 1, 1 << 20, &v), a->opt.world_size = (int)v;
            break;
        case O_ONERR:
            if (!strcmp(s, "fail"))
                a->opt.on_error = SL_ON_ERROR_FAIL;
            else if (!strcmp(s, "skip"))
                a->opt.on_error = SL_ON_ERROR_SKIP;
            else
                bad = 1;
            break;
        case O_SET:
            bad = a->nsets == MAX_SETS || parse_set(s, &a->sets[a->nsets++]);
            break;
        case O_TELEM:
            a->opt.telemetry_path = s;
            break;
        case O_PORT:
            bad = sl__parse_ll(s, 1, 65535, &v), a->opt.metrics_port = (int)v;
            break;
        case O_TMS:
            bad = sl__parse_ll(s, 1, 60000, &v), a->opt.telemetry_ms = (int)v;
            break;
        case O_POLICY:
            if (!strcmp(s, "heuristic"))
                a->opt.policy = SL_POLICY_HEURISTIC;
            else if (!strcmp(s, "static"))
                a->opt.policy = SL_POLICY_STATIC;
            else if (!strcmp(s, "rl"))
                a->opt.policy = SL_POLICY_RL;
            else
                bad = 1;
            break;
        case O_PFILE:
            a->opt.policy_file = s;
            break;
        case O_LEARN:
            a->opt.learn = 1;
            break;
        case O_MAXT:
            bad = sl__parse_ll(s, 2, 256, &v), a->opt.max_threads = (int)v;
            break;
        case O_RLAT:
            bad = parse_latency_ms(s,
                                   &a->storage[SL_TESTING_READ_LATENCY_US]);
            break;
        case O_RBW:
            a->storage[SL_TESTING_READ_BYTES_PER_S] = sl__parse_size(s);
            bad = a->storage[SL_TESTING_READ_BYTES_PER_S] < 0;
            break;
        case O_MAXM: {
            long long m = sl__parse_size(s);
            bad = m <= 0;
            a->opt.max_memory_bytes = m;
            break;
        }
        case O_HELP:
        case 'h':
            usage(stdout, argv[0]);
            exit(0);
        default: /* --digest, --json, --state, ...; or not an option */
            bad = sl__consume_opt(c, s, &a->c);
            if (!bad)
                return -1;
            bad = bad < 0;
        }
        if (bad) {
            fprintf(stderr, "sluice %s: bad value '%s' for --%s\n", argv[0],
                    s ? s : "", lo[li].name);
            return -1;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "sluice %s: expected one SOURCE\n", argv[0]);
        return -1;
    }
    a->source = argv[optind];
    return 0;
}

/* What a --state file must agree on to resume: everything that changes the
 * batch stream (thread counts and prefetch do not). */
static uint64_t config_hash(const run_args_t *a)
{
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

#define STATE_MAGIC "sluice-state 1"

typedef struct state {
    sl_position_t pos;
    uint64_t digest;
    uint64_t config;
} state_t;

static void progress(sl_loader_t *l, int64_t done, int64_t total, double secs,
                     int64_t samples, double stall)
{
    sl_snapshot_t snap;
    sl_snapshot_init(&snap);
    int have = sl_loader_snapshot(l, &snap) == 0 && snap.t > 0;
    double eta = done > 0 ? secs * (double)(total - done) / (double)done : 0;
    int width = 30, fill = total ? (int)(width * done / total) : 0;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %" PRId64 "/%" PRId64 " %6.0f img/s  stall %4.1f%%",
            bar, done, total, secs > 0 ? (double)samples / secs : 0.0,
            100.0 * stall);
    if (have)
        fprintf(stderr, "  cpu %3.0f%% (other %2.0f%%)  rss %4.0f MB",
                100.0 * snap.cpu_self, 100.0 * snap.cpu_other,
                (double)snap.rss_bytes / 1048576.0);
    fprintf(stderr, "  eta %02d:%02d ", (int)(eta / 60), (int)eta % 60);
    fflush(stderr);
}

static void print_skips(sl_loader_t *l, int64_t *shown)
{
    int64_t n = sl_loader_skipped_count(l);
    for (; *shown < n; (*shown)++) {
        const char *m = sl_loader_skipped_message(l, *shown);
        if (!m) { /* past the kept messages: counted only */
            *shown = n;
            break;
        }
        fprintf(stderr, "skipped: %s\n", m);
    }
}

int sl__cmd_run(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* text batches: cmd_text.c */
        if (!strcmp(argv[i], "--task") || !strncmp(argv[i], "--task=", 7))
            return sl__cmd_text(argc, argv);
    run_args_t a;
    memset(&a, 0, sizeof a);
    sl_options_init(&a.opt);
    a.bench = !strcmp(argv[0], "bench");
    if (parse_args(argc, argv, &a)) {
        usage(stderr, argv[0]);
        return 2;
    }
    state_t st = {{0, 0}, 0, config_hash(&a)};
    if (a.c.resume) {
        state_t rs;
        if (sl__state_read(a.c.resume, STATE_MAGIC, &rs.pos, &rs.digest,
                           &rs.config)) {
            fprintf(stderr, "sluice %s: %s: not a sluice state file\n", argv[0],
                    a.c.resume);
            return 2;
        }
        if (rs.config != st.config) {
            fprintf(stderr,
                    "sluice %s: %s was written with other options or source; "
                    "resume with the same ones\n",
                    argv[0], a.c.resume);
            return 2;
        }
        st = rs;
        /* The state holds the absolute position; epochs count from the
         * run's first epoch, so shorten by the epochs already done. */
    }
    sl_loader_t *l = NULL;
    a.opt.epochs = sl__epochs_left(a.opt.epochs, a.c.duration, 0);
    if (a.c.resume) {
        a.opt.epochs -= st.pos.epoch;
        if (a.opt.epochs < 1) {
            fprintf(stderr, "sluice %s: nothing left to resume\n", argv[0]);
            return 0;
        }
    }
    int rc = sl_loader_create(a.source, &a.opt, &l);
    if (rc) {
        fprintf(stderr, "sluice %s: %s\n", argv[0], sl_loader_last_error(NULL));
        return 1;
    }
    for (int k = 1; k <= 2; k++)
        if (a.storage[k])
            sl__testing_storage_set(l, (sl_testing_storage_t)k, a.storage[k]);
    int64_t nb = sl_loader_batches_per_epoch(l);
    int64_t total = nb * a.opt.epochs - st.pos.batch;
    if (a.c.stop_after && a.c.stop_after < total)
        total = a.c.stop_after;
    int show = !a.c.quiet && isatty(2);
    if (!a.c.json || show)
        fprintf(stderr,
                "sluice %s: %" PRId64 " samples, %d classes, %" PRId64
                " batches/epoch, from epoch %" PRId64 " batch %" PRId64 "\n",
                argv[0], sl_loader_num_samples(l), sl_loader_num_classes(l), nb,
                st.pos.epoch, st.pos.batch);
    size_t waits_cap = total > 0 && total < 4096 ? (size_t)total : 4096;
    sl__waits_t waits;
    if (sl__waits_init(&waits, waits_cap)) {
        sl_loader_destroy(l);
        return 1;
    }
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    rc = sl_loader_start(l, &st.pos);
    int64_t t0 = sl__now_ns(), last_draw = 0, done = 0, samples = 0;
    int64_t shown_skips = 0, cur_epoch = st.pos.epoch;
    uint64_t h = st.digest;
    while (!rc && done < total) {
        double el = (double)(sl__now_ns() - t0) / 1e9;
        for (int k = 0; k < a.nsets; k++) {
            knob_set_t *ks = &a.sets[k];
            int now =
                ks->at_s < 0 ? ks->at == done : !ks->fired && el >= ks->at_s;
            if (!now)
                continue;
            ks->fired = 1;
            if (ks->storage) {
                if (sl__testing_storage_set(l, ks->storage, ks->value))
                    fprintf(stderr, "sluice %s: --set: value out of range\n",
                            argv[0]);
            } else if (ks->param == 0)
                a.step_ms = (double)ks->value;
            else if (sl_loader_set(l, ks->param, ks->value))
                fprintf(stderr, "sluice %s: --set: %s\n", argv[0],
                        sl_loader_last_error(l));
        }
        const sl_batch_t *b;
        int64_t w0 = sl__now_ns();
        rc = sl_loader_next(l, &b);
        int64_t w = sl__now_ns() - w0;
        if (rc)
            break;
        if (sl__waits_add(&waits, w)) {
            sl_loader_release(l, b);
            rc = SL_ENOMEM;
            break;
        }
        if (b->epoch != cur_epoch) {
            print_skips(l, &shown_skips);
            cur_epoch = b->epoch;
        }
        if (a.c.digest) {
            h = XXH3_64bits_withSeed(b->data, (size_t)b->n * b->sample_bytes,
                                     h);
            h = XXH3_64bits_withSeed(b->labels, (size_t)b->n * sizeof(int64_t),
                                     h);
        }
        samples += b->n;
        done++;
        if (a.step_ms > 0) {
            struct timespec ts = {(time_t)(a.step_ms / 1000),
                                  (long)(fmod(a.step_ms, 1000.0) * 1e6)};
            while (nanosleep(&ts, &ts) != 0)
                ;
        }
        sl_loader_release(l, b);
        int64_t now = sl__now_ns();
        if (a.c.duration > 0 && (double)(now - t0) / 1e9 >= a.c.duration)
            break;
        if (show && (now - last_draw > 100000000 || done == total)) {
            last_draw = now;
            double secs = (double)(now - t0) / 1e9;
            progress(l, done, total, secs, samples,
                     secs > 0 ? (double)waits.total / 1e9 / secs : 0);
        }
    }
    double secs = (double)(sl__now_ns() - t0) / 1e9;
    if (show)
        fputc('\n', stderr);
    print_skips(l, &shown_skips);
    if (rc == SL_EEND)
        rc = 0;
    if (rc)
        fprintf(stderr, "sluice %s: error: %s\n", argv[0],
                sl_loader_last_error(l));
    double cpu = sl__cpu_seconds_since(&ru0);
    sl_stats_t s;
    sl_stats_init(&s);
    sl_loader_stats(l, &s);
    sl_position_t pos;
    sl_loader_position(l, &pos);
    if (a.c.state_out &&
        sl__state_write(a.c.state_out, STATE_MAGIC, &pos, h, st.config))
        fprintf(stderr, "sluice %s: cannot write %s\n", argv[0], a.c.state_out);
    sl__report_t r = {
        .noun = "samples",
        .unit = "img/s",
        .samples = samples,
        .batches = done,
        .epochs = done ? (cur_epoch - st.pos.epoch + 1) : 0,
        .seconds = secs,
        .cpu_seconds = cpu,
        .waits = &waits,
        .errors_skipped = s.errors_skipped,
        .bytes_read = s.bytes_read,
        .threads = a.opt.decode_threads ? a.opt.decode_threads : sl__ncpu(),
        .batch = a.opt.batch_size ? a.opt.batch_size : 64,
        .out = a.opt.dtype == SL_DTYPE_FLOAT32 ? "float" : "uint8",
        .pos = pos,
        .digest = a.c.digest,
        .h = h,
        .rc = rc,
    };
    snprintf(r.json_shape, sizeof r.json_shape, ", \"size\": %d",
             a.opt.image_size ? a.opt.image_size : 224);
    sl__report_print(&r, !a.c.json || show, a.c.json);
    sl__waits_free(&waits);
    sl_loader_destroy(l);
    return rc ? 1 : 0;
}
