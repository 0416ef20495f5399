/* base/alloc: allocation shapes that modules kept writing out by hand.
 * Depends on nothing. */
#ifndef SL_ALLOC_H
#define SL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* One array of a group allocated together: `at` is the address of the
 * pointer member that receives it (&obj->field), `bytes` its size. */
typedef struct sl__part {
    void *at;
    size_t bytes;
} sl__part_t;

/* Allocates parts[0..n-1] as one zeroed block, each part aligned for any
 * type, and stores each part's address through its `at`. The block is
 * freed with free() of the first part's pointer. @return 0, or SL_ENOMEM
 * with every pointer set to NULL. */
int sl__parts_alloc(const sl__part_t *parts, int n);

/* Makes room for `want` elements of `size` bytes in the array whose
 * pointer is at `items` (&obj->array) and whose capacity is *cap: when
 * *cap < want, the capacity doubles (starting at `first`) until it holds
 * want, and the array is reallocated. @return 0, or SL_ENOMEM with the array
 * and *cap unchanged. The one growth rule of the library's arrays. */
int sl__array_reserve(void *items, size_t *cap, size_t want, size_t size,
                      size_t first);

/* Frees the strings v[0..n-1] and the array v itself; v may be NULL. */
void sl__strv_free(char **v, int64_t n);

#endif
