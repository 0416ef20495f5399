/* cli/report: the figures of `run` / `bench` and their text form (the
 * consumer loop, consume.h, gathers them): the consumer's wait times, the
 * process's CPU time and peak memory, the --state file, and what they
 * print (the human line and the --json object, whose keys scripts and
 * tests read). */
#ifndef SL_CLI_REPORT_H
#define SL_CLI_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "core/statefile.h"
#include "sluice/sluice.h"

/** The consumer's wait for each batch (ns), in arrival order until
 *  sl__waits_sort. */
typedef struct sl__waits {
    int64_t *v;
    size_t n, cap;
    int64_t total; /* sum of v */
} sl__waits_t;

/** Room for `cap` waits first (it grows). @return 0, or -1 (no memory). */
int sl__waits_init(sl__waits_t *w, size_t cap);
/** Appends one wait. @return 0, or -1 (no memory; w is unchanged). */
int sl__waits_add(sl__waits_t *w, int64_t ns);
void sl__waits_free(sl__waits_t *w);

/** CPU seconds (user + system) this process used since `ru0`. */
double sl__cpu_seconds_since(const struct rusage *ru0);
/** Peak resident memory of this process in MB. VmHWM, not ru_maxrss: Linux
 *  carries a parent's ru_maxrss into an exec'd child, so a sluice started
 *  from a large Python process would report the parent's peak. */
double sl__peak_rss_mb(void);

/** A --state file (core/statefile.h), written whole or not at all
 *  (sl__write_file_whole: never over a FIFO or device, no temp file left).
 *  @return 0, or an SL_E* code with "PATH: cause" in err. */
int sl__state_write(const char *path, const char *magic, const sl__state_t *s,
                    char *err, size_t errlen);
/** Reads a file sl__state_write wrote with the same magic: a regular file
 *  (a FIFO or device is refused, never waited on) of at most
 *  SL__STATE_MAX_BYTES. @return 0, or -1 with why (unreadable; not such a
 *  file, which line) in err. */
int sl__state_read(const char *path, const char *magic, sl__state_t *s,
                   char *err, size_t errlen);

/** The figures of one run. */
typedef struct sl__report {
    const char *noun;      /* human line: "samples" | "sequences" */
    const char *unit;      /* human line: rate unit, "img/s" | "seq/s" */
    char rate_extra[64];   /* human line: after the rate, e.g. ", 9 tokens/s" */
    char json_rates[128];  /* JSON: after "samples_per_s", e.g. tokens */
    char json_shape[1024]; /* JSON: after "batch", e.g. "size" */
    int64_t samples, batches, epochs;
    double seconds, cpu_seconds;
    sl__waits_t *waits; /* sorted by sl__report_print */
    int64_t errors_skipped, bytes_read;
    int threads, batch;
    const char *out; /* the "out" key: "uint8" | "float" | "int32" */
    sl_position_t pos;
    int digest; /* print the digest */
    uint64_t h;
    int rc;           /* nonzero: the JSON gets "error" */
    int loader_bound; /* the consumer did no work (no --step-ms): every
                         wait is a stall, the rate is the loader's capacity;
                         the human line says so */
    /* with rc: why, as printed (the JSON's "message") */
    const char *message;
} sl__report_t;

/** Prints the human line (and digest) to stdout when `human`, and the JSON
 *  object as one line when `json`. Sorts r->waits. */
void sl__report_print(sl__report_t *r, int human, int json);

#endif
