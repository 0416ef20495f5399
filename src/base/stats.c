/* Order statistics: see stats.h. */
#include "base/stats.h"

#include <math.h>
#include <stdlib.h>

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void sl__sort_i64(int64_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_i64);
}

void sl__sort_double(double *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_double);
}

size_t sl__rank_index(size_t n, double q)
{
    double k = ceil(q * (double)n) - 1;
    if (!(k > 0)) /* also NaN */
        return 0;
    return k >= (double)n ? n - 1 : (size_t)k;
}

int64_t sl__percentile_i64(const int64_t *v, size_t n, double q)
{
    return n ? v[sl__rank_index(n, q)] : 0;
}

double sl__percentile_double(const double *v, size_t n, double q)
{
    return n ? v[sl__rank_index(n, q)] : 0;
}
