/* cli/consume: the consumer loop of `run` / `bench` (cmd_run.c) and of their
 * text form `run --task` (cmd_text.c), written once: the options both take,
 * --resume, the loop itself (wait times, --digest, --stop-after,
 * --duration, the progress line, skipped-sample messages), --state, and
 * the figures handed to the report. Each command supplies its loader
 * through sl__stream_t (next / release / digest / position ...). */
#ifndef SL_CLI_CONSUME_H
#define SL_CLI_CONSUME_H

#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>

#include "opts.h"
#include "report.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"
#include "sluice/text.h"

/** The options both commands take: the consumer loop's, and those of the
 *  stream that mean the same for images and text. Zero: not given. */
typedef struct sl__consume_args {
    int digest, json, quiet;
    int64_t stop_after; /* batches; 0 = all */
    double duration;    /* seconds; 0 = no limit */
    const char *state_out, *resume;
    /* the stream's (copied into each loader's options) */
    int batch, threads, rank, world;
    int64_t epochs;
    uint64_t seed;
    int no_shuffle, drop_last;
    int on_error; /* SL_ON_ERROR_* */
} sl__consume_args_t;

/* Their rows (opts.h), to follow a command's own table. */
extern const sl__opt_t sl__consume_opts[];

/** Copies the shared stream options into a loader's options `o` (the
 *  image and text options name these fields alike). */
#define SL__CONSUME_COPY_STREAM(o, c)                                          \
    do {                                                                       \
        (o)->batch_size = (c)->batch;                                          \
        (o)->epochs = (c)->epochs;                                             \
        (o)->seed = (c)->seed;                                                 \
        (o)->no_shuffle = (c)->no_shuffle;                                     \
        (o)->drop_last = (c)->drop_last;                                       \
        (o)->rank = (c)->rank;                                                 \
        (o)->world_size = (c)->world;                                          \
        (o)->decode_threads = (c)->threads;                                    \
        (o)->on_error = (c)->on_error;                                         \
    } while (0)

/** A command's half of the command line. */
typedef struct sl__consume_cli {
    const sl__opts_t *opts; /* its own table, then sl__consume_opts */
    /* Takes its operands (n of them, checked by the option layer), and
     * copies the shared stream options into its loader's. */
    void (*operands)(char **op, int n, void *ctx);
    uint64_t (*config)(const void *ctx); /* what --state must agree on */
} sl__consume_cli_t;

/** One batch as the loop sees it. */
typedef struct sl__item {
    const void *batch; /* the loader's, handed back to release */
    int64_t n, epoch, tokens;
} sl__item_t;

/** A loader, as the loop drives it. */
typedef struct sl__stream {
    void *loader;
    int (*start)(void *l, const sl_position_t *from);
    /* waits at most timeout_ms (< 0: no limit); SL_ETIMEDOUT: nothing
     * handed out, call again */
    int (*next)(void *l, sl__item_t *it, int timeout_ms);
    void (*release)(void *l, const void *batch);
    uint64_t (*digest)(const void *batch, uint64_t h); /* xxh3 chain */
    void (*position)(void *l, sl_position_t *pos);
    void (*stats)(void *l, int64_t *errors_skipped, int64_t *bytes_read);
    int64_t (*skipped_count)(void *l);
    const char *(*skipped_message)(void *l, int64_t i);
    const char *(*last_error)(void *l);
} sl__stream_t;

/** The image loader and the text loader as streams (streams.c). */
sl__stream_t sl__stream_image(sl_loader_t *l);
sl__stream_t sl__stream_text(sl_text_loader_t *l);

/** One run of the loop: what it was asked, and what it got. */
typedef struct sl__consume {
    sl__consume_args_t *args; /* filled from the command line */
    const char *magic;        /* of the --state file */
    void *ctx;                /* the command's: own options, before, progress */
    int64_t total;  /* batches to take at most (INT64_MAX: to the end) */
    double step_ms; /* hold each batch this long, as a training step */
    /* Called before each batch (NULL: none), e.g. for timed knob sets. */
    void (*before)(struct sl__consume *c, double elapsed_s);
    /* Draws the progress line (NULL: none); `now` as sl__now_ns. */
    void (*progress)(struct sl__consume *c, int64_t now);
    /* filled by sl__consume_begin / sl__consume_run */
    const char *cmd;           /* for messages: "run" | "bench" */
    uint64_t config;           /* what a --state file must agree on */
    sl_position_t from, pos;   /* start, and reached */
    sl__state_t saved;         /* --resume's file */
    int64_t samples_in_source; /* and what identifies the source: */
    uint64_t dataset;          /* sl__consume_source */
    uint64_t h;                /* digest */
    int64_t done, samples, tokens, epoch;
    int64_t stepped; /* batches held for a step (step_ms > 0) */
    int64_t t0, errors_skipped, bytes_read;
    double seconds, cpu_seconds;
    sl__waits_t waits;
    int show;         /* progress line on (a terminal, no --quiet) */
    int stopped;      /* the loop ended on SIGINT / SIGTERM / SIGHUP: it */
    int state_failed; /* --state could not be written */
    int rc;
    char error[1024]; /* with rc: the stream's message */
} sl__consume_t;

/** Parses argv (cli->opts: the command's options into c->ctx, the shared
 *  ones into *c->args; then cli->operands); sets c->cmd, c->config and
 *  c->show; reads --resume (when given) into c->from and c->h, checking
 *  its magic and config; sets *epochs to those still to run (all, 1, or
 *  until the clock with --duration; less those a resumed run did).
 *  @return 0 (go on), 2 (a bad command line or --resume: exit status 2),
 *  or -1 (--help, or nothing left to resume: exit status 0). */
int sl__consume_begin(sl__consume_t *c, const sl__consume_cli_t *cli, int argc,
                      char **argv, int64_t *epochs);
/** Once the loader is made: the source's samples (text: documents) and a
 *  hash of what else identifies it, for --state; with --resume, checked
 *  against the file's (a changed source would resume onto other samples).
 *  @return 0, or 2 (printed why: exit status 2). */
int sl__consume_source(sl__consume_t *c, int64_t samples, uint64_t dataset);
/** Starts the stream at c->from and consumes it: until its end, c->total,
 *  --stop-after, --duration or Ctrl-C / SIGTERM / SIGHUP; then prints
 *  skipped samples and any error, and writes --state. Fills the figures
 *  of *c; c->rc is 0 or SL_E*. Then call sl__consume_report.
 *
 *  SIGINT, SIGTERM or SIGHUP (caught from here on, unless ignored, as
 *  nohup does; cli/stopsig.h) stops the loop before the next batch: the
 *  position reached is the batches handed out,
 *  --state gets it (--resume continues there), the report is marked
 *  interrupted and sl__consume_exit gives 128 + the signal. The loop waits
 *  for a batch in slices (s->next's timeout), checking between them: the
 *  signal may land on any thread, so no wait is woken by it. A second
 *  signal ends the process at once. @return c->rc. */
int sl__consume_run(sl__consume_t *c, const sl__stream_t *s);
/** Fills the report's common fields from a run (noun, unit, threads,
 *  batch, out and the extras are the command's), prints it (the human
 *  line unless --json without a progress line; after an interrupting
 *  signal, where it stopped, and "interrupted" in the JSON) and frees
 *  c->waits. */
void sl__consume_report(sl__consume_t *c, sl__report_t *r);
/** The command's exit status after a run: 1 on an error, 128 + the signal
 *  after SIGINT / SIGTERM / SIGHUP (130 / 143 / 129), else 0. */
int sl__consume_exit(const sl__consume_t *c);

#endif
