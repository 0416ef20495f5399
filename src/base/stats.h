/* base/stats: order statistics of samples (wait times, latencies). The one
 * percentile rule of the tree. Depends on nothing. */
#ifndef SL_BASE_STATS_H
#define SL_BASE_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Sorts ascending, in place. */
void sl__sort_i64(int64_t *v, size_t n);
void sl__sort_double(double *v, size_t n);

/* The q-quantile (0 < q <= 1) by nearest rank: the smallest sample with at
 * least q * n samples at or below it, v[ceil(q * n) - 1] (clamped to the
 * array). v must be sorted. Returns 0 for n == 0. */
size_t sl__rank_index(size_t n, double q);
int64_t sl__percentile_i64(const int64_t *v, size_t n, double q);
double sl__percentile_double(const double *v, size_t n, double q);

#endif
