/* Fuzz target: any bytes as a --resume state file (core/statefile), with
 * the image CLI's magic. Nothing may crash or read past the bytes; what
 * parses has every field in range and is stable:
 * parse(format(parse(x))) == parse(x), and format(parse(x)) == x (the
 * format is strict: one spelling per state). The seed corpus: a state
 * `sluice run --state` writes, the text CLI's, and hostile edits of it
 * (INT64_MIN epoch, 19 digits, signs, upper-case hex, CRLF, NUL, junk). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/statefile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const magic = "sluice-state 2";
    sl__state_t a, b;
    char err[256];
    if (sl__state_parse((const char *)data, size, magic, &a, err, sizeof err))
        return 0;
    if (a.pos.epoch < 0 || a.pos.epoch > SL__STATE_MAX_NUM || a.pos.batch < 0 ||
        a.pos.batch > SL__STATE_MAX_NUM || a.samples < 0 ||
        a.samples > SL__STATE_MAX_NUM)
        abort();
    char text[SL__STATE_MAX_BYTES + 1];
    int n = sl__state_format(magic, &a, text, sizeof text);
    if (n < 0 || (size_t)n != size || memcmp(text, data, size))
        abort();
    if (sl__state_parse(text, (size_t)n, magic, &b, err, sizeof err) ||
        memcmp(&a, &b, sizeof a))
        abort();
    return 0;
}
