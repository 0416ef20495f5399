/* plot: the one smoothing rule of every rate and share the plot draws (see
 * SL__PLOT_WINDOW_S in plot_internal.h): a trailing window of rows, kept
 * in a ring with running sums, and a dt-weighted mean over it. O(1)
 * amortized per row, memory bounded by SL__PLOT_WINDOW_ROWS. */
#include <math.h>
#include <string.h>

#include "telemetry/plot_internal.h"

static double val(double x)
{
    return isfinite(x) && x > 0 ? x : 0;
}

static int enough(const sl__plot_smooth_t *s, double span, double batches)
{
    if (span >= SL__PLOT_WINDOW_MAX_S)
        return 1;
    return span >= SL__PLOT_WINDOW_S &&
           (!s->batch_rule || batches >= SL__PLOT_WINDOW_BATCHES);
}

/* Adds (sign 1) or removes (sign -1) row r's part of the sums. */
static void account(sl__plot_smooth_t *s, size_t r, double sign)
{
    double dt = s->row[r].dt;
    s->span += sign * val(dt);
    s->batches += sign * val(s->row[r].nb);
    for (int c = 0; c < SL__PC_NRATES; c++) {
        double v = s->row[r].v[c];
        if (!isfinite(v))
            continue;
        s->vs[c] += sign * v;
        s->cnt[c] += sign;
        if (isfinite(dt) && dt > 0) {
            s->vw[c] += sign * v * dt;
            s->w[c] += sign * dt;
        }
    }
}

static void drop_first(sl__plot_smooth_t *s)
{
    account(s, s->first, -1);
    s->first = (s->first + 1) % SL__PLOT_WINDOW_ROWS;
    s->n--;
}

void sl__plot_smooth_init(sl__plot_smooth_t *s)
{
    memset(s, 0, sizeof *s);
}

void sl__plot_smooth_add(sl__plot_smooth_t *s, double dt, double nb,
                         const double v[SL__PC_NRATES],
                         double out[SL__PC_NRATES])
{
    if (s->n == SL__PLOT_WINDOW_ROWS)
        drop_first(s);
    size_t r = (s->first + s->n) % SL__PLOT_WINDOW_ROWS;
    s->row[r].dt = dt;
    s->row[r].nb = nb;
    memcpy(s->row[r].v, v, sizeof s->row[r].v);
    s->n++;
    s->batch_rule |= isfinite(nb);
    account(s, r, 1);
    /* The latest start that is still enough (a window that is enough stays
     * so with rows added at its start). */
    while (s->n > 1) {
        size_t f = s->first;
        if (!enough(s, s->span - val(s->row[f].dt),
                    s->batches - val(s->row[f].nb)))
            break;
        drop_first(s);
    }
    /* Rates and shares are >= 0: a running sum's rounding must not make a
     * flat 0 read as -0.00. */
    for (int c = 0; c < SL__PC_NRATES; c++) {
        double m = s->w[c] > 1e-9    ? s->vw[c] / s->w[c]
                   : s->cnt[c] > 0.5 ? s->vs[c] / s->cnt[c]
                                     : NAN;
        out[c] = m < 0 ? 0 : m;
    }
}
