/* exec/coalesce: which records to fetch together. Given the records a
 * reader is about to read, in the order they are needed (each an object,
 * an offset and a length), it groups those of one object whose byte ranges
 * follow each other, with at most max_gap bytes between neighbours and at
 * most max_bytes from the first byte of a group to its last, so that each
 * group is one ranged request (docs/DESIGN.md, "Coalesced reads"). A pure
 * function: no I/O, no state. Depends on nothing. */
#ifndef SL_COALESCE_H
#define SL_COALESCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__crec {
    const void *obj; /* the object (file, URL) the record is in */
    uint64_t off;
    uint64_t len; /* > 0 */
} sl__crec_t;

/* The groups of rec[0..n): order[0..n) lists the record indices group by
 * group, groups in the order of the first-needed record in each (the
 * lowest index), each group's records by offset; start[g] is where group g
 * begins in order (start[ngroups] = n; start has room for n + 1).
 * Records of one object are merged when the next does not overlap the
 * group (off >= the group's end), the gap is at most max_gap and the group
 * then spans at most max_bytes; a record that fits nowhere is a group of
 * its own (so max_bytes 0 makes every record its own group, in need
 * order). @return ngroups (0 for n 0), or -1 when out of memory (order and
 * start are then one group per record, in need order). */
int sl__coalesce_plan(const sl__crec_t *rec, int n, uint64_t max_bytes,
                      uint64_t max_gap, int *order, int *start);

#endif
