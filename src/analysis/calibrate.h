/* analysis/calibrate: a simulator profile (src/sim) fitted to the telemetry
 * of one real run (`sluice run --telemetry FILE`), behind `sluice
 * calibrate` and sl_calibrate. Method (docs/SIMULATOR.md):
 *   - per stage, wall ms per item = busy x workers x interval / items,
 *     pooled over the steady periods (after skip_s, with items);
 *   - CPU ms per item = that x the share of a core our busy threads got:
 *     share = (cpu_self x ncpu) / (busy threads), <= 1 (contention from the
 *     consumer, other processes or too many threads shows as share < 1);
 *   - CV from the spread of the per-period estimates: a period of n items
 *     has a mean whose CV is cv / sqrt(n);
 *   - item bytes = read bytes / read items; batch size = the most samples
 *     per batch handed out in any period (full batches);
 *   - consumer step = (time not waiting) / batches, or the given step;
 *   - storage, when not given: reads that keep a reader more than
 *     SL_CALIB_STORAGE_MS each wait on storage. Periods whose wall time per
 *     read is at least 1.5 x the least (readers queued behind each other:
 *     a shared bandwidth) give the bandwidth (median read bytes/s over
 *     them, at least 3 such periods); the others give the latency (median
 *     wall time per read, less SL_CALIB_READ_CPU_MS, the read's own CPU,
 *     which is then the profile's read_ms);
 *   - ncpu, memory, RSS besides the batch buffers from the snapshots;
 *   - the GPU stage, where it did samples: gpu_ms = its busy seconds per
 *     sample (the placement rule's capacity measure, exact where the
 *     stage was the bound, slower than the stage where it idled between
 *     groups), gpu_cpu_ms = gpu_cpu_busy per sample x the core share;
 *     gpu_slow is not fitted (the step with and without the stage would
 *     be needed).
 * Foreign load (cpu_other) is the environment, not the machine: it is
 * reported (foreign_demand, the simulator's `interfere` for a replay), not
 * put into the profile.
 *
 * Files: calibrate_fit.c (the fit, pure arithmetic on periods),
 * calibrate.c (periods from sl_snapshot_parse, the profile, JSON,
 * sl_calibrate). */
#ifndef SL_CALIBRATE_H
#define SL_CALIBRATE_H

#include <stddef.h>
#include <stdio.h>

#include "base/base.h"
#include "sim/sim.h"
#include "sluice/analysis.h"
#include "sluice/telemetry.h"

/* One telemetry period: the fields of a snapshot line the fit reads (names
 * as in the JSON; stage figures of the read and decode stages). */
typedef struct sl__calib_period {
    double t, interval_s, cpu_self, cpu_other, samples_per_s;
    double stall_fraction, consumer_wait_ms, read_bytes_per_s;
    double read_busy, read_items_per_s, decode_busy, decode_items_per_s;
    int ncpu, decode_workers, prefetch;
    int read_slots; /* what read_busy is a share of (sl__stall_read_slots):
                       the I/O depth with asynchronous reads, else the
                       read threads */
    double mem_total, rss; /* bytes */
    long long samples_total, batches_total;
    /* the GPU stage (< 0: none): samples/s it finished, the share of the
     * period it had samples in it, the cores its CPU took */
    double gpu_samples_per_s, gpu_stage_busy, gpu_cpu_busy;
} sl__calib_period_t;

/* The period of one snapshot (a line of the file read by sl_snapshot_parse):
 * 0, or SL_ECORRUPT when it lacks what the fit needs (an interval, cores). */
int sl__calib_period_of(const sl_snapshot_t *s, sl__calib_period_t *p);

typedef struct sl__calib_fit {
    int periods, used; /* periods given, periods the fit used */
    int ncpu, batch_size, prefetch;
    double core_share; /* CPU our busy threads got per busy second, <= 1 */
    double read_ms, read_cv, read_wall_ms, decode_ms, decode_cv;
    double item_bytes, step_ms;
    double mem_total, max_rss;   /* bytes; 0 if unknown */
    double cpu_other;            /* 0..1 of the machine, mean */
    double samples_per_s, stall; /* what the run got */
    /* Storage fitted from the periods (sl__calib_storage_fit); 0: none
     * seen (latency), not reached (bandwidth). */
    double storage_latency_ms, storage_bw;
    int storage_periods, storage_saturated; /* periods behind each */
    /* The GPU stage, where the run had one that did samples: its busy
     * seconds per sample (the placement rule's measure, 1 / capacity where
     * the stage was the bound) and the CPU a sample cost it (x core_share,
     * as a decode's); 0: none. */
    double gpu_ms, gpu_cpu_ms;
    int gpu_periods;
} sl__calib_fit_t;

/* Wall ms per read above which a read waits on storage. */
#define SL_CALIB_STORAGE_MS 1.0
/* A read's CPU when its storage wait is fitted (a ~100 kB page-cache
 * read): the wall time cannot tell the two apart. */
#define SL_CALIB_READ_CPU_MS 0.05

/* The storage fit of periods p[0..n-1] (steady ones: t >= skip_s) into
 * f's storage_* fields: latency and bandwidth, as described above. */
void sl__calib_storage_fit(const sl__calib_period_t *p, int n, double skip_s,
                           sl__calib_fit_t *f);

/* The fit of periods p[0..n-1] (o resolved). 0; SL_ENOMEM; SL_ECORRUPT
 * when fewer than 5 steady periods with decoded items remain. */
int sl__calib_fit(const sl__calib_period_t *p, int n,
                  const sl_calibrate_options_t *o, sl__calib_fit_t *fit);

typedef struct sl__calibration {
    sl__calib_fit_t fit;
    sl__sim_profile_t profile;
    double foreign_cores;  /* cores' worth of other processes' CPU use */
    double foreign_demand; /* cores' worth of threads competing with ours */
    int lines_unreadable;
    char note[512]; /* provenance, saved in the profile's "note" */
} sl__calibration_t;

/* *out = *in with the caller's size honoured and defaults filled in;
 * SL_EINVAL with a message for a bad size or a value out of range. */
int sl__calibrate_options_resolve(const sl_calibrate_options_t *in,
                                  sl_calibrate_options_t *out, char *err,
                                  size_t errlen);

/* The fit and the profile from periods (source names them in the note). */
int sl__calibrate_periods(const sl__calib_period_t *p, int n,
                          const sl_calibrate_options_t *o, const char *source,
                          sl__calibration_t *out, char *err, size_t errlen);

/* The same from telemetry JSON Lines: each line read by sl_snapshot_parse;
 * lines it refuses, or without a period, count as unreadable. */
int sl__calibrate_stream(FILE *f, const char *source,
                         const sl_calibrate_options_t *o,
                         sl__calibration_t *out, char *err, size_t errlen);
/* The same from a telemetry JSON Lines file. */
int sl__calibrate_file(const char *path, const sl_calibrate_options_t *o,
                       sl__calibration_t *out, char *err, size_t errlen);

/* The fit as the one-line JSON object of `sluice calibrate --json`
 * (malloc'd); NULL when out of memory. */
char *sl__calibration_fit_json(const sl__calibration_t *c);

#endif
