/* text/bpe_load: tiktoken rank files, each encoding's pattern and special
 * tokens, and the finished tokenizer (PCRE2 + JIT). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"

/* The patterns, verbatim from tiktoken_ext/openai_public.py (tiktoken
 * 0.14). tiktoken runs them with Rust's fancy-regex, where $ is the end of
 * the text only, so we compile with PCRE2_DOLLAR_ENDONLY; its \p{..} and \s
 * are of the Unicode tables tiktoken was built with, so
 * sl__bpe_pattern_for_pcre2() (bpe_pattern.c) spells them out from
 * bpe_uclass.h instead of leaving them to PCRE2's own tables. */
static const char PAT_R50K[] =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|"
    "\\s+(?!\\S)|\\s";
static const char PAT_CL100K[] =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| "
    "?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";
static const char PAT_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}"
    "\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}"
    "\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
    "\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|"
    "\\s+";

typedef struct enc_def {
    const char *name;
    const char *pat;
    const char *sp[6];
    int32_t sp_id[6];
} enc_def_t;

static const enc_def_t ENCODINGS[] = {
    {"gpt2", PAT_R50K, {"<|endoftext|>"}, {50256}},
    {"r50k_base", PAT_R50K, {"<|endoftext|>"}, {50256}},
    {"p50k_base", PAT_R50K, {"<|endoftext|>"}, {50256}},
    {"p50k_edit",
     PAT_R50K,
     {"<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"},
     {50256, 50281, 50282, 50283}},
    {"cl100k_base",
     PAT_CL100K,
     {"<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
      "<|endofprompt|>"},
     {100257, 100258, 100259, 100260, 100276}},
    {"o200k_base",
     PAT_O200K,
     {"<|endoftext|>", "<|endofprompt|>"},
     {199999, 200018}},
};

static const enc_def_t *find_encoding(const char *encoding)
{
    for (size_t i = 0; i < sizeof ENCODINGS / sizeof ENCODINGS[0]; i++)
        if (!strcmp(ENCODINGS[i].name, encoding))
            return &ENCODINGS[i];
    return NULL;
}

int sl__bpe_encoding_known(const char *encoding)
{
    return encoding && find_encoding(encoding) != NULL;
}

void sl__bpe_free(struct sl__bpe *bpe)
{
    if (!bpe)
        return;
    sl__bpe_map_free(&bpe->map);
    free(bpe->pair2);
    for (size_t i = 0; i < bpe->nsp; i++)
        free(bpe->sp[i].s);
    free(bpe->sp);
    pcre2_code_free((pcre2_code *)bpe->re);
    free(bpe);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int sl__bpe_finish(struct sl__bpe *bpe, const char *encoding, const char *name,
                   sl__tok_t **out, char *err, size_t errlen)
{
    int rc;
    const enc_def_t *def = find_encoding(encoding);
    if (!def) {
        rc = sl__fail(err, errlen, SL_EUNSUPPORTED,
                      "%s: unknown encoding '%s' (gpt2, r50k_base, p50k_base, "
                      "p50k_edit, cl100k_base, o200k_base)",
                      name, encoding);
        goto fail;
    }
    snprintf(bpe->name, sizeof bpe->name, "%s", def->name);
    sl__bpe_map_t *m = &bpe->map;

    /* ids must be distinct (tiktoken's CoreBPE refuses duplicate ranks):
     * checked on a sorted copy, memory as the token count, not the
     * largest rank */
    uint32_t *sorted = malloc((m->n ? m->n : 1) * sizeof *sorted);
    if (!sorted) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
        goto fail;
    }
    memcpy(sorted, m->rank, m->n * sizeof *sorted);
    qsort(sorted, m->n, sizeof *sorted, cmp_u32);
    for (uint32_t e = 1; e < m->n; e++)
        if (sorted[e] == sorted[e - 1]) {
            rc =
                sl__fail(err, errlen, SL_ECORRUPT,
                         "%s: rank %u is given to two tokens", name, sorted[e]);
            free(sorted);
            goto fail;
        }
    bpe->n_vocab = m->n ? (size_t)sorted[m->n - 1] + 1 : 0;
    free(sorted);

    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        bpe->byte_rank[b] = sl__bpe_map_get(m, &c, 1);
    }
    bpe->pair2 = malloc(65536 * sizeof *bpe->pair2);
    if (!bpe->pair2) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
        goto fail;
    }
    for (size_t i = 0; i < 65536; i++)
        bpe->pair2[i] = SL__BPE_NORANK;
    for (uint32_t e = 0; e < m->n; e++)
        if (m->len[e] == 2) {
            const uint8_t *p = m->arena + m->off[e];
            bpe->pair2[p[0] << 8 | p[1]] = m->rank[e];
        }

    for (size_t i = 0; i < 6 && def->sp[i]; i++)
        bpe->nsp++;
    bpe->sp = calloc(bpe->nsp ? bpe->nsp : 1, sizeof *bpe->sp);
    if (!bpe->sp) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
        goto fail;
    }
    for (size_t i = 0; i < bpe->nsp; i++) {
        bpe->sp[i].s = strdup(def->sp[i]);
        if (!bpe->sp[i].s) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
            goto fail;
        }
        bpe->sp[i].n = strlen(def->sp[i]);
        bpe->sp[i].id = def->sp_id[i];
        bpe->sp_first[(uint8_t)def->sp[i][0]] = 1;
        if ((size_t)def->sp_id[i] + 1 > bpe->n_vocab)
            bpe->n_vocab = (size_t)def->sp_id[i] + 1;
    }

    char *pat;
    rc = sl__bpe_pattern_for_pcre2(def->pat, &pat);
    if (rc) {
        rc = sl__fail(err, errlen, rc, "%s: pattern of %s: %s", name, encoding,
                      rc == SL_ENOMEM ? "out of memory"
                                      : "a class bpe_uclass.h lacks");
        goto fail;
    }
    int ec;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile(
        (PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
        PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_UTF_CHECK, &ec,
        &eoff, NULL);
    free(pat);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        rc = sl__fail(err, errlen, SL_EUNSUPPORTED,
                      "%s: pattern of %s does not compile at %zu: %s", name,
                      encoding, (size_t)eoff, (const char *)msg);
        goto fail;
    }
    bpe->re = re;
    /* both modes: partial-hard matching encodes text that goes on (bpe.c) */
    bpe->jit =
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;

    sl__tok_t *t = calloc(1, sizeof *t);
    if (!t) {
        rc = sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
        goto fail;
    }
    t->kind = SL__TOK_BPE;
    t->bpe = bpe;
    *out = t;
    return 0;
fail:
    sl__bpe_free(bpe);
    return rc;
}

/* base64 (standard alphabet, '=' padding) as Python's b64decode in its
 * default non-strict mode would accept from a rank file's token field; we
 * are strict: any other character or bad padding is an error. */
static int b64_decode(const char *s, size_t n, uint8_t *out, size_t *outn)
{
    static int8_t T[256];
    static int init;
    if (!init) {
        memset(T, -1, sizeof T);
        const char *a =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int i = 0; i < 64; i++)
            T[(uint8_t)a[i]] = (int8_t)i;
        init = 1;
    }
    if (n % 4)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int pad = 0;
        uint32_t v = 0;
        for (int j = 0; j < 4; j++) {
            char c = s[i + j];
            if (c == '=' && i + 4 == n && j >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            if (pad || T[(uint8_t)c] < 0)
                return -1;
            v = v << 6 | (uint32_t)T[(uint8_t)c];
        }
        out[o++] = (uint8_t)(v >> 16);
        if (pad < 2)
            out[o++] = (uint8_t)(v >> 8);
        if (pad < 1)
            out[o++] = (uint8_t)v;
    }
    *outn = o;
    return 0;
}

/* The end of the run of d[i..e) whose bytes are in `set` (in = 1) or not
 * in it (in = 0); a NUL byte is never in the set. */
static size_t span(const char *d, size_t i, size_t e, const char *set, int in)
{
    while (i < e && (d[i] && strchr(set, d[i])) == in)
        i++;
    return i;
}

/* A rank file gives each token its rank, 0 .. tokens - 1 in tiktoken's
 * files; the vocabulary is sized by the largest, so a rank far above the
 * file's lines is refused (a 16-byte file could size it at 2^31). The
 * slack leaves room for gaps. */
#define RANK_LIMIT(lines) (2 * (unsigned long long)(lines) + 1024)

int sl__bpe_load_tiktoken_mem(const char *data, size_t n, const char *name,
                              const char *encoding, sl__tok_t **out, char *err,
                              size_t errlen)
{
    *out = NULL;
    struct sl__bpe *bpe = calloc(1, sizeof *bpe);
    if (!bpe || sl__bpe_map_init(&bpe->map, n / 12 + 16)) {
        free(bpe);
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
    }
    uint8_t tok[768];
    size_t line = 0, i = 0, lines = n && data[n - 1] != '\n';
    for (const char *q = data; (q = memchr(q, '\n', n - (size_t)(q - data)));
         q++)
        lines++;
    int rc;
    while (i < n) {
        line++;
        size_t e = span(data, i, n, "\n\r", 0);
        /* fields: token, rank */
        size_t a = span(data, i, e, " \t", 1);
        if (a < e) {
            size_t b = span(data, a, e, " \t", 0);
            size_t c = span(data, b, e, " \t", 1);
            size_t d = span(data, c, e, "0123456789", 1);
            size_t f = span(data, d, e, " \t", 1);
            if (c == b || d == c || f != e || d - c > 10) {
                rc =
                    sl__fail(err, errlen, SL_ECORRUPT,
                             "%s:%zu: expected 'BASE64TOKEN RANK'", name, line);
                goto fail;
            }
            unsigned long long r = strtoull(data + c, NULL, 10);
            size_t tn;
            if (r >= INT32_MAX || r >= RANK_LIMIT(lines)) {
                rc = sl__fail(err, errlen, SL_ECORRUPT,
                              "%s:%zu: rank %llu out of range (ranks are below "
                              "2 x lines + 1024: %llu in this file)",
                              name, line, r,
                              RANK_LIMIT(lines) < INT32_MAX ? RANK_LIMIT(lines)
                                                            : INT32_MAX);
                goto fail;
            }
            if (b - a > 1000 || b64_decode(data + a, b - a, tok, &tn)) {
                rc = sl__fail(err, errlen, SL_ECORRUPT,
                              "%s:%zu: bad base64 token", name, line);
                goto fail;
            }
            if (tn == 0) {
                rc = sl__fail(err, errlen, SL_ECORRUPT, "%s:%zu: empty token",
                              name, line);
                goto fail;
            }
            if (sl__bpe_map_put(&bpe->map, tok, tn, (uint32_t)r)) {
                rc =
                    sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
                goto fail;
            }
        }
        i = e;
        if (i < n && data[i] == '\r' && i + 1 < n && data[i + 1] == '\n')
            i++;
        if (i < n)
            i++;
    }
    if (bpe->map.n == 0) {
        rc = sl__fail(err, errlen, SL_ECORRUPT, "%s: no tokens", name);
        goto fail;
    }
    return sl__bpe_finish(bpe, encoding, name, out, err, errlen);
fail:
    sl__bpe_free(bpe);
    return rc;
}

int sl__bpe_load_tiktoken(const char *ranks_path, const char *encoding,
                          sl__tok_t **out, char *err, size_t errlen)
{
    char *data;
    size_t n;
    if (!ranks_path || !encoding || !out)
        return sl__fail(err, errlen, SL_EINVAL, "bpe: invalid argument");
    int rc = sl__read_small_file(ranks_path, SL__VOCAB_MAX_BYTES, &data, &n,
                                 err, errlen);
    if (rc)
        return rc;
    rc = sl__bpe_load_tiktoken_mem(data, n, ranks_path, encoding, out, err,
                                   errlen);
    free(data);
    return rc;
}

int32_t sl__bpe_id(const struct sl__bpe *bpe, const char *token)
{
    size_t n = strlen(token);
    for (size_t i = 0; i < bpe->nsp; i++)
        if (bpe->sp[i].n == n && !memcmp(bpe->sp[i].s, token, n))
            return bpe->sp[i].id;
    uint32_t r = sl__bpe_map_get(&bpe->map, (const uint8_t *)token, n);
    return r == SL__BPE_NORANK ? -1 : (int32_t)r;
}

size_t sl__bpe_size(const struct sl__bpe *bpe)
{
    return bpe->n_vocab;
}
