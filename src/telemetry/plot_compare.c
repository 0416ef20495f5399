/* plot: the gnuplot script that draws runs compared (plot.h) — each run's
 * table (plot_table.c) over the others in four stacked panels over t, a
 * colour per run: samples/s delivered, stall, the GPU share (where a run
 * has a stage), and CPU (sluice's solid, the other processes' dashed: a
 * hog shows there). Rates are the smoothed columns, as in one run's
 * plot. */
#include <math.h>
#include <stdio.h>

#include "telemetry/plot_internal.h"

/* Okabe-Ito, as plot_script.c's: readable for colour-blind readers. */
static const char *const colors[SL__PLOT_MAX_RUNS] = {
    "#0072B2", "#D55E00", "#009E73", "#CC79A7",
    "#E69F00", "#56B4E9", "#000000", "#F0E442"};

typedef struct {
    const char *ylabel;
    int percent; /* 0..1 shares, drawn as % */
    int col;     /* SL__PC_*: the series each run draws */
    int col2;    /* a second series each run draws dashed (-1: none) */
    const char *style;
} cpanel_t;

static const cpanel_t cpanels[] = {
    {"samples/s delivered (1 s mean)", 0, SL__PC_SMOOTHED(SL__PC_SPS), -1,
     "lines lw 1.5"},
    {"stall (%)", 1, SL__PC_SMOOTHED(SL__PC_STALL), -1, "lines lw 1.2"},
    {"GPU share (%)", 1, SL__PC_GPU_SHARE, -1, "steps lw 1.5"},
    {"CPU (%), others dashed", 1, SL__PC_SMOOTHED(SL__PC_CPU_SELF),
     SL__PC_SMOOTHED(SL__PC_CPU_OTHER), "lines lw 1.5"},
};
#define NCPANELS (int)(sizeof cpanels / sizeof cpanels[0])
#define SHARE_PANEL 2 /* drawn only where a run has a GPU stage */

/* The most any run's column c reached (-INFINITY: no value anywhere). */
static double top_of(const sl__plot_table_t *tb, int n, int c)
{
    double top = -INFINITY;
    for (int i = 0; i < n; i++)
        if (c >= 0 && tb[i].max[c] > top)
            top = tb[i].max[c];
    return top;
}

/* One run's series: data's column c (as % where pct), its legend. */
static void series(FILE *f, int *any, const char *data, int c, int pct,
                   const char *style, const char *color, const char *title)
{
    fprintf(f, "%s", *any ? ", \\\n     " : "plot ");
    sl__plot_put_quoted(f, data);
    if (pct)
        fprintf(f, " using 1:($%d*100)", c + 1);
    else
        fprintf(f, " using 1:%d", c + 1);
    fprintf(f, " with %s lc rgb '%s' title ", style, color);
    sl__plot_put_quoted(f, title);
    *any = 1;
}

void sl__plot_compare_script_write(FILE *f, const char *const *data,
                                   const char *const *labels,
                                   const sl__plot_table_t *tb, int n,
                                   const char *out, int png, const char *title)
{
    double tmin = INFINITY, tmax = -INFINITY, x0, x1;
    for (int i = 0; i < n; i++) {
        tmin = fmin(tmin, tb[i].st.tmin);
        tmax = fmax(tmax, tb[i].st.tmax);
    }
    sl__plot_xrange(tmin, tmax, &x0, &x1);
    int show[NCPANELS], np = 0;
    for (int p = 0; p < NCPANELS; p++)
        if (p != SHARE_PANEL || isfinite(top_of(tb, n, cpanels[p].col)))
            show[np++] = p;
    sl__plot_begin(f, out, png, 230 * np, np, title, 0.72, 0.06, 0.94, 0.018,
                   x0, x1);
    for (int k = 0; k < np; k++) {
        const cpanel_t *pn = &cpanels[show[k]];
        double top = fmax(top_of(tb, n, pn->col), top_of(tb, n, pn->col2));
        sl__plot_panel(f, k, pn->ylabel, k == np - 1, top, pn->percent, 0);
        int any = 0;
        for (int i = 0; i < n; i++) {
            char t[256];
            const char *c = colors[i % SL__PLOT_MAX_RUNS];
            if (isfinite(tb[i].max[pn->col])) {
                if (pn->col == SL__PC_SMOOTHED(SL__PC_SPS) &&
                    tb[i].st.seconds > 0)
                    snprintf(t, sizeof t, "%s (mean %.0f/s)", labels[i],
                             tb[i].st.samples / tb[i].st.seconds);
                else
                    snprintf(t, sizeof t, "%s", labels[i]);
                series(f, &any, data[i], pn->col, pn->percent, pn->style, c, t);
            }
            if (pn->col2 >= 0 && isfinite(tb[i].max[pn->col2])) {
                snprintf(t, sizeof t, "%s: others", labels[i]);
                series(f, &any, data[i], pn->col2, pn->percent,
                       "lines lw 1.2 dt 2", c, t);
            }
        }
        if (!any)
            sl__plot_no_data(f);
        fprintf(f, "\n");
    }
    fprintf(f, "\nunset multiplot\nunset output\n");
}
