/* sluice run | bench --task lm|mlm: stream text batches (sl_text_loader_*)
 * as a trainer would and report the figures of the image bench (samples =
 * sequences) plus tokens/s; optionally a digest of every batch and a
 * resumable position. Reached from cmd_run.c when --task is given. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <xxhash.h>

#include "sluice/text.h"
#include "base/base.h"
#include "cli.h"
#include "report.h"
#include "sluice/sluice.h"

#define MAX_SOURCES 256
#define STATE_MAGIC "sluice-text-state 1"

typedef struct text_args {
    const char *sources[MAX_SOURCES];
    int nsources;
    sl_text_options_t opt;
    sl__consume_args_t c; /* --digest, --json, --duration, --state, ... */
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

static int parse_args(int argc, char **argv, text_args_t *a)
{
    enum {
        O_TASK = 256,
        O_TOK,
        O_VOCAB,
        O_MERGES,
        O_CASED,
        O_DPF,
        O_SEQ,
        O_BATCH,
        O_THREADS,
        O_EPOCHS,
        O_SEED,
        O_NOSHUF,
        O_DROP,
        O_RANK,
        O_WORLD,
        O_ONERR,
        O_MASK,
        O_CHUNK,
        O_GROUP,
        O_PREFETCH,
        O_HELP
    };
    static const struct option lo[] = {{"task", 1, 0, O_TASK},
                                       {"tokenizer", 1, 0, O_TOK},
                                       {"vocab", 1, 0, O_VOCAB},
                                       {"merges", 1, 0, O_MERGES},
                                       {"cased", 0, 0, O_CASED},
                                       {"doc-per-file", 0, 0, O_DPF},
                                       {"seq-len", 1, 0, O_SEQ},
                                       {"batch", 1, 0, O_BATCH},
                                       {"threads", 1, 0, O_THREADS},
                                       {"epochs", 1, 0, O_EPOCHS},
                                       {"seed", 1, 0, O_SEED},
                                       {"no-shuffle", 0, 0, O_NOSHUF},
                                       {"drop-last", 0, 0, O_DROP},
                                       {"rank", 1, 0, O_RANK},
                                       {"world", 1, 0, O_WORLD},
                                       {"on-error", 1, 0, O_ONERR},
                                       {"mask-prob", 1, 0, O_MASK},
                                       {"chunk-bytes", 1, 0, O_CHUNK},
                                       {"group", 1, 0, O_GROUP},
                                       {"prefetch", 1, 0, O_PREFETCH},
                                       {"help", 0, 0, O_HELP},
                                       SL__CONSUME_OPTIONS,
                                       {0, 0, 0, 0}};
    sl_text_options_t *o = &a->opt;
    long long v = 0;
    int c, li = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        const char *s = optarg;
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
        case O_BATCH:
            bad = sl__parse_ll(s, 1, 1 << 20, &v), o->batch_size = (int)v;
            break;
        case O_THREADS:
            bad = sl__parse_ll(s, 1, 256, &v), o->decode_threads = (int)v;
            break;
        case O_EPOCHS:
            bad = sl__parse_ll(s, 1, 1000000, &v), o->epochs = v;
            break;
        case O_SEED:
            bad = sl__parse_ll(s, 0, INT64_MAX, &v), o->seed = (uint64_t)v;
            break;
        case O_NOSHUF:
            o->no_shuffle = 1;
            break;
        case O_DROP:
            o->drop_last = 1;
            break;
        case O_RANK:
            bad = sl__parse_ll(s, 0, 1 << 20, &v), o->rank = (int)v;
            break;
        case O_WORLD:
            bad = sl__parse_ll(s, 1, 1 << 20, &v), o->world_size = (int)v;
            break;
        case O_ONERR:
            if (!strcmp(s, "skip"))
                o->on_error = SL_ON_ERROR_SKIP;
            else if (strcmp(s, "fail"))
                bad = 1;
            break;
        case O_MASK:
            o->mask_prob = strtod(s, NULL);
            bad = !(o->mask_prob > 0 && o->mask_prob <= 1);
            break;
        case O_CHUNK: {
            long long m = sl__parse_size(s);
            bad = m <= 0, o->chunk_bytes = m;
            break;
        }
        case O_GROUP:
            bad = sl__parse_ll(s, 1, 4096, &v), o->group_chunks = (int)v;
            break;
        case O_PREFETCH:
            bad = sl__parse_ll(s, 1, 65536, &v), o->prefetch_chunks = (int)v;
            break;
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
    for (; optind < argc; optind++) {
        if (a->nsources == MAX_SOURCES) {
            fprintf(stderr, "sluice %s: more than %d sources\n", argv[0],
                    MAX_SOURCES);
            return -1;
        }
        a->sources[a->nsources++] = argv[optind];
    }
    if (!a->nsources) {
        fprintf(stderr, "sluice %s: expected a SOURCE\n", argv[0]);
        return -1;
    }
    if (!o->vocab) {
        fprintf(stderr, "sluice %s: --vocab is required\n", argv[0]);
        return -1;
    }
    return 0;
}

/* What a --state file must agree on: everything that changes the stream. */
static uint64_t config_hash(const text_args_t *a)
{
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

static uint64_t digest_batch(const sl_text_batch_t *b, uint64_t h)
{
    size_t n = (size_t)b->n * (size_t)b->seq_len * sizeof(int32_t);
    h = XXH3_64bits_withSeed(b->input_ids, n, h);
    h = XXH3_64bits_withSeed(b->labels, n, h);
    if (b->attention_mask) {
        h = XXH3_64bits_withSeed(b->attention_mask, n, h);
        h = XXH3_64bits_withSeed(b->token_type_ids, n, h);
    }
    return h;
}

static void print_skips(sl_text_loader_t *l, int64_t *shown)
{
    int64_t n = sl_text_loader_skipped_count(l);
    for (; *shown < n; (*shown)++) {
        const char *m = sl_text_loader_skipped_message(l, *shown);
        if (!m) {
            *shown = n;
            break;
        }
        fprintf(stderr, "skipped: %s\n", m);
    }
}

int sl__cmd_text(int argc, char **argv)
{
    text_args_t a;
    memset(&a, 0, sizeof a);
    sl_text_options_init(&a.opt);
    if (parse_args(argc, argv, &a)) {
        usage(stderr, argv[0]);
        return 2;
    }
    uint64_t config = config_hash(&a), h = 0;
    sl_position_t pos = {0, 0};
    if (a.c.resume) {
        uint64_t cfg = 0;
        int ok = !sl__state_read(a.c.resume, STATE_MAGIC, &pos, &h, &cfg);
        if (!ok || cfg != config) {
            fprintf(stderr, "sluice %s: %s: %s\n", argv[0], a.c.resume,
                    ok ? "written with other options or sources"
                       : "not a sluice text state file");
            return 2;
        }
    }
    a.opt.epochs = sl__epochs_left(a.opt.epochs, a.c.duration, pos.epoch);
    if (a.opt.epochs < 1) {
        fprintf(stderr, "sluice %s: nothing left to resume\n", argv[0]);
        return 0;
    }
    sl_text_loader_t *l = NULL;
    int rc = sl_text_loader_create(a.sources, a.nsources, &a.opt, &l);
    if (rc) {
        fprintf(stderr, "sluice %s: %s\n", argv[0],
                sl_text_loader_last_error(NULL));
        return 1;
    }
    int show = !a.c.quiet && isatty(2);
    if (!a.c.json || show)
        fprintf(stderr,
                "sluice %s: %s, %" PRId64 " documents, from epoch %" PRId64
                " batch %" PRId64 "\n",
                argv[0], a.opt.task == SL_TEXT_LM ? "lm" : "mlm",
                sl_text_loader_num_documents(l), pos.epoch, pos.batch);
    sl__waits_t waits;
    if (sl__waits_init(&waits, 4096)) {
        sl_text_loader_destroy(l);
        return 1;
    }
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    rc = sl_text_loader_start(l, &pos);
    int64_t t0 = sl__now_ns(), last_draw = 0, done = 0, rows = 0, toks = 0;
    int64_t shown = 0, first_epoch = pos.epoch;
    int64_t cur_epoch = pos.epoch;
    while (!rc && (!a.c.stop_after || done < a.c.stop_after)) {
        const sl_text_batch_t *b;
        int64_t w0 = sl__now_ns();
        rc = sl_text_loader_next(l, &b);
        int64_t w = sl__now_ns() - w0;
        if (rc)
            break;
        if (sl__waits_add(&waits, w)) {
            sl_text_loader_release(l, b);
            rc = SL_ENOMEM;
            break;
        }
        done++;
        cur_epoch = b->epoch;
        if (a.c.digest)
            h = digest_batch(b, h);
        rows += b->n;
        toks += b->tokens;
        sl_text_loader_release(l, b);
        int64_t now = sl__now_ns();
        double secs = (double)(now - t0) / 1e9;
        if (a.c.duration > 0 && secs >= a.c.duration)
            break;
        if (show && now - last_draw > 100000000) {
            last_draw = now;
            fprintf(stderr, "\r%" PRId64 " batches, %.0f seq/s, %.0f tok/s  ",
                    done, (double)rows / secs, (double)toks / secs);
        }
    }
    double secs = (double)(sl__now_ns() - t0) / 1e9;
    if (show)
        fputc('\n', stderr);
    print_skips(l, &shown);
    if (rc == SL_EEND)
        rc = 0;
    if (rc)
        fprintf(stderr, "sluice %s: error: %s\n", argv[0],
                sl_text_loader_last_error(l));
    double cpu = sl__cpu_seconds_since(&ru0);
    sl_text_stats_t st;
    sl_text_stats_init(&st);
    sl_text_loader_stats(l, &st);
    sl_text_options_t used; /* the options in force, defaults resolved */
    sl_text_options_init(&used);
    sl_text_loader_options(l, &used);
    sl_text_loader_position(l, &pos);
    if (a.c.state_out &&
        sl__state_write(a.c.state_out, STATE_MAGIC, &pos, h, config))
        fprintf(stderr, "sluice %s: cannot write %s\n", argv[0], a.c.state_out);
    int seq = used.seq_len;
    double trate = secs > 0 ? (double)toks / secs : 0;
    sl__report_t r = {
        .noun = "sequences",
        .unit = "seq/s",
        .samples = rows,
        .batches = done,
        .epochs = done ? cur_epoch - first_epoch + 1 : 0,
        .seconds = secs,
        .cpu_seconds = cpu,
        .waits = &waits,
        .errors_skipped = st.errors_skipped,
        .bytes_read = st.bytes_read,
        .threads = used.decode_threads,
        .batch = used.batch_size,
        .out = "int32",
        .pos = pos,
        .digest = a.c.digest,
        .h = h,
        .rc = rc,
    };
    snprintf(r.rate_extra, sizeof r.rate_extra, ", %.0f tokens/s", trate);
    snprintf(r.json_rates, sizeof r.json_rates,
             ", \"tokens\": %" PRId64 ", \"tokens_per_s\": %.1f", toks, trate);
    snprintf(r.json_shape, sizeof r.json_shape,
             ", \"seq_len\": %d, \"task\": \"%s\"", seq,
             a.opt.task == SL_TEXT_LM ? "lm" : "mlm");
    sl__report_print(&r, !a.c.json || show, a.c.json);
    sl__waits_free(&waits);
    sl_text_loader_destroy(l);
    return rc ? 1 : 0;
}
