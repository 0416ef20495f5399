/* plot: telemetry lines -> a whitespace separated table for gnuplot, one
 * row per snapshot, NaN where a value cannot be read. The file is outside
 * bytes (cut by a crash, edited by hand, not telemetry at all): each line
 * goes through sl_snapshot_parse, and a line it refuses is counted and
 * skipped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/telemetry.h"
#include "telemetry/plot_internal.h"

/* Longer lines are counted as malformed without being kept in memory; real
 * telemetry lines are 2-4 KB (more with many cores in cpu_core). */
#define PLOT_MAX_LINE (1u << 20)

/* The columns' names in the table's header line (the JSON member paths). */
static const char *const col_names[SL__PC_N] = {
    "t",
    "samples_per_s",
    "stall_fraction",
    "cpu_self",
    "cpu_other",
    "cpu_total",
    "queue_depth.read",
    "queue_depth.decode",
    "queue_depth.batches",
    "knobs.read_threads",
    "knobs.decode_threads",
    "knobs.prefetch",
};

static void columns(const sl_snapshot_t *s, double v[SL__PC_N])
{
    v[SL__PC_T] = s->t;
    v[SL__PC_SPS] = s->samples_per_s;
    v[SL__PC_STALL] = s->stall_fraction;
    v[SL__PC_CPU_SELF] = s->cpu_self;
    v[SL__PC_CPU_OTHER] = s->cpu_other;
    v[SL__PC_CPU_TOTAL] = s->cpu_total;
    v[SL__PC_Q_READ] = s->read.queue_depth;
    v[SL__PC_Q_DECODE] = s->decode.queue_depth;
    v[SL__PC_Q_BATCHES] = s->batches_ready;
    v[SL__PC_K_READ] = s->read.workers;
    v[SL__PC_K_DECODE] = s->decode.workers;
    v[SL__PC_K_PREFETCH] = s->prefetch;
    for (int i = 0; i < SL__PC_N; i++)
        if (v[i] < 0) /* cannot be read */
            v[i] = NAN;
}

/* The next line of f without its '\n' in *buf (grown as needed, up to
 * PLOT_MAX_LINE). Returns its length, -2 for a line over the limit (consumed,
 * not kept), -1 at end of file. */
static long read_line(FILE *f, char **buf, size_t *cap)
{
    size_t n = 0;
    int c, over = 0, any = 0;
    while ((c = getc(f)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (over)
            continue;
        if (n >= PLOT_MAX_LINE) {
            over = 1;
            continue;
        }
        if (n + 1 >= *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*buf, nc);
            if (!nb) {
                over = 1;
                continue;
            }
            *buf = nb;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (!any)
        return -1;
    if (over)
        return -2;
    return (long)n;
}

static int blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    return 1;
}

static void add_row(FILE *out, const double v[SL__PC_N], sl__plot_table_t *tb)
{
    for (int i = 0; i < SL__PC_N; i++) {
        if (isfinite(v[i])) {
            fprintf(out, "%s%.9g", i ? " " : "", v[i]);
            if (v[i] > tb->max[i])
                tb->max[i] = v[i];
        } else {
            fprintf(out, " NaN");
        }
    }
    fprintf(out, "\n");
    if (v[SL__PC_T] < tb->st.tmin)
        tb->st.tmin = v[SL__PC_T];
    if (v[SL__PC_T] > tb->st.tmax)
        tb->st.tmax = v[SL__PC_T];
    tb->st.points++;
}

int sl__plot_table_write(FILE *in, FILE *out, sl__plot_table_t *tb)
{
    char *buf = NULL;
    size_t cap = 0;
    long len, lineno = 0;
    memset(tb, 0, sizeof *tb);
    tb->st.tmin = INFINITY;
    tb->st.tmax = -INFINITY;
    for (int i = 0; i < SL__PC_N; i++)
        tb->max[i] = -INFINITY;
    fprintf(out, "#");
    for (int i = 0; i < SL__PC_N; i++)
        fprintf(out, " %s", col_names[i]);
    fprintf(out, "\n");
    while ((len = read_line(in, &buf, &cap)) != -1) {
        lineno++;
        if (len >= 0 && blank(buf, (size_t)len))
            continue;
        sl_snapshot_t s;
        sl_snapshot_init(&s);
        if (len < 0 || sl_snapshot_parse(buf, (size_t)len, &s, NULL, 0)) {
            if (!tb->st.malformed++)
                tb->st.first_bad = lineno;
            continue;
        }
        double v[SL__PC_N];
        columns(&s, v);
        add_row(out, v, tb);
    }
    int rc = ferror(in) ? -1 : 0;
    free(buf);
    return rc;
}
