/* Fuzz target: the text sources' parsers (text/textsrc). Bytes that start
 * with the shard magic are opened as a text shard and every record read and
 * validated as UTF-8, as the loader does; any other bytes are a JSON Lines
 * file: every line goes through the "text" field parser, whose output must
 * be valid UTF-8, and through the UTF-8 validator, which must agree with an
 * independent decoder (code point ranges, not byte tables). Nothing may
 * crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "data/shard.h"
#include "data/shard_format.h"
#include "text/textsrc.h"

#define FUZZ_MAX_RECORD (64u << 20)

/* Offset of the first invalid byte by decoding code points. */
static size_t utf8_ref(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        size_t k = c < 0x80             ? 0
                   : (c & 0xe0) == 0xc0 ? 1
                   : (c & 0xf0) == 0xe0 ? 2
                   : (c & 0xf8) == 0xf0 ? 3
                                        : 9;
        if (k == 9)
            return i;
        if (k == 0) {
            i++;
            continue;
        }
        uint32_t cp = c & (0x3f >> k);
        size_t j = 1;
        for (; j <= k && i + j < n && (p[i + j] & 0xc0) == 0x80; j++)
            cp = (cp << 6) | (p[i + j] & 0x3f);
        if (j <= k)
            return i; /* truncated */
        static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += k + 1;
    }
    return n;
}

/* Python stops at the first byte that cannot start or continue a valid
 * sequence, which can be after the lead byte: compare only where each
 * says the text is valid up to, and that both agree on validity. */
static void check_utf8(const uint8_t *p, size_t n)
{
    size_t a = sl__utf8_valid_prefix(p, n), b = utf8_ref(p, n);
    if (a != b)
        abort();
}

static void shard(const uint8_t *data, size_t size)
{
    sl__shard_t *s = NULL;
    char err[512];
    if (sl__shard_open_mem(data, size, &s, err, sizeof err))
        return;
    sl__bytes_t out = {0}, scratch = {0};
    for (uint64_t i = 0; i < sl__shard_count(s); i++) {
        if (sl__shard_entry(s, i)->raw_size > FUZZ_MAX_RECORD)
            continue;
        if (!sl__shard_read(s, i, &out, &scratch, NULL, err, sizeof err))
            check_utf8(out.p, out.n);
    }
    sl__bytes_free(&out);
    sl__bytes_free(&scratch);
    sl__shard_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= SL_SHARD_MAGIC_LEN &&
        !memcmp(data, SL_SHARD_MAGIC, SL_SHARD_MAGIC_LEN)) {
        shard(data, size);
        return 0;
    }
    sl__bytes_t buf = {0};
    char err[512];
    size_t off = 0;
    while (off < size) {
        const uint8_t *nl = memchr(data + off, '\n', size - off);
        size_t end = nl ? (size_t)(nl - data) : size;
        check_utf8(data + off, end - off);
        if (!sl__textsrc_parse_jsonl((const char *)data + off, end - off,
                                     "fuzz:1", &buf, err, sizeof err) &&
            sl__utf8_valid_prefix(buf.p, buf.n) != buf.n)
            abort(); /* the parser must hand out valid UTF-8 only */
        off = end + 1;
    }
    sl__bytes_free(&buf);
    return 0;
}
