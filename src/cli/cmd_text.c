/* sluice run | bench --task lm|mlm: stream text batches (sl_text_loader_*)
 * as a trainer would and report the figures of the image bench (samples =
 * sequences) plus tokens/s; optionally a digest of every batch and a
 * resumable position. Reached from cmd_run.c when --task is given. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/base.h"
#include "cli.h"
#include "consume.h"
#include "sluice/sluice.h"

#define MAX_SOURCES 256
#define STATE_MAGIC "sluice-text-state 1"

typedef struct text_args {
    const char *sources[MAX_SOURCES];
    int nsources;
    sl_text_options_t opt;
    sl__consume_args_t c; /* --digest, --json, --batch, --seed, ... */
} text_args_t;

static void usage(FILE *f, const char *cmd)
{
    fprintf(f,
            "usage: sluice %s --task lm|mlm SOURCE... --tokenizer T --vocab "
            "FILE [options]\n"
            "SOURCE: text files (a document per line), *.jsonl (\"text\" "
            "field), text shards\n"
            "        (sluice pack --text), or directories of them\n"
            "  --tokenizer T      gpt2 | cl100k_base | ... | wordpiece "
            "(lm: gpt2, mlm: wordpiece)\n"
            "  --vocab FILE       encoder.json | rank file | vocab.txt\n"
            "  --merges FILE      gpt2: vocab.bpe\n"
            "  --cased            wordpiece: keep case and accents\n"
            "  --doc-per-file     a plain text file is one document\n"
            "  --seq-len N        lm: tokens per sequence (1024); mlm: "
            "max_len (512)\n"
            "  --batch N          sequences per batch (8)\n"
            "  --threads N        tokenizer threads (cores)\n"
            "  --epochs E         epochs (1)\n"
            "  --duration S       stop after S seconds (epochs repeat)\n"
            "  --seed S, --no-shuffle, --drop-last\n"
            "  --rank R --world W this process's share of the data\n"
            "  --on-error fail|skip  bad documents (fail)\n"
            "  --mask-prob P      mlm: share of tokens predicted (0.15)\n"
            "  --chunk-bytes N    documents per tokenizing job (256K)\n"
            "  --group N          chunks shuffled together (16)\n"
            "  --prefetch N       chunks tokenized ahead (2 x group)\n"
            "  --digest           xxh3-64 over every batch's arrays\n"
            "  --stop-after N     stop after N batches (see --state)\n"
            "  --state FILE       write the position (and digest) reached\n"
            "  --resume FILE      continue from a --state file\n"
            "  --json             a JSON object of the figures as last line\n"
            "  --quiet            no progress line\n",
            cmd);
}

enum {
    O_TASK = 256,
    O_TOK,
    O_VOCAB,
    O_MERGES,
    O_CASED,
    O_DPF,
    O_SEQ,
    O_MASK,
    O_CHUNK,
    O_GROUP,
    O_PREFETCH
};

/* The options only text takes. @return 0 taken, 1 bad, -1 not ours. */
static int text_opt(int c, const char *s, void *ctx)
{
    sl_text_options_t *o = &((text_args_t *)ctx)->opt;
    long long v = 0;
    int bad = 0;
    switch (c) {
    case O_TASK:
        if (!strcmp(s, "lm"))
            o->task = SL_TEXT_LM;
        else if (!strcmp(s, "mlm"))
            o->task = SL_TEXT_MLM;
        else
            bad = 1;
        break;
    case O_TOK:
        o->tokenizer = s;
        break;
    case O_VOCAB:
        o->vocab = s;
        break;
    case O_MERGES:
        o->merges = s;
        break;
    case O_CASED:
        o->cased = 1;
        break;
    case O_DPF:
        o->doc_per_file = 1;
        break;
    case O_SEQ:
        bad = sl__parse_ll(s, 4, 1 << 24, &v), o->seq_len = (int)v;
        break;
    case O_MASK:
        o->mask_prob = strtod(s, NULL);
        bad = !(o->mask_prob > 0 && o->mask_prob <= 1);
        break;
    case O_CHUNK:
        o->chunk_bytes = sl__parse_size(s);
        bad = o->chunk_bytes <= 0;
        break;
    case O_GROUP:
        bad = sl__parse_ll(s, 1, 4096, &v), o->group_chunks = (int)v;
        break;
    case O_PREFETCH:
        bad = sl__parse_ll(s, 1, 65536, &v), o->prefetch_chunks = (int)v;
        break;
    default:
        return -1;
    }
    return bad ? 1 : 0;
}

/* The operands, and the shared options into the loader's. @return 0, or
 * -1 after printing what was wrong and the usage. */
static int operands(int argc, char **argv, void *ctx)
{
    text_args_t *a = ctx;
    for (; optind < argc; optind++) {
        if (a->nsources == MAX_SOURCES)
            return sl__consume_bad(usage, argv[0], "more than %d sources",
                                   MAX_SOURCES);
        a->sources[a->nsources++] = argv[optind];
    }
    sl_text_options_t *o = &a->opt;
    if (!a->nsources)
        return sl__consume_bad(usage, argv[0], "expected a SOURCE");
    if (!o->vocab)
        return sl__consume_bad(usage, argv[0], "--vocab is required");
    SL__CONSUME_COPY_STREAM(o, &a->c);
    o->decode_threads = a->c.threads;
    o->on_error = a->c.on_error;
    return 0;
}

/* What a --state file must agree on: everything that changes the stream. */
static uint64_t config_hash(const void *ctx)
{
    const text_args_t *a = ctx;
    const sl_text_options_t *o = &a->opt;
    XXH3_state_t *h = XXH3_createState();
    XXH3_64bits_reset(h);
    for (int i = 0; i < a->nsources; i++)
        XXH3_64bits_update(h, a->sources[i], strlen(a->sources[i]) + 1);
    char buf[512];
    int n = snprintf(buf, sizeof buf,
                     "%d|%s|%d|%d|%d|%d|%" PRIu64 "|%d|%d|%d|%d|%d|%g|%" PRId64
                     "|%d",
                     o->task, o->tokenizer ? o->tokenizer : "", o->cased,
                     o->doc_per_file, o->seq_len, o->batch_size, o->seed,
                     o->no_shuffle, o->drop_last, o->rank, o->world_size,
                     o->eos_id, o->mask_prob, o->chunk_bytes, o->group_chunks);
    XXH3_64bits_update(h, buf, (size_t)n);
    uint64_t r = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return r;
}

static void progress(sl__consume_t *c, int64_t now)
{
    double secs = (double)(now - c->t0) / 1e9;
    fprintf(stderr, "\r%" PRId64 " batches, %.0f seq/s, %.0f tok/s  ", c->done,
            (double)c->samples / secs, (double)c->tokens / secs);
}

/* Its options: its own, then those all consumers take. */
static const struct option text_options[] = {
    {"task", 1, 0, O_TASK},         {"tokenizer", 1, 0, O_TOK},
    {"vocab", 1, 0, O_VOCAB},       {"merges", 1, 0, O_MERGES},
    {"cased", 0, 0, O_CASED},       {"doc-per-file", 0, 0, O_DPF},
    {"seq-len", 1, 0, O_SEQ},       {"mask-prob", 1, 0, O_MASK},
    {"chunk-bytes", 1, 0, O_CHUNK}, {"group", 1, 0, O_GROUP},
    {"prefetch", 1, 0, O_PREFETCH}, SL__CONSUME_OPTIONS};

static const sl__consume_cli_t text_cli = {text_options, text_opt, operands,
                                           usage, config_hash};

int sl__cmd_text(int argc, char **argv)
{
    text_args_t a = {0};
    sl_text_options_init(&a.opt);
    sl__consume_t c = {.args = &a.c,
                       .magic = STATE_MAGIC,
                       .total = INT64_MAX,
                       .progress = progress,
                       .ctx = &a};
    int rc = sl__consume_begin(&c, &text_cli, argc, argv, &a.opt.epochs);
    if (rc)
        return rc < 0 ? 0 : rc;
    sl_text_loader_t *l = NULL;
    if (sl_text_loader_create(a.sources, a.nsources, &a.opt, &l)) {
        fprintf(stderr, "sluice %s: %s\n", argv[0],
                sl_text_loader_last_error(NULL));
        return 1;
    }
    const char *task = a.opt.task == SL_TEXT_LM ? "lm" : "mlm";
    if (!a.c.json || c.show)
        fprintf(stderr,
                "sluice %s: %s, %" PRId64 " documents, from epoch %" PRId64
                " batch %" PRId64 "\n",
                argv[0], task, sl_text_loader_num_documents(l), c.from.epoch,
                c.from.batch);
    const sl__stream_t s = sl__stream_text(l);
    rc = sl__consume_run(&c, &s);
    sl_text_options_t used; /* the options in force, defaults resolved */
    sl_text_options_init(&used);
    sl_text_loader_options(l, &used);
    int seq = used.seq_len;
    double trate = c.seconds > 0 ? (double)c.tokens / c.seconds : 0;
    sl__report_t r = {
        .noun = "sequences",
        .unit = "seq/s",
        .threads = used.decode_threads,
        .batch = used.batch_size,
        .out = "int32",
    };
    snprintf(r.rate_extra, sizeof r.rate_extra, ", %.0f tokens/s", trate);
    snprintf(r.json_rates, sizeof r.json_rates,
             ", \"tokens\": %" PRId64 ", \"tokens_per_s\": %.1f", c.tokens,
             trate);
    snprintf(r.json_shape, sizeof r.json_shape,
             ", \"seq_len\": %d, \"task\": \"%s\"", seq, task);
    sl__consume_report(&c, &r);
    sl_text_loader_destroy(l);
    return rc ? 1 : 0;
}
