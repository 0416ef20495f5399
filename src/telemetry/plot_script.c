/* plot: the gnuplot script that draws the table (plot_table.c) as five
 * stacked panels over t (six when the run made ranged requests: remote
 * sources), rates smoothed (the raw points on request), and the
 * scheduler's decisions (and the cache's codec choices) marked on the knob
 * panel and listed under it. */
#include <math.h>
#include <string.h>

#include "telemetry/decision_text.h"
#include "telemetry/plot_internal.h"

void sl__plot_put_quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'')
            fputs("''", f);
        else
            fputc(c < 0x20 || c == 0x7f ? ' ' : c, f);
    }
    fputc('\'', f);
}

void sl__plot_xrange(double tmin, double tmax, double *x0, double *x1)
{
    /* t counts from the loader's creation: start the axis at 0 unless the
     * file is a late excerpt of a long run. */
    *x0 = tmin, *x1 = tmax;
    if (*x0 > 0 && *x0 < 0.05 * (*x1 - *x0))
        *x0 = 0;
    if (!(*x1 > *x0)) { /* one point: gnuplot refuses an empty range */
        *x0 -= 1;
        *x1 += 1;
    }
}

void sl__plot_begin(FILE *f, const char *out, int png, int h, int panels,
                    const char *title, double right, double bottom, double top,
                    double spacing, double x0, double x1)
{
    fprintf(f, "set terminal %s noenhanced size 1000,%d font 'Sans,11'\n",
            png ? "pngcairo" : "svg", h);
    fprintf(f, "set output ");
    sl__plot_put_quoted(f, out);
    fprintf(f, "\nset multiplot layout %d,1 title ", panels);
    sl__plot_put_quoted(f, title);
    /* Fixed margins: every panel's plot area lines up whatever the width of
     * its tic labels, and the right strip holds the legends. */
    fprintf(f,
            " font ',13' margins 0.09,%.6f,%.6f,%.6f spacing 0,%.6f\n"
            "set xrange [%.9g:%.9g]\n"
            "set grid xtics ytics lc rgb '#dddddd'\n"
            "set key outside right top Left reverse samplen 2.5\n"
            "set border lw 0.8\n"
            "set ytics nomirror\n",
            right, bottom, top, spacing, x0, x1);
}

void sl__plot_panel(FILE *f, int k, const char *ylabel, int last, double top,
                    int percent, int whole)
{
    fprintf(f, "\n# panel %d\nset ylabel ", k + 1);
    sl__plot_put_quoted(f, ylabel);
    fprintf(f, "\n");
    if (last)
        fprintf(f, "set format x '%%g'\nset xlabel 't (s)'\n");
    else
        fprintf(f, "set format x ''\nunset xlabel\n");
    /* y ranges are set here, not autoscaled: all these values are >= 0, a
     * line at 0 or at the top must not hide under the border, a constant
     * must not blow up to a band around itself, and shares near 100 % read
     * best on a 0..100 scale. */
    if (percent)
        top *= 100;
    if (!(top > 0))
        top = 1;
    if (percent && top >= 50)
        top = 100;
    fprintf(f, "set yrange [%.6g:%.6g]\n", -0.04 * top, 1.08 * top);
    if (percent && top == 100)
        fprintf(f, "set ytics 0, 20, 100\n");
    else if (whole && top <= 8)
        fprintf(f, "set ytics 0, 1\n");
    else
        fprintf(f, "set ytics autofreq\n");
}

void sl__plot_no_data(FILE *f)
{
    fprintf(f, "set yrange [0:1]\n"
               "set label 1 'no data' at graph 0.5, 0.5 center\n"
               "plot -1 notitle\n"
               "unset label 1");
}

typedef struct {
    int col;           /* SL__PC_*: smoothed for a rate */
    int raw;           /* the raw column drawn as points with --raw; -1 none */
    const char *title; /* legend */
    const char *expr;  /* gnuplot y expression, %d = the column; NULL: $col */
    const char *style; /* after "with", before the colour */
    const char *color;
} series_t;

/* Records per request, against the right-hand axis (a few, beside
 * requests/s in the hundreds). */
static int on_y2(const series_t *se)
{
    return se->col == SL__PC_REC_PER_REQ_S;
}

typedef struct {
    const char *ylabel;
    int percent; /* values are 0..1 shares, drawn as % */
    int nseries;
    series_t s[5];
} panel_t;

#define SMOOTH(c) SL__PC_SMOOTHED(c), c

/* Colours: Okabe-Ito, readable for colour-blind readers and in grey. Rates
 * and shares are drawn smoothed (plot_smooth.c); queue depths and knobs
 * are instantaneous. */
#define NPANELS 6
#define REQ_PANEL 4 /* drawn only when the run made requests */

static const panel_t panels[NPANELS] = {
    {"samples/s (1 s mean)",
     0,
     4,
     {{SMOOTH(SL__PC_SPS), "samples_per_s", NULL, "lines lw 1.5", "#0072B2"},
      {SMOOTH(SL__PC_READ_IPS), "read items/s", NULL, "lines lw 1 dt 2",
       "#009E73"},
      {SMOOTH(SL__PC_DECODE_IPS), "decode items/s (CPU)", NULL,
       "lines lw 1 dt 3", "#CC79A7"},
      {SMOOTH(SL__PC_GPU_IPS), "GPU stage samples/s", NULL, "lines lw 1 dt 4",
       "#E69F00"}}},
    {"stall, cache, GPU share (%)",
     1,
     5,
     {{SMOOTH(SL__PC_STALL), "stall_fraction", "($%d*100)", "lines lw 1.5",
       "#D55E00"},
      {SL__PC_CACHE_HIT, -1, "cache hit rate", "($%d*100)", "lines lw 1 dt 2",
       "#009E73"},
      {SL__PC_DISK_HIT, -1, "disk tier hit rate", "($%d*100)",
       "lines lw 1 dt 3", "#56B4E9"},
      {SL__PC_CACHE_STORED, -1, "cache stored / raw bytes", "($%d*100)",
       "steps lw 1 dt 4", "#CC79A7"},
      {SL__PC_GPU_SHARE, -1, "GPU share (placement)", "($%d*100)",
       "steps lw 1.5", "#000000"}}},
    {"CPU (% of machine)",
     1,
     3,
     {{SMOOTH(SL__PC_CPU_TOTAL), "cpu_total", "($%d*100)", "lines lw 1 dt 2",
       "#555555"},
      {SMOOTH(SL__PC_CPU_SELF), "cpu_self (sluice)", "($%d*100)",
       "lines lw 1.5", "#0072B2"},
      {SMOOTH(SL__PC_CPU_OTHER), "cpu_other", "($%d*100)", "lines lw 1.5",
       "#E69F00"}}},
    {"queue depth (items)",
     0,
     3,
     {{SL__PC_Q_READ, -1, "read-ahead in use", NULL, "lines lw 1.5", "#009E73"},
      {SL__PC_Q_DECODE, -1, "decode", NULL, "lines lw 1.5", "#CC79A7"},
      {SL__PC_Q_BATCHES, -1, "batches ready", NULL, "lines lw 1.5",
       "#0072B2"}}},
    /* Remote sources: requests per second, and the records each fetched
     * (above 1 when neighbouring records are coalesced), right axis. */
    {"requests/s (1 s mean)",
     0,
     2,
     {{SMOOTH(SL__PC_REQ_PS), "requests/s", NULL, "lines lw 1.5", "#0072B2"},
      {SL__PC_REC_PER_REQ_S, -1, "records per request (right)", NULL,
       "lines lw 1 dt 2", "#D55E00"}}},
    /* Knobs often hold equal values: widths shrink from the first drawn to
     * the last so a step under another stays visible. */
    {"knob value",
     0,
     4,
     {{SL__PC_K_READ, -1, "read_threads", NULL, "steps lw 5", "#56B4E9"},
      {SL__PC_K_DECODE, -1, "decode_threads", NULL, "steps lw 2.5", "#D55E00"},
      {SL__PC_K_PREFETCH, -1, "prefetch", NULL, "steps lw 1.2", "#000000"},
      {SL__PC_K_IO_DEPTH, -1, "io_depth", NULL, "steps lw 1.2 dt 2",
       "#009E73"}}},
};

/* Decisions listed in full under the figure; the rest only marked. */
#define LISTED 12
#define LIST_PX 17 /* one listed line */

static int listed_lines(const sl__plot_table_t *tb)
{
    if (!tb->ndec)
        return 0;
    int n = tb->ndec < LISTED ? tb->ndec : LISTED;
    return 1 + n + (tb->ndec_all > n);
}

/* The scheduler's decisions on the knob panel: a dotted line and a number
 * at each (every one in the file), and the numbered list (time, knob, from ->
 * to, reason) under the figure at screen height y0 downwards. */
static void decisions(FILE *f, const sl__plot_table_t *tb, double y0,
                      double line)
{
    if (!tb->ndec)
        return;
    for (int k = 0; k < tb->ndec; k++) {
        const sl__plot_decision_t *d = &tb->dec[k];
        fprintf(f,
                "set arrow %d from %.9g, graph 0 to %.9g, graph 1 nohead "
                "dt 3 lw 0.8 lc rgb '#777777' back\n",
                k + 1, d->t, d->t);
        fprintf(f,
                "set label %d '%d' at %.9g, graph 0.92 left offset 0.2,0 "
                "font ',8' tc rgb '#333333' front\n",
                1000 + k, k + 1, d->t);
    }
    char text[320];
    snprintf(text, sizeof text, "decisions (%ld):", tb->ndec_all);
    fprintf(f, "set label 98 ");
    sl__plot_put_quoted(f, text);
    fprintf(f, " at screen 0.02, screen %.6f font ',9'\n", y0);
    int n = tb->ndec < LISTED ? tb->ndec : LISTED;
    for (int k = 0; k < n; k++) {
        const sl__plot_decision_t *d = &tb->dec[k];
        const char *why = d->reason[0] ? d->reason : "(no reason recorded)";
        char what[288];
        sl__decision_text(what, sizeof what, d->knob, d->from, d->to, d->from_s,
                          d->to_s, why);
        snprintf(text, sizeof text, "%d  t %.2f s  %s", k + 1, d->t, what);
        fprintf(f, "set label %d ", 200 + k);
        sl__plot_put_quoted(f, text);
        fprintf(f, " at screen 0.03, screen %.6f font ',9'\n",
                y0 - (k + 1) * line);
    }
    if (tb->ndec_all > n) {
        snprintf(text, sizeof text, "... and %ld more", tb->ndec_all - n);
        fprintf(f, "set label 99 ");
        sl__plot_put_quoted(f, text);
        fprintf(f, " at screen 0.03, screen %.6f font ',9'\n",
                y0 - (n + 1) * line);
    }
}

void sl__plot_script_write(FILE *f, const char *data, const char *out, int png,
                           int raw, const char *title,
                           const sl__plot_table_t *tb)
{
    double x0, x1;
    sl__plot_xrange(tb->st.tmin, tb->st.tmax, &x0, &x1);
    /* The request panel only for runs that made requests. */
    int show[NPANELS], n = 0;
    for (int p = 0; p < NPANELS; p++)
        if (p != REQ_PANEL || tb->max[SL__PC_REQ_PS] > 0)
            show[n++] = p;
    /* The decision list takes a strip under the panels. */
    int base = 230 * n;
    int list = listed_lines(tb), h = base + LIST_PX * list;
    double bottom = (0.06 * base + LIST_PX * list) / h;
    sl__plot_begin(f, out, png, h, n, title, 0.78, bottom, 1 - 0.06 * base / h,
                   0.018 * base / h, x0, x1);
    int dots = tb->st.points <= 100;
    for (int k = 0; k < n; k++) {
        const panel_t *pn = &panels[show[k]];
        int last = k == n - 1;
        double top = -INFINITY, top2 = -INFINITY;
        for (int i = 0; i < pn->nseries; i++) {
            const series_t *se = &pn->s[i];
            double *t = on_y2(se) ? &top2 : &top;
            if (tb->max[se->col] > *t)
                *t = tb->max[se->col];
            if (raw && se->raw >= 0 && tb->max[se->raw] > *t)
                *t = tb->max[se->raw];
        }
        if (isfinite(top2)) {
            if (!(top2 > 0))
                top2 = 1;
            fprintf(f, "set y2range [%.6g:%.6g]\nset y2tics autofreq\n",
                    -0.04 * top2, 1.08 * top2);
        }
        /* knobs are whole numbers */
        sl__plot_panel(f, k, pn->ylabel, last, top, pn->percent, last);
        /* gnuplot stops at a plot whose points are all undefined, so a
         * column with no value is left out; a panel with none keeps its
         * frame, a clipped constant and a note. */
        if (last)
            decisions(f, tb, (double)(LIST_PX * list - 4) / h,
                      (double)LIST_PX / h);
        int any = 0;
        for (int i = 0; i < pn->nseries; i++) {
            const series_t *se = &pn->s[i];
            if (!isfinite(tb->max[se->col]))
                continue;
            fprintf(f, "%s", any ? ", \\\n     " : "plot ");
            if (raw && se->raw >= 0 && isfinite(tb->max[se->raw])) {
                sl__plot_put_quoted(f, data);
                fprintf(f, " using 1:");
                fprintf(f, se->expr ? se->expr : "%d", se->raw + 1);
                fprintf(f, " with points pt 7 ps 0.3 lc rgb '%s' title ",
                        se->color);
                char t[96];
                snprintf(t, sizeof t, "%s (raw)", se->title);
                sl__plot_put_quoted(f, t);
                fprintf(f, ", \\\n     ");
            }
            sl__plot_put_quoted(f, data);
            fprintf(f, " using 1:");
            fprintf(f, se->expr ? se->expr : "%d", se->col + 1);
            if (on_y2(se))
                fprintf(f, " axes x1y2");
            /* A value between two nulls is no segment: with few points,
             * mark each one so that lone values still show. */
            if (dots && !strncmp(se->style, "lines ", 6))
                fprintf(f, " with linespoints pt 7 ps 0.5 %s", se->style + 6);
            else
                fprintf(f, " with %s", se->style);
            fprintf(f, " lc rgb '%s' title ", se->color);
            sl__plot_put_quoted(f, se->title);
            any = 1;
        }
        if (!any)
            sl__plot_no_data(f);
        fprintf(f, "\n");
        if (isfinite(top2))
            fprintf(f, "unset y2tics\n");
        if (last && tb->ndec)
            fprintf(f, "unset arrow\nunset label\n");
    }
    fprintf(f, "\nunset multiplot\nunset output\n");
}
