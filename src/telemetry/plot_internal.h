/* plot, inside: the table's columns, shared by the table writer and the
 * script writer. */
#ifndef SL_TELEMETRY_PLOT_INTERNAL_H
#define SL_TELEMETRY_PLOT_INTERNAL_H

#include <stdio.h>

#include "telemetry/plot.h"

/* The table's columns, in order; column 1 (gnuplot numbering) is t. */
enum {
    SL__PC_T,
    SL__PC_SPS,
    SL__PC_STALL,
    SL__PC_CPU_SELF,
    SL__PC_CPU_OTHER,
    SL__PC_CPU_TOTAL,
    SL__PC_Q_READ,
    SL__PC_Q_DECODE,
    SL__PC_Q_BATCHES,
    SL__PC_K_READ,
    SL__PC_K_DECODE,
    SL__PC_K_PREFETCH,
    SL__PC_N
};

typedef struct sl__plot_table {
    sl__plot_stats_t st;
    double max[SL__PC_N]; /* -INFINITY: the column has no value at all */
} sl__plot_table_t;

/* Reads telemetry lines from in, writes the table to out. Returns 0, or -1
 * with errno when in cannot be read. */
int sl__plot_table_write(FILE *in, FILE *out, sl__plot_table_t *tb);

/* The gnuplot script drawing the table at data to out. */
void sl__plot_script_write(FILE *f, const char *data, const char *out, int png,
                           const char *title, const sl__plot_table_t *tb);

#endif
