/* text/bpe_gpt2: GPT-2's encoder.json + vocab.bpe, to ranks exactly as
 * tiktoken.load.data_gym_to_mergeable_bpe_ranks builds them: the 256 bytes
 * in GPT-2's byte-to-unicode order, then one rank per merge line, then a
 * check that encoder.json agrees (less <|endoftext|> / <|startoftext|>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"

/* data_gym: printable Latin-1 bytes stand for themselves, the 68 others are
 * U+0100.. in byte order. cp_to_byte[cp] for cp < 324, -1 if not used. */
static void data_gym_tables(int16_t cp_to_byte[324], uint8_t rank_to_byte[256])
{
    for (int i = 0; i < 324; i++)
        cp_to_byte[i] = -1;
    int r = 0, extra = 0;
    for (int b = 0; b < 256; b++)
        if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) ||
            (b >= 0xae && b <= 0xff)) {
            cp_to_byte[b] = (int16_t)b;
            rank_to_byte[r++] = (uint8_t)b;
        }
    for (int b = 0; b < 256; b++)
        if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) ||
              (b >= 0xae && b <= 0xff))) {
            cp_to_byte[256 + extra++] = (int16_t)b;
            rank_to_byte[r++] = (uint8_t)b;
        }
}

/* Decodes one UTF-8 code point at p[0..n) (strict). Returns its length or
 * 0 when invalid. */
static size_t utf8_cp(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t b = p[0];
    size_t len = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    if (len > n || sl__utf8_valid_prefix(p, len) != len)
        return 0;
    uint32_t c = len == 1   ? b
                 : len == 2 ? b & 0x1f
                 : len == 3 ? b & 0x0f
                            : b & 0x07;
    for (size_t i = 1; i < len; i++)
        c = c << 6 | (p[i] & 0x3f);
    *cp = c;
    return len;
}

/* data_gym string (UTF-8) -> bytes. -1 on a character outside the map. */
static int decode_data_gym(const int16_t *cp_to_byte, const uint8_t *s,
                           size_t n, uint8_t *out, size_t *outn)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_cp(s + i, n - i, &cp);
        if (!k || cp >= 324 || cp_to_byte[cp] < 0)
            return -1;
        out[o++] = (uint8_t)cp_to_byte[cp];
        i += k;
    }
    *outn = o;
    return 0;
}

static size_t line_of(const char *s, size_t off)
{
    size_t line = 1;
    for (size_t i = 0; i < off; i++)
        line += s[i] == '\n';
    return line;
}

static int parse_merges(struct sl__bpe *bpe, const int16_t *cp_to_byte,
                        const char *d, size_t n, const char *name, char *err,
                        size_t errlen)
{
    uint8_t buf[1024];
    size_t i = 0, line = 1;
    if (sl__utf8_valid_prefix((const uint8_t *)d, n) != n) {
        size_t off = sl__utf8_valid_prefix((const uint8_t *)d, n);
        return sl__fail(err, errlen, SL_ECORRUPT, "%s:%zu: invalid UTF-8", name,
                        line_of(d, off));
    }
    /* the first line is the "#version" header; tiktoken skips it unread */
    while (i < n && d[i] != '\n')
        i++;
    if (i >= n)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s:1: truncated: no merges after the header line",
                        name);
    i++;
    uint32_t rank = 256;
    while (i < n) {
        line++;
        size_t e = i;
        while (e < n && d[e] != '\n')
            e++;
        if (e >= n)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s:%zu: truncated: last line has no newline", name,
                            line);
        /* two fields separated by whitespace */
        size_t f[4], nf = 0;
        for (size_t p = i; p < e && nf <= 4;) {
            while (p < e && (d[p] == ' ' || d[p] == '\t' || d[p] == '\r'))
                p++;
            if (p >= e)
                break;
            size_t q = p;
            while (q < e && d[q] != ' ' && d[q] != '\t' && d[q] != '\r')
                q++;
            if (nf < 4) {
                f[nf] = p;
                f[nf + 1] = q;
            }
            nf += 2;
            p = q;
        }
        if (nf != 4)
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s:%zu: expected two tokens 'A B'", name, line);
        size_t l1 = f[1] - f[0], l2 = f[3] - f[2], o1, o2;
        if (l1 + l2 > sizeof buf ||
            decode_data_gym(cp_to_byte, (const uint8_t *)d + f[0], l1, buf,
                            &o1) ||
            decode_data_gym(cp_to_byte, (const uint8_t *)d + f[2], l2, buf + o1,
                            &o2))
            return sl__fail(err, errlen, SL_ECORRUPT,
                            "%s:%zu: character outside GPT-2's byte map", name,
                            line);
        if (sl__bpe_map_put(&bpe->map, buf, o1 + o2, rank++))
            return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", name);
        i = e + 1;
    }
    return 0;
}

/* encoder.json: one object of "string": integer. */
typedef struct jp {
    const char *d;
    size_t n, i;
    const char *name;
    char *err;
    size_t errlen;
} jp_t;

static int jp_fail(jp_t *j, const char *what)
{
    return sl__fail(j->err, j->errlen, SL_ECORRUPT, "%s:%zu: %s", j->name,
                    line_of(j->d, j->i < j->n ? j->i : j->n), what);
}

static void jp_ws(jp_t *j)
{
    while (j->i < j->n && (j->d[j->i] == ' ' || j->d[j->i] == '\t' ||
                           j->d[j->i] == '\n' || j->d[j->i] == '\r'))
        j->i++;
}

/* Skips white space, then consumes `c` if it comes next: 1, else 0. */
static int jp_eat(jp_t *j, char c)
{
    jp_ws(j);
    if (j->i >= j->n || j->d[j->i] != c)
        return 0;
    j->i++;
    return 1;
}

static int hex4(const char *s, uint32_t *v)
{
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int x = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (x < 0)
            return -1;
        *v = *v << 4 | (uint32_t)x;
    }
    return 0;
}

static size_t put_utf8(uint8_t *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (uint8_t)(0xc0 | c >> 6);
        o[1] = (uint8_t)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xe0 | c >> 12);
        o[1] = (uint8_t)(0x80 | (c >> 6 & 0x3f));
        o[2] = (uint8_t)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | c >> 18);
    o[1] = (uint8_t)(0x80 | (c >> 12 & 0x3f));
    o[2] = (uint8_t)(0x80 | (c >> 6 & 0x3f));
    o[3] = (uint8_t)(0x80 | (c & 0x3f));
    return 4;
}

/* Parses a JSON string at j->i (at the quote) into out (UTF-8). */
static int jp_string(jp_t *j, uint8_t *out, size_t cap, size_t *outn)
{
    size_t o = 0;
    if (j->i >= j->n || j->d[j->i] != '"')
        return jp_fail(j, "expected a string");
    j->i++;
    for (;;) {
        if (j->i >= j->n)
            return jp_fail(j, "truncated string");
        if (o + 8 > cap)
            return jp_fail(j, "string too long");
        uint8_t c = (uint8_t)j->d[j->i];
        if (c == '"') {
            j->i++;
            break;
        }
        if (c < 0x20)
            return jp_fail(j, "control character in string");
        if (c != '\\') {
            out[o++] = c;
            j->i++;
            continue;
        }
        if (j->i + 1 >= j->n)
            return jp_fail(j, "truncated string");
        /* The one-character escapes, and what each stands for. */
        static const char esc[] = "\"\\/bfnrt", val[] = "\"\\/\b\f\n\r\t";
        char e = j->d[j->i + 1];
        const char *k = e ? strchr(esc, e) : NULL;
        j->i += 2;
        if (k) {
            out[o++] = (uint8_t)val[k - esc];
            continue;
        }
        if (e != 'u')
            return jp_fail(j, "bad escape");
        uint32_t v, w;
        if (j->i + 4 > j->n || hex4(j->d + j->i, &v))
            return jp_fail(j, "bad \\u escape");
        j->i += 4;
        if (v >= 0xd800 && v < 0xdc00 && j->i + 6 <= j->n &&
            j->d[j->i] == '\\' && j->d[j->i + 1] == 'u' &&
            !hex4(j->d + j->i + 2, &w) && w >= 0xdc00 && w < 0xe000) {
            v = 0x10000 + ((v - 0xd800) << 10) + (w - 0xdc00);
            j->i += 6;
        }
        /* a lone surrogate cannot map to a GPT-2 byte anyway */
        if (v >= 0xd800 && v < 0xe000)
            return jp_fail(j, "lone surrogate in string");
        o += put_utf8(out + o, v);
    }
    *outn = o;
    return 0;
}

static int check_encoder(struct sl__bpe *bpe, const int16_t *cp_to_byte,
                         const char *d, size_t n, const char *name, char *err,
                         size_t errlen)
{
    jp_t j = {d, n, 0, name, err, errlen};
    uint8_t s[1024], b[1024];
    size_t count = 0;
    int rc;
    if (!jp_eat(&j, '{'))
        return jp_fail(&j, "expected '{'");
    if (jp_eat(&j, '}'))
        goto end;
    for (;;) {
        size_t sn = 0, bn = 0;
        jp_ws(&j);
        if ((rc = jp_string(&j, s, sizeof s, &sn)))
            return rc;
        if (!jp_eat(&j, ':'))
            return jp_fail(&j, "expected ':'");
        jp_ws(&j);
        size_t a = j.i;
        if (j.i < n && d[j.i] == '-')
            j.i++;
        while (j.i < n && d[j.i] >= '0' && d[j.i] <= '9')
            j.i++;
        if (j.i == a || j.i - a > 10 ||
            (j.i < n && (d[j.i] == '.' || d[j.i] == 'e' || d[j.i] == 'E')))
            return jp_fail(&j, "expected an integer id");
        long long v = strtoll(d + a, NULL, 10);
        if (decode_data_gym(cp_to_byte, s, sn, b, &bn))
            return jp_fail(&j, "token has a character outside GPT-2's "
                               "byte map");
        int special = (bn == 13 && !memcmp(b, "<|endoftext|>", 13)) ||
                      (bn == 15 && !memcmp(b, "<|startoftext|>", 15));
        if (!special) {
            uint32_t r = sl__bpe_map_get(&bpe->map, b, bn);
            if (r == SL__BPE_NORANK || (long long)r != v)
                return jp_fail(&j, "encoder does not match the merges file "
                                   "(id differs from merge rank)");
            count++;
        }
        if (jp_eat(&j, ','))
            continue;
        if (jp_eat(&j, '}'))
            break;
        return jp_fail(&j, j.i >= n ? "truncated: expected ',' or '}'"
                                    : "expected ',' or '}'");
    }
end:
    jp_ws(&j);
    if (j.i != n)
        return jp_fail(&j, "trailing data after the object");
    if (count != bpe->map.n)
        return sl__fail(err, errlen, SL_ECORRUPT,
                        "%s: encoder has %zu tokens, the merges make %u", name,
                        count, bpe->map.n);
    return 0;
}

int sl__bpe_load_gpt2_mem(const char *enc, size_t enc_n, const char *enc_name,
                          const char *merges, size_t merges_n,
                          const char *merges_name, sl__tok_t **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    int16_t cp_to_byte[324];
    uint8_t rank_to_byte[256];
    data_gym_tables(cp_to_byte, rank_to_byte);
    struct sl__bpe *bpe = calloc(1, sizeof *bpe);
    if (!bpe || sl__bpe_map_init(&bpe->map, merges_n / 8 + 512)) {
        free(bpe);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    int rc = 0;
    for (int r = 0; r < 256 && !rc; r++)
        rc = sl__bpe_map_put(&bpe->map, &rank_to_byte[r], 1, (uint32_t)r);
    if (rc)
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    if (!rc)
        rc = parse_merges(bpe, cp_to_byte, merges, merges_n, merges_name, err,
                          errlen);
    if (!rc)
        rc = check_encoder(bpe, cp_to_byte, enc, enc_n, enc_name, err, errlen);
    if (rc) {
        sl__bpe_free(bpe);
        return rc;
    }
    return sl__bpe_finish(bpe, "gpt2", merges_name, out, err, errlen);
}

int sl__bpe_load_gpt2(const char *encoder_json, const char *vocab_bpe,
                      sl__tok_t **out, char *err, size_t errlen)
{
    if (!encoder_json || !vocab_bpe || !out)
        return sl__fail(err, errlen, SL_EINVAL, "bpe: invalid argument");
    char *e = NULL, *m = NULL;
    size_t en, mn;
    int rc = sl__read_small_file(encoder_json, SL__VOCAB_MAX_BYTES, &e, &en,
                                 err, errlen);
    if (!rc)
        rc = sl__read_small_file(vocab_bpe, SL__VOCAB_MAX_BYTES, &m, &mn, err,
                                 errlen);
    if (!rc)
        rc = sl__bpe_load_gpt2_mem(e, en, encoder_json, m, mn, vocab_bpe, out,
                                   err, errlen);
    free(e);
    free(m);
    return rc;
}
