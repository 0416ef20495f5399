/* sluice simulate: runs the pipeline model (src/sim) on a profile with a
 * fixed configuration or the heuristic scheduler, and prints the figures
 * `sluice run --json` prints, under the same keys. --telemetry writes the
 * simulated snapshots as the real JSON Lines, for `sluice plot` and
 * `sluice analyze`. Uses sim/ and sched/ internals (a tool of the
 * scheduler's, like pack uses data/). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sched/heuristic.h"
#include "sim/sim.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"

#define DECIDE_TICKS 5 /* as the loader: one decision per 5 periods */
#define PERIOD_S 0.1

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: sluice simulate --profile FILE [options]\n"
        "  --profile FILE       a profile (sluice calibrate, "
        "docs/SIMULATOR.md)\n"
        "  --threads N          decode threads (alias --decode-threads)\n"
        "  --read-threads N     read threads\n"
        "  --prefetch N         batch buffers\n"
        "  --policy static|heuristic  who sets the knobs not given "
        "(heuristic)\n"
        "  --max-threads N      budget: decode threads + 1 (2 x cores)\n"
        "  --duration S         simulated seconds (60)\n"
        "  --samples N          stop once N samples are handed out\n"
        "  --step-ms T          consumer step per batch (profile's)\n"
        "  --consumer-cpu C     0..1: the consumer's CPU demand while it "
        "steps\n"
        "  --interfere X        cores of foreign busy threads at t = 0\n"
        "  --storage-bw B       storage bytes/s, 0: unlimited (profile's)\n"
        "  --storage-latency-ms L  per-read storage latency (profile's)\n"
        "  --ncpu N             cores (profile's)\n"
        "  --events LIST        t:kind=value,... kinds: interfere, "
        "storage_bw,\n"
        "                       step_ms, consumer_cpu (e.g. 20:interfere=1)\n"
        "  --seed S             random seed (1)\n"
        "  --telemetry FILE     write simulated snapshots as JSON Lines\n"
        "  --json               a JSON object of the figures as last line\n");
}

typedef struct waits {
    double *w, *t; /* per batch: wait, time handed out */
    size_t n, cap;
    int oom;
} waits_t;

static void on_batch(void *ctx, double t, double wait)
{
    waits_t *w = ctx;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 1024;
        double *v = realloc(w->w, cap * sizeof *v);
        if (v)
            w->w = v;
        double *u = v ? realloc(w->t, cap * sizeof *u) : NULL;
        if (!u) {
            w->oom = 1;
            return;
        }
        w->t = u;
        w->cap = cap;
    }
    w->t[w->n] = t;
    w->w[w->n++] = wait;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct_ms(const double *v, size_t n, double q)
{
    if (!n)
        return 0;
    size_t i = (size_t)ceil(q * (double)n) - (q * (double)n >= 1);
    if (i >= n)
        i = n - 1;
    return v[i] * 1000.0;
}

/* "t:kind=value,..." appended to the profile's events, then sorted. */
static int parse_events(const char *s, sl__sim_profile_t *p)
{
    char *copy = strdup(s);
    if (!copy)
        return -1;
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':'), *eq = strchr(tok, '=');
        if (!colon || !eq || eq < colon || p->n_events >= SL_SIM_MAX_EVENTS) {
            rc = -1;
            break;
        }
        *colon = *eq = '\0';
        char *end;
        sl__sim_event_t e;
        e.t = strtod(tok, &end);
        rc |= *end || !(e.t >= 0);
        e.kind = sl__sim_event_kind(colon + 1);
        rc |= !e.kind;
        e.value = strtod(eq + 1, &end);
        rc |= *end || sl__sim_event_check(&e);
        if (!rc)
            p->events[p->n_events++] = e;
    }
    free(copy);
    /* insertion sort: at most SL_SIM_MAX_EVENTS */
    for (int i = 1; i < p->n_events; i++)
        for (int j = i; j > 0 && p->events[j - 1].t > p->events[j].t; j--) {
            sl__sim_event_t t = p->events[j];
            p->events[j] = p->events[j - 1];
            p->events[j - 1] = t;
        }
    return rc ? -1 : 0;
}

typedef struct args {
    const char *profile, *telemetry, *events;
    int read, decode, prefetch, max_threads, heuristic, json, ncpu;
    double duration, step_ms, consumer_cpu, interfere, storage_bw, latency;
    long long samples;
    unsigned long long seed;
} args_t;

static int parse_args(int argc, char **argv, args_t *a)
{
    enum {
        O_PROFILE = 256,
        O_THREADS,
        O_RTHREADS,
        O_PREFETCH,
        O_POLICY,
        O_MAXT,
        O_DURATION,
        O_SAMPLES,
        O_STEP,
        O_CCPU,
        O_INTERFERE,
        O_NCPU,
        O_EVENTS,
        O_SEED,
        O_BW,
        O_LAT,
        O_TELEMETRY,
        O_JSON
    };
    static const struct option lo[] = {{"profile", 1, 0, O_PROFILE},
                                       {"threads", 1, 0, O_THREADS},
                                       {"decode-threads", 1, 0, O_THREADS},
                                       {"read-threads", 1, 0, O_RTHREADS},
                                       {"prefetch", 1, 0, O_PREFETCH},
                                       {"policy", 1, 0, O_POLICY},
                                       {"max-threads", 1, 0, O_MAXT},
                                       {"duration", 1, 0, O_DURATION},
                                       {"samples", 1, 0, O_SAMPLES},
                                       {"step-ms", 1, 0, O_STEP},
                                       {"consumer-cpu", 1, 0, O_CCPU},
                                       {"interfere", 1, 0, O_INTERFERE},
                                       {"ncpu", 1, 0, O_NCPU},
                                       {"events", 1, 0, O_EVENTS},
                                       {"seed", 1, 0, O_SEED},
                                       {"storage-bw", 1, 0, O_BW},
                                       {"storage-latency-ms", 1, 0, O_LAT},
                                       {"telemetry", 1, 0, O_TELEMETRY},
                                       {"json", 0, 0, O_JSON},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->heuristic = 1;
    a->duration = 60;
    a->step_ms = a->consumer_cpu = a->interfere = -1;
    a->storage_bw = a->latency = -1;
    a->seed = 1;
    int c, li = -1, dur_given = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        char *end = NULL;
        const char *s = optarg;
        int bad = 0;
        long v;
        switch (c) {
        case 'h':
            usage(stdout);
            exit(0);
        case O_PROFILE:
            a->profile = s;
            break;
        case O_THREADS:
        case O_RTHREADS:
        case O_PREFETCH:
        case O_MAXT:
        case O_NCPU:
            v = strtol(s, &end, 10);
            bad = *end || v < 1 || v > 4096;
            if (c == O_THREADS)
                a->decode = (int)v;
            else if (c == O_RTHREADS)
                a->read = (int)v;
            else if (c == O_PREFETCH)
                a->prefetch = (int)v;
            else if (c == O_MAXT)
                a->max_threads = (int)v;
            else
                a->ncpu = (int)v, bad |= v > SL_SNAPSHOT_MAX_CORES;
            break;
        case O_POLICY:
            if (!strcmp(s, "heuristic"))
                a->heuristic = 1;
            else if (!strcmp(s, "static"))
                a->heuristic = 0;
            else
                bad = 1;
            break;
        case O_DURATION:
            dur_given = 1;
            a->duration = strtod(s, &end);
            bad = *end || !(a->duration > 0 && a->duration <= 1e7);
            break;
        case O_SAMPLES:
            a->samples = strtoll(s, &end, 10);
            bad = *end || a->samples < 1;
            break;
        case O_STEP:
            a->step_ms = strtod(s, &end);
            bad = *end || !(a->step_ms >= 0);
            break;
        case O_CCPU:
            a->consumer_cpu = strtod(s, &end);
            bad = *end || !(a->consumer_cpu >= 0 && a->consumer_cpu <= 1);
            break;
        case O_INTERFERE:
            a->interfere = strtod(s, &end);
            bad = *end || !(a->interfere >= 0);
            break;
        case O_BW:
        case O_LAT: {
            double v = strtod(s, &end);
            bad = *end || !(v >= 0 && v <= 1e15);
            if (c == O_BW)
                a->storage_bw = v;
            else
                a->latency = v;
            break;
        }
        case O_EVENTS:
            a->events = s;
            break;
        case O_SEED:
            a->seed = strtoull(s, &end, 10);
            bad = *end != 0;
            break;
        case O_TELEMETRY:
            a->telemetry = s;
            break;
        case O_JSON:
            a->json = 1;
            break;
        default:
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "sluice simulate: bad value '%s' for --%s\n", s,
                    li >= 0 ? lo[li].name : "?");
            return 2;
        }
    }
    if (!a->profile || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (a->samples > 0 && !dur_given)
        a->duration = 1e6; /* until the samples are out */
    return 0;
}

/* The budgets and tuning flags, as the loader's set_budgets() makes them. */
static void limits_for(const args_t *a, const sl__knobs_t *k, int ncpu,
                       sl__limits_t *lim)
{
    memset(lim, 0, sizeof *lim);
    lim->tune_read = a->heuristic && a->read == 0;
    lim->tune_decode = a->heuristic && a->decode == 0;
    lim->tune_prefetch = a->heuristic && a->prefetch == 0;
    lim->max_threads = a->max_threads > 0 ? a->max_threads : 2 * ncpu;
    if (lim->max_threads < 2)
        lim->max_threads = 2;
    if (a->max_threads <= 0 && k->decode_threads + 1 > lim->max_threads)
        lim->max_threads = k->decode_threads + 1;
    lim->max_read = sl__io_depth_budget(ncpu);
    if (k->read_threads > lim->max_read)
        lim->max_read = k->read_threads;
    lim->max_decode = lim->max_threads - 1;
    if (lim->max_decode > 256)
        lim->max_decode = 256;
    lim->max_prefetch = k->prefetch * 4 > 16 ? k->prefetch * 4 : 16;
}

int sl__cmd_simulate(int argc, char **argv)
{
    args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    sl__sim_profile_t p;
    char err[512];
    if (sl__sim_profile_load(a.profile, &p, err, sizeof err)) {
        fprintf(stderr, "sluice simulate: %s\n", err);
        return 1;
    }
    if (a.step_ms >= 0)
        p.step_ms = a.step_ms;
    if (a.consumer_cpu >= 0)
        p.consumer_cpu = a.consumer_cpu;
    if (a.interfere >= 0)
        p.interfere = a.interfere;
    if (a.ncpu > 0)
        p.ncpu = a.ncpu;
    if (a.storage_bw >= 0)
        p.storage_bw = a.storage_bw;
    if (a.latency >= 0)
        p.storage_latency_ms = a.latency;
    if (a.events && parse_events(a.events, &p)) {
        fprintf(stderr,
                "sluice simulate: bad --events '%s' (t:kind=value,... at "
                "most %d; kinds interfere, storage_bw, step_ms, "
                "consumer_cpu)\n",
                a.events, SL_SIM_MAX_EVENTS);
        return 2;
    }
    sl__knobs_t k;
    k.read_threads = a.read ? a.read : 1;
    k.decode_threads = a.decode ? a.decode : p.ncpu;
    k.prefetch = a.prefetch
                     ? a.prefetch
                     : (k.decode_threads * 2 < 2 ? 2 : k.decode_threads * 2);
    sl__limits_t lim;
    limits_for(&a, &k, p.ncpu, &lim);
    if (a.max_threads > 0 && k.decode_threads + 1 > a.max_threads) {
        if (!lim.tune_decode) {
            fprintf(stderr,
                    "sluice simulate: %d decode threads + 1 for reading "
                    "exceed the thread budget of %d\n",
                    k.decode_threads, a.max_threads);
            return 2;
        }
        k.decode_threads = a.max_threads - 1;
        if (k.decode_threads < 1) {
            fprintf(stderr, "sluice simulate: budget too small\n");
            return 2;
        }
    }
    lim.min_decode = lim.tune_decode ? k.decode_threads : 0; /* as the loader */
    FILE *tf = NULL;
    if (a.telemetry && !(tf = fopen(a.telemetry, "w"))) {
        fprintf(stderr, "sluice simulate: cannot write %s\n", a.telemetry);
        return 1;
    }
    sl__sim_t *s = sl__sim_create(&p, &k, a.seed);
    if (!s) {
        fprintf(stderr, "sluice simulate: out of memory\n");
        if (tf)
            fclose(tf);
        return 1;
    }
    waits_t w = {0};
    sl__sim_on_batch(s, on_batch, &w);
    int tuned = lim.tune_read || lim.tune_decode || lim.tune_prefetch;
    sl__heur_t heur;
    sl__heur_init(&heur);
    sl_snapshot_t win[DECIDE_TICKS];
    int nwin = 0;
    int64_t decisions = 0;
    int pending = 0; /* a decision to report in the next snapshot */
    char knob[24] = "", reason[160] = "";
    int from = 0, to = 0;
    double cpu_s = 0, peak_rss = 0, t_end = a.duration;
    int64_t ticks = 0;
    char *line = malloc(16384);
    int64_t nperiods = (int64_t)ceil(a.duration / PERIOD_S - 1e-9);
    sl_snapshot_t sn;
    for (int64_t i = 0; i < nperiods; i++) {
        sl__sim_step(s, PERIOD_S, &sn);
        sn.decisions_total = decisions;
        if (pending) {
            sn.decision_new = 1;
            snprintf(sn.decision_knob, sizeof sn.decision_knob, "%s", knob);
            sn.decision_from = from;
            sn.decision_to = to;
            snprintf(sn.decision_reason, sizeof sn.decision_reason, "%s",
                     reason);
            pending = 0;
        }
        cpu_s += sn.cpu_self * sn.ncpu * sn.interval_s;
        if ((double)sn.rss_bytes > peak_rss)
            peak_rss = (double)sn.rss_bytes;
        if (tf && line) {
            int len = sl_snapshot_json(&sn, line, 16384);
            if (len > 0 && len < 16384)
                fprintf(tf, "%s\n", line);
        }
        if (nwin == DECIDE_TICKS) {
            memmove(win, win + 1, (DECIDE_TICKS - 1) * sizeof win[0]);
            nwin--;
        }
        win[nwin++] = sn;
        if (a.samples > 0 && sn.samples_total >= a.samples) {
            t_end = sn.t;
            break;
        }
        if (tuned && ++ticks % DECIDE_TICKS == 0) {
            sl__knobs_t next;
            int kk = sl__heur_step(&heur, win, nwin, &lim, &k, &next, reason,
                                   sizeof reason);
            if (kk != SL_KNOB_NONE) {
                const char *names[] = {"", "read_threads", "decode_threads",
                                       "prefetch"};
                snprintf(knob, sizeof knob, "%s", names[kk]);
                from = kk == SL_KNOB_READ     ? k.read_threads
                       : kk == SL_KNOB_DECODE ? k.decode_threads
                                              : k.prefetch;
                to = kk == SL_KNOB_READ     ? next.read_threads
                     : kk == SL_KNOB_DECODE ? next.decode_threads
                                            : next.prefetch;
                k = next;
                sl__sim_set_knobs(s, &k);
                decisions++;
                pending = 1;
            }
        }
    }
    free(line);
    if (tf)
        fclose(tf);
    /* Samples and time as `run` counts them: up to the last batch handed
     * out (plus its step, which run waits before it stops). */
    int64_t samples = (int64_t)w.n * p.batch_size;
    double secs = t_end;
    if (a.samples > 0 && samples >= a.samples) {
        int64_t nb = (a.samples + p.batch_size - 1) / p.batch_size;
        w.n = (size_t)nb;
        samples = nb * p.batch_size;
        secs = w.t[nb - 1] + p.step_ms / 1000.0;
    }
    double wait_total = 0;
    for (size_t i = 0; i < w.n; i++)
        wait_total += w.w[i];
    double rate = secs > 0 ? (double)samples / secs : 0;
    double stall = secs > 0 ? wait_total / secs : 0;
    double wait_mean = w.n ? wait_total * 1000.0 / (double)w.n : 0;
    qsort(w.w, w.n, sizeof *w.w, cmp_d);
    double p50 = pct_ms(w.w, w.n, 0.5), p99 = pct_ms(w.w, w.n, 0.99);
    double util = secs > 0 ? cpu_s / secs / p.ncpu : 0;
    if (!a.json)
        printf("simulated: %lld samples in %zu batches, %.2f s: %.0f img/s"
               "  stall %.1f%%  wait mean %.2f ms p50 %.2f ms p99 %.2f ms"
               "  cpu %.0f%%  knobs %d/%d/%d  decisions %lld\n",
               (long long)samples, w.n, secs, rate, 100 * stall, wait_mean, p50,
               p99, 100 * util, k.read_threads, k.decode_threads, k.prefetch,
               (long long)decisions);
    else
        printf("{\"simulated\": true, \"samples\": %lld, \"batches\": %zu"
               ", \"seconds\": %.4f, \"samples_per_s\": %.2f"
               ", \"stall_fraction\": %.4f, \"wait_ms_p50\": %.3f"
               ", \"wait_ms_p99\": %.3f, \"cpu_util\": %.4f"
               ", \"cpu_seconds\": %.3f, \"wait_ms_mean\": %.3f"
               ", \"peak_rss_mb\": %.1f, \"threads\": %d, \"read_threads\": %d"
               ", \"prefetch\": %d, \"batch\": %d, \"decisions\": %lld"
               ", \"policy\": \"%s\"}\n",
               (long long)samples, w.n, secs, rate, stall, p50, p99, util,
               cpu_s, wait_mean, peak_rss / 1e6, k.decode_threads,
               k.read_threads, k.prefetch, p.batch_size, (long long)decisions,
               tuned ? "heuristic" : "static");
    free(w.w);
    free(w.t);
    sl__sim_destroy(s);
    return w.oom ? 1 : 0;
}
