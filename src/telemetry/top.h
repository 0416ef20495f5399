/* telemetry/top: the model behind `sluice top`, a live view of a running
 * job from its metrics endpoint (docs/TELEMETRY.md). A frame is made from
 * two scrapes of /metrics (rates over the time between them, from the
 * counters and the job's own clock, sluice_uptime_seconds) and one of
 * /decisions, and drawn as plain lines of at most a given width and
 * height; the terminal (escapes, keys, resizes) is the command's
 * (src/cli/cmd_top.c). Pure functions of their input: the unit tests
 * feed them recorded text. Depends on base and telemetry/promtext. */
#ifndef SL_TOP_H
#define SL_TOP_H

#include <stddef.h>

#include "promtext.h"
#include "scrape.h"

#define SL__TOP_STAGES 4
#define SL__TOP_DECISIONS 16

typedef struct sl__top_stage {
    char name[16];
    int threads;         /* -1: unknown */
    int slots;           /* what busy is a share of: its threads, or the
                            read stage's I/O depth with asynchronous reads
                            (sluice_io_async 1: its busy seconds are reads
                            in flight); -1: unknown */
    double busy;         /* 0..1 of its slots' time; -1: unknown */
    int queue, capacity; /* -1: unknown */
} sl__top_stage_t;

typedef struct sl__top_decision {
    double t; /* the job's clock */
    long long seq;
    char knob[24];
    int from, to;
    char reason[160];
} sl__top_decision_t;

/* Unknown numbers are negative (never invented), as in a snapshot. */
typedef struct sl__top_frame {
    double uptime_s;
    double span_s; /* what the rates cover: the time between the scrapes,
                      or 0 when they are the job's last snapshot's (the
                      first frame, or a restarted job) */
    double samples_per_s, batches_per_s;
    double samples_total, batches_total, errors_skipped;
    double stall;   /* 0..1: share of the time the consumer waited */
    double wait_ms; /* mean wait per batch */
    int nstages;
    sl__top_stage_t stage[SL__TOP_STAGES];
    int prefetch, batches_ready;
    double cpu_self, cpu_other, cpu_total, run_queue;
    double rss_bytes, mem_available_bytes, disk_read_bytes_per_s, gpu_util;
    /* the GPU stage (placement): its share of each batch, samples/s (over
     * the scrapes), busy share and the CPU it costs in cores; all < 0
     * without one */
    double gpu_share, gpu_samples_per_s, gpu_busy, gpu_cpu_cores;
    double decisions_total;
    int ndec; /* oldest first */
    sl__top_decision_t dec[SL__TOP_DECISIONS];
} sl__top_frame_t;

/** A frame from the scrape before (prev: NULL or empty for the first),
 *  this one (cur) and the decision log (dec: NULL when not read). */
void sl__top_frame_make(const sl__prom_set_t *prev, const sl__prom_set_t *cur,
                        const sl__prom_set_t *dec, sl__top_frame_t *f);

/** The frame as text: at most `height` lines ('\n'-terminated), each at
 *  most `width` bytes of printable ASCII (anything else the job sent is
 *  shown as '?'), the first line naming `source`. The decision list takes
 *  the lines left; the rest is cut from the bottom on a short screen.
 *  @return the bytes needed (as snprintf). */
int sl__top_render(const sl__top_frame_t *f, const char *source, int width,
                   int height, char *buf, size_t len);

/** GETs u and parses it as Prometheus text into *out. @return 0, or
 *  sl__http_get's codes (SL_EEND: the job is gone), SL_ECORRUPT for text
 *  that does not parse; err names the URL and the cause. */
int sl__top_scrape(const sl__url_t *u, int timeout_ms, sl__prom_set_t *out,
                   char *err, size_t errlen);

/** The /decisions URL beside a /metrics one (same server; a path ending
 *  in "metrics" ends in "decisions" instead). @return 0, or -1 when the
 *  path does not end in "metrics". */
int sl__top_decisions_url(const sl__url_t *metrics, sl__url_t *out);

/** Attach by pid: the first port process `pid` listens on that serves a
 *  sluice /metrics on 127.0.0.1 (any exposition with sluice_samples_total).
 *  @return 0 and *out; SL_ENOTFOUND (no such process, or none of its ports
 *  serves sluice metrics: was it started with a metrics port?) or SL_EIO
 *  (its descriptors cannot be read) with err. */
int sl__top_attach_pid(int pid, int timeout_ms, sl__url_t *out, char *err,
                       size_t errlen);

#endif
