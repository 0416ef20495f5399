/* data/brace: shard lists as WebDataset users write them, expanded the way
 * the `braceexpand` package (which webdataset uses) does for the forms
 * that matter: "shard-{000000..000099}.tar" (an integer range, inclusive,
 * either direction; zero-padded to the wider bound when a bound is written
 * with leading zeros), "{train,val}/x.tar" (a list), several groups (left
 * to right, the leftmost varying slowest) and groups nested in a list
 * ("{a,b{1..2}}"). A brace pair that is neither a list nor a range stays as
 * it is ("{x}"), as in braceexpand. No escapes. Depends on base. */
#ifndef SL_BRACE_H
#define SL_BRACE_H

#include <stddef.h>

#define SL__BRACE_MAX_NAMES (1 << 20) /* names one pattern may expand to */

/* Expands pattern into *out (a NULL-terminated vector of *n strings, freed
 * with sl__strv_free(*out, *n)). A pattern without braces gives itself.
 * @return 0; SL_ERANGE when it would give more than SL__BRACE_MAX_NAMES
 *         names or a range bound does not fit; SL_ENOMEM; message in err. */
int sl__brace_expand(const char *pattern, char ***out, int *n, char *err,
                     size_t errlen);

/* 1 if pattern holds a '{' (a shard list rather than one path). */
int sl__brace_has(const char *pattern);

#endif
