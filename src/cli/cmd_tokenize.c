/* `sluice tokenize`: the token ids of a whole text file, space-separated,
 * through the public tokenizer API (sluice/tokenizer.h). The file is read
 * whole, as bytes: a BOM and CRLF are text, as with Python's open(f,
 * encoding='utf-8', newline=''). --json times only the encoding (not the
 * file or vocabulary load). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli.h"
#include "opts.h"
#include "sluice/tokenizer.h"

/* The input is read whole (a regular file: a FIFO is refused); larger
 * is a corpus for the loader, not for this command. */
#define TOKENIZE_MAX_BYTES ((size_t)1 << 30)

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
     "print {\"tokens\",\"bytes\",\"seconds\",\"mb_s\"} (encoding time only)"},
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
    "",
    {tokenize_opts},
    "one FILE",
    1,
    1};

/* The ids, space-separated, as one line. @return 0, or -1 (write error). */
static int print_ids(const int32_t *ids, size_t nids)
{
    for (size_t i = 0; i < nids; i++)
        printf(i ? " %" PRId32 : "%" PRId32, ids[i]);
    return putchar('\n') == EOF || fflush(stdout) ? -1 : 0;
}

/* Encodes text[0..n) into *ids (grown as needed), `repeat` times; *best
 * is the fastest encode in seconds. @return 0, or an SL_E* code. */
static int encode(sl_tokenizer_t *t, const char *text, size_t n, int repeat,
                  int32_t **ids, size_t *nids, double *best)
{
    size_t cap = n + 1; /* valid UTF-8: at most one id a byte */
    int rc = 0;
    for (int r = 0; !rc && r < repeat; r++) {
        int32_t *more = realloc(*ids, cap * sizeof **ids);
        if (!more)
            return SL_ENOMEM;
        *ids = more;
        int64_t t0 = sl__now_ns();
        rc = sl_tokenizer_encode(t, text, n, *ids, cap, nids);
        double sec = (double)(sl__now_ns() - t0) / 1e9;
        if (rc == SL_ERANGE) { /* invalid bytes: a U+FFFD each; again */
            cap = *nids;
            rc = 0;
            r--;
            continue;
        }
        if (r == 0 || sec < *best)
            *best = sec;
    }
    return rc;
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
    char err[512] = "", *text = NULL;
    size_t n = 0, nids = 0;
    int32_t *ids = NULL;
    double best = 0;
    /* The read's message names the file already; encode's does not. */
    rc = sl__read_small_file(file, TOKENIZE_MAX_BYTES, &text, &n, err,
                             sizeof err);
    if (!rc && (rc = encode(tok, text, n, repeat, &ids, &nids, &best)))
        snprintf(err, sizeof err, "%s: %s", file,
                 rc == SL_ENOMEM ? "out of memory"
                                 : sl_tokenizer_last_error(tok));
    int status = 0;
    if (rc) {
        sl__cli_error("tokenize", "%s", err);
        status = 1;
    } else if (json) {
        printf("{\"tokens\": %zu, \"bytes\": %zu, \"seconds\": %.6f, "
               "\"mb_s\": %.3f}\n",
               nids, n, best, best > 0 ? (double)n / 1e6 / best : 0.0);
    } else if (count) {
        printf("%zu\n", nids);
    } else if (print_ids(ids, nids)) {
        sl__cli_error("tokenize", "write error");
        status = 1;
    }
    free(ids);
    sl_tokenizer_destroy(tok);
    free(text);
    return status;
}
