/* plot: the gnuplot script that draws the table (plot_table.c) as five
 * stacked panels over t. */
#include <math.h>
#include <string.h>

#include "telemetry/plot_internal.h"

/* s as a gnuplot single-quoted string: no escapes there but '' for a quote;
 * control characters (a title from the shell may hold a newline) become
 * spaces. */
static void put_quoted(FILE *f, const char *s)
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

typedef struct {
    int col;           /* SL__PC_* */
    const char *title; /* legend */
    const char *expr;  /* gnuplot y expression, %d = the column; NULL: $col */
    const char *style; /* after "with" */
} series_t;

typedef struct {
    const char *ylabel;
    int percent; /* values are 0..1 shares, drawn as % */
    int nseries;
    series_t s[3];
} panel_t;

/* Colours: Okabe-Ito, readable for colour-blind readers and in grey. */
static const panel_t panels[5] = {
    {"samples/s",
     0,
     1,
     {{SL__PC_SPS, "samples_per_s", NULL, "lines lw 1.5 lc rgb '#0072B2'"}}},
    {"consumer stall (%)",
     1,
     1,
     {{SL__PC_STALL, "stall_fraction", "($%d*100)",
       "lines lw 1.5 lc rgb '#D55E00'"}}},
    {"CPU (% of machine)",
     1,
     3,
     {{SL__PC_CPU_TOTAL, "cpu_total", "($%d*100)",
       "lines lw 1 dt 2 lc rgb '#555555'"},
      {SL__PC_CPU_SELF, "cpu_self (sluice)", "($%d*100)",
       "lines lw 1.5 lc rgb '#0072B2'"},
      {SL__PC_CPU_OTHER, "cpu_other", "($%d*100)",
       "lines lw 1.5 lc rgb '#E69F00'"}}},
    {"queue depth (items)",
     0,
     3,
     {{SL__PC_Q_READ, "read (of 32)", NULL, "lines lw 1.5 lc rgb '#009E73'"},
      {SL__PC_Q_DECODE, "decode", NULL, "lines lw 1.5 lc rgb '#CC79A7'"},
      {SL__PC_Q_BATCHES, "batches ready", NULL,
       "lines lw 1.5 lc rgb '#0072B2'"}}},
    /* Knobs often hold equal values: widths shrink from the first drawn to
     * the last so a step under another stays visible. */
    {"knob value",
     0,
     3,
     {{SL__PC_K_READ, "read_threads", NULL, "steps lw 5 lc rgb '#56B4E9'"},
      {SL__PC_K_DECODE, "decode_threads", NULL,
       "steps lw 2.5 lc rgb '#D55E00'"},
      {SL__PC_K_PREFETCH, "prefetch", NULL, "steps lw 1.2 lc rgb '#000000'"}}},
};

void sl__plot_script_write(FILE *f, const char *data, const char *out, int png,
                           const char *title, const sl__plot_table_t *tb)
{
    /* t counts from the loader's creation: start the axis at 0 unless the
     * file is a late excerpt of a long run. */
    double x0 = tb->st.tmin, x1 = tb->st.tmax;
    if (x0 > 0 && x0 < 0.05 * (x1 - x0))
        x0 = 0;
    if (!(x1 > x0)) { /* one point: gnuplot refuses an empty range */
        x0 -= 1;
        x1 += 1;
    }
    fprintf(f, "set terminal %s noenhanced size 1000,1150 font 'Sans,11'\n",
            png ? "pngcairo" : "svg");
    fprintf(f, "set output ");
    put_quoted(f, out);
    fprintf(f, "\nset multiplot layout 5,1 title ");
    put_quoted(f, title);
    /* Fixed margins: every panel's plot area lines up whatever the width of
     * its tic labels, and the right strip holds the legends. */
    fprintf(f,
            " font ',13' margins 0.09,0.78,0.06,0.94 spacing 0,0.018\n"
            "set xrange [%.9g:%.9g]\n"
            "set grid xtics ytics lc rgb '#dddddd'\n"
            "set key outside right top Left reverse samplen 2.5\n"
            "set border lw 0.8\n"
            "set ytics nomirror\n",
            x0, x1);
    int dots = tb->st.points <= 100;
    for (int p = 0; p < 5; p++) {
        const panel_t *pn = &panels[p];
        int last = p == 4;
        fprintf(f, "\n# panel %d\n", p + 1);
        fprintf(f, "set ylabel ");
        put_quoted(f, pn->ylabel);
        fprintf(f, "\n");
        if (last)
            fprintf(f, "set format x '%%g'\nset xlabel 't (s)'\n");
        else
            fprintf(f, "set format x ''\nunset xlabel\n");
        /* y ranges are set here, not autoscaled: all these values are >= 0,
         * a line at 0 or at the top must not hide under the border, a
         * constant must not blow up to a band around itself, and shares
         * near 100 % read best on a 0..100 scale. */
        double top = -INFINITY;
        for (int i = 0; i < pn->nseries; i++)
            if (tb->max[pn->s[i].col] > top)
                top = tb->max[pn->s[i].col];
        if (pn->percent)
            top *= 100;
        if (!(top > 0))
            top = 1;
        if (pn->percent && top >= 50)
            top = 100;
        fprintf(f, "set yrange [%.6g:%.6g]\n", -0.04 * top, 1.08 * top);
        if (pn->percent && top == 100)
            fprintf(f, "set ytics 0, 20, 100\n");
        else if (last && top <= 8)
            fprintf(f, "set ytics 0, 1\n"); /* knobs are whole numbers */
        else
            fprintf(f, "set ytics autofreq\n");
        /* gnuplot stops at a plot whose points are all undefined, so a
         * column with no value is left out; a panel with none keeps its
         * frame, a clipped constant and a note. */
        int any = 0;
        for (int i = 0; i < pn->nseries; i++) {
            const series_t *se = &pn->s[i];
            if (!isfinite(tb->max[se->col]))
                continue;
            fprintf(f, "%s", any ? ", \\\n     " : "plot ");
            put_quoted(f, data);
            fprintf(f, " using 1:");
            if (se->expr)
                fprintf(f, se->expr, se->col + 1);
            else
                fprintf(f, "%d", se->col + 1);
            /* A value between two nulls is no segment: with few points,
             * mark each one so that lone values still show. */
            if (dots && !strncmp(se->style, "lines ", 6))
                fprintf(f, " with linespoints pt 7 ps 0.5 %s title ",
                        se->style + 6);
            else
                fprintf(f, " with %s title ", se->style);
            put_quoted(f, se->title);
            any = 1;
        }
        if (!any)
            fprintf(f, "set yrange [0:1]\n"
                       "set label 1 'no data' at graph 0.5, 0.5 center\n"
                       "plot -1 notitle\n"
                       "unset label 1");
        fprintf(f, "\n");
    }
    fprintf(f, "\nunset multiplot\nunset output\n");
}
