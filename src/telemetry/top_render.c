/* sluice top's text: one frame as lines that fit the screen. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "telemetry/decision_text.h"
#include "top.h"

typedef struct screen {
    sl__sbuf_t out;
    int width, height, lines;
} screen_t;

/* One line, cut to the width, non-printable bytes as '?'; none past the
 * height. */
__attribute__((format(printf, 2, 3))) static void line(screen_t *s,
                                                       const char *fmt, ...)
{
    if (s->lines >= s->height)
        return;
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    size_t n = strlen(b);
    if (n > (size_t)s->width)
        n = (size_t)s->width;
    while (n > 0 && b[n - 1] == ' ')
        n--;
    b[n] = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)b[i] < 0x20 || (unsigned char)b[i] > 0x7e)
            b[i] = '?';
    sl__sbuf_printf(&s->out, "%s\n", b);
    s->lines++;
}

/* A decision's text on up to `most` lines, broken at spaces, the lines
 * after the first indented; the last one cut at the width. */
#define DEC_INDENT 12
#define DEC_LINES 3
static void wrapped(screen_t *s, const char *t, int indent, int most)
{
    for (int k = 0; k < most && *t; k++) {
        int room = s->width - (k ? indent : 0);
        int n = (int)strlen(t);
        if (n > room && k + 1 < most && room > 0) {
            int cut = room;
            while (cut > room / 2 && t[cut] != ' ')
                cut--;
            n = t[cut] == ' ' ? cut : room;
        }
        line(s, "%*s%.*s", k ? indent : 0, "", n, t);
        t += n;
        while (*t == ' ')
            t++;
    }
}

/* A number or "-" when unknown, into b. */
static const char *num(char *b, size_t n, const char *fmt, double v)
{
    if (v < 0)
        snprintf(b, n, "-");
    else
        snprintf(b, n, fmt, v);
    return b;
}

static const char *pct(char *b, size_t n, double v)
{
    return num(b, n, "%.1f %%", v < 0 ? v : v * 100);
}

static const char *bytes(char *b, size_t n, double v)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (v < 0)
        return num(b, n, "", v);
    snprintf(b, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return b;
}

static const char *dur(char *b, size_t n, double s)
{
    if (s < 0)
        return num(b, n, "", s);
    if (s >= 1e9) /* not a job's clock; shown, not converted */
        return num(b, n, "%.3gs", s);
    long t = (long)s;
    if (t >= 3600)
        snprintf(b, n, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60)
        snprintf(b, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(b, n, "%.1fs", s);
    return b;
}

static void stage_lines(screen_t *s, const sl__top_frame_t *f)
{
    /* The bar takes what the columns leave: name 8, threads 8, the
     * percentage 8, the queue 12. */
    int bar = s->width - 40;
    if (bar > 50)
        bar = 50;
    line(s, "%-8s %7s  %-*s %6s  %11s", "stage", "threads",
         bar > 2 ? bar + 2 : 0, bar > 2 ? "busy" : "", bar > 2 ? "" : "busy",
         "queue");
    for (int k = 0; k < f->nstages; k++) {
        const sl__top_stage_t *g = &f->stage[k];
        char bb[64] = "", th[16], bu[16], q[32];
        if (bar > 2) {
            double busy = g->busy > 1 ? 1 : g->busy;
            int fill = busy > 0 ? (int)(busy * bar + 0.5) : 0;
            bb[0] = '[';
            for (int i = 0; i < bar; i++)
                bb[1 + i] = i < fill ? '#' : ' ';
            bb[bar + 1] = ']';
            bb[bar + 2] = 0;
        }
        num(th, sizeof th, "%.0f", g->threads);
        snprintf(bu, sizeof bu, "%s", g->busy < 0 ? "-" : "");
        if (g->busy >= 0)
            snprintf(bu, sizeof bu, "%.0f %%", g->busy * 100);
        if (g->queue >= 0 && g->capacity >= 0)
            snprintf(q, sizeof q, "%d/%d", g->queue, g->capacity);
        else
            snprintf(q, sizeof q, "-");
        line(s, "%-8s %7s  %s %6s  %11s", g->name, th, bb, bu, q);
    }
}

int sl__top_render(const sl__top_frame_t *f, const char *source, int width,
                   int height, char *buf, size_t len)
{
    screen_t s = {{buf, len, 0, 0}, width < 1 ? 1 : width, height, 0};
    if (buf && len)
        buf[0] = 0;
    char a[32], b[32], c[32], d[32];
    line(&s, "sluice top  %s  up %s%s", source, dur(a, sizeof a, f->uptime_s),
         f->span_s > 0 ? "" : "  (rates: the job's last 0.1 s)");
    line(&s, "samples/s  %10s   batches/s %8s   samples %s   skipped %s",
         num(a, sizeof a, "%.1f", f->samples_per_s),
         num(b, sizeof b, "%.1f", f->batches_per_s),
         num(c, sizeof c, "%.0f", f->samples_total),
         num(d, sizeof d, "%.0f", f->errors_skipped));
    line(&s, "stall      %10s   wait/batch %s   (consumer waiting for data)",
         pct(a, sizeof a, f->stall), num(b, sizeof b, "%.2f ms", f->wait_ms));
    int rt = -1, dt = -1;
    for (int k = 0; k < f->nstages; k++) {
        if (!strcmp(f->stage[k].name, "read"))
            rt = f->stage[k].threads;
        else if (!strcmp(f->stage[k].name, "decode"))
            dt = f->stage[k].threads;
    }
    line(&s, "knobs      read_threads %s   decode_threads %s   prefetch %s",
         num(a, sizeof a, "%.0f", rt), num(b, sizeof b, "%.0f", dt),
         num(c, sizeof c, "%.0f", f->prefetch));
    line(&s, "%s", "");
    stage_lines(&s, f);
    line(&s, "batches    %s ready of %s buffers",
         num(a, sizeof a, "%.0f", f->batches_ready),
         num(b, sizeof b, "%.0f", f->prefetch));
    line(&s, "%s", "");
    line(&s, "cpu        self %s   other %s   total %s   run queue %s",
         pct(a, sizeof a, f->cpu_self), pct(b, sizeof b, f->cpu_other),
         pct(c, sizeof c, f->cpu_total),
         num(d, sizeof d, "%.0f", f->run_queue));
    line(&s, "memory     rss %s   available %s   disk read %s/s",
         bytes(a, sizeof a, f->rss_bytes),
         bytes(b, sizeof b, f->mem_available_bytes),
         bytes(c, sizeof c, f->disk_read_bytes_per_s));
    if (f->gpu_util >= 0)
        line(&s, "gpu        %s busy", pct(a, sizeof a, f->gpu_util));
    if (f->gpu_share >= 0)
        line(&s,
             "placement  GPU share %s   stage %s/s, busy %s   its CPU %s cores",
             pct(a, sizeof a, f->gpu_share),
             num(b, sizeof b, "%.0f", f->gpu_samples_per_s),
             pct(c, sizeof c, f->gpu_busy),
             num(d, sizeof d, "%.2f", f->gpu_cpu_cores));
    line(&s, "%s", "");
    line(&s, "decisions  %s knob change%s%s",
         num(a, sizeof a, "%.0f", f->decisions_total),
         f->decisions_total == 1 ? "" : "s", f->ndec ? ", newest first:" : "");
    for (int i = f->ndec - 1; i >= 0; i--) {
        const sl__top_decision_t *e = &f->dec[i];
        char what[224], d[256];
        sl__decision_text(what, sizeof what, e->knob, e->from, e->to, NULL,
                          NULL, e->reason);
        snprintf(d, sizeof d, "  %8s  %s", dur(a, sizeof a, e->t), what);
        wrapped(&s, d, DEC_INDENT, DEC_LINES);
    }
    return s.out.need;
}
