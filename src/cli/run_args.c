/* cli/run_args: the command line of `run` / `bench` over images (see
 * run_args.h). */
#include "run_args.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <xxhash.h>

static int add_set(const char *s, void *sets)
{
    return sl__knob_sets_add(sets, s);
}

static int latency(const char *s, void *us)
{
    return sl__parse_latency_ms(s, us);
}

#define F(f) offsetof(sl__run_args_t, f)
static const char *const dtypes[] = {"uint8", "float", NULL};
static const int dtype_v[] = {SL_DTYPE_UINT8, SL_DTYPE_FLOAT32};
static const char *const layouts[] = {"chw", "hwc", NULL};
static const int layout_v[] = {SL_LAYOUT_CHW, SL_LAYOUT_HWC};
_Static_assert(SL_MODE_EVAL == 1, "--eval is a flag");
static const char *const policies[] = {"heuristic", "static", "rl", NULL};
static const int policy_v[] = {SL_POLICY_HEURISTIC, SL_POLICY_STATIC,
                               SL_POLICY_RL};

/* The options only images take (the shared ones follow them). */
static const sl__opt_t run_opts[] = {
    {"size", 0, SL__OPT_INT, F(opt.image_size), 1, 8192, "N", "output N x N",
     "224"},
    {"read-threads", 0, SL__OPT_INT, F(opt.read_threads), 1, 256, "N",
     "read threads", "1"},
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
    {"set", 0, SL__OPT_CALL, F(sets), 0, 0, "K:KNOB=V",
     "after K batches (Ks: K seconds) set KNOB (threads, read-threads, "
     "prefetch, step-ms, read-latency-ms, read-bw) to V",
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
     "budget: decode threads + 1; read threads are I/O depth (<= 4 x cores)",
     "2 x cores"},
    {"max-memory", 0, SL__OPT_SIZE, F(opt.max_memory_bytes), 1, HUGE_VAL,
     "SIZE", "budget: batch buffers + read-ahead, e.g. 512M"},
    {"read-latency-ms", 0, SL__OPT_CALL, F(storage[SL_TESTING_READ_LATENCY_US]),
     0, 0, "T",
     "emulated slow storage: each read takes at least T ms (<= 60000)", "0",
     .parse = latency},
    {"read-bw", 0, SL__OPT_SIZE, F(storage[SL_TESTING_READ_BYTES_PER_S]), 0,
     HUGE_VAL, "SIZE", "emulated storage bandwidth in bytes/s, e.g. 20M",
     "no cap"},
    {NULL},
};
#undef F

static const sl__opts_t run_usage = {
    "SOURCE [options]",
    "SOURCE: an ImageFolder directory, a directory of shards (sluice pack), "
    "or one shard\n",
    {run_opts, sl__consume_opts},
    "one SOURCE",
    1,
    1,
    NULL};

/* The operand, and the shared options into the loader's. */
static void operands(char **op, int n, void *ctx)
{
    sl__run_args_t *a = ctx;
    (void)n; /* 1 */
    a->source = op[0];
    SL__CONSUME_COPY_STREAM(&a->opt, &a->c);
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

const sl__consume_cli_t sl__run_cli = {&run_usage, operands, config_hash};
