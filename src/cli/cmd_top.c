/* `sluice top --port P | --url U | --pid N`: a live view of a running job
 * from its metrics endpoint, refreshed every --interval seconds, like htop:
 * full screen on a terminal (q quits; a resize redraws), one plain frame
 * per interval when stdout is not a terminal or TERM is dumb, one frame
 * with --once. The model and the text are telemetry/top.h; this file is
 * the terminal. Exit 0 (also when the job ends: a last line says so), 1
 * cannot attach or the endpoint keeps failing, 2 usage. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "cli.h"
#include "opts.h"
#include "sluice/sluice.h"
#include "telemetry/top.h"

typedef struct top_args {
    int port, pid, once, frames;
    const char *url;
    double interval;
} top_args_t;

#define F(f) offsetof(top_args_t, f)
static const sl__opt_t top_opts[] = {
    {"port", 'p', SL__OPT_INT, F(port), 1, 65535, "P",
     "the job's --metrics-port: http://127.0.0.1:P/metrics"},
    {"url", 0, SL__OPT_STR, F(url), 0, 0, "U",
     "or its endpoint's URL, http://HOST:P/metrics"},
    {"pid", 0, SL__OPT_INT, F(pid), 1, 2147483647, "N",
     "or its process id: the port it serves metrics on is found from its "
     "sockets (/proc/N/fd, /proc/N/net/tcp)"},
    {"interval", 'i', SL__OPT_DOUBLE, F(interval), 0.1, 3600, "S",
     "seconds between refreshes (rates are over this time)", "1"},
    {"once", 0, SL__OPT_FLAG, F(once), 0, 0, NULL,
     "print one frame (rates over one interval) and exit"},
    {"frames", 'n', SL__OPT_INT, F(frames), 1, 1000000000, "N",
     "plain text: print N frames, one per interval, and exit"},
    {NULL},
};

static const sl__opts_t top_usage = {
    "--port P | --url U | --pid N [--interval S] [--once | --frames N]",
    "  throughput, stall, per-stage busy and queues, knobs, the scheduler's\n"
    "  recent decisions, CPU and memory of a job started with\n"
    "  `sluice run ... --metrics-port P` (or metrics_port=P in Python)\n",
    {top_opts},
    "no operands",
    0,
    0,
    "keys: q quits. Not a terminal (or TERM=dumb): one plain frame per\n"
    "interval. The job ending (connection refused) ends top with exit 0.\n"};

#define SCRAPE_MS 2000 /* one scrape's time limit */
#define MAX_FAILS 5    /* failed scrapes in a row before giving up */

static volatile sig_atomic_t quit_sig, resized, suspend_req;
static void on_tstp(int sig)
{
    (void)sig;
    suspend_req = 1;
}
static void on_quit(int sig)
{
    quit_sig = sig;
}
static void on_winch(int sig)
{
    (void)sig;
    resized = 1;
}

/* The terminal, restored however top ends (q, a signal, the job ending). */
static struct termios saved_tio;
static int raw_on, screen_on;

static void term_restore(void)
{
    if (screen_on) {
        fputs("\x1b[?25h\x1b[?1049l", stdout); /* cursor, main screen */
        fflush(stdout);
        screen_on = 0;
    }
    if (raw_on) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
        raw_on = 0;
    }
}

static void term_enter(void)
{
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
        struct termios t = saved_tio;
        t.c_lflag &= (tcflag_t) ~(ICANON | ECHO); /* keys at once, unseen */
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        raw_on = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
    }
    fputs("\x1b[?1049h\x1b[?25l", stdout); /* alternate screen, no cursor */
    screen_on = 1;
}

/* Ctrl-Z: the shell's screen back while stopped, ours again on fg. */
static void suspend(void)
{
    suspend_req = 0;
    term_restore();
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP); /* stops here until SIGCONT */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tstp;
    sigaction(SIGTSTP, &sa, NULL);
    term_enter();
    resized = 1; /* redraw */
}

static void term_size(int *w, int *h)
{
    struct winsize ws;
    *w = 80;
    *h = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 &&
        ws.ws_row > 0) {
        *w = ws.ws_col;
        *h = ws.ws_row;
    }
}

/* One frame's text into a buffer that grows to fit. */
static char *render(const sl__top_frame_t *f, const char *src, int w, int h)
{
    int need = sl__top_render(f, src, w, h, NULL, 0);
    char *b = malloc((size_t)need + 1);
    if (b)
        sl__top_render(f, src, w, h, b, (size_t)need + 1);
    return b;
}

/* Full screen: home, each line cleared to its end, the rest cleared, and
 * the status line (reverse video) on the last row. */
static void draw(const sl__top_frame_t *f, const char *src, const char *status)
{
    int w, h;
    term_size(&w, &h);
    char *b = render(f, src, w, h > 1 ? h - 1 : 1);
    fputs("\x1b[H", stdout);
    for (char *p = b, *nl; p && (nl = strchr(p, '\n')); p = nl + 1)
        /* A full-width line leaves the cursor on its last column, where
         * erasing to the end would take that character too. */
        printf("%.*s%s\r\n", (int)(nl - p), p, nl - p < w ? "\x1b[K" : "");
    free(b);
    printf("\x1b[J\x1b[%d;1H\x1b[7m%-*.*s\x1b[0m", h, w, w, status);
    fflush(stdout);
}

static void print_plain(const sl__top_frame_t *f, const char *src)
{
    const char *cols = getenv("COLUMNS");
    int w = cols && atoi(cols) >= 20 ? atoi(cols) : 80;
    char *b = render(f, src, w, 1000);
    if (b)
        fputs(b, stdout);
    free(b);
    putchar('\n');
    fflush(stdout);
}

/* Waits until the deadline (monotonic ns) for keys and resizes: 1 when q
 * was pressed or a signal asks to quit, 0 at the deadline. A resize
 * redraws the last frame at once. */
static int wait_keys(int64_t deadline, int interactive,
                     const sl__top_frame_t *f, const char *src,
                     const char *status)
{
    for (;;) {
        if (quit_sig)
            return 1;
        if (suspend_req && interactive)
            suspend();
        if (resized) {
            resized = 0;
            if (interactive)
                draw(f, src, status);
        }
        int64_t left = deadline - sl__now_ns();
        if (left <= 0)
            return 0;
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        int r = poll(&p, raw_on ? 1 : 0, (int)(left / 1000000) + 1);
        if (r > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL)) &&
            !(p.revents & POLLIN))
            raw_on = 0; /* stdin gone: no more keys to read */
        if (r > 0 && (p.revents & POLLIN)) {
            char k[64];
            ssize_t n = read(STDIN_FILENO, k, sizeof k);
            for (ssize_t i = 0; i < n; i++)
                if (k[i] == 'q' || k[i] == 'Q')
                    return 1;
        }
    }
}

static void on_signals(int interactive)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit; /* no SA_RESTART: poll returns at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_winch;
    sigaction(SIGWINCH, &sa, NULL);
    if (interactive) {
        sa.sa_handler = on_tstp;
        sigaction(SIGTSTP, &sa, NULL);
    }
}

/* Where to scrape, from --port / --url / --pid. */
static int target(const top_args_t *a, sl__url_t *u, char *err, size_t n)
{
    if (a->url)
        return sl__url_parse(a->url, u, err, n);
    if (a->port) {
        *u = (sl__url_t){"127.0.0.1", a->port, "/metrics"};
        return 0;
    }
    return sl__top_attach_pid(a->pid, SCRAPE_MS, u, err, n);
}

int sl__cmd_top(int argc, char **argv)
{
    top_args_t a = {0};
    a.interval = 1;
    int rc = sl__opts_parse(&top_usage, &a, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    if (optind < argc)
        return sl__opts_bad(&top_usage, "top", "unexpected operand '%s'",
                            argv[optind]);
    if (!!a.port + !!a.url + !!a.pid != 1)
        return sl__opts_bad(&top_usage, "top",
                            "give one of --port, --url or --pid");
    char err[512];
    sl__url_t u, du;
    if (target(&a, &u, err, sizeof err)) {
        fprintf(stderr, "sluice top: %s\n", err);
        return 1;
    }
    int have_dec = sl__top_decisions_url(&u, &du) == 0;
    char src[sizeof u.host + sizeof u.path + 16];
    snprintf(src, sizeof src, "%s:%d%s", u.host, u.port, u.path);

    sl__prom_set_t prev = {0}, cur = {0}, dec = {0}, tmp;
    sl__top_frame_t f;
    int ret = 0, fails = 0, frames = 0;
    if ((rc = sl__top_scrape(&u, SCRAPE_MS, &cur, err, sizeof err))) {
        fprintf(stderr, "sluice top: %s%s\n", err,
                rc == SL_EEND ? " (no job serves metrics there)" : "");
        return 1;
    }
    const char *term = getenv("TERM");
    int interactive = !a.once && !a.frames && isatty(STDOUT_FILENO) && term &&
                      *term && strcmp(term, "dumb");
    on_signals(interactive);
    if (interactive) {
        term_enter();
        atexit(term_restore);
    }
    char status[600];
    snprintf(status, sizeof status, " q quits   refresh %.1f s", a.interval);
    int64_t period = (int64_t)(a.interval * 1e9);
    int64_t next = sl__now_ns();
    for (;;) {
        /* Decisions are best-effort: an older job has no /decisions. */
        if (have_dec &&
            sl__top_scrape(&du, SCRAPE_MS, &dec, err, sizeof err) != 0)
            dec.n = 0;
        sl__top_frame_make(&prev, &cur, &dec, &f);
        if (interactive)
            draw(&f, src, status);
        else if (!a.once || prev.n) /* --once: the frame with rates */
            print_plain(&f, src), frames++;
        if ((a.once && prev.n) || (a.frames && frames >= a.frames))
            break;
        next += period;
        if (wait_keys(next, interactive, &f, src, status))
            break;
        if (sl__now_ns() > next + period) /* suspended: no burst */
            next = sl__now_ns();
        rc = sl__top_scrape(&u, SCRAPE_MS, &prev, err, sizeof err);
        if (rc == 0) {
            tmp = prev, prev = cur, cur = tmp; /* prev: the scrape before */
            fails = 0;
            snprintf(status, sizeof status, " q quits   refresh %.1f s",
                     a.interval);
            continue;
        }
        if (rc == SL_EEND) {
            term_restore();
            if (interactive || !frames) /* the last frame seen stays */
                print_plain(&f, src);
            printf("sluice top: the job at %s has ended (%s); last seen at "
                   "up %.1f s with %.0f samples\n",
                   src, err, f.uptime_s, f.samples_total);
            break;
        }
        if (++fails >= MAX_FAILS) {
            term_restore();
            fprintf(stderr, "sluice top: %s (%d scrapes in a row failed)\n",
                    err, fails);
            ret = 1;
            break;
        }
        snprintf(status, sizeof status, " q quits   %s", err);
        prev.n = 0; /* rates again from the next good scrape */
    }
    term_restore();
    sl__prom_set_free(&prev);
    sl__prom_set_free(&cur);
    sl__prom_set_free(&dec);
    return ret;
}
