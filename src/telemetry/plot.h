/* plot: a --telemetry file (docs/TELEMETRY.md) drawn as five stacked panels
 * over t: throughput, consumer stall, CPU, queue depths and knob values.
 *
 * We do not draw ourselves: the JSON Lines are read with sl_snapshot_parse
 * and reduced to a whitespace separated table (NaN where a value cannot be
 * read), a gnuplot script is written beside it, and gnuplot (Debian:
 * gnuplot-nox) renders it. Both temp files are removed afterwards.
 *
 * Rates and shares (samples/s, stage items/s, stall, CPU) are drawn as a
 * trailing mean over >= 1 s and >= 3 batches (plot_smooth.c): a 100 ms
 * snapshot holds a whole number of batches, so its own rate zig-zags.
 *
 * Runs compared: two or more files (a placement against another, a run
 * before and after a change) drawn over each other, a colour each, in
 * four panels: samples/s delivered, stall, the GPU share (where a run has
 * a stage) and CPU (sluice's and the other processes'), each run's mean
 * rate in its legend.
 *
 * Files: plot_table.c (telemetry -> table), plot_smooth.c (the smoothing
 * rule), plot_script.c (table -> gnuplot script), plot_compare.c (tables
 * -> the comparison's script), plot.c (temp files, running gnuplot). */
#ifndef SL_TELEMETRY_PLOT_H
#define SL_TELEMETRY_PLOT_H

#include <stdio.h>

#define SL__PLOT_MAX_RUNS 8 /* files one comparison draws */

typedef struct sl__plot_opts {
    const char *input; /* the telemetry file */
    /* runs compared: ninputs (2..SL__PLOT_MAX_RUNS) files over each other,
     * input unused; labels[i] names inputs[i] in the legends (NULL, or a
     * NULL entry: its file's name) */
    const char *const *inputs;
    int ninputs;
    const char *const *labels;
    const char *output; /* the picture; the caller checked its type */
    int png;            /* 1: PNG, 0: SVG */
    int raw;            /* also the raw per-snapshot rates, as points */
    const char *title;  /* NULL: "sluice telemetry: <input's name>" */
    const char *tmpdir; /* for the temp files; NULL or "": /tmp */
    int keep_temps;     /* leave the table and script, and say where */
    FILE *log;          /* warnings and gnuplot's own messages, each line after
                           log_prefix; NULL: none */
    const char *log_prefix;
} sl__plot_opts_t;

typedef struct sl__plot_stats {
    long points;    /* lines drawn */
    long malformed; /* lines skipped (not a snapshot, or over 1 MiB) */
    long first_bad; /* the first of them, 1-based */
    double tmin, tmax;
    double samples, seconds; /* delivered over the lines with an interval */
} sl__plot_stats_t;

/* Draws o->input (or o->inputs compared) to o->output. Skipped lines are
 * a warning on o->log, not an error; a file without one valid line is. A
 * comparison's *st adds up its files' (t over all of them).
 * Returns 0, or SL_E* with the message in err: SL_EIO (a file cannot be
 * read or written), SL_ECORRUPT (no valid line), SL_ENOTFOUND (gnuplot not
 * installed), SL_EUNSUPPORTED (gnuplot failed or drew nothing; nothing is
 * left at o->output then). *st is filled as far as the file was read. */
int sl__plot(const sl__plot_opts_t *o, sl__plot_stats_t *st, char *err,
             size_t errlen);

#endif
