/* cli/consume: the consumer loop of `run` / `bench` (cmd_run.c) and of their
 * text form `run --task` (cmd_text.c), written once: the options both take,
 * --resume, the loop itself (wait times, --digest, --stop-after,
 * --duration, the progress line, skipped-sample messages), --state, and
 * the figures handed to the report. Each command supplies its loader
 * through sl__stream_t (next / release / digest / position ...). */
#ifndef SL_CLI_CONSUME_H
#define SL_CLI_CONSUME_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>

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
    int on_error, on_error_set; /* SL_ON_ERROR_*; --on-error given */
} sl__consume_args_t;

/* getopt_long codes of those options, clear of each command's own. */
enum {
    SL__OPT_DIGEST = 0x1000,
    SL__OPT_STOP,
    SL__OPT_STATE,
    SL__OPT_RESUME,
    SL__OPT_JSON,
    SL__OPT_QUIET,
    SL__OPT_DURATION,
    SL__OPT_BATCH,
    SL__OPT_THREADS,
    SL__OPT_EPOCHS,
    SL__OPT_SEED,
    SL__OPT_NOSHUF,
    SL__OPT_DROP,
    SL__OPT_RANK,
    SL__OPT_WORLD,
    SL__OPT_ONERR,
    SL__OPT_HELP
};

/* Their `struct option` entries, to end a command's table (one a line, as
 * the tables have them; clang-format would pack them). */
/* clang-format off */
#define SL__CONSUME_OPTIONS                                                    \
    {"digest", 0, 0, SL__OPT_DIGEST},                                          \
    {"stop-after", 1, 0, SL__OPT_STOP},                                        \
    {"state", 1, 0, SL__OPT_STATE},                                            \
    {"resume", 1, 0, SL__OPT_RESUME},                                          \
    {"json", 0, 0, SL__OPT_JSON},                                              \
    {"quiet", 0, 0, SL__OPT_QUIET},                                            \
    {"duration", 1, 0, SL__OPT_DURATION},                                      \
    {"batch", 1, 0, SL__OPT_BATCH},                                            \
    {"threads", 1, 0, SL__OPT_THREADS},                                        \
    {"epochs", 1, 0, SL__OPT_EPOCHS},                                          \
    {"seed", 1, 0, SL__OPT_SEED},                                              \
    {"no-shuffle", 0, 0, SL__OPT_NOSHUF},                                      \
    {"drop-last", 0, 0, SL__OPT_DROP},                                         \
    {"rank", 1, 0, SL__OPT_RANK},                                              \
    {"world", 1, 0, SL__OPT_WORLD},                                            \
    {"on-error", 1, 0, SL__OPT_ONERR},                                         \
    {"help", 0, 0, SL__OPT_HELP},                                              \
    {0, 0, 0, 0}
/* clang-format on */

/** Copies the shared stream options into a loader's options `o` (the
 *  image and text options name these fields alike; threads and on_error
 *  differ, and each command copies them itself). */
#define SL__CONSUME_COPY_STREAM(o, c)                                          \
    do {                                                                       \
        (o)->batch_size = (c)->batch;                                          \
        (o)->epochs = (c)->epochs;                                             \
        (o)->seed = (c)->seed;                                                 \
        (o)->no_shuffle = (c)->no_shuffle;                                     \
        (o)->drop_last = (c)->drop_last;                                       \
        (o)->rank = (c)->rank;                                                 \
        (o)->world_size = (c)->world;                                          \
    } while (0)

/** A command's own option: getopt_long's code `c`, argument `arg`.
 *  @return 0 taken, 1 a bad value, -1 not one of its options. */
typedef int (*sl__own_opt_fn)(int c, const char *arg, void *ctx);

/** A command's half of the command line. */
typedef struct sl__consume_cli {
    const struct option *lo; /* its entries, then SL__CONSUME_OPTIONS */
    sl__own_opt_fn own;      /* its options */
    /* Its operands (argv[optind..]), then the shared stream options copied
     * into its loader's; @return 0, or -1 after sl__consume_bad. */
    int (*operands)(int argc, char **argv, void *ctx);
    void (*usage)(FILE *f, const char *cmd);
    uint64_t (*config)(const void *ctx); /* what --state must agree on */
} sl__consume_cli_t;

/** Prints "sluice CMD: <fmt...>" and the usage to stderr (a bad command
 *  line). @return -1. */
int sl__consume_bad(void (*usage)(FILE *, const char *), const char *cmd,
                    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** Parses a whole decimal number in [lo, hi] into *out. @return 0, or -1
 *  (*out unchanged). */
int sl__parse_ll(const char *s, long long lo, long long hi, long long *out);

/** One batch as the loop sees it. */
typedef struct sl__item {
    const void *batch; /* the loader's, handed back to release */
    int64_t n, epoch, tokens;
} sl__item_t;

/** A loader, as the loop drives it. */
typedef struct sl__stream {
    void *loader;
    int (*start)(void *l, const sl_position_t *from);
    int (*next)(void *l, sl__item_t *it);
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
    const char *cmd;         /* for messages: "run" | "bench" */
    uint64_t config;         /* what a --state file must agree on */
    sl_position_t from, pos; /* start, and reached */
    uint64_t h;              /* digest */
    int64_t done, samples, tokens, epoch;
    int64_t t0, errors_skipped, bytes_read;
    double seconds, cpu_seconds;
    sl__waits_t waits;
    int show; /* progress line on (a terminal, no --quiet) */
    int rc;
} sl__consume_t;

/** Parses argv (getopt_long over cli->lo: the shared options into
 *  *c->args, the others to cli->own(c->ctx); then cli->operands; --help
 *  prints the usage to stdout and exits 0); sets c->cmd, c->config and
 *  c->show; reads --resume (when given) into c->from and c->h, checking
 *  its magic and config; sets *epochs to those still to run (all, 1, or
 *  until the clock with --duration; less those a resumed run did).
 *  @return 0 (go on), 2 (a bad command line or --resume: exit status 2),
 *  or -1 (nothing left to resume: exit status 0), after a message. */
int sl__consume_begin(sl__consume_t *c, const sl__consume_cli_t *cli, int argc,
                      char **argv, int64_t *epochs);
/** Starts the stream at c->from and consumes it: until its end, c->total,
 *  --stop-after or --duration; then prints skipped samples and any error,
 *  and writes --state. Fills the figures of *c; c->rc is 0 or SL_E*.
 *  Then call sl__consume_report. @return c->rc. */
int sl__consume_run(sl__consume_t *c, const sl__stream_t *s);
/** Fills the report's common fields from a run (noun, unit, threads,
 *  batch, out and the extras are the command's), prints it (the human
 *  line unless --json without a progress line) and frees c->waits. */
void sl__consume_report(sl__consume_t *c, sl__report_t *r);

#endif
