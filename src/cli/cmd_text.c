/* sluice run | bench --task lm|mlm: stream text batches (sl_text_loader_*)
 * as a trainer would and report the figures of the image bench (samples =
 * sequences) plus tokens/s; optionally a digest of every batch and a
 * resumable position. Reached from cmd_run.c when --task is given. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "base/base.h"
#include "consume.h"
#include "sluice/sluice.h"
#include "sluice/testing.h"

#define MAX_SOURCES 256
#define STATE_MAGIC "sluice-text-state 2" /* 2: the documents and id */

typedef struct text_args {
    const char *sources[MAX_SOURCES];
    int nsources;
    sl_text_options_t opt;
    double step_ms;
    sl__consume_args_t c; /* --digest, --json, --batch, --seed, ... */
} text_args_t;

#define F(f) offsetof(text_args_t, opt.f)
static const char *const tasks[] = {"lm", "mlm", NULL};
static const int task_v[] = {SL_TEXT_LM, SL_TEXT_MLM};

/* The options only text takes (the shared ones follow them). */
static const sl__opt_t text_opts[] = {
    {"task", 0, SL__OPT_CHOICE, F(task), 0, 0, NULL, "what the batches train",
     NULL, tasks, task_v},
    {"tokenizer", 0, SL__OPT_STR, F(tokenizer), 0, 0, "T",
     "gpt2 | cl100k_base | ... | wordpiece", "lm: gpt2, mlm: wordpiece"},
    {"vocab", 0, SL__OPT_STR, F(vocab), 0, 0, "FILE",
     "encoder.json | rank file | vocab.txt", .need = 1},
    {"merges", 0, SL__OPT_STR, F(merges), 0, 0, "FILE", "gpt2: vocab.bpe"},
    {"cased", 0, SL__OPT_FLAG, F(cased), 0, 0, NULL,
     "wordpiece: keep case and accents"},
    {"doc-per-file", 0, SL__OPT_FLAG, F(doc_per_file), 0, 0, NULL,
     "a plain text file is one document"},
    {"seq-len", 0, SL__OPT_INT, F(seq_len), 4, 1 << 24, "N",
     "lm: tokens per sequence; mlm: max_len", "1024, 512"},
    {"mask-prob", 0, SL__OPT_DOUBLE, F(mask_prob), 0, 1, "P",
     "mlm: share of tokens predicted (0: none, every label -100)", "0.15"},
    {"chunk-bytes", 0, SL__OPT_SIZE, F(chunk_bytes), 1, HUGE_VAL, "N",
     "documents per tokenizing job", "256K"},
    {"group", 0, SL__OPT_INT, F(group_chunks), 1, 4096, "N",
     "chunks shuffled together", "16"},
    {"prefetch", 0, SL__OPT_INT, F(prefetch_chunks), 1, 65536, "N",
     "chunks tokenized ahead", "2 x group"},
    {"max-memory", 0, SL__OPT_SIZE, F(max_memory_bytes), 1, HUGE_VAL, "SIZE",
     "budget: batch buffers + documents being tokenized (12 bytes a byte; "
     "one that never fits is a bad document), e.g. 512M",
     "half the cgroup's memory limit, none without one"},
    {"step-ms", 0, SL__OPT_DOUBLE, offsetof(text_args_t, step_ms), 0, HUGE_VAL,
     "T", "hold each batch T ms, as a training step would", "0"},
    {NULL},
};

static const sl__opts_t text_usage = {
    "--task lm|mlm SOURCE... --tokenizer T --vocab FILE [options]",
    "SOURCE: text files (a document per line), *.jsonl (\"text\" field), "
    "text shards\n        (sluice pack --text), or directories of them\n",
    {text_opts, sl__consume_opts},
    "a SOURCE",
    1,
    MAX_SOURCES,
    NULL};

/* The operands, and the shared options into the loader's. */
static void operands(char **op, int n, void *ctx)
{
    text_args_t *a = ctx;
    for (a->nsources = 0; a->nsources < n; a->nsources++)
        a->sources[a->nsources] = op[a->nsources];
    SL__CONSUME_COPY_STREAM(&a->opt, &a->c);
    if (a->opt.mask_prob >= 0) /* given: 0 is no masking, not the default */
        a->opt.given |= SL_TEXT_GIVEN_MASK_PROB;
    else
        a->opt.mask_prob = 0;
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
    if (o->given) /* hashed only when set: older state files hold */
        XXH3_64bits_update(h, &o->given, sizeof o->given);
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

static const sl__consume_cli_t text_cli = {&text_usage, operands, config_hash};

int sl__cmd_text(int argc, char **argv)
{
    text_args_t a = {0};
    sl_text_options_init(&a.opt);
    a.opt.mask_prob = -1; /* not given (operands) */
    sl__consume_t c = {.args = &a.c,
                       .magic = STATE_MAGIC,
                       .total = INT64_MAX,
                       .progress = progress,
                       .ctx = &a};
    int rc = sl__consume_begin(&c, &text_cli, argc, argv, &a.opt.epochs);
    if (rc)
        return rc < 0 ? 0 : rc;
    c.step_ms = a.step_ms;
    sl_text_loader_t *l = NULL;
    if (sl_text_loader_create(a.sources, a.nsources, &a.opt, &l)) {
        fprintf(stderr, "sluice %s: %s\n", argv[0],
                sl_text_loader_last_error(NULL));
        return 1;
    }
    /* The source's identity beside its document count: the vocabulary's
     * size (the tokenizer files are not in the options' hash). */
    int64_t vocab = sl_text_loader_vocab_size(l);
    rc = sl__consume_source(&c, sl_text_loader_num_documents(l),
                            XXH3_64bits(&vocab, sizeof vocab));
    if (rc) {
        sl_text_loader_destroy(l);
        return rc;
    }
    const char *task = a.opt.task == SL_TEXT_LM ? "lm" : "mlm";
    if (!a.c.json || c.show)
        fprintf(stderr,
                "sluice %s: %s, %" PRId64 " documents, from epoch %" PRId64
                " batch %" PRId64 "\n",
                argv[0], task, sl_text_loader_num_documents(l), c.from.epoch,
                c.from.batch);
    const char *mem_why = ""; /* a default budget is said, as for images */
    int64_t budget = sl__testing_text_memory_budget(l, &mem_why);
    if (mem_why[0] && (!a.c.json || c.show))
        fprintf(stderr, "sluice %s: memory budget: %.0f MB%s\n", argv[0],
                (double)budget / (1 << 20), mem_why);
    const sl__stream_t s = sl__stream_text(l);
    sl__consume_run(&c, &s);
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
    sl_text_stats_t st;
    sl_text_stats_init(&st);
    sl_text_loader_stats(l, &st);
    snprintf(r.json_rates, sizeof r.json_rates,
             ", \"tokens\": %" PRId64 ", \"tokens_per_s\": %.1f"
             ", \"tokens_dropped\": %" PRId64,
             c.tokens, trate, st.tokens_dropped);
    if (st.tokens_dropped && (!a.c.json || c.show))
        fprintf(stderr,
                "sluice %s: %" PRId64 " tokens dropped (%.2f %% of the %" PRId64
                " tokenized): chunks' tails shorter than a window of %d\n",
                argv[0], st.tokens_dropped,
                st.tokens_encoded ? 100.0 * (double)st.tokens_dropped /
                                        (double)st.tokens_encoded
                                  : 0.0,
                st.tokens_encoded, seq + 1);
    snprintf(r.json_shape, sizeof r.json_shape,
             ", \"seq_len\": %d, \"task\": \"%s\"", seq, task);
    sl__consume_report(&c, &r);
    sl_text_loader_destroy(l);
    return sl__consume_exit(&c);
}
