/* Fuzz target: any bytes through sl_snapshot_parse, one telemetry line as a
 * file holds it. Nothing may crash or read past the bytes, and what parses
 * must be stable: json(parse(json(parse(x)))) == json(parse(x)). The seed
 * corpus is lines of a `sluice bench --telemetry` run and edge cases. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"
#include "sluice/telemetry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* sl_snapshot_json into a new buffer (a huge number takes hundreds of
 * digits under %f). */
static char *to_json(const sl_snapshot_t *s, int *n)
{
    *n = sl_snapshot_json(s, NULL, 0);
    char *b = malloc((size_t)*n + 1);
    if (!b)
        abort();
    if (sl_snapshot_json(s, b, (size_t)*n + 1) != *n)
        abort();
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl_snapshot_t a, b; /* ~1.5 KiB each */
    sl_snapshot_init(&a);
    sl_snapshot_init(&b);
    char err[256];
    if (sl_snapshot_parse((const char *)data, size, &a, err, sizeof err))
        return 0;
    int na, nb;
    char *ja = to_json(&a, &na);
    if (sl_snapshot_parse(ja, (size_t)na, &b, err, sizeof err)) {
        fprintf(stderr, "own output refused: %s\n%s\n", err, ja);
        abort();
    }
    char *jb = to_json(&b, &nb);
    if (na != nb || memcmp(ja, jb, (size_t)na)) {
        fprintf(stderr, "not stable:\n%s\n%s\n", ja, jb);
        abort();
    }
    free(ja);
    free(jb);
    return 0;
}
