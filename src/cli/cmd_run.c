/* sluice run | bench: stream batches as a trainer would and report the
 * figures (throughput, stalls, waits, CPU, memory), optionally a digest of
 * every byte handed out, and a resumable position. Its options are the
 * table below and the consumer's (consume.c), whose loop it runs. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/base.h"
#include "cli.h"
#include "consume.h"
#include "knob_sets.h"
#include "sluice/telemetry.h"
#include "sluice/testing.h"

#define STATE_MAGIC "sluice-state 2" /* 2: the source's samples and id */

typedef struct run_args {
    const char *source;
    sl_options_t opt;
    int64_t storage[3]; /* sl_testing_storage_t -> value (0: off) */
    double step_ms;
    sl__consume_args_t c; /* --digest, --json, --batch, --seed, ... */
    sl__knob_sets_t sets; /* --set */
    sl_loader_t *loader;  /* once created */
} run_args_t;

static int add_set(const char *s, void *sets)
{
    return sl__knob_sets_add(sets, s);
}

/* --io-depth N | off */
static int io_depth(const char *s, void *out)
{
    long long v;
    if (!strcmp(s, "off")) {
        *(int *)out = SL_IO_DEPTH_OFF;
        return 0;
    }
    if (sl__parse_ll(s, 1, 65536, &v))
        return -1;
    *(int *)out = (int)v;
    return 0;
}

/* --coalesce SIZE | off */
static int coalesce(const char *s, void *out)
{
    long long v = strcmp(s, "off") ? sl__parse_size(s) : -1;
    if (v == 0 || v > (1LL << 30) || (v < 0 && strcmp(s, "off")))
        return -1;
    *(int64_t *)out = v;
    return 0;
}

static int latency(const char *s, void *us)
{
    return sl__parse_latency_ms(s, us);
}

#define F(f) offsetof(run_args_t, f)
static const char *const dtypes[] = {"uint8", "float", NULL};
static const int dtype_v[] = {SL_DTYPE_UINT8, SL_DTYPE_FLOAT32};
static const char *const layouts[] = {"chw", "hwc", NULL};
static const int layout_v[] = {SL_LAYOUT_CHW, SL_LAYOUT_HWC};
_Static_assert(SL_MODE_EVAL == 1, "--eval is a flag");
static const char *const policies[] = {"heuristic", "static", "rl", NULL};
static const int policy_v[] = {SL_POLICY_HEURISTIC, SL_POLICY_STATIC,
                               SL_POLICY_RL};
static const char *const cache_policies[] = {"minio", "lru", NULL};
static const int cache_policy_v[] = {SL_CACHE_MINIO, SL_CACHE_LRU};
static const char *const cache_codecs[] = {"auto",   "none",    "lz4", "zstd-1",
                                           "zstd-3", "zstd-19", NULL};
static const char *const placements[] = {"auto", "cpu", "gpu", NULL};
static const int placement_v[] = {SL_PLACEMENT_AUTO, SL_PLACEMENT_CPU,
                                  SL_PLACEMENT_GPU};
static const int cache_codec_v[] = {
    SL_CACHE_CODEC_AUTO,  SL_CACHE_CODEC_NONE,  SL_CACHE_CODEC_LZ4,
    SL_CACHE_CODEC_ZSTD1, SL_CACHE_CODEC_ZSTD3, SL_CACHE_CODEC_ZSTD19};

/* The options only images take (the shared ones follow them). */
static const sl__opt_t run_opts[] = {
    {"size", 0, SL__OPT_INT, F(opt.image_size), 1, 8192, "N", "output N x N",
     "224"},
    {"read-threads", 0, SL__OPT_INT, F(opt.read_threads), 1, 256, "N",
     "read threads", "1"},
    {"io-depth", 0, SL__OPT_CALL, F(opt.io_depth), 0, 0, "N",
     "reads in flight, shared by the read threads (io_uring); off: one "
     "blocking read per read thread",
     "heuristic: tuned; else one per read thread", .parse = io_depth},
    {"coalesce", 0, SL__OPT_CALL, F(opt.coalesce_bytes), 0, 0, "SIZE",
     "reads in flight from URLs: neighbouring records in one range "
     "request of at most SIZE (up to 1G); off: one request per record",
     "1M", .parse = coalesce},
    {"prefetch", 0, SL__OPT_INT, F(opt.prefetch), 1, 4096, "N",
     "batch buffers in flight", "2 x threads"},
    {"step-ms", 0, SL__OPT_DOUBLE, F(step_ms), 0, HUGE_VAL, "T",
     "hold each batch T ms, as a training step would", "0"},
    {"out", 0, SL__OPT_CHOICE, F(opt.dtype), 0, 0, NULL,
     "pixels, or normalised float32", "uint8", dtypes, dtype_v},
    {"layout", 0, SL__OPT_CHOICE, F(opt.layout), 0, 0, NULL, "pixel order",
     "chw", layouts, layout_v},
    {"eval", 0, SL__OPT_FLAG, F(opt.mode), 0, 0, NULL,
     "Resize+CenterCrop instead of RandomResizedCrop+flip"},
    {"no-flip", 0, SL__OPT_FLAG, F(opt.no_flip), 0, 0, NULL, "no random flip"},
    {"no-dct", 0, SL__OPT_FLAG, F(opt.no_dct_scale), 0, 0, NULL,
     "no JPEG DCT-domain downscaling"},
    {"unordered", 0, SL__OPT_FLAG, F(opt.unordered), 0, 0, NULL,
     "hand out batches as they complete"},
    {"shuffle-buffer", 0, SL__OPT_INT, F(opt.shuffle_buffer), 1, 1 << 24, "N",
     "WebDataset order: files shuffled, samples through an N-sample "
     "shuffle buffer",
     "off: a global permutation"},
    {"set", 0, SL__OPT_CALL, F(sets), 0, 0, "K:KNOB=V",
     "after K batches (Ks: K seconds) set KNOB (threads, read-threads, "
     "io-depth, "
     "prefetch, gpu-share, step-ms, read-latency-ms, read-bw) to V",
     .parse = add_set},
    {"telemetry", 0, SL__OPT_STR, F(opt.telemetry_path), 0, 0, "FILE",
     "one JSON line of telemetry per period (docs/TELEMETRY.md)"},
    {"telemetry-ms", 0, SL__OPT_INT, F(opt.telemetry_ms), 1, 60000, "N",
     "telemetry period", "100"},
    {"metrics-port", 0, SL__OPT_INT, F(opt.metrics_port), 1, 65535, "P",
     "serve Prometheus metrics on 127.0.0.1:P/metrics"},
    {"policy", 0, SL__OPT_CHOICE, F(opt.policy), 0, 0, NULL,
     "tune the knobs not given", "heuristic", policies, policy_v},
    {"policy-file", 0, SL__OPT_STR, F(opt.policy_file), 0, 0, "F",
     "rl: weights file", "the built-in default"},
    {"learn", 0, SL__OPT_FLAG, F(opt.learn), 0, 0, NULL,
     "rl: fine-tune online; back to the heuristic if reward degrades"},
    {"max-threads", 0, SL__OPT_INT, F(opt.max_threads), 2, 256, "N",
     "budget: decode threads + 1; read threads are I/O depth (4 x "
     "cores, 64..256)",
     "2 x cores"},
    {"max-memory", 0, SL__OPT_SIZE, F(opt.max_memory_bytes), 1, HUGE_VAL,
     "SIZE", "budget: batch buffers + read-ahead + decode scratch, e.g. 512M",
     "half the cgroup's memory limit plus --cache, none without one"},
    {"cache", 0, SL__OPT_SIZE, F(opt.cache_bytes), 0, HUGE_VAL, "SIZE",
     "keep samples in SIZE bytes of memory across epochs (taken out of "
     "--max-memory), e.g. 200M",
     "none"},
    {"cache-policy", 0, SL__OPT_CHOICE, F(opt.cache_policy), 0, 0, NULL,
     "minio: fill until full, never evict; lru: least recently used out",
     "minio", cache_policies, cache_policy_v},
    {"cache-decoded", 0, SL__OPT_FLAG, F(opt.cache_decoded), 0, 0, NULL,
     "cache decoded images (full size): later epochs skip decoding; "
     "implies --no-dct"},
    {"cache-codec", 0, SL__OPT_CHOICE, F(opt.cache_codec), 0, 0, NULL,
     "how cache entries are stored; auto: chosen at run time from "
     "measured ratios, codec time and what a miss costs",
     "auto", cache_codecs, cache_codec_v},
    {"cache-dir", 0, SL__OPT_STR, F(opt.cache_dir), 0, 0, "DIR",
     "the cache's disk tier: samples --cache has no room for are kept in a "
     "fresh subdirectory of DIR (removed at exit), within --cache-disk"},
    {"cache-disk", 0, SL__OPT_SIZE, F(opt.cache_disk_bytes), 1, HUGE_VAL,
     "SIZE", "bytes of the disk tier (with --cache-dir), e.g. 2G"},
    {"placement", 0, SL__OPT_CHOICE, F(opt.placement), 0, 0, NULL,
     "where samples are decoded: gpu fails when the GPU stage is "
     "unavailable, auto falls back to the CPU and says why",
     "auto", placements, placement_v},
    {"gpu-share", 0, SL__OPT_INT, F(opt.gpu_share), 0, 1000, "N",
     "per mille of each batch on the GPU stage (needs it in use)",
     "1000 with --placement gpu; auto: the scheduler's"},
    {"gpu-device", 0, SL__OPT_INT, F(opt.gpu_device), 0, 1023, "N",
     "the CUDA device the GPU stage runs on", "0"},
    {"gpu-memory", 0, SL__OPT_SIZE, F(opt.gpu_memory_bytes), 1, HUGE_VAL,
     "SIZE",
     "a hard budget of GPU memory for the GPU stage and device batches, "
     "e.g. 512M",
     "1 GiB for the stage"},
    {"read-latency-ms", 0, SL__OPT_CALL, F(storage[SL_TESTING_READ_LATENCY_US]),
     0, 0, "T",
     "emulated slow storage: each read takes at least T ms (<= 60000)", "0",
     .parse = latency},
    {"read-bw", 0, SL__OPT_SIZE, F(storage[SL_TESTING_READ_BYTES_PER_S]), 0,
     HUGE_VAL, "SIZE", "emulated storage bandwidth in bytes/s, e.g. 20M",
     "no cap"},
    {NULL},
};

static const sl__opts_t run_usage = {
    "SOURCE [options]",
    "SOURCE: an ImageFolder directory, a directory of shards (sluice pack), "
    "or one shard;\n"
    "  WebDataset .tar shards or TFRecord files: 'shard-{000..009}.tar', "
    "'data.tfrecord',\n"
    "  'tfrecord:train-{00000..01023}-of-01024'\n"
    "Text: --task lm|mlm SOURCE... --tokenizer T --vocab FILE streams token "
    "batches\n"
    "  instead (its options: sluice run --task lm --help)\n",
    {run_opts, sl__consume_opts},
    "one SOURCE",
    1,
    1,
    NULL};

/* The operand, and the shared options into the loader's. */
static void operands(char **op, int n, void *ctx)
{
    run_args_t *a = ctx;
    (void)n; /* 1 */
    a->source = op[0];
    SL__CONSUME_COPY_STREAM(&a->opt, &a->c);
}

/* What a --state file must agree on to resume: everything that changes the
 * batch stream (thread counts and prefetch do not). */
static uint64_t config_hash(const void *ctx)
{
    const run_args_t *a = ctx;
    const sl_options_t *o = &a->opt;
    char buf[1024];
    int n = snprintf(buf, sizeof buf,
                     "%s|%d|%d|%d|%d|%d|%d|%" PRIu64 "|%d|%d|%d|%d|%d|%d|%d",
                     a->source, o->batch_size, o->image_size, o->mode, o->dtype,
                     o->layout, o->no_flip, o->seed, o->no_shuffle,
                     o->drop_last, o->rank, o->world_size, o->unordered,
                     o->no_dct_scale, o->on_error);
    if (o->cache_decoded) /* its stream is the --no-dct one */
        n += snprintf(buf + n, sizeof buf - (size_t)n, "|cd");
    if (o->shuffle_buffer) /* appended only when set: old state files hold */
        n += snprintf(buf + n, sizeof buf - (size_t)n, "|sb%d",
                      o->shuffle_buffer);
    return XXH3_64bits(buf, (size_t)n);
}

static const sl__consume_cli_t run_cli = {&run_usage, operands, config_hash};

/* What identifies the source beside its sample count: its classes (names,
 * in label order) and batches per epoch. A --state file must agree. */
static uint64_t dataset_hash(const sl_loader_t *l)
{
    XXH3_state_t *h = XXH3_createState();
    if (!h)
        return 0;
    XXH3_64bits_reset(h);
    int k = sl_loader_num_classes(l);
    int64_t nb = sl_loader_batches_per_epoch(l);
    XXH3_64bits_update(h, &k, sizeof k);
    XXH3_64bits_update(h, &nb, sizeof nb);
    for (int i = 0; i < k; i++) {
        const char *name = sl_loader_class_name(l, i);
        XXH3_64bits_update(h, name ? name : "", name ? strlen(name) + 1 : 1);
    }
    uint64_t r = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return r;
}

static void progress(sl__consume_t *c, int64_t now)
{
    sl_loader_t *l = ((run_args_t *)c->ctx)->loader;
    sl_snapshot_t snap;
    sl_snapshot_init(&snap);
    int have = sl_loader_snapshot(l, &snap) == 0 && snap.t > 0;
    double secs = (double)(now - c->t0) / 1e9;
    double stall = secs > 0 ? (double)c->waits.total / 1e9 / secs : 0;
    int64_t done = c->done, total = c->total;
    double eta = done > 0 ? secs * (double)(total - done) / (double)done : 0;
    int width = 30, fill = total ? (int)(width * done / total) : 0;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %" PRId64 "/%" PRId64 " %6.0f img/s  stall %4.1f%%",
            bar, done, total, secs > 0 ? (double)c->samples / secs : 0.0,
            100.0 * stall);
    if (have)
        fprintf(stderr, "  cpu %3.0f%% (other %2.0f%%)  rss %4.0f MB",
                100.0 * snap.cpu_self, 100.0 * snap.cpu_other,
                (double)snap.rss_bytes / 1048576.0);
    fprintf(stderr, "  eta %02d:%02d ", (int)(eta / 60), (int)eta % 60);
    fflush(stderr);
}

/* --set: the knob changes due before the next batch. */
static void apply_sets(sl__consume_t *c, double elapsed)
{
    run_args_t *a = c->ctx;
    sl__knob_sets_due(&a->sets, a->loader, c->cmd, c->done, elapsed,
                      &c->step_ms);
}

int sl__cmd_run(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* text batches: cmd_text.c */
        if (!strcmp(argv[i], "--task") || !strncmp(argv[i], "--task=", 7))
            return sl__cmd_text(argc, argv);
    run_args_t a = {0};
    sl_options_init(&a.opt);
    sl__consume_t c = {
        .args = &a.c, .magic = STATE_MAGIC, .progress = progress, .ctx = &a};
    int rc = sl__consume_begin(&c, &run_cli, argc, argv, &a.opt.epochs);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (a.opt.unordered && (a.c.state_out || a.c.resume)) {
        /* The position counts batches handed out; unordered, those are not
         * the first ones of the epoch, so a resume would repeat some and
         * never deliver others (sl_loader_start refuses it too). */
        fprintf(stderr,
                "sluice %s: --state and --resume need ordered delivery: "
                "leave out --unordered\n",
                argv[0]);
        return 2;
    }
    c.step_ms = a.step_ms;
    c.before = a.sets.n ? apply_sets : NULL;
    if (sl_loader_create(a.source, &a.opt, &a.loader)) {
        fprintf(stderr, "sluice %s: %s\n", argv[0], sl_loader_last_error(NULL));
        return 1;
    }
    sl_loader_t *l = a.loader;
    rc = sl__knob_sets_check(&a.sets, l, argv[0]);
    if (!rc)
        rc = sl__consume_source(&c, sl_loader_num_samples(l), dataset_hash(l));
    if (rc) {
        sl_loader_destroy(l);
        return rc;
    }
    for (int k = 1; k <= 2; k++) /* emulated storage (sluice/testing.h) */
        if (a.storage[k])
            sl__testing_storage_set(l, (sl_testing_storage_t)k, a.storage[k]);
    int64_t nb = sl_loader_batches_per_epoch(l);
    c.total = nb * a.opt.epochs - c.from.batch;
    if (!a.c.json || c.show)
        fprintf(stderr,
                "sluice %s: %" PRId64 " samples, %d classes, %" PRId64
                " batches/epoch, from epoch %" PRId64 " batch %" PRId64 "\n",
                argv[0], sl_loader_num_samples(l), sl_loader_num_classes(l), nb,
                c.from.epoch, c.from.batch);
    const char *path_why = "";
    int async = sl__testing_read_path(l, &path_why);
    if (!a.c.json || c.show)
        fprintf(stderr, "sluice %s: reads: %s%s%s\n", argv[0],
                async ? "asynchronous ("
                      : "one blocking read per read thread: ",
                path_why, async ? "), io_depth reads in flight" : "");
    const char *mem_why = "";
    int64_t budget = sl__testing_memory_budget(l, &mem_why);
    if (mem_why[0] && (!a.c.json || c.show))
        fprintf(stderr, "sluice %s: memory budget: %.0f MB%s\n", argv[0],
                (double)budget / (1 << 20), mem_why);
    const char *place_why = "";
    int on_gpu = sl__testing_placement(l, &place_why);
    if (!a.c.json || c.show)
        fprintf(stderr, "sluice %s: placement: %s%s%s%s\n", argv[0],
                on_gpu ? "GPU stage and CPU" : "CPU", place_why[0] ? " (" : "",
                place_why, place_why[0] ? ")" : "");
    const sl__stream_t s = sl__stream_image(l);
    sl__consume_run(&c, &s);
    if (!c.stopped)
        sl__knob_sets_unfired(&a.sets, argv[0], c.done);
    sl_options_t used; /* the options in force, defaults resolved */
    sl_options_init(&used);
    sl_loader_options(l, &used);
    sl__report_t r = {
        .noun = "samples",
        .unit = "img/s",
        .threads = used.decode_threads,
        .batch = used.batch_size,
        .out = used.dtype == SL_DTYPE_FLOAT32 ? "float" : "uint8",
    };
    int64_t depth = 0, readers = 0;
    sl_loader_get(l, SL_PARAM_IO_DEPTH, &depth);
    sl_loader_get(l, SL_PARAM_READ_THREADS, &readers);
    snprintf(r.json_shape, sizeof r.json_shape,
             ", \"size\": %d, \"read_path\": \"%s\", \"read_threads\": %lld"
             ", \"io_depth\": %lld",
             used.image_size, async ? path_why : "threads", (long long)readers,
             async ? (long long)depth : 0LL);
    sl_stats_t st;
    sl_stats_init(&st);
    sl_loader_stats(l, &st);
    if (st.requests > 0) {
        size_t k = strlen(r.json_shape);
        snprintf(
            r.json_shape + k, sizeof r.json_shape - k,
            ", \"requests\": {\"count\": %lld, \"records\": %lld, "
            "\"fallbacks\": %lld, \"coalesce_bytes\": %lld}",
            (long long)st.requests, (long long)st.request_records,
            (long long)st.request_fallbacks,
            (long long)(used.coalesce_bytes > 0 ? used.coalesce_bytes : 0));
        if (!a.c.json || c.show)
            fprintf(stderr,
                    "sluice %s: remote reads: %lld requests for %lld samples "
                    "(%.2f a request; coalescing %s), %lld coalesced requests "
                    "failed and were read record by record\n",
                    argv[0], (long long)st.requests,
                    (long long)st.request_records,
                    (double)st.request_records / (double)st.requests,
                    used.coalesce_bytes > 0 ? "on" : "off",
                    (long long)st.request_fallbacks);
    }
    const char *codec = st.cache_codec >= 0 && st.cache_codec <= 5
                            ? cache_codecs[st.cache_codec]
                            : "?";
    if (used.cache_bytes > 0 || used.cache_disk_bytes > 0) {
        size_t k = strlen(r.json_shape);
        int64_t finds = st.cache_hits + st.cache_misses;
        snprintf(r.json_shape + k, sizeof r.json_shape - k,
                 ", \"cache\": {\"policy\": \"%s\", \"decoded\": %d, "
                 "\"limit_bytes\": %lld, \"hits\": %lld, \"misses\": %lld, "
                 "\"hit_rate\": %.4f, \"bytes\": %lld, \"entries\": %lld, "
                 "\"raw_bytes\": %lld, \"codec\": \"%s\", \"codec_choices\": "
                 "%lld}",
                 used.cache_policy == SL_CACHE_LRU ? "lru" : "minio",
                 used.cache_decoded, (long long)used.cache_bytes,
                 (long long)st.cache_hits, (long long)st.cache_misses,
                 finds ? (double)st.cache_hits / (double)finds : 0.0,
                 (long long)st.cache_bytes, (long long)st.cache_entries,
                 (long long)st.cache_raw_bytes, codec,
                 (long long)st.cache_codec_choices);
        if (used.cache_disk_bytes > 0) { /* inside "cache" */
            k = strlen(r.json_shape) - 1;
            snprintf(
                r.json_shape + k, sizeof r.json_shape - k,
                ", \"disk\": {\"limit_bytes\": %lld, \"hits\": %lld, "
                "\"misses\": %lld, \"bytes\": %lld, \"entries\": %lld, "
                "\"errors\": %lld}}",
                (long long)used.cache_disk_bytes, (long long)st.cache_disk_hits,
                (long long)st.cache_disk_misses, (long long)st.cache_disk_bytes,
                (long long)st.cache_disk_entries,
                (long long)st.cache_disk_errors);
        }
        if (!a.c.json || c.show)
            fprintf(
                stderr,
                "sluice %s: cache (%s%s, %.1f MB): %lld hits, %lld "
                "misses (%.1f%%), holds %lld samples in %.1f MB (%.1f "
                "MB raw, codec %s, %lld choices); read from storage "
                "%.1f MB\n",
                argv[0], used.cache_policy == SL_CACHE_LRU ? "lru" : "minio",
                used.cache_decoded ? ", decoded" : "",
                (double)used.cache_bytes / 1e6, (long long)st.cache_hits,
                (long long)st.cache_misses,
                finds ? 100.0 * (double)st.cache_hits / (double)finds : 0.0,
                (long long)st.cache_entries, (double)st.cache_bytes / 1e6,
                (double)st.cache_raw_bytes / 1e6, codec,
                (long long)st.cache_codec_choices, (double)st.bytes_read / 1e6);
        if (used.cache_disk_bytes > 0 && (!a.c.json || c.show))
            fprintf(stderr,
                    "sluice %s: cache disk tier (%.1f MB): %lld hits, %lld "
                    "misses, holds %lld samples in %.1f MB, %lld errors\n",
                    argv[0], (double)used.cache_disk_bytes / 1e6,
                    (long long)st.cache_disk_hits,
                    (long long)st.cache_disk_misses,
                    (long long)st.cache_disk_entries,
                    (double)st.cache_disk_bytes / 1e6,
                    (long long)st.cache_disk_errors);
    }
    sl__consume_report(&c, &r);
    sl_loader_destroy(l);
    return sl__consume_exit(&c);
}
