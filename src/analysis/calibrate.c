/* Calibration around the fit (calibrate.h): options, telemetry lines, the
 * profile, and the JSON of sl_calibrate. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis.h"
#include "base/abi.h"
#include "base/alloc.h"
#include "calibrate.h"
#include "sluice/telemetry.h"
#include "telemetry/snapshot_schema.h"

SL__ABI_INIT_PAIR(sl_calibrate_options_init, sl_calibrate_options_t)

int sl__calibrate_options_resolve(const sl_calibrate_options_t *in,
                                  sl_calibrate_options_t *o, char *err,
                                  size_t errlen)
{
    int rc = sl__abi_in(o, sizeof *o, in, sizeof(size_t),
                        "sl_calibrate_options", err, errlen);
    if (rc)
        return rc;
    const char *bad = !(o->consumer_cpu >= 0 && o->consumer_cpu <= 1)
                          ? "consumer_cpu"
                      : !(o->batch_bytes >= 0)        ? "batch_bytes"
                      : !(o->storage_bw >= 0)         ? "storage_bw"
                      : !(o->storage_latency_ms >= 0) ? "storage_latency_ms"
                      : isnan(o->skip_s)              ? "skip_s"
                      : isnan(o->step_ms)             ? "step_ms"
                                                      : NULL;
    if (bad)
        return sl__fail(err, errlen, SL_EINVAL, "%s out of range", bad);
    o->skip_s = o->skip_s == 0 ? 1 : o->skip_s < 0 ? 0 : o->skip_s;
    return 0;
}

/* Numbers the writer leaves null when unknown (sl_snapshot_parse reads them
 * as -1) are NaN here, and unknown counts are 0: the fit tests for those
 * (isfinite, > 0), so a period reads the same as it did from the JSON. */
static double known(double v)
{
    return v < 0 ? NAN : v;
}
static int count(int v)
{
    return v < 0 ? 0 : v;
}
static long long count64(int64_t v)
{
    return v < 0 ? 0 : (long long)v;
}

int sl__calib_period_of(const sl_snapshot_t *s, sl__calib_period_t *p)
{
    memset(p, 0, sizeof *p);
    p->t = s->t;
    p->interval_s = s->interval_s;
    p->ncpu = count(s->ncpu);
    p->cpu_self = s->cpu_self;
    p->cpu_other = s->cpu_other;
    p->samples_per_s = s->samples_per_s;
    p->stall_fraction = s->stall_fraction;
    p->consumer_wait_ms = s->consumer_wait_ms;
    p->read_bytes_per_s = known(s->read_bytes_per_s);
    p->mem_total = known((double)s->mem_total_bytes);
    p->rss = known((double)s->rss_bytes);
    p->samples_total = count64(s->samples_total);
    p->batches_total = count64(s->batches_total);
    p->read_slots = count(sl__stall_read_slots(s));
    p->read_busy = s->read.busy;
    p->read_items_per_s = s->read.items_per_s;
    p->decode_workers = count(s->decode.workers);
    p->decode_busy = s->decode.busy;
    p->decode_items_per_s = s->decode.items_per_s;
    p->prefetch = count(s->prefetch);
    int stage =
        s->placement_present && s->placement_gpu && s->gpu_stage_busy >= 0;
    p->gpu_samples_per_s = stage ? s->gpu_samples_per_s : -1;
    p->gpu_stage_busy = stage ? s->gpu_stage_busy : -1;
    p->gpu_cpu_busy = stage ? s->gpu_cpu_busy : -1;
    return p->interval_s > 0 && p->ncpu > 0 ? 0 : SL_ECORRUPT;
}

/* The profile the fit describes, and the foreign demand. */
static void make_profile(const sl_calibrate_options_t *o, sl__calibration_t *c)
{
    const sl__calib_fit_t *fit = &c->fit;
    sl__sim_profile_t *p = &c->profile;
    sl__sim_profile_default(p);
    p->ncpu = fit->ncpu;
    p->batch_size = fit->batch_size;
    p->read_ms = fit->read_ms;
    p->read_cv = fit->read_cv;
    p->decode_ms = fit->decode_ms > 1e-3 ? fit->decode_ms : 1e-3;
    p->decode_cv = fit->decode_cv;
    p->item_bytes = fit->item_bytes;
    /* Storage as given, else as fitted from the reads' waits. */
    int given = o->storage_latency_ms > 0 || o->storage_bw > 0;
    double lat_ms = given ? o->storage_latency_ms : fit->storage_latency_ms;
    double bw = given ? o->storage_bw : fit->storage_bw;
    p->storage_bw = bw;
    if (lat_ms > 0 || bw > 0) {
        /* The read stage's wall time includes the storage wait that the
         * profile now models (the engine's emulated storage adds it to
         * read busy): what is left is CPU. A lone transfer at the full
         * bandwidth is the least it can wait. */
        double io = lat_ms + (bw > 0 ? fit->item_bytes / bw * 1000 : 0);
        double left = (fit->read_wall_ms - io) * fit->core_share;
        p->read_ms = left > 0.001 ? left : 0.001;
        if (!given)
            p->read_ms = SL_CALIB_READ_CPU_MS;
    }
    p->storage_latency_ms = lat_ms;
    p->step_ms = o->step_ms > 0   ? o->step_ms
                 : o->step_ms < 0 ? 0
                                  : fit->step_ms;
    p->consumer_cpu = o->consumer_cpu;
    p->batch_bytes = o->batch_bytes > 0
                         ? o->batch_bytes
                         : (double)fit->batch_size * 224 * 224 * 3;
    p->base_rss = fit->max_rss - fit->prefetch * p->batch_bytes;
    if (p->base_rss < 0)
        p->base_rss = 0;
    if (fit->mem_total > 0)
        p->mem_total = fit->mem_total;
    p->gpu_ms = fit->gpu_ms;
    p->gpu_cpu_ms = fit->gpu_ms > 0 ? fit->gpu_cpu_ms : 0;
    p->interfere = 0;
    /* Foreign load as the simulator's `interfere`: under processor sharing
     * each foreign thread got the share ours got, so the cores' worth of
     * threads competing is their usage over that share. */
    c->foreign_cores = fit->cpu_other * fit->ncpu;
    c->foreign_demand = fit->core_share > 0.05
                            ? c->foreign_cores / fit->core_share
                            : c->foreign_cores;
}

/* unreadable: lines of the source left out, for the message. */
static int calibrate(const sl__calib_period_t *p, int n, int unreadable,
                     const sl_calibrate_options_t *opt, const char *source,
                     sl__calibration_t *c, char *err, size_t errlen)
{
    sl_calibrate_options_t o;
    memset(c, 0, sizeof *c);
    c->lines_unreadable = unreadable;
    int rc = sl__calibrate_options_resolve(opt, &o, err, errlen);
    if (rc)
        return rc;
    if ((rc = sl__calib_fit(p, n, &o, &c->fit)))
        return sl__fail(err, errlen, rc,
                        "%s: %s (%d snapshot lines, %d unreadable)", source,
                        rc == SL_ENOMEM ? "out of memory"
                                        : "too few steady periods with "
                                          "decoded items (need 5 after the "
                                          "skip)",
                        n, unreadable);
    make_profile(&o, c);
    const sl__calib_fit_t *f = &c->fit;
    snprintf(c->note, sizeof c->note,
             "sluice calibrate %s: %d of %d periods; core share %.3f; "
             "measured %.1f samples/s, stall %.3f, foreign load %.2f cores "
             "(demand %.2f)",
             source, f->used, f->periods, f->core_share, f->samples_per_s,
             f->stall, c->foreign_cores, c->foreign_demand);
    return 0;
}

int sl__calibrate_periods(const sl__calib_period_t *p, int n,
                          const sl_calibrate_options_t *o, const char *source,
                          sl__calibration_t *c, char *err, size_t errlen)
{
    return calibrate(p, n, 0, o, source, c, err, errlen);
}

int sl__calibrate_stream(FILE *f, const char *source,
                         const sl_calibrate_options_t *o, sl__calibration_t *c,
                         char *err, size_t errlen)
{
    sl__calib_period_t *p = NULL;
    int n = 0, bad = 0, rc = 0;
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0, len = 0, lineno = 0;
    sl_snapshot_t snap;
    sl_snapshot_init(&snap);
    int got;
    for (;;) {
        if (sl__array_reserve(&p, &cap, (size_t)n + 1, sizeof *p, 1024)) {
            got = SL_ENOMEM;
            break;
        }
        got = sl__read_line(f, SL__SNAPSHOT_MAX_LINE, &line, &lcap, &len);
        if (got != 0 && got != SL__LINE_LONG)
            break;
        lineno++;
        if (!got && sl_snapshot_parse(line, len, &snap, NULL, 0) == 0 &&
            sl__calib_period_of(&snap, &p[n]) == 0)
            n++;
        else
            bad++;
    }
    /* an error is not the end of the snapshots: it fails, named */
    if (got < 0)
        rc = sl__fail(err, errlen, got, "%s:%zu: %s%s", source, lineno + 1,
                      got == SL_ENOMEM ? "out of memory" : "read error: ",
                      got == SL_ENOMEM ? "" : strerror(errno));
    free(line);
    if (!rc)
        rc = calibrate(p, n, bad, o, source, c, err, errlen);
    free(p);
    return rc;
}

int sl__calibrate_file(const char *path, const sl_calibrate_options_t *o,
                       sl__calibration_t *c, char *err, size_t errlen)
{
    if (!path)
        return sl__fail(err, errlen, SL_EINVAL, "no snapshot file");
    /* a regular file: /dev/zero or a FIFO would be read without end */
    int fd = sl__open_regular(path, NULL, err, errlen);
    if (fd < 0) /* sl_calibrate: SL_EIO for a file that cannot be read */
        return fd == SL_ENOTFOUND ? SL_EIO : fd;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return sl__fail(err, errlen, SL_ENOMEM, "%s: out of memory", path);
    }
    int rc = sl__calibrate_stream(f, path, o, c, err, errlen);
    fclose(f);
    return rc;
}

char *sl__calibration_fit_json(const sl__calibration_t *c)
{
    const sl__calib_fit_t *f = &c->fit;
    const sl__sim_profile_t *p = &c->profile;
    char *s = NULL;
    int n = asprintf(
        &s,
        "{\"periods\": %d, \"used\": %d, \"core_share\": %.4f"
        ", \"decode_ms\": %.4f, \"decode_cv\": %.3f, \"read_ms\":"
        " %.4f, \"read_cv\": %.3f, \"item_bytes\": %.0f, "
        "\"step_ms\": %.3f, \"batch_size\": %d, \"ncpu\": %d"
        ", \"foreign_cores\": %.3f, \"foreign_demand\": %.3f"
        ", \"samples_per_s\": %.2f, \"stall_fraction\": %.4f"
        ", \"storage_latency_ms\": %.3f, \"storage_bw\": %.0f"
        ", \"storage_fitted\": %s, \"storage_periods\": %d"
        ", \"storage_saturated_periods\": %d"
        ", \"gpu_ms\": %.4f, \"gpu_cpu_ms\": %.4f, \"gpu_periods\": %d}",
        f->periods, f->used, f->core_share, p->decode_ms, p->decode_cv,
        p->read_ms, p->read_cv, p->item_bytes, p->step_ms, p->batch_size,
        p->ncpu, c->foreign_cores, c->foreign_demand, f->samples_per_s,
        f->stall, p->storage_latency_ms, p->storage_bw,
        f->storage_periods || f->storage_saturated ? "true" : "false",
        f->storage_periods, f->storage_saturated, p->gpu_ms, p->gpu_cpu_ms,
        f->gpu_periods);
    return n < 0 ? NULL : s;
}

/* The profile as the text sl__sim_profile_save_note writes. sim/ writes
 * profiles to files only, so this goes through an in-memory file; at merge
 * it becomes a call of sim's own JSON writer if sim gains one. */
static char *profile_text(const sl__calibration_t *c, char *err, size_t errlen)
{
    int fd = memfd_create("sluice-profile", MFD_CLOEXEC);
    if (fd < 0) {
        sl__fail(err, errlen, SL_EIO, "memfd_create failed");
        return NULL;
    }
    char path[64], *text = NULL;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (sl__sim_profile_save_note(path, &c->profile, c->note, err, errlen) ==
        0) {
        off_t n = lseek(fd, 0, SEEK_END);
        text = n > 0 ? malloc((size_t)n + 1) : NULL;
        if (text && pread(fd, text, (size_t)n, 0) == n) {
            text[n] = 0;
        } else {
            free(text);
            text = NULL;
            sl__fail(err, errlen, SL_EIO, "cannot read the profile back");
        }
    }
    close(fd);
    return text;
}

SL_API int sl_calibrate(const char *telemetry_path,
                        const sl_calibrate_options_t *o, char **json_out,
                        char *err, size_t errlen)
{
    if (!json_out)
        return sl__fail(err, errlen, SL_EINVAL, "json_out is NULL");
    sl__calibration_t *c = calloc(1, sizeof *c);
    if (!c)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    int rc = sl__calibrate_file(telemetry_path, o, c, err, errlen);
    char *profile = rc ? NULL : profile_text(c, err, errlen);
    char *fit = profile ? sl__calibration_fit_json(c) : NULL;
    char *all = NULL;
    if (!rc && !profile)
        rc = SL_EIO;
    else if (!rc && (!fit || asprintf(&all, "{\"profile\": %s, \"fit\": %s}",
                                      profile, fit) < 0))
        rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    else if (!rc)
        *json_out = all;
    free(profile);
    free(fit);
    free(c);
    return rc;
}
