/* Cost of the telemetry collector: runs it alone (a fake, idle pipeline)
 * for --seconds at --period-ms and reports the CPU time it used as a share
 * of one core. Target: <= 1% of one core at 100 ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/base.h"
#include "telemetry/collector.h"

static void idle_pipe(void *arg, sl__pipe_sample_t *o)
{
    (void)arg;
    memset(o, 0, sizeof *o);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
    double seconds = 10;
    int period = 100, json = 0;
    const char *jsonl = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--period-ms") && i + 1 < argc)
            period = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jsonl") && i + 1 < argc)
            jsonl = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr,
                    "usage: telemetry_overhead [--seconds S] [--period-ms P] "
                    "[--jsonl FILE] [--json]\n");
            return 2;
        }
    }
    sl__collector_opts_t o = {period, "/", jsonl, 0, 600, NULL, NULL, NULL};
    sl__collector_t *c;
    char err[256];
    double c0 = cpu_seconds();
    int64_t t0 = sl__now_ns();
    if (sl__collector_start(&o, idle_pipe, NULL, &c, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    usleep((useconds_t)(seconds * 1e6));
    sl_snapshot_t s;
    sl__collector_latest(c, &s);
    sl__collector_stop(c);
    double wall = (double)(sl__now_ns() - t0) / 1e9;
    double cpu = cpu_seconds() - c0;
    int ticks = (int)(wall * 1000 / period);
    printf("collector at %d ms for %.1f s (%d ticks%s): %.4f CPU s = %.3f%% "
           "of one core, %.1f us per tick\n",
           period, wall, ticks, jsonl ? ", JSONL on" : "", cpu,
           100 * cpu / wall, ticks ? cpu / ticks * 1e6 : 0.0);
    if (json)
        printf("{\"period_ms\": %d, \"seconds\": %.2f, \"cpu_s\": %.5f, "
               "\"core_percent\": %.4f, \"us_per_tick\": %.1f}\n",
               period, wall, cpu, 100 * cpu / wall,
               ticks ? cpu / ticks * 1e6 : 0.0);
    return 0;
}
