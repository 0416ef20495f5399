/* `sluice plot TELEMETRY.jsonl -o FILE.svg|FILE.png [--title T]`: draws a
 * `--telemetry` file (docs/TELEMETRY.md) as five stacked panels over t with
 * gnuplot; the work is telemetry/plot.h. Exit 0 drawn, 1 failure, 2 usage. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "telemetry/plot.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice plot TELEMETRY.jsonl -o FILE.svg|FILE.png "
               "[--title T]\n"
               "  TELEMETRY.jsonl  written by `sluice run --telemetry FILE`\n"
               "  -o, --output F   .svg or .png: five panels over t: "
               "samples/s, stall %%,\n"
               "                   CPU %% (self, other, total), queue depths, "
               "knob values\n"
               "  -t, --title T    title (default: the telemetry file's name)\n"
               "needs gnuplot (Debian: apt-get install gnuplot-nox)\n");
}

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
    const char *out = NULL, *title = NULL;
    static const struct option lo[] = {{"output", 1, 0, 'o'},
                                       {"title", 1, 0, 't'},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:t:h", lo, NULL)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 't':
            title = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1 || !out) {
        fprintf(stderr, "sluice plot: %s\n",
                optind >= argc ? "no telemetry file given"
                : !out         ? "no output given (-o FILE.svg|FILE.png)"
                               : "one telemetry file at a time");
        usage(stderr);
        return 2;
    }
    int png = out_kind(out);
    if (png < 0) {
        fprintf(stderr,
                "sluice plot: %s: unknown output type; name it .svg or .png\n",
                out);
        return 2;
    }
    sl__plot_opts_t o = {
        .input = argv[optind],
        .output = out,
        .png = png,
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
