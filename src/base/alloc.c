#include "base/alloc.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

static size_t round_up(size_t n)
{
    size_t a = alignof(max_align_t);
    return (n + a - 1) / a * a;
}

int sl__parts_alloc(const sl__part_t *parts, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += round_up(parts[i].bytes);
    char *block = calloc(total ? total : 1, 1);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        /* Through memcpy: the members are typed pointers, not void *. */
        void *p = block ? block + off : NULL;
        memcpy(parts[i].at, &p, sizeof p);
        off += round_up(parts[i].bytes);
    }
    return block ? 0 : SL_ENOMEM;
}

int sl__array_reserve(void *items, size_t *cap, size_t want, size_t size,
                      size_t first)
{
    if (want <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : first;
    while (n < want)
        n *= 2;
    void *old, *p;
    memcpy(&old, items, sizeof old);
    if (n > SIZE_MAX / size || !(p = realloc(old, n * size)))
        return SL_ENOMEM;
    memcpy(items, &p, sizeof p);
    *cap = n;
    return 0;
}

void sl__strv_free(char **v, int64_t n)
{
    for (int64_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}
