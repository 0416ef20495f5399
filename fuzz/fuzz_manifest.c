/* Fuzz target: any bytes as the text files of a pack folder besides its
 * shards: sluice-manifest.txt (sl__manifest_parse) and classes.txt
 * (sl__classes_parse). A manifest that parses is formatted and parsed
 * again and must come back the same. Nothing may crash, leak or read out
 * of bounds. Seeds: fuzz/corpus/fuzz_manifest/ (manifests of real packs,
 * damaged copies, classes.txt files). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "data/manifest.h"

static void round_trip(const sl__manifest_t *m)
{
    char *text;
    size_t n;
    if (sl__manifest_format(m, &text, &n))
        return;
    sl__manifest_t again;
    char err[512];
    if (sl__manifest_parse(text, n, "again", &again, err, sizeof err))
        abort(); /* what the writer writes, the reader reads */
    if (again.records != m->records || again.classes != m->classes ||
        again.classes_sum != m->classes_sum || again.nshards != m->nshards)
        abort();
    for (int i = 0; i < m->nshards; i++)
        if (strcmp(again.shards[i].name, m->shards[i].name) ||
            again.shards[i].bytes != m->shards[i].bytes ||
            again.shards[i].records != m->shards[i].records ||
            again.shards[i].digest != m->shards[i].digest)
            abort();
    sl__manifest_free(&again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exactly sized copy, so ASan sees any read past the end. */
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    sl__manifest_t m;
    char err[512];
    if (sl__manifest_parse(copy, size, "fuzz", &m, err, sizeof err) == 0) {
        round_trip(&m);
        sl__manifest_free(&m);
    }
    char **names;
    int n;
    if (sl__classes_parse(copy, size, "fuzz", &names, &n, err, sizeof err) == 0)
        sl__strv_free(names, n);
    free(copy);
    return 0;
}
