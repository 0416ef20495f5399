/* `sluice tokenize`: the token ids of a whole text file, space-separated,
 * through the public tokenizer API (sluice/tokenizer.h). The file is read
 * whole, as bytes: a BOM and CRLF are text, as with Python's open(f,
 * encoding='utf-8', newline=''). --json times only the encoding (not the
 * file or vocabulary load). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli.h"
#include "sluice/tokenizer.h"
#include "text/bpe_internal.h" /* sl__bpe_read_file */

static void usage(void)
{
    fprintf(stderr,
            "usage: sluice tokenize --tokenizer gpt2 --vocab ENCODER.json "
            "--merges VOCAB.bpe FILE\n"
            "       sluice tokenize --tokenizer cl100k_base|r50k_base|"
            "p50k_base|o200k_base --vocab RANKS.tiktoken FILE\n"
            "       sluice tokenize --tokenizer wordpiece --vocab vocab.txt "
            "[--cased] FILE\n"
            "  --cased          wordpiece: keep case and accents (default: "
            "uncased,\n"
            "                   as bert-base-uncased; --uncased says so)\n"
            "  --allow-special  special tokens (<|endoftext|>...) in the text "
            "become their ids\n"
            "  --count          print only the number of tokens\n"
            "  --json           print {\"tokens\",\"bytes\",\"seconds\","
            "\"mb_s\"} (encoding time only)\n"
            "  --repeat N       encode N times (timing: the fastest)\n");
}

static int print_ids(const int32_t *ids, size_t nids)
{
    char buf[1 << 16];
    size_t n = 0;
    for (size_t i = 0; i < nids; i++) {
        if (n + 16 > sizeof buf) {
            if (fwrite(buf, 1, n, stdout) != n)
                return -1;
            n = 0;
        }
        char tmp[12];
        int k = 0;
        uint32_t v = (uint32_t)ids[i];
        if (ids[i] < 0) {
            buf[n++] = '-';
            v = (uint32_t)(-(int64_t)ids[i]);
        }
        do {
            tmp[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (k)
            buf[n++] = tmp[--k];
        if (i + 1 < nids)
            buf[n++] = ' ';
    }
    buf[n++] = '\n';
    return fwrite(buf, 1, n, stdout) == n ? 0 : -1;
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
    static const struct option opts[] = {
        {"tokenizer", required_argument, 0, 't'},
        {"vocab", required_argument, 0, 'v'},
        {"merges", required_argument, 0, 'm'},
        {"cased", no_argument, 0, 'C'},
        {"uncased", no_argument, 0, 'u'},
        {"allow-special", no_argument, 0, 's'},
        {"count", no_argument, 0, 'c'},
        {"json", no_argument, 0, 'j'},
        {"repeat", required_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    sl_tokenizer_options_t o;
    sl_tokenizer_options_init(&o);
    int count = 0, json = 0, repeat = 1, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:v:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            o.name = optarg;
            break;
        case 'v':
            o.vocab = optarg;
            break;
        case 'm':
            o.merges = optarg;
            break;
        case 'C':
            o.cased = 1;
            break;
        case 'u':
            o.cased = 0;
            break;
        case 's':
            o.allow_special = 1;
            break;
        case 'c':
            count = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'r':
            repeat = atoi(optarg);
            if (repeat < 1) {
                fprintf(stderr, "tokenize: --repeat must be >= 1\n");
                return 2;
            }
            break;
        default:
            usage();
            return c == 'h' ? 0 : 2;
        }
    }
    if (!o.name || !o.vocab || optind + 1 != argc) {
        usage();
        return 2;
    }
    const char *file = argv[optind];
    sl_tokenizer_t *tok = NULL;
    int rc = sl_tokenizer_create(&o, &tok);
    if (rc) {
        fprintf(stderr, "tokenize: %s\n", sl_tokenizer_last_error(NULL));
        return rc == SL_EUNSUPPORTED ? 2 : 1;
    }
    char err[512] = "", *text = NULL;
    size_t n = 0, nids = 0;
    int32_t *ids = NULL;
    double best = 0;
    rc = sl__bpe_read_file(file, &text, &n, err, sizeof err);
    if (!rc && (rc = encode(tok, text, n, repeat, &ids, &nids, &best)))
        snprintf(err, sizeof err, "%s",
                 rc == SL_ENOMEM ? "out of memory"
                                 : sl_tokenizer_last_error(tok));
    int status = 0;
    if (rc) {
        fprintf(stderr, "tokenize: %s: %s\n", file, err);
        status = 1;
    } else if (json) {
        printf("{\"tokens\": %zu, \"bytes\": %zu, \"seconds\": %.6f, "
               "\"mb_s\": %.3f}\n",
               nids, n, best, best > 0 ? (double)n / 1e6 / best : 0.0);
    } else if (count) {
        printf("%zu\n", nids);
    } else if (print_ids(ids, nids)) {
        fprintf(stderr, "tokenize: write error\n");
        status = 1;
    }
    free(ids);
    sl_tokenizer_destroy(tok);
    free(text);
    return status;
}
