/* `sluice plot TELEMETRY.jsonl... -o FILE.svg|FILE.png [--title T]`: draws a
 * `--telemetry` file (docs/TELEMETRY.md) as five stacked panels over t with
 * gnuplot, or two or more files compared (--labels names them); the work
 * is telemetry/plot.h. Exit 0 drawn, 1 failure, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "opts.h"
#include "telemetry/plot.h"

typedef struct plot_args {
    const char *out, *title, *labels;
    int raw;
} plot_args_t;

static const sl__opt_t plot_opts[] = {
    {"output", 'o', SL__OPT_STR, offsetof(plot_args_t, out), 0, 0, "F",
     ".svg or .png: panels over t: samples/s (delivered, read, decoded on "
     "the CPU, by the GPU stage), stall % and the GPU share, CPU % (self, "
     "other, total), queue depths, knob values; for URLs requests/s"},
    {"title", 't', SL__OPT_STR, offsetof(plot_args_t, title), 0, 0, "T",
     "title", "the telemetry file's name"},
    {"raw", 0, SL__OPT_FLAG, offsetof(plot_args_t, raw), 0, 0, NULL,
     "also each snapshot's own rates and shares, as points (the lines are "
     "means over >= 1 s and >= 3 batches)"},
    {"labels", 0, SL__OPT_STR, offsetof(plot_args_t, labels), 0, 0, "A,B,..",
     "files compared: their names in the legends, in order", "the file names"},
    {NULL},
};

static const sl__opts_t plot_usage = {
    "TELEMETRY.jsonl... -o FILE.svg|FILE.png [--title T] [--raw]",
    "  TELEMETRY.jsonl: written by `sluice run --telemetry FILE`\n"
    "  two or more (at most 8): the runs compared, over each other in four\n"
    "  panels (samples/s delivered with each run's mean, stall, the GPU\n"
    "  share, CPU of sluice and of other processes), a colour each\n",
    {plot_opts},
    "TELEMETRY.jsonl files (1 to 8)",
    1,
    SL__PLOT_MAX_RUNS,
    "needs gnuplot (Debian: apt-get install gnuplot-nox)\n"};

/* 1 png, 0 svg, -1 other (case-insensitive extension). */
static int out_kind(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot || strchr(dot, '/'))
        return -1;
    if (!strcasecmp(dot, ".png"))
        return 1;
    if (!strcasecmp(dot, ".svg"))
        return 0;
    return -1;
}

int sl__cmd_plot(int argc, char **argv)
{
    plot_args_t a = {NULL, NULL, NULL, 0};
    int rc = sl__opts_parse(&plot_usage, &a, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    const char *out = a.out, *title = a.title;
    if (!out)
        return sl__opts_bad(&plot_usage, "plot",
                            "no output given (-o FILE.svg|FILE.png)");
    int png = out_kind(out);
    if (png < 0) {
        fprintf(stderr,
                "sluice plot: %s: unknown output type; name it .svg or .png\n",
                out);
        return 2;
    }
    int nin = argc - optind;
    if (a.raw && nin > 1)
        return sl__opts_bad(&plot_usage, "plot",
                            "--raw draws one file, not files compared");
    /* --labels: a name a file, split at commas, as many as the files */
    const char *labels[SL__PLOT_MAX_RUNS] = {NULL};
    char lbuf[1024];
    if (a.labels) {
        if (nin < 2)
            return sl__opts_bad(&plot_usage, "plot",
                                "--labels names files compared (two or more)");
        snprintf(lbuf, sizeof lbuf, "%s", a.labels);
        int k = 0;
        for (char *p = lbuf, *c; p; p = c ? c + 1 : NULL) {
            c = strchr(p, ',');
            if (c)
                *c = '\0';
            if (k < SL__PLOT_MAX_RUNS)
                labels[k] = p;
            k++;
        }
        if (k != nin) {
            fprintf(stderr,
                    "sluice plot: --labels gives %d name%s for %d files\n", k,
                    k == 1 ? "" : "s", nin);
            return 2;
        }
    }
    sl__plot_opts_t o = {
        .input = argv[optind],
        .inputs = (const char *const *)(argv + optind),
        .ninputs = nin > 1 ? nin : 0,
        .labels = a.labels ? labels : NULL,
        .output = out,
        .png = png,
        .raw = a.raw,
        .title = title,
        .tmpdir = getenv("TMPDIR"),
        /* SLUICE_PLOT_KEEP=1: keep the table and script, to debug by hand */
        .keep_temps = getenv("SLUICE_PLOT_KEEP") != NULL,
        .log = stderr,
        .log_prefix = "sluice plot: ",
    };
    sl__plot_stats_t st;
    char err[8192];
    if (sl__plot(&o, &st, err, sizeof err)) {
        fprintf(stderr, "sluice plot: %s\n", err);
        return 1;
    }
    printf("wrote %s (%s, %ld points, t %.2f..%.2f s)\n", out,
           png ? "PNG" : "SVG", st.points, st.tmin, st.tmax);
    return 0;
}
