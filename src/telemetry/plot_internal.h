/* plot, inside: the table's columns, shared by the table writer, the
 * smoothing rule and the script writer. */
#ifndef SL_TELEMETRY_PLOT_INTERNAL_H
#define SL_TELEMETRY_PLOT_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include "telemetry/plot.h"

/* The table's columns, in order; column 1 (gnuplot numbering) is t. */
enum {
    SL__PC_T,
    /* per interval rates and shares as the file has them (raw) */
    SL__PC_SPS,
    SL__PC_STALL,
    SL__PC_CPU_SELF,
    SL__PC_CPU_OTHER,
    SL__PC_CPU_TOTAL,
    SL__PC_READ_IPS,
    SL__PC_DECODE_IPS,
    SL__PC_GPU_IPS, /* the GPU stage's samples per second (NaN: no stage) */
    SL__PC_REQ_PS,  /* ranged requests for samples per second (URLs) */
    SL__PC_REC_PS,  /* the records they fetched per second */
    /* instantaneous values */
    SL__PC_Q_READ,
    SL__PC_Q_DECODE,
    SL__PC_Q_BATCHES,
    SL__PC_K_READ,
    SL__PC_K_DECODE,
    SL__PC_K_PREFETCH,
    SL__PC_K_IO_DEPTH,   /* reads in flight allowed (NaN: blocking reads) */
    SL__PC_CACHE_HIT,    /* the sample cache's hit rate (NaN: no lookups) */
    SL__PC_GPU_SHARE,    /* the GPU stage's share, 0..1 (NaN: no stage) */
    SL__PC_CACHE_STORED, /* the cache's bytes held / before its codec */
    SL__PC_DISK_HIT,     /* the disk tier's hits / lookups in the interval */
    /* what the smoothing reads */
    SL__PC_INTERVAL,
    SL__PC_BATCHES,
    /* the raw rates smoothed (plot_smooth.c), in the raw ones' order */
    SL__PC_SPS_S,
    SL__PC_STALL_S,
    SL__PC_CPU_SELF_S,
    SL__PC_CPU_OTHER_S,
    SL__PC_CPU_TOTAL_S,
    SL__PC_READ_IPS_S,
    SL__PC_DECODE_IPS_S,
    SL__PC_GPU_IPS_S,
    SL__PC_REQ_PS_S,
    SL__PC_REC_PS_S,
    /* records per request over the window: REC_PS_S / REQ_PS_S */
    SL__PC_REC_PER_REQ_S,
    SL__PC_N
};
#define SL__PC_NRATES (SL__PC_REC_PS - SL__PC_SPS + 1)
/* The smoothed column of raw rate column c. */
#define SL__PC_SMOOTHED(c) (SL__PC_SPS_S + (c)-SL__PC_SPS)

/* The smoothing window (plot_smooth.c): a 100 ms snapshot holds one or two
 * batches at ~1,300 img/s in batches of 64, so its rate zig-zags between
 * 640 and 1,280. A trailing window of at least 1 s and 3 batches (when the
 * file counts batches) holds enough batches that one more or less moves the
 * rate by a few percent; it stops at 10 s when batches are that slow, and
 * at WINDOW_ROWS rows (memory: the table is written as the file is read). */
#define SL__PLOT_WINDOW_S 1.0
#define SL__PLOT_WINDOW_BATCHES 3
#define SL__PLOT_WINDOW_MAX_S 10.0
#define SL__PLOT_WINDOW_ROWS 4096

/* The trailing window over the rows read so far, with running sums. */
typedef struct sl__plot_smooth {
    struct {
        double dt, nb;           /* interval (s), batches in it; NaN unknown */
        double v[SL__PC_NRATES]; /* the raw rates */
    } row[SL__PLOT_WINDOW_ROWS]; /* a ring: n rows from first */
    size_t first, n;
    int batch_rule; /* some row so far knew its batches */
    double span, batches;
    double vw[SL__PC_NRATES], w[SL__PC_NRATES];   /* sum v*dt, sum dt */
    double vs[SL__PC_NRATES], cnt[SL__PC_NRATES]; /* sum v, rows with v */
} sl__plot_smooth_t;

void sl__plot_smooth_init(sl__plot_smooth_t *s);
/* Adds a row: its interval dt (s), the batches completed in it nb (NaN:
 * not known; the batch rule applies once some row knew) and its raw rates
 * v; drops the rows the window no longer needs; writes each rate's mean
 * over the window to out: weighted by dt (rows whose value is not finite
 * left out; unweighted when no row has a dt; NaN when no row has a
 * value). */
void sl__plot_smooth_add(sl__plot_smooth_t *s, double dt, double nb,
                         const double v[SL__PC_NRATES],
                         double out[SL__PC_NRATES]);

/* The scheduler's knob changes the file records (decision_new lines), and
 * the cache's run-time codec choices (a change of cache.codec between two
 * lines: knob "cache_codec", from_s / to_s the codecs' names): all of
 * them, each marked on the knob panel. */
typedef struct sl__plot_decision {
    double t;
    char knob[24];
    int from, to;
    char from_s[16], to_s[16]; /* set: the values are these names */
    char reason[160];
} sl__plot_decision_t;

typedef struct sl__plot_table {
    sl__plot_stats_t st;
    double max[SL__PC_N];     /* -INFINITY: the column has no value at all */
    sl__plot_decision_t *dec; /* every one (owned; sl__plot_table_free) */
    size_t dec_cap;
    int ndec;      /* in dec: ndec_all, unless memory ran out */
    long ndec_all; /* in the file */
} sl__plot_table_t;

/* Reads telemetry lines from in, writes the table to out. tb: zeroed, or
 * one written before (its decisions are freed first). Returns 0, or -1
 * with errno when in cannot be read (ENOMEM: none for the window). */
int sl__plot_table_write(FILE *in, FILE *out, sl__plot_table_t *tb);
/* Frees tb's decisions (tb itself is the caller's); zeroed tb ok. */
void sl__plot_table_free(sl__plot_table_t *tb);

/* The gnuplot script drawing the table at data to out; raw: the raw
 * per-interval points under the smoothed lines too. */
void sl__plot_script_write(FILE *f, const char *data, const char *out, int png,
                           int raw, const char *title,
                           const sl__plot_table_t *tb);

/* s as a gnuplot single-quoted string: no escapes there but '' for a
 * quote; control characters (a title from the shell may hold a newline)
 * become spaces. */
void sl__plot_put_quoted(FILE *f, const char *s);

/* The rules both scripts draw by (plot_script.c). The x axis over
 * [tmin, tmax]: from 0 unless the file is a late excerpt of a long run. */
void sl__plot_xrange(double tmin, double tmax, double *x0, double *x1);
/* The terminal (h pixels high), the output, `panels` stacked under the
 * title with fixed margins (the legends right of `right`, the panels from
 * `bottom` to `top` of the screen, `spacing` apart), the x range. */
void sl__plot_begin(FILE *f, const char *out, int png, int h, int panels,
                    const char *title, double right, double bottom, double top,
                    double spacing, double x0, double x1);
/* Panel k's label, its x tics (numbered on the last) and its y range for
 * values up to top (0..1 shares drawn as %, where percent; whole: tics at
 * each whole number up to 8, for knobs). */
void sl__plot_panel(FILE *f, int k, const char *ylabel, int last, double top,
                    int percent, int whole);
/* A panel without a value: its frame and "no data". */
void sl__plot_no_data(FILE *f);

/* The comparison's script (plot_compare.c): the tables data[0..n), their
 * runs named labels[i], drawn over each other to out. */
void sl__plot_compare_script_write(FILE *f, const char *const *data,
                                   const char *const *labels,
                                   const sl__plot_table_t *tb, int n,
                                   const char *out, int png, const char *title);

#endif
