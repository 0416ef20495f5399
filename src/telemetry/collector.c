#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/abi.h"
#include "base/base.h"
#include "machine.h"
#include "prom.h"

/* Raw cumulative readings at one instant; a snapshot is the difference of
 * two. */
typedef struct reading {
    int64_t t_ns;
    sl__proc_stat_t stat;
    uint64_t self_jiffies;
    sl__self_io_t io;
    int io_ok;
    sl__disk_t disk;
    int disk_ok;
    sl__net_t net;
    int net_ok;
    sl__pipe_sample_t pipe;
} reading_t;

struct sl__collector {
    sl__collector_opts_t o;
    sl__pipe_fn fn;
    void *arg;
    char disk[64];
    int64_t t0_ns;
    long clk_tck;
    int ncpu_usable; /* sl__cpus_usable() at the start */
    reading_t prev, cur;
    sl__rapl_t rapl;
    double rapl_j0, gpu_j0;
    char gpu_bus[32]; /* the GPU NVML reports ("": GPU 0) */
    FILE *jsonl;
    char *jsonl_name;    /* its path, for messages (the caller's is read
                            only by start) */
    int64_t jsonl_lines; /* written whole */
    int jsonl_failed;    /* a write failed: no more lines (said once) */
    sl__prom_t *prom;

    pthread_t tid;
    int running;
    pthread_mutex_t mu; /* guards ring, latest, stop */
    pthread_cond_t cv;
    int stop;
    sl_snapshot_t *ring;
    int ring_n, ring_head; /* ring_head: next slot to write */
    sl_snapshot_t latest;
    sl__collector_extra_t extra; /* latest's, under mu */
    char *line;                  /* JSON line buffer */
    size_t line_cap;
};

static void read_now(sl__collector_t *c, reading_t *r)
{
    char *buf = NULL;
    size_t cap = 1 << 16;
    buf = malloc(cap);
    memset(r, 0, sizeof *r);
    r->t_ns = sl__now_ns();
    if (!buf)
        return;
    long n;
    if ((n = sl__read_small("/", "proc/stat", buf, cap)) > 0)
        sl__parse_proc_stat(buf, (size_t)n, &r->stat);
    if ((n = sl__read_small("/", "proc/self/stat", buf, cap)) > 0)
        sl__parse_pid_stat(buf, (size_t)n, &r->self_jiffies);
    if ((n = sl__read_small("/", "proc/self/io", buf, cap)) > 0)
        r->io_ok = sl__parse_self_io(buf, (size_t)n, &r->io) == 0;
    if (c->disk[0] && (n = sl__read_small("/", "proc/diskstats", buf, cap)) > 0)
        r->disk_ok =
            sl__parse_diskstats(buf, (size_t)n, c->disk, &r->disk) == 0;
    if ((n = sl__read_small("/", "proc/net/dev", buf, cap)) > 0)
        r->net_ok = sl__parse_net_dev(buf, (size_t)n, &r->net) == 0;
    if (c->fn)
        c->fn(c->arg, &r->pipe);
    free(buf);
}

static double rate(uint64_t a, uint64_t b, double secs)
{
    return secs > 0 && b >= a ? (double)(b - a) / secs : 0;
}

/* avg10 of a PSI file's "some" and "full" lines; -1 when absent. */
static void psi_avg(const char *file, double *some, double *full)
{
    char buf[512];
    long n = sl__read_small("/", file, buf, sizeof buf);
    sl__psi_t p;
    *some = *full = -1;
    if (n <= 0 || sl__parse_psi(buf, (size_t)n, &p) || !p.present)
        return;
    *some = p.some_avg10;
    *full = p.full_avg10;
}

static void stage(sl_stage_stats_t *st, int workers, int64_t busy0,
                  int64_t busy1, int64_t items0, int64_t items1, double secs)
{
    st->workers = workers;
    st->busy = workers > 0 && secs > 0
                   ? (double)(busy1 - busy0) / 1e9 / (secs * workers)
                   : 0;
    if (st->busy > 1)
        st->busy = 1;
    st->items_per_s = secs > 0 ? (double)(items1 - items0) / secs : 0;
    st->items_total = items1;
}

static void make_snapshot(sl__collector_t *c, sl_snapshot_t *s)
{
    const reading_t *a = &c->prev, *b = &c->cur;
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    double secs = (double)(b->t_ns - a->t_ns) / 1e9;
    s->t = (double)(b->t_ns - c->t0_ns) / 1e9;
    s->interval_s = secs;
    /* CPU: machine-wide busy share, ours, and the rest (interference). */
    s->ncpu = b->stat.ncpu > 0 ? b->stat.ncpu : sl__ncpu();
    s->ncpu_usable = c->ncpu_usable < s->ncpu ? c->ncpu_usable : s->ncpu;
    uint64_t dt = b->stat.all.total - a->stat.all.total;
    uint64_t db = b->stat.all.busy - a->stat.all.busy;
    if (b->stat.all.total > a->stat.all.total &&
        b->stat.all.busy >= a->stat.all.busy)
        s->cpu_total = (double)db / (double)dt;
    double self_s =
        (double)(b->self_jiffies - a->self_jiffies) / (double)c->clk_tck;
    s->cpu_self = secs > 0 ? self_s / (secs * s->ncpu) : 0;
    if (s->cpu_self > 1)
        s->cpu_self = 1;
    s->cpu_other = s->cpu_total - s->cpu_self;
    if (s->cpu_other < 0)
        s->cpu_other = 0;
    for (int i = 0; i < b->stat.ncpu && i < SL_SNAPSHOT_MAX_CORES; i++) {
        uint64_t t = b->stat.cpu[i].total - a->stat.cpu[i].total;
        uint64_t u = b->stat.cpu[i].busy - a->stat.cpu[i].busy;
        s->cpu_core[i] = t > 0 && u <= t ? (float)u / (float)t : 0.0f;
    }
    s->run_queue = b->stat.procs_running;
    double unused;
    psi_avg("proc/pressure/cpu", &s->psi_cpu_some, &unused);
    psi_avg("proc/pressure/io", &s->psi_io_some, &s->psi_io_full);
    psi_avg("proc/pressure/memory", &s->psi_mem_some, &s->psi_mem_full);
    char buf[8192];
    long n = sl__read_small("/", "proc/meminfo", buf, sizeof buf);
    uint64_t tot = 0, avail = 0;
    if (n > 0 && sl__parse_meminfo(buf, (size_t)n, &tot, &avail) == 0) {
        s->mem_total_bytes = (int64_t)tot;
        s->mem_available_bytes = (int64_t)avail;
    } else {
        s->mem_total_bytes = s->mem_available_bytes = -1;
    }
    n = sl__read_small("/", "proc/self/status", buf, sizeof buf);
    uint64_t rss = 0;
    s->rss_bytes = n > 0 && sl__parse_status_rss(buf, (size_t)n, &rss) == 0
                       ? (int64_t)rss
                       : -1;
    if (a->disk_ok && b->disk_ok) {
        s->disk_read_bytes_per_s =
            rate(a->disk.read_bytes, b->disk.read_bytes, secs);
        s->disk_busy =
            secs > 0 ? (double)(b->disk.io_ms - a->disk.io_ms) / 1000.0 / secs
                     : 0;
        if (s->disk_busy > 1)
            s->disk_busy = 1;
    } else {
        s->disk_read_bytes_per_s = s->disk_busy = -1;
    }
    s->self_read_bytes_per_s =
        a->io_ok && b->io_ok ? rate(a->io.rchar, b->io.rchar, secs) : -1;
    if (a->net_ok && b->net_ok) {
        s->net_rx_bytes_per_s = rate(a->net.rx_bytes, b->net.rx_bytes, secs);
        s->net_tx_bytes_per_s = rate(a->net.tx_bytes, b->net.tx_bytes, secs);
    } else {
        s->net_rx_bytes_per_s = s->net_tx_bytes_per_s = -1;
    }
    /* GPU and energy: read, never invented. */
    sl__gpu_t g;
    memset(&g, 0, sizeof g);
    sl__gpu_read(&g, c->gpu_bus);
    s->gpu_present = g.valid;
    s->gpu_index = g.valid ? g.index : -1;
    if (g.valid) {
        s->gpu_count = g.count;
        s->gpu_util = g.util;
        s->gpu_jpg_util = g.jpg_util;
        s->gpu_power_w = g.power_w;
        s->gpu_mem_used_bytes = (int64_t)g.mem_used;
        s->gpu_mem_total_bytes = (int64_t)g.mem_total;
        s->gpu_pcie_rx_bytes_per_s = g.pcie_rx_bytes_per_s;
        s->gpu_pcie_tx_bytes_per_s = g.pcie_tx_bytes_per_s;
    } else {
        s->gpu_util = s->gpu_jpg_util = s->gpu_power_w = -1;
        s->gpu_mem_used_bytes = s->gpu_mem_total_bytes = -1;
        s->gpu_pcie_rx_bytes_per_s = s->gpu_pcie_tx_bytes_per_s = -1;
    }
    double rj = sl__rapl_read(&c->rapl, "/");
    double e = -1;
    if (rj >= 0)
        e = rj - c->rapl_j0;
    if (g.valid && g.energy_j >= 0 && c->gpu_j0 >= 0)
        e = (e < 0 ? 0 : e) + (g.energy_j - c->gpu_j0);
    s->energy_j = e;
    /* Pipeline. */
    const sl__pipe_sample_t *p = &a->pipe, *q = &b->pipe;
    s->samples_total = q->samples;
    s->batches_total = q->batches;
    s->errors_skipped = q->errors_skipped;
    s->bytes_read_total = q->bytes_read;
    s->samples_per_s = secs > 0 ? (double)(q->samples - p->samples) / secs : 0;
    s->read_bytes_per_s =
        rate((uint64_t)p->bytes_read, (uint64_t)q->bytes_read, secs);
    s->stall_fraction =
        secs > 0 ? (double)(q->wait_ns - p->wait_ns) / 1e9 / secs : 0;
    if (s->stall_fraction > 1)
        s->stall_fraction = 1;
    /* Per batch handed out; an interval without one holds part of a wait
     * still in progress, counted whole (a total stall reads as the
     * interval, not 0). */
    int64_t nb = q->batches - p->batches;
    s->consumer_wait_ms =
        (double)(q->wait_ns - p->wait_ns) / 1e6 / (double)(nb > 0 ? nb : 1);
    int64_t nl = q->lat_count - p->lat_count;
    s->batch_latency_ms =
        nl > 0 ? (double)(q->lat_sum_ns - p->lat_sum_ns) / 1e6 / (double)nl : 0;
    stage(&s->read, q->io_async ? q->io_depth : q->read_workers,
          p->read_busy_ns, q->read_busy_ns, p->read_items, q->read_items, secs);
    s->read.workers = q->read_workers;
    s->io_async = q->io_async;
    s->io_depth = q->io_async ? q->io_depth : 0;
    s->reads_in_flight = q->reads_in_flight;
    s->cache_hits_total = q->cache_hits;
    s->cache_misses_total = q->cache_misses;
    int64_t finds =
        q->cache_hits + q->cache_misses - p->cache_hits - p->cache_misses;
    s->cache_hit_rate =
        finds > 0 ? (double)(q->cache_hits - p->cache_hits) / (double)finds
                  : -1;
    s->cache_bytes = q->cache_bytes;
    s->cache_raw_bytes = q->cache_raw_bytes;
    s->cache_entries = q->cache_entries;
    s->cache_limit_bytes = q->cache_limit;
    memcpy(s->cache_codec, q->cache_codec, sizeof s->cache_codec);
    s->cache_codec_choices = q->cache_codec_choices;
    s->placement_present = q->placement_present;
    memcpy(s->placement, q->placement, sizeof s->placement);
    s->placement_gpu = q->placement_gpu;
    s->gpu_share = q->gpu_share;
    memcpy(s->placement_why, q->placement_why, sizeof s->placement_why);
    memcpy(s->placement_held, q->placement_held, sizeof s->placement_held);
    s->gpu_samples_total = q->gpu_samples;
    s->gpu_refused_total = q->gpu_refused;
    s->gpu_samples_per_s =
        rate((uint64_t)p->gpu_samples, (uint64_t)q->gpu_samples, secs);
    s->gpu_stage_busy =
        q->gpu_stage && secs > 0
            ? (double)(q->gpu_busy_ns - p->gpu_busy_ns) / 1e9 / secs
            : -1;
    s->gpu_cpu_busy = q->gpu_stage && secs > 0
                          ? (double)(q->gpu_cpu_ns - p->gpu_cpu_ns) / 1e9 / secs
                          : -1;
    s->gpu_cpu_total_s = q->gpu_stage ? (double)q->gpu_cpu_ns / 1e9 : -1;
    s->gpu_handoff_busy =
        q->gpu_stage && secs > 0
            ? (double)(q->gpu_handoff_ns - p->gpu_handoff_ns) / 1e9 / secs
            : -1;
    s->gpu_handoff_total_s =
        q->gpu_stage ? (double)q->gpu_handoff_ns / 1e9 : -1;
    memcpy(s->gpu_refused_why, q->gpu_refused_why, sizeof s->gpu_refused_why);
    s->gpu_roi = q->gpu_stage ? q->gpu_roi : -1;
    s->gpu_bytes = q->gpu_stage ? q->gpu_bytes : -1;
    s->gpu_nvjpeg_bytes = q->gpu_stage ? q->gpu_nvjpeg_bytes : -1;
    s->gpu_decoded_frac = q->gpu_stage && q->gpu_px_images > 0
                              ? q->gpu_px_decoded / q->gpu_px_images
                              : -1;
    s->requests_total = q->requests;
    s->request_records_total = q->request_records;
    s->request_fallbacks_total = q->request_fallbacks;
    int64_t nreq = q->requests - p->requests;
    s->requests_per_s = secs > 0 ? (double)nreq / secs : 0;
    s->records_per_request =
        nreq > 0
            ? (double)(q->request_records - p->request_records) / (double)nreq
            : -1;
    s->cache_disk_present = q->cache_disk_present;
    s->cache_disk_admitting = q->cache_disk_admitting;
    s->cache_disk_hits_total = q->cache_disk_hits;
    s->cache_disk_misses_total = q->cache_disk_misses;
    s->cache_disk_bytes = q->cache_disk_bytes;
    s->cache_disk_entries = q->cache_disk_entries;
    s->cache_disk_limit_bytes = q->cache_disk_limit;
    s->cache_disk_errors_total = q->cache_disk_errors;
    s->read.queue_depth = q->read_inflight;
    s->read.queue_capacity = q->read_capacity;
    stage(&s->decode, q->decode_workers, p->decode_busy_ns, q->decode_busy_ns,
          p->decode_items, q->decode_items, secs);
    s->decode.queue_depth = q->decode_queue;
    s->decode.queue_capacity = q->decode_capacity;
    s->prefetch = q->prefetch;
    s->batches_ready = q->batches_ready;
    s->batches_filling = q->batches_filling;
    s->decisions_total = q->decisions;
    if (q->decisions != p->decisions) {
        s->decision_new = 1;
        snprintf(s->decision_knob, sizeof s->decision_knob, "%s",
                 q->decision_knob);
        s->decision_from = q->decision_from;
        s->decision_to = q->decision_to;
        snprintf(s->decision_reason, sizeof s->decision_reason, "%s",
                 q->decision_reason);
    }
}

/* Appends c->line to the JSONL file. The first write that fails (a full
 * disk, a file-size limit, a pipe's reader gone) is said once through
 * o.on_warning, and ends the file's writing: the lines before it stay
 * whole, none is cut or left with a gap. */
static void jsonl_write(sl__collector_t *c)
{
    errno = 0;
    int bad = fputs(c->line, c->jsonl) == EOF;
    bad |= fputc('\n', c->jsonl) == EOF;
    bad |= fflush(c->jsonl) == EOF;
    if (!bad) {
        c->jsonl_lines++;
        return;
    }
    int e = errno ? errno : EIO;
    c->jsonl_failed = 1;
    if (c->o.on_warning) {
        char m[1280];
        snprintf(m, sizeof m,
                 "telemetry %s: write failed: %s; no more lines written "
                 "(%lld whole before it)",
                 c->jsonl_name ? c->jsonl_name : "file", strerror(e),
                 (long long)c->jsonl_lines);
        c->o.on_warning(c->arg, m);
    }
}

void sl__collector_tick(sl__collector_t *c)
{
    read_now(c, &c->cur);
    sl_snapshot_t s;
    make_snapshot(c, &s);
    c->prev = c->cur;
    const sl__pipe_sample_t *q = &c->cur.pipe;
    pthread_mutex_lock(&c->mu);
    c->latest = s;
    sl__collector_extra_t *x = &c->extra;
    x->wait_s = (double)q->wait_ns / 1e9;
    x->read_busy_s = (double)q->read_busy_ns / 1e9;
    x->decode_busy_s = (double)q->decode_busy_ns / 1e9;
    if (s.decision_new) {
        if (x->ndec == SL__DECISION_LOG)
            memmove(x->dec, x->dec + 1,
                    (SL__DECISION_LOG - 1) * sizeof *x->dec);
        else
            x->ndec++;
        sl__decision_rec_t *d = &x->dec[x->ndec - 1];
        d->t = s.t;
        d->seq = s.decisions_total;
        memcpy(d->knob, s.decision_knob, sizeof d->knob);
        d->from = s.decision_from;
        d->to = s.decision_to;
        memcpy(d->reason, s.decision_reason, sizeof d->reason);
    }
    c->ring[c->ring_head] = s;
    c->ring_head = (c->ring_head + 1) % c->o.ring;
    if (c->ring_n < c->o.ring)
        c->ring_n++;
    pthread_mutex_unlock(&c->mu);
    if (c->jsonl && !c->jsonl_failed) {
        int need = sl_snapshot_json(&s, c->line, c->line_cap);
        if (need >= 0 && (size_t)need < c->line_cap)
            jsonl_write(c);
    }
}

static void *collector_main(void *p)
{
    sl__collector_t *c = p;
    int64_t next = sl__now_ns() + (int64_t)c->o.period_ms * 1000000;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        if (sl__now_ns() < next) {
            /* The condition variable runs on CLOCK_MONOTONIC (see start). */
            struct timespec ts = sl__mono_timespec(next);
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&c->mu);
        sl__collector_tick(c);
        if (c->o.on_tick)
            c->o.on_tick(c->arg, c);
        next += (int64_t)c->o.period_ms * 1000000;
        if (next < sl__now_ns()) /* fell behind (suspended): no burst */
            next = sl__now_ns() + (int64_t)c->o.period_ms * 1000000;
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* The HTTP server, the JSONL file and the memory (thread already gone). */
static void collector_free(sl__collector_t *c)
{
    sl__prom_stop(c->prom);
    if (c->jsonl)
        fclose(c->jsonl);
    free(c->jsonl_name);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->ring);
    free(c->line);
    free(c);
}

/* The JSONL file: created or truncated; a FIFO (a pipe to a reader, e.g.
 * `--telemetry >(jq ...)`) is opened without waiting, so one that has no
 * reader is an error at once instead of a hang, then written blocking. */
static int jsonl_open(sl__collector_t *c, const char *path, char *err,
                      size_t errlen)
{
    int fd =
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0)
        return sl__fail(err, errlen, SL_EIO, "%s: cannot write: %s", path,
                        errno == ENXIO ? "a FIFO with no reader"
                                       : strerror(errno));
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
        !(c->jsonl = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        return sl__fail(err, errlen, SL_EIO, "%s: cannot write: %s", path,
                        strerror(e));
    }
    c->jsonl_name = sl__msg_escape_dup(path); /* NULL: "file" said */
    return 0;
}

int sl__collector_start(const sl__collector_opts_t *o, sl__pipe_fn fn,
                        void *arg, sl__collector_t **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    sl__collector_t *c = calloc(1, sizeof *c);
    if (!c)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    c->o = *o;
    snprintf(c->gpu_bus, sizeof c->gpu_bus, "%s",
             o->gpu_bus_id ? o->gpu_bus_id : "");
    c->o.gpu_bus_id = NULL; /* the copy is read */
    if (c->o.ring < 1)
        c->o.ring = 600;
    if (c->o.period_ms < 1)
        c->o.period_ms = 100;
    c->fn = fn;
    c->arg = arg;
    c->ncpu_usable = sl__cpus_usable();
    c->clk_tck = sysconf(_SC_CLK_TCK);
    if (c->clk_tck <= 0)
        c->clk_tck = 100;
    c->ring = calloc((size_t)c->o.ring, sizeof *c->ring);
    c->line_cap = 16384;
    c->line = malloc(c->line_cap);
    if (!c->ring || !c->line) {
        free(c->ring);
        free(c->line);
        free(c);
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    if (o->data_path)
        sl__disk_for_path(o->data_path, c->disk, sizeof c->disk);
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = 0;
    if (o->jsonl_path)
        rc = jsonl_open(c, o->jsonl_path, err, errlen);
    c->t0_ns = sl__now_ns();
    read_now(c, &c->prev);
    c->rapl_j0 = sl__rapl_read(&c->rapl, "/");
    sl__gpu_t g;
    memset(&g, 0, sizeof g);
    sl__gpu_read(&g, c->gpu_bus);
    c->gpu_j0 = g.valid ? g.energy_j : -1;
    if (!rc && o->metrics_port)
        rc = sl__prom_start(o->metrics_port, c, &c->prom, err, errlen);
    if (!rc && pthread_create(&c->tid, NULL, collector_main, c))
        rc = sl__fail(err, errlen, SL_ETHREAD, "cannot start the collector");
    if (rc) {
        collector_free(c);
        return rc;
    }
    c->running = 1;
    *out = c;
    return 0;
}

void sl__collector_stop(sl__collector_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->tid, NULL);
    sl__collector_tick(c); /* the tail: short runs get a snapshot too */
    collector_free(c);
}

int sl__collector_latest(sl__collector_t *c, sl_snapshot_t *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->latest;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int sl__collector_latest_extra(sl__collector_t *c, sl_snapshot_t *out,
                               sl__collector_extra_t *x)
{
    pthread_mutex_lock(&c->mu);
    *out = c->latest;
    *x = c->extra;
    int have = c->ring_n > 0;
    pthread_mutex_unlock(&c->mu);
    return have;
}

int sl__collector_recent(sl__collector_t *c, sl_snapshot_t *out, int max)
{
    pthread_mutex_lock(&c->mu);
    int n = c->ring_n < max ? c->ring_n : max;
    int start = (c->ring_head - n + c->o.ring) % c->o.ring;
    for (int i = 0; i < n; i++)
        out[i] = c->ring[(start + i) % c->o.ring];
    pthread_mutex_unlock(&c->mu);
    return n;
}

int sl__collector_copy_latest(sl__collector_t *c, sl_snapshot_t *out)
{
    if (!out || sl__abi_size(out) < SL__SNAPSHOT_V1_SIZE)
        return SL_EINVAL;
    if (!c)
        return SL_ESTATE;
    sl_snapshot_t s;
    int rc = sl__collector_latest(c, &s);
    return rc ? rc : sl__abi_out(out, &s, sizeof s, SL__SNAPSHOT_V1_SIZE);
}

int sl__collector_copy_recent(sl__collector_t *c, sl_snapshot_t *out, int max)
{
    if (!out || max < 0)
        return SL_EINVAL;
    size_t stride = max ? sl__abi_size(out) : sizeof *out;
    if (stride < SL__SNAPSHOT_V1_SIZE)
        return SL_EINVAL;
    if (!c)
        return SL_ESTATE;
    if (stride == sizeof *out) /* this header's layout: straight in */
        return sl__collector_recent(c, out, max);
    sl_snapshot_t *tmp = malloc((size_t)max * sizeof *tmp);
    if (!tmp)
        return SL_ENOMEM;
    int n = sl__collector_recent(c, tmp, max);
    for (int i = 0; i < n; i++) {
        void *dst = (char *)out + (size_t)i * stride;
        *(size_t *)dst = stride;
        sl__abi_out(dst, &tmp[i], sizeof tmp[i], SL__SNAPSHOT_V1_SIZE);
    }
    free(tmp);
    return n;
}
