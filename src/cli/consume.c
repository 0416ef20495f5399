/* cli/consume: the consumer loop shared by `run` / `bench` and `run --task`
 * (see consume.h). */
#include "consume.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "stopsig.h"

#define F(f) offsetof(sl__consume_args_t, f)
static const char *const on_error_names[] = {"fail", "skip", NULL};
static const int on_error_values[] = {SL_ON_ERROR_FAIL, SL_ON_ERROR_SKIP};

const sl__opt_t sl__consume_opts[] = {
    {"batch", 0, SL__OPT_INT, F(batch), 1, 1 << 20, "N",
     "items per batch (images 64, text 8)"},
    {"threads", 0, SL__OPT_INT, F(threads), 1, 256, "N",
     "decode+transform or tokenizer threads", "cores"},
    {"epochs", 0, SL__OPT_I64, F(epochs), 1, 1000000, "E", "epochs", "1"},
    {"duration", 0, SL__OPT_DOUBLE, F(duration), SL__OPT_POS, HUGE_VAL, "S",
     "stop after S seconds (epochs repeat as needed)"},
    {"seed", 0, SL__OPT_I64, F(seed), 0, (double)INT64_MAX, "S", "random seed",
     "0"},
    {"no-shuffle", 0, SL__OPT_FLAG, F(no_shuffle), 0, 0, NULL,
     "keep the stored order"},
    {"drop-last", 0, SL__OPT_FLAG, F(drop_last), 0, 0, NULL,
     "leave out a last, smaller batch"},
    {"rank", 0, SL__OPT_INT, F(rank), 0, 1 << 20, "R",
     "with --world W: this process's share of the data"},
    {"world", 0, SL__OPT_INT, F(world), 1, 1 << 20, "W", "processes sharing"},
    {"on-error", 0, SL__OPT_CHOICE, F(on_error), 0, 0, NULL,
     "bad samples or documents", "fail", on_error_names, on_error_values},
    {"digest", 0, SL__OPT_FLAG, F(digest), 0, 0, NULL,
     "xxh3-64 over every batch's arrays (bytes and labels)"},
    {"stop-after", 0, SL__OPT_I64, F(stop_after), 1, (double)INT64_MAX, "N",
     "stop after N batches (see --state)"},
    {"state", 0, SL__OPT_STR, F(state_out), 0, 0, "FILE",
     "write the position (and digest) reached"},
    {"resume", 0, SL__OPT_STR, F(resume), 0, 0, "FILE",
     "continue from a --state file"},
    {"json", 0, SL__OPT_FLAG, F(json), 0, 0, NULL,
     "a JSON object of the figures as last line"},
    {"quiet", 0, SL__OPT_FLAG, F(quiet), 0, 0, NULL, "no progress line"},
    {NULL},
};

/* The epochs still to run from epoch `from` (a resumed position): all
 * `epochs`, or with none given 1, or 1000000 (until the clock) when
 * `duration` is set. */
static int64_t epochs_left(int64_t epochs, double duration, int64_t from)
{
    int64_t total = epochs ? epochs : duration > 0 ? 1000000 : 1;
    return total - from;
}

int sl__consume_begin(sl__consume_t *c, const sl__consume_cli_t *cli, int argc,
                      char **argv, int64_t *epochs)
{
    const sl__consume_args_t *a = c->args;
    int st = sl__opts_parse(cli->opts, c->ctx, c->args, argc, argv);
    if (st >= 0)
        return st ? st : -1;
    cli->operands(argv + optind, argc - optind, c->ctx);
    c->cmd = argv[0];
    c->config = cli->config(c->ctx);
    c->show = !a->quiet && isatty(2);
    char why[256];
    if (!a->resume)
        goto left;
    if (sl__state_read(a->resume, c->magic, &c->saved, why, sizeof why)) {
        fprintf(stderr, "sluice %s: --resume %s\n", c->cmd, why);
        return 2;
    }
    c->from = c->saved.pos;
    c->h = c->saved.digest;
    if (c->saved.config != c->config) {
        fprintf(stderr,
                "sluice %s: %s was written with other options or sources; "
                "resume with the same ones\n",
                c->cmd, a->resume);
        return 2;
    }
left:
    /* The state holds the absolute position; epochs count from the run's
     * first epoch, so shorten by the epochs already done. */
    *epochs = epochs_left(*epochs, a->duration, c->from.epoch);
    if (*epochs < 1) {
        fprintf(stderr, "sluice %s: nothing left to resume\n", c->cmd);
        return -1;
    }
    return 0;
}

int sl__consume_source(sl__consume_t *c, int64_t samples, uint64_t dataset)
{
    c->samples_in_source = samples;
    c->dataset = dataset;
    const char *f = c->args->resume;
    if (!f || (c->saved.samples == samples && c->saved.dataset == dataset))
        return 0;
    fprintf(stderr,
            "sluice %s: %s was written for a source of %lld samples (id "
            "%016llx); it now has %lld (id %016llx): the saved position "
            "would name other samples; resume with the same data\n",
            c->cmd, f, (long long)c->saved.samples,
            (unsigned long long)c->saved.dataset, (long long)samples,
            (unsigned long long)dataset);
    return 2;
}

static void print_skips(const sl__stream_t *s, int64_t *shown)
{
    int64_t n = s->skipped_count(s->loader);
    for (; *shown < n; (*shown)++) {
        const char *m = s->skipped_message(s->loader, *shown);
        if (!m) { /* past the kept messages: counted only */
            *shown = n;
            break;
        }
        /* the list holds warnings too (nothing lost): "warning: ..." */
        if (strncmp(m, "warning: ", 9) == 0)
            fprintf(stderr, "%s\n", m);
        else
            fprintf(stderr, "skipped: %s\n", m);
    }
}

static void hold(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Ctrl-C (SIGINT) or SIGTERM while batches flow (see consume.h, and
 * stopsig.h for the rule): the loop polls the stream in slices of
 * STOP_POLL_MS and stops taking batches once a stop signal came. */
#define STOP_POLL_MS 100

/* The stream's next, ending the stream (SL_EEND) once a stop signal came. */
static int next_or_stop(sl__consume_t *c, const sl__stream_t *s, sl__item_t *it)
{
    int rc = SL_ETIMEDOUT;
    while (rc == SL_ETIMEDOUT && !sl__stop_signal())
        rc = s->next(s->loader, it, STOP_POLL_MS);
    if (rc == SL_ETIMEDOUT) { /* stopped: the position is the next batch */
        c->stopped = sl__stop_signal();
        return SL_EEND;
    }
    return rc; /* one that came with the signal is taken: handed out */
}

int sl__consume_run(sl__consume_t *c, const sl__stream_t *s)
{
    const sl__consume_args_t *a = c->args;
    void *l = s->loader;
    if (a->stop_after && a->stop_after < c->total)
        c->total = a->stop_after;
    size_t cap = c->total > 0 && c->total < 4096 ? (size_t)c->total : 4096;
    int rc = sl__waits_init(&c->waits, cap) ? SL_ENOMEM : 0;
    sl__stop_catch("\nsluice: stopping: the summary and --state follow "
                   "(again to quit at once)\n");
    if (!rc)
        rc = s->start(l, &c->from);
    /* CPU and wall time over the same interval, from the start to the
     * last batch: CPU counted over a longer one (from before the start,
     * to after the error was printed) gave a cpu_util over 1 where a run
     * failed before its first batch. */
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    int64_t last_draw = 0, shown = 0;
    c->t0 = sl__now_ns();
    c->epoch = c->from.epoch;
    while (!rc && c->done < c->total) {
        if (c->before)
            c->before(c, (double)(sl__now_ns() - c->t0) / 1e9);
        sl__item_t it;
        int64_t w0 = sl__now_ns();
        rc = next_or_stop(c, s, &it);
        int64_t w = sl__now_ns() - w0;
        if (rc)
            break;
        if (sl__waits_add(&c->waits, w)) {
            s->release(l, it.batch);
            rc = SL_ENOMEM;
            break;
        }
        if (it.epoch != c->epoch) {
            print_skips(s, &shown);
            c->epoch = it.epoch;
        }
        if (a->digest)
            c->h = s->digest(it.batch, c->h);
        c->samples += it.n;
        c->tokens += it.tokens;
        c->done++;
        if (c->step_ms > 0) {
            hold(c->step_ms);
            c->stepped++;
        }
        s->release(l, it.batch);
        int64_t now = sl__now_ns();
        if (a->duration > 0 && (double)(now - c->t0) / 1e9 >= a->duration)
            break;
        if (c->show && c->progress &&
            (now - last_draw > 100000000 || c->done == c->total)) {
            last_draw = now;
            c->progress(c, now);
        }
    }
    c->seconds = (double)(sl__now_ns() - c->t0) / 1e9;
    c->cpu_seconds = sl__cpu_seconds_since(&ru0);
    if (c->show)
        fputc('\n', stderr);
    print_skips(s, &shown);
    if (rc == SL_EEND)
        rc = 0;
    if (rc) {
        snprintf(c->error, sizeof c->error, "%s", s->last_error(l));
        fprintf(stderr, "sluice %s: error: %s\n", c->cmd, c->error);
    }
    s->stats(l, &c->errors_skipped, &c->bytes_read);
    s->position(l, &c->pos);
    sl__state_t st = {c->pos, c->h, c->config, c->samples_in_source,
                      c->dataset};
    char why[512];
    if (a->state_out &&
        sl__state_write(a->state_out, c->magic, &st, why, sizeof why)) {
        /* the position is what --state promised: its loss fails the run */
        sl__msg_escape(why, sizeof why);
        fprintf(stderr, "sluice %s: error: cannot write the state file %s\n",
                c->cmd, why);
        if (!rc)
            snprintf(c->error, sizeof c->error,
                     "cannot write the state file %s", why);
        c->state_failed = 1;
        if (!rc)
            rc = SL_ESYSTEM;
    }
    return c->rc = rc;
}

void sl__consume_report(sl__consume_t *c, sl__report_t *r)
{
    r->samples = c->samples;
    r->batches = c->done;
    r->epochs = c->done ? c->epoch - c->from.epoch + 1 : 0;
    r->seconds = c->seconds;
    r->cpu_seconds = c->cpu_seconds;
    r->waits = &c->waits;
    r->errors_skipped = c->errors_skipped;
    r->bytes_read = c->bytes_read;
    r->pos = c->pos;
    r->digest = c->args->digest;
    r->h = c->h;
    r->rc = c->rc;
    r->message = c->rc ? c->error : NULL;
    r->loader_bound = c->done > 0 && !c->stepped;
    if (c->stopped) {
        const char *name = sl__stop_name(c->stopped);
        size_t k = strlen(r->json_shape);
        snprintf(r->json_shape + k, sizeof r->json_shape - k,
                 ", \"interrupted\": \"%s\"", name);
        const char *f = c->state_failed ? NULL : c->args->state_out;
        char *st = f ? sl__msg_escape_dup(f) : NULL;
        fprintf(stderr,
                "sluice %s: interrupted (%s) at epoch %" PRId64
                " batch %" PRId64 "%s%s%s\n",
                c->cmd, name, c->pos.epoch, c->pos.batch,
                st ? ": --resume " : "", st ? st : "",
                st ? " continues there" : "");
        free(st);
    }
    sl__report_print(r, !c->args->json || c->show, c->args->json);
    sl__waits_free(&c->waits);
}

int sl__consume_exit(const sl__consume_t *c)
{
    return c->rc ? 1 : sl__stop_signal() ? 128 + sl__stop_signal() : 0;
}
