/* Grouping neighbouring records into one request: see coalesce.h. */
#include "exec/coalesce.h"

#include <stdlib.h>

/* Record a before record b: by object, offset, then need. */
static int before(const sl__crec_t *rec, int a, int b)
{
    uintptr_t oa = (uintptr_t)rec[a].obj, ob = (uintptr_t)rec[b].obj;
    if (oa != ob)
        return oa < ob;
    if (rec[a].off != rec[b].off)
        return rec[a].off < rec[b].off;
    return a < b;
}

static int singles(int n, int *order, int *start)
{
    for (int i = 0; i < n; i++)
        order[i] = start[i] = i;
    start[n] = n;
    return n;
}

int sl__coalesce_plan(const sl__crec_t *rec, int n, uint64_t max_bytes,
                      uint64_t max_gap, int *order, int *start)
{
    if (n <= 0) {
        start[0] = 0;
        return 0;
    }
    /* by object and offset (insertion sort: n is a reader's share) */
    int *sorted = malloc(sizeof *sorted * (size_t)n * 3);
    if (!sorted) {
        singles(n, order, start);
        return -1;
    }
    int *gfirst = sorted + n;    /* per group (sorted): where it starts */
    int *gneed = sorted + 2 * n; /* its first-needed record */
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && before(rec, i, sorted[j - 1])) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = i;
    }
    /* the groups, in sorted order */
    int ng = 0;
    uint64_t gstart = 0, gend = 0;
    for (int k = 0; k < n; k++) {
        const sl__crec_t *r = &rec[sorted[k]];
        int join = ng > 0 && r->obj == rec[sorted[gfirst[ng - 1]]].obj &&
                   r->off >= gend && r->off - gend <= max_gap &&
                   r->off + r->len - gstart <= max_bytes;
        if (!join) {
            gfirst[ng] = k;
            gneed[ng] = sorted[k];
            ng++;
            gstart = r->off;
        } else if (sorted[k] < gneed[ng - 1]) {
            gneed[ng - 1] = sorted[k];
        }
        gend = r->off + r->len;
    }
    /* the groups by need (insertion sort of group numbers) */
    int *gorder = malloc(sizeof *gorder * (size_t)ng);
    if (!gorder) {
        free(sorted);
        singles(n, order, start);
        return -1;
    }
    for (int g = 0; g < ng; g++) {
        int j = g;
        while (j > 0 && gneed[g] < gneed[gorder[j - 1]]) {
            gorder[j] = gorder[j - 1];
            j--;
        }
        gorder[j] = g;
    }
    int at = 0;
    for (int o = 0; o < ng; o++) {
        int g = gorder[o];
        int end = g + 1 < ng ? gfirst[g + 1] : n;
        start[o] = at;
        for (int k = gfirst[g]; k < end; k++)
            order[at++] = sorted[k];
    }
    start[ng] = n;
    free(gorder);
    free(sorted);
    return ng;
}
