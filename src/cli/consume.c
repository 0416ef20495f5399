/* cli/consume: the consumer loop shared by `run` / `bench` and `run --task`
 * (see consume.h). */
#include "consume.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

int sl__parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* One of SL__CONSUME_OPTIONS. @return 1 taken, 0 not one of them, -1 a bad
 * value. */
static int consume_opt(int c, const char *s, sl__consume_args_t *a)
{
    long long v = 0;
    int bad = 0;
    switch (c) {
    case SL__OPT_DIGEST:
        a->digest = 1;
        break;
    case SL__OPT_STOP:
        bad = sl__parse_ll(s, 1, INT64_MAX, &v), a->stop_after = v;
        break;
    case SL__OPT_STATE:
        a->state_out = s;
        break;
    case SL__OPT_RESUME:
        a->resume = s;
        break;
    case SL__OPT_JSON:
        a->json = 1;
        break;
    case SL__OPT_QUIET:
        a->quiet = 1;
        break;
    case SL__OPT_DURATION:
        a->duration = strtod(s, NULL);
        bad = !(a->duration > 0);
        break;
    case SL__OPT_BATCH:
        bad = sl__parse_ll(s, 1, 1 << 20, &v), a->batch = (int)v;
        break;
    case SL__OPT_THREADS:
        bad = sl__parse_ll(s, 1, 256, &v), a->threads = (int)v;
        break;
    case SL__OPT_EPOCHS:
        bad = sl__parse_ll(s, 1, 1000000, &v), a->epochs = v;
        break;
    case SL__OPT_SEED:
        bad = sl__parse_ll(s, 0, INT64_MAX, &v), a->seed = (uint64_t)v;
        break;
    case SL__OPT_NOSHUF:
        a->no_shuffle = 1;
        break;
    case SL__OPT_DROP:
        a->drop_last = 1;
        break;
    case SL__OPT_RANK:
        bad = sl__parse_ll(s, 0, 1 << 20, &v), a->rank = (int)v;
        break;
    case SL__OPT_WORLD:
        bad = sl__parse_ll(s, 1, 1 << 20, &v), a->world = (int)v;
        break;
    case SL__OPT_ONERR:
        a->on_error_set = 1;
        if (!strcmp(s, "fail"))
            a->on_error = SL_ON_ERROR_FAIL;
        else if (!strcmp(s, "skip"))
            a->on_error = SL_ON_ERROR_SKIP;
        else
            bad = 1;
        break;
    default:
        return 0;
    }
    return bad ? -1 : 1;
}

/* getopt_long over argv: the shared options to *a, the others to own().
 * @return 0, or -1 after printing what was wrong and the usage. */
static int parse_opts(int argc, char **argv, const struct option *lo,
                      sl__own_opt_fn own, void *ctx, sl__consume_args_t *a,
                      void (*usage)(FILE *, const char *))
{
    int c, li = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        const char *s = optarg;
        if (c == SL__OPT_HELP || c == 'h') {
            usage(stdout, argv[0]);
            exit(0);
        }
        int bad = consume_opt(c, s, a);
        if (bad == 0) {
            bad = own(c, s, ctx);
            if (bad < 0) /* not an option: getopt_long said so */
                goto fail;
        } else {
            bad = bad < 0;
        }
        if (bad) {
            fprintf(stderr, "sluice %s: bad value '%s' for --%s\n", argv[0],
                    s ? s : "", lo[li].name);
            goto fail;
        }
    }
    return 0;
fail:
    usage(stderr, argv[0]);
    return -1;
}

int sl__consume_bad(void (*usage)(FILE *, const char *), const char *cmd,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sluice %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage(stderr, cmd);
    return -1;
}

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
    if (parse_opts(argc, argv, cli->lo, cli->own, c->ctx, c->args,
                   cli->usage) ||
        cli->operands(argc, argv, c->ctx))
        return 2;
    c->cmd = argv[0];
    c->config = cli->config(c->ctx);
    c->show = !a->quiet && isatty(2);
    uint64_t cfg = 0;
    if (!a->resume)
        goto left;
    if (sl__state_read(a->resume, c->magic, &c->from, &c->h, &cfg)) {
        fprintf(stderr, "sluice %s: %s: not a sluice state file\n", c->cmd,
                a->resume);
        return 2;
    }
    if (cfg != c->config) {
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

static void print_skips(const sl__stream_t *s, int64_t *shown)
{
    int64_t n = s->skipped_count(s->loader);
    for (; *shown < n; (*shown)++) {
        const char *m = s->skipped_message(s->loader, *shown);
        if (!m) { /* past the kept messages: counted only */
            *shown = n;
            break;
        }
        fprintf(stderr, "skipped: %s\n", m);
    }
}

static void hold(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int sl__consume_run(sl__consume_t *c, const sl__stream_t *s)
{
    const sl__consume_args_t *a = c->args;
    void *l = s->loader;
    if (a->stop_after && a->stop_after < c->total)
        c->total = a->stop_after;
    size_t cap = c->total > 0 && c->total < 4096 ? (size_t)c->total : 4096;
    int rc = sl__waits_init(&c->waits, cap) ? SL_ENOMEM : 0;
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    if (!rc)
        rc = s->start(l, &c->from);
    int64_t last_draw = 0, shown = 0;
    c->t0 = sl__now_ns();
    c->epoch = c->from.epoch;
    while (!rc && c->done < c->total) {
        if (c->before)
            c->before(c, (double)(sl__now_ns() - c->t0) / 1e9);
        sl__item_t it;
        int64_t w0 = sl__now_ns();
        rc = s->next(l, &it);
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
        if (c->step_ms > 0)
            hold(c->step_ms);
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
    if (c->show)
        fputc('\n', stderr);
    print_skips(s, &shown);
    if (rc == SL_EEND)
        rc = 0;
    if (rc)
        fprintf(stderr, "sluice %s: error: %s\n", c->cmd, s->last_error(l));
    c->cpu_seconds = sl__cpu_seconds_since(&ru0);
    s->stats(l, &c->errors_skipped, &c->bytes_read);
    s->position(l, &c->pos);
    if (a->state_out &&
        sl__state_write(a->state_out, c->magic, &c->pos, c->h, c->config))
        fprintf(stderr, "sluice %s: cannot write %s\n", c->cmd, a->state_out);
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
    sl__report_print(r, !c->args->json || c->show, c->args->json);
    sl__waits_free(&c->waits);
}
