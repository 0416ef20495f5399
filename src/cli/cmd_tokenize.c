/* `sluice tokenize`: the token ids of a whole text file, space-separated.
 * The file is read whole, as bytes: a BOM and CRLF are text, as with
 * Python's open(f, encoding='utf-8', newline=''). --json times only the
 * encoding (not the file or vocabulary load). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "text/bpe_internal.h"
#include "text/tokenizer.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: sluice tokenize --tokenizer gpt2 --vocab ENCODER.json "
            "--merges VOCAB.bpe FILE\n"
            "       sluice tokenize --tokenizer cl100k_base|r50k_base|"
            "p50k_base|o200k_base --vocab RANKS.tiktoken FILE\n"
            "       sluice tokenize --tokenizer wordpiece --vocab vocab.txt "
            "[--uncased] FILE\n"
            "  --allow-special  special tokens (<|endoftext|>...) in the text "
            "become their ids\n"
            "  --count          print only the number of tokens\n"
            "  --json           print {\"tokens\",\"bytes\",\"seconds\","
            "\"mb_s\"} (encoding time only)\n"
            "  --repeat N       encode N times (timing: the fastest)\n");
}

static int print_ids(const sl__ids_t *ids)
{
    char buf[1 << 16];
    size_t n = 0;
    for (size_t i = 0; i < ids->n; i++) {
        if (n + 16 > sizeof buf) {
            if (fwrite(buf, 1, n, stdout) != n)
                return -1;
            n = 0;
        }
        char tmp[12];
        int k = 0;
        uint32_t v = (uint32_t)ids->v[i];
        if (ids->v[i] < 0) {
            buf[n++] = '-';
            v = (uint32_t)(-(int64_t)ids->v[i]);
        }
        do {
            tmp[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (k)
            buf[n++] = tmp[--k];
        if (i + 1 < ids->n)
            buf[n++] = ' ';
    }
    buf[n++] = '\n';
    return fwrite(buf, 1, n, stdout) == n ? 0 : -1;
}

int sl__cmd_tokenize(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tokenizer", required_argument, 0, 't'},
        {"vocab", required_argument, 0, 'v'},
        {"merges", required_argument, 0, 'm'},
        {"uncased", no_argument, 0, 'u'},
        {"allow-special", no_argument, 0, 's'},
        {"count", no_argument, 0, 'c'},
        {"json", no_argument, 0, 'j'},
        {"repeat", required_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *kind = NULL, *vocab = NULL, *merges = NULL;
    int uncased = 0, allow_special = 0, count = 0, json = 0, repeat = 1, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:v:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            kind = optarg;
            break;
        case 'v':
            vocab = optarg;
            break;
        case 'm':
            merges = optarg;
            break;
        case 'u':
            uncased = 1;
            break;
        case 's':
            allow_special = 1;
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
        case 'h':
            usage();
            return 0;
        default:
            usage();
            return 2;
        }
    }
    if (!kind || !vocab || optind + 1 != argc) {
        usage();
        return 2;
    }
    const char *file = argv[optind];
    char err[512] = "";
    sl__tok_t *tok = NULL;
    int rc;
    if (!strcmp(kind, "gpt2") && merges)
        rc = sl__bpe_load_gpt2(vocab, merges, &tok, err, sizeof err);
    else if (!strcmp(kind, "gpt2") || strstr(kind, "_base") ||
             !strcmp(kind, "p50k_edit"))
        rc = sl__bpe_load_tiktoken(vocab, kind, &tok, err, sizeof err);
    else if (!strcmp(kind, "wordpiece"))
        rc = sl__wordpiece_load(vocab, uncased, &tok, err, sizeof err);
    else {
        fprintf(stderr, "tokenize: unknown tokenizer '%s'\n", kind);
        return 2;
    }
    if (rc) {
        fprintf(stderr, "tokenize: %s\n", err);
        return 1;
    }
    char *text = NULL;
    size_t n = 0;
    rc = sl__bpe_read_file(file, &text, &n, err, sizeof err);
    sl__tok_scratch_t *s = sl__tok_scratch_create();
    sl__ids_t ids = {0};
    double best = 0;
    if (!rc && !s)
        rc = sl__fail(err, sizeof err, SL_ENOMEM, "out of memory");
    for (int r = 0; !rc && r < repeat; r++) {
        ids.n = 0;
        int64_t t0 = sl__now_ns();
        rc = sl__tok_encode(tok, text, n, allow_special, s, &ids, err,
                            sizeof err);
        double sec = (double)(sl__now_ns() - t0) / 1e9;
        if (r == 0 || sec < best)
            best = sec;
    }
    int status = 0;
    if (rc) {
        fprintf(stderr, "tokenize: %s: %s\n", file, err);
        status = 1;
    } else if (json) {
        printf("{\"tokens\": %zu, \"bytes\": %zu, \"seconds\": %.6f, "
               "\"mb_s\": %.3f}\n",
               ids.n, n, best, best > 0 ? (double)n / 1e6 / best : 0.0);
    } else if (count) {
        printf("%zu\n", ids.n);
    } else if (print_ids(&ids)) {
        fprintf(stderr, "tokenize: write error\n");
        status = 1;
    }
    sl__ids_free(&ids);
    sl__tok_scratch_destroy(s);
    sl__tok_free(tok);
    free(text);
    return status;
}
