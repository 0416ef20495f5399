/* sluice calibrate: fits a simulator profile (src/sim) to the telemetry of
 * one real run (`sluice run --telemetry FILE`). Method (docs/SIMULATOR.md):
 *   - per stage, wall ms per item = busy x workers x interval / items,
 *     pooled over the steady periods (after --skip s, with items);
 *   - CPU ms per item = that x the share of a core our busy threads got:
 *     r = (cpu_self x ncpu) / (busy threads), <= 1 (contention from the
 *     consumer, other processes or too many threads shows as r < 1);
 *   - CV from the spread of the per-period estimates: a period of n items
 *     has a mean whose CV is cv / sqrt(n);
 *   - item bytes = read bytes / read items; batch size = the most samples
 *     per batch handed out in any period (full batches);
 *   - consumer step = (time not waiting) / batches, or --step-ms;
 *   - ncpu, memory, RSS besides the batch buffers from the snapshots.
 * Foreign load (cpu_other) is the environment, not the machine: it is
 * reported, not put into the profile's `interfere`. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sim/sim.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice calibrate TELEMETRY.jsonl -o PROFILE.json "
               "[options]\n"
               "  -o, --output FILE    the profile to write\n"
               "  --step-ms T          the consumer step the run used (else "
               "inferred)\n"
               "  --consumer-cpu C     0..1: the consumer's CPU demand (0: it "
               "sleeps)\n"
               "  --batch-bytes B      bytes of one batch buffer (batch x "
               "224x224x3)\n"
               "  --storage-bw B       storage bytes/s (0: page cache)\n"
               "  --storage-latency-ms L  per-read latency (0)\n"
               "  --skip S             warm-up seconds left out (1)\n"
               "  --json               print the fit as one JSON object\n");
}

/* The fields of one snapshot line the fit reads. */
typedef struct row {
    double t, dt, cpu_self, cpu_other, samples_per_s, stall, wait_ms;
    double rbusy, ritems, dbusy, ditems, rbytes;
    int ncpu, rworkers, dworkers, prefetch;
    double mem_total, rss;
    long long samples_total, batches_total;
} row_t;

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int parse_row(const char *line, row_t *r)
{
    json_t *o = json_loads(line, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return -1;
    }
    memset(r, 0, sizeof *r);
    r->t = num(o, "t");
    r->dt = num(o, "interval_s");
    r->ncpu = (int)num(o, "ncpu");
    r->cpu_self = num(o, "cpu_self");
    r->cpu_other = num(o, "cpu_other");
    r->samples_per_s = num(o, "samples_per_s");
    r->stall = num(o, "stall_fraction");
    r->wait_ms = num(o, "consumer_wait_ms");
    r->rbytes = num(o, "read_bytes_per_s");
    r->mem_total = num(o, "mem_total_bytes");
    r->rss = num(o, "rss_bytes");
    r->samples_total = (long long)num(o, "samples_total");
    r->batches_total = (long long)num(o, "batches_total");
    json_t *st = json_object_get(o, "stages");
    json_t *rd = json_object_get(st, "read"),
           *dc = json_object_get(st, "decode");
    r->rworkers = (int)num(rd, "workers");
    r->rbusy = num(rd, "busy");
    r->ritems = num(rd, "items_per_s");
    r->dworkers = (int)num(dc, "workers");
    r->dbusy = num(dc, "busy");
    r->ditems = num(dc, "items_per_s");
    r->prefetch = (int)num(json_object_get(o, "knobs"), "prefetch");
    json_decref(o);
    int ok = isfinite(r->t) && r->dt > 0 && r->ncpu > 0 &&
             isfinite(r->cpu_self) && isfinite(r->dbusy) &&
             isfinite(r->ditems) && isfinite(r->rbusy) && isfinite(r->ritems);
    return ok ? 0 : -1;
}

typedef struct fit {
    int n_rows, n_used, ncpu, batch_size, prefetch;
    double share, read_ms, read_cv, decode_ms, decode_cv, item_bytes, step_ms;
    double read_wall_ms;
    double mem_total, base_rss, cpu_other, samples_per_s, stall;
} fit_t;

/* Per-item CV from per-period means x_i over n_i items each (weights). */
static double cv_items(const double *x, const double *n, int k, double mean)
{
    double s = 0, w = 0;
    for (int i = 0; i < k; i++) {
        s += n[i] * (x[i] - mean) * (x[i] - mean);
        w += 1;
    }
    if (w < 2 || mean <= 0)
        return 0.5;
    double cv = sqrt(s / (w - 1)) / mean;
    return cv < 0.05 ? 0.05 : cv > 1.5 ? 1.5 : cv;
}

/* lat_ms, bw: the storage the run had (0: none), whose waits count as
 * read-stage busy time but use no CPU: the core share then comes from the
 * decode stage alone (the reads' own CPU is small beside their waits). */
static int fit_rows(const row_t *rows, int n, double skip, double lat_ms,
                    double bw, fit_t *f)
{
    memset(f, 0, sizeof *f);
    f->n_rows = n;
    double rwall = 0, ritems = 0, dwall = 0, ditems = 0, self = 0, nb = 0;
    double bytes = 0, busy_t = 0, other = 0, time = 0, wait = 0, samples = 0;
    long long bsize = 0;
    double *dx = malloc((size_t)n * sizeof *dx),
           *dn = malloc((size_t)n * sizeof *dn);
    double *rx = malloc((size_t)n * sizeof *rx),
           *rn = malloc((size_t)n * sizeof *rn);
    double *rss = malloc((size_t)n * sizeof *rss);
    if (!dx || !dn || !rx || !rn || !rss) {
        free(dx), free(dn), free(rx), free(rn), free(rss);
        return -1;
    }
    int kd = 0, kr = 0, nrss = 0;
    /* The last two periods see the pipeline drain: left out too. */
    for (int i = 1; i + 2 < n; i++) {
        const row_t *r = &rows[i];
        /* Batches hold at most batch_size samples, so samples per batch
         * over any period is at most that, and equal to it in a period of
         * only full batches (an epoch's last batch may be short). */
        long long db = r->batches_total - rows[i - 1].batches_total;
        long long ds = r->samples_total - rows[i - 1].samples_total;
        if (db > 0 && ds / db > bsize)
            bsize = ds / db;
        if (r->t < skip || r->ditems <= 0)
            continue;
        double dt = r->dt;
        double dw = r->dbusy * r->dworkers * dt,
               rw = r->rbusy * r->rworkers * dt;
        double di = r->ditems * dt, ri = r->ritems * dt;
        dwall += dw;
        ditems += di;
        rwall += rw;
        ritems += ri;
        self += r->cpu_self * r->ncpu * dt;
        /* With storage waits in the read stage (readers that share a
         * bandwidth wait for each other too), the share comes from the
         * decoders alone: their busy time is all CPU or core waits. */
        double io = lat_ms > 0 || bw > 0 ? rw : 0;
        busy_t += dw + (rw > io ? rw - io : 0);
        other += r->cpu_other * dt;
        bytes += r->rbytes * dt;
        time += dt;
        /* Waits are added when a batch is handed out, and stall_fraction
         * is clipped at 1: the mean wait per batch x batches is not. */
        if (db > 0 && isfinite(r->wait_ms))
            wait += r->wait_ms / 1000 * (double)db;
        nb += (double)db;
        samples += r->samples_per_s * dt;
        /* Per-period CPU ms per item, each with its own core share, for
         * the spread (foreign load changes from period to period). */
        double cw = dw + (rw > io ? rw - io : 0);
        double sh = cw > 0 ? r->cpu_self * r->ncpu * dt / cw : 1;
        sh = sh > 1 ? 1 : sh;
        if (di >= 3)
            dx[kd] = dw * 1000 / di * sh, dn[kd++] = di;
        if (ri >= 3)
            rx[kr] = rw * 1000 / ri * sh, rn[kr++] = ri;
        if (r->rss > 0)
            rss[nrss++] = r->rss;
        f->n_used++;
    }
    const row_t *last = &rows[n - 1];
    f->ncpu = last->ncpu;
    f->prefetch = last->prefetch > 0 ? last->prefetch : 1;
    f->batch_size = bsize > 0 ? (int)bsize
                    : last->batches_total > 0
                        ? (int)llround((double)last->samples_total /
                                       (double)last->batches_total)
                        : 64;
    int rc = 0;
    if (f->n_used < 5 || ditems <= 0) {
        rc = -2;
        goto out;
    }
    f->share = busy_t > 0 ? self / busy_t : 1;
    if (f->share > 1)
        f->share = 1;
    f->decode_ms = dwall * 1000 / ditems * f->share;
    f->decode_cv = cv_items(dx, dn, kd, f->decode_ms);
    f->read_wall_ms = ritems > 0 ? rwall * 1000 / ritems : 0;
    f->read_ms = f->read_wall_ms * f->share;
    f->read_cv = kr > 1 ? cv_items(rx, rn, kr, f->read_ms) : 0.5;
    f->item_bytes = ritems > 0 ? bytes / ritems : 0;
    f->step_ms = nb > 0 && time > wait ? (time - wait) * 1000 / nb : 0;
    f->cpu_other = other / time;
    f->samples_per_s = samples / time;
    f->stall = wait / time > 1 ? 1 : wait / time;
    f->mem_total = last->mem_total > 0 ? last->mem_total : 0;
    if (nrss) {
        double m = 0;
        for (int i = 0; i < nrss; i++)
            m = rss[i] > m ? rss[i] : m;
        f->base_rss = m;
    }
out:
    free(dx), free(dn), free(rx), free(rn), free(rss);
    return rc;
}

int sl__cmd_calibrate(int argc, char **argv)
{
    enum { O_STEP = 256, O_CCPU, O_BB, O_BW, O_LAT, O_SKIP, O_JSON };
    static const struct option lo[] = {{"output", 1, 0, 'o'},
                                       {"step-ms", 1, 0, O_STEP},
                                       {"consumer-cpu", 1, 0, O_CCPU},
                                       {"batch-bytes", 1, 0, O_BB},
                                       {"storage-bw", 1, 0, O_BW},
                                       {"storage-latency-ms", 1, 0, O_LAT},
                                       {"skip", 1, 0, O_SKIP},
                                       {"json", 0, 0, O_JSON},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *out = NULL;
    double step = -1, ccpu = 0, bb = -1, bw = 0, lat = 0, skip = 1;
    int json = 0, c, li = -1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", lo, &li)) != -1) {
        char *end = (char *)"";
        double v = 0;
        if (c != 'h' && c != 'o' && c != O_JSON && c != '?')
            v = strtod(optarg, &end);
        if (*end || v < 0 || (c == O_CCPU && v > 1)) {
            fprintf(stderr, "sluice calibrate: bad value '%s' for --%s\n",
                    optarg, li >= 0 ? lo[li].name : "?");
            return 2;
        }
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case 'o':
            out = optarg;
            break;
        case O_STEP:
            step = v;
            break;
        case O_CCPU:
            ccpu = v;
            break;
        case O_BB:
            bb = v;
            break;
        case O_BW:
            bw = v;
            break;
        case O_LAT:
            lat = v;
            break;
        case O_SKIP:
            skip = v;
            break;
        case O_JSON:
            json = 1;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!out || optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "sluice calibrate: cannot open %s\n", path);
        return 1;
    }
    row_t *rows = NULL;
    int n = 0, cap = 0, bad = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            row_t *v = realloc(rows, (size_t)cap * sizeof *v);
            if (!v) {
                fprintf(stderr, "sluice calibrate: out of memory\n");
                free(rows), free(line), fclose(f);
                return 1;
            }
            rows = v;
        }
        if (parse_row(line, &rows[n]) == 0)
            n++;
        else
            bad++;
    }
    free(line);
    fclose(f);
    fit_t fit;
    int rc = n > 0 ? fit_rows(rows, n, skip, lat, bw, &fit) : -2;
    free(rows);
    if (rc) {
        fprintf(stderr,
                "sluice calibrate: %s: %s (%d snapshot lines, %d unreadable)\n",
                path,
                rc == -1 ? "out of memory"
                         : "too few steady periods with decoded items (need 5 "
                           "after --skip)",
                n, bad);
        return 1;
    }
    sl__sim_profile_t p;
    sl__sim_profile_default(&p);
    p.ncpu = fit.ncpu;
    p.batch_size = fit.batch_size;
    p.read_ms = fit.read_ms;
    p.read_cv = fit.read_cv;
    p.decode_ms = fit.decode_ms > 1e-3 ? fit.decode_ms : 1e-3;
    p.decode_cv = fit.decode_cv;
    p.item_bytes = fit.item_bytes;
    p.storage_bw = bw;
    if (lat > 0 || bw > 0) {
        /* The read stage's wall time includes the storage wait that the
         * profile now models (the engine's emulated storage adds it to
         * read busy): what is left is CPU. A lone transfer at the full
         * bandwidth is the least it can wait. */
        double io = lat + (bw > 0 ? fit.item_bytes / bw * 1000 : 0);
        double left = (fit.read_wall_ms - io) * fit.share;
        p.read_ms = left > 0.001 ? left : 0.001;
    }
    p.storage_latency_ms = lat;
    p.step_ms = step >= 0 ? step : fit.step_ms;
    p.consumer_cpu = ccpu;
    p.batch_bytes = bb >= 0 ? bb : (double)fit.batch_size * 224 * 224 * 3;
    p.base_rss = fit.base_rss - fit.prefetch * p.batch_bytes;
    if (p.base_rss < 0)
        p.base_rss = 0;
    if (fit.mem_total > 0)
        p.mem_total = fit.mem_total;
    p.interfere = 0;
    /* Foreign load as the simulator's `interfere`: under processor sharing
     * each foreign thread got the share ours got, so the cores' worth of
     * threads competing is their usage over that share. */
    double demand = fit.share > 0.05 ? fit.cpu_other * fit.ncpu / fit.share
                                     : fit.cpu_other * fit.ncpu;
    char note[512];
    snprintf(note, sizeof note,
             "sluice calibrate %s: %d of %d periods; core share %.3f; "
             "measured %.1f samples/s, stall %.3f, foreign load %.2f cores "
             "(demand %.2f)",
             path, fit.n_used, fit.n_rows, fit.share, fit.samples_per_s,
             fit.stall, fit.cpu_other * fit.ncpu, demand);
    char err[256];
    if (sl__sim_profile_save_note(out, &p, note, err, sizeof err)) {
        fprintf(stderr, "sluice calibrate: %s\n", err);
        return 1;
    }
    if (json)
        printf("{\"periods\": %d, \"used\": %d, \"core_share\": %.4f"
               ", \"decode_ms\": %.4f, \"decode_cv\": %.3f, \"read_ms\": %.4f"
               ", \"read_cv\": %.3f, \"item_bytes\": %.0f, \"step_ms\": %.3f"
               ", \"batch_size\": %d, \"ncpu\": %d"
               ", \"foreign_cores\": %.3f, \"foreign_demand\": %.3f"
               ", \"samples_per_s\": %.2f"
               ", \"stall_fraction\": %.4f}\n",
               fit.n_rows, fit.n_used, fit.share, p.decode_ms, p.decode_cv,
               p.read_ms, p.read_cv, p.item_bytes, p.step_ms, p.batch_size,
               p.ncpu, fit.cpu_other * fit.ncpu, demand, fit.samples_per_s,
               fit.stall);
    else
        printf("%s: decode %.3f ms (cv %.2f), read %.3f ms (cv %.2f), "
               "%.0f B/item, step %.2f ms, batch %d, %d cores; core share "
               "%.2f, foreign load %.2f cores (%d periods used)\n",
               out, p.decode_ms, p.decode_cv, p.read_ms, p.read_cv,
               p.item_bytes, p.step_ms, p.batch_size, p.ncpu, fit.share,
               fit.cpu_other * fit.ncpu, fit.n_used);
    return 0;
}
