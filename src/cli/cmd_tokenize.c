/* `sluice tokenize`: the token ids of a whole text file, space-separated,
 * through the public tokenizer API (sluice/tokenizer.h). The file is
 * streamed as bytes, its ids those of the whole: a BOM and CRLF are text,
 * as with Python's open(f, encoding='utf-8', newline=''). --json times
 * the reading and encoding (not the vocabulary load). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli.h"
#include "opts.h"
#include "sluice/tokenizer.h"

typedef struct tok_args {
    sl_tokenizer_options_t o;
    int count, json, repeat;
} tok_args_t;

#define F(f) offsetof(tok_args_t, f)
static const sl__opt_t tokenize_opts[] = {
    {"tokenizer", 't', SL__OPT_STR, F(o.name), 0, 0, "T",
     "gpt2 | r50k_base | p50k_base | p50k_edit | cl100k_base | o200k_base "
     "| wordpiece",
     .need = 1},
    {"vocab", 'v', SL__OPT_STR, F(o.vocab), 0, 0, "FILE",
     "ENCODER.json | RANKS.tiktoken | vocab.txt", .need = 1},
    {"merges", 'm', SL__OPT_STR, F(o.merges), 0, 0, "FILE",
     "gpt2: VOCAB.bpe (without it, --vocab is a rank file)"},
    {"cased", 0, SL__OPT_FLAG, F(o.cased), 0, 0, NULL,
     "wordpiece: keep case and accents"},
    {"uncased", 0, SL__OPT_UNSET, F(o.cased), 0, 0, NULL,
     "wordpiece: lower-case and strip accents, as bert-base-uncased",
     "the default"},
    {"allow-special", 0, SL__OPT_FLAG, F(o.allow_special), 0, 0, NULL,
     "special tokens (<|endoftext|>...) in the text become their ids"},
    {"count", 0, SL__OPT_FLAG, F(count), 0, 0, NULL,
     "print only the number of tokens"},
    {"json", 0, SL__OPT_FLAG, F(json), 0, 0, NULL,
     "print {\"tokens\",\"bytes\",\"seconds\",\"mb_s\"} (reading and "
     "encoding; not the vocabulary load)"},
    {"repeat", 0, SL__OPT_INT, F(repeat), 1, INT_MAX, "N",
     "encode N times (timing: the fastest)", "1"},
    {NULL},
};

static const sl__opts_t tokenize_usage = {
    "--tokenizer gpt2 --vocab ENCODER.json --merges VOCAB.bpe FILE\n"
    "       sluice tokenize --tokenizer cl100k_base|r50k_base|p50k_base|"
    "o200k_base --vocab RANKS.tiktoken FILE\n"
    "       sluice tokenize --tokenizer wordpiece --vocab vocab.txt [--cased] "
    "FILE",
    "FILE is streamed: the ids of the whole file, in a few MB whatever its "
    "size\n        (a line with no whitespace is one piece, held whole)\n",
    {tokenize_opts},
    "one FILE",
    1,
    1};

/* Where the ids go: printed (space-separated, one line in all) or only
 * counted. */
typedef struct sink {
    int print;
    size_t nids;
} sink_t;

static int emit(const int32_t *ids, size_t n, void *ctx)
{
    sink_t *k = ctx;
    for (size_t i = 0; k->print && i < n; i++)
        printf(k->nids + i ? " %" PRId32 : "%" PRId32, ids[i]);
    k->nids += n;
    return k->print && ferror(stdout) ? SL_EIO : 0;
}

int sl__cmd_tokenize(int argc, char **argv)
{
    tok_args_t a = {.repeat = 1};
    sl_tokenizer_options_init(&a.o);
    int rc = sl__opts_parse(&tokenize_usage, &a, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    sl_tokenizer_options_t o = a.o;
    int count = a.count, json = a.json, repeat = a.repeat;
    const char *file = argv[optind];
    sl_tokenizer_t *tok = NULL;
    rc = sl_tokenizer_create(&o, &tok);
    if (rc) {
        sl__cli_error("tokenize", "%s", sl_tokenizer_last_error(NULL));
        return rc == SL_EUNSUPPORTED ? 2 : 1;
    }
    /* The file is streamed (sl_tokenizer_encode_file): its size does not
     * bound the memory, and the ids are those of the whole. --repeat runs
     * it again; the timing is of reading (from the page cache, after the
     * first) and encoding. */
    sink_t k = {.print = !count && !json};
    uint64_t n = 0;
    double best = 0;
    for (int r = 0; !rc && r < repeat; r++) {
        k.nids = 0;
        int64_t t0 = sl__now_ns();
        rc = sl_tokenizer_encode_file(tok, file, emit, &k, &n);
        double sec = (double)(sl__now_ns() - t0) / 1e9;
        if (r == 0 || sec < best)
            best = sec;
        k.print = 0; /* the ids once */
    }
    int status = 0;
    if (rc) {
        if (rc == SL_EIO && ferror(stdout))
            sl__cli_error("tokenize", "write error");
        else
            sl__cli_error("tokenize", "%s", sl_tokenizer_last_error(tok));
        status = 1;
    } else if (json) {
        printf("{\"tokens\": %zu, \"bytes\": %" PRIu64 ", \"seconds\": %.6f, "
               "\"mb_s\": %.3f}\n",
               k.nids, n, best, best > 0 ? (double)n / 1e6 / best : 0.0);
    } else if (count) {
        printf("%zu\n", k.nids);
    } else if (putchar('\n') == EOF || fflush(stdout)) {
        sl__cli_error("tokenize", "write error");
        status = 1;
    }
    sl_tokenizer_destroy(tok);
    return status;
}
