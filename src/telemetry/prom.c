#include "prom.h"
#include "sluice/telemetry.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/base.h"
#include "collector.h"

/* What a local client can take from the training process: at most
 * SL_PROM_CONNS sockets (more are accepted and closed at once, so none
 * waits in the kernel's backlog ahead of a scrape), each dropped after
 * SL_PROM_IDLE_S seconds without a complete request, and SL_PROM_CONN_MEM
 * bytes of request buffer each. A scrape is one short GET, so none of
 * these limits a well-behaved scraper. The limit is ours (conn_admit):
 * libmicrohttpd, at its own connection limit, stops accepting and leaves
 * every further connection queued in the kernel, so 1,000 idle ones would
 * starve scrapes for minutes. */
#define SL_PROM_CONNS 16
#define SL_PROM_IDLE_S 3
#define SL_PROM_CONN_MEM (16 * 1024)

/* One server per port in this process. A loader made while another of this
 * process still serves the port (Python keeps a retired engine alive while
 * the user holds its batches, and restarts on a fresh one) takes the port
 * over instead of failing to bind it: the newest collector attached is the
 * one served, and the daemon stops with the last one detached.
 * Lock order: reg_mu, then att_mu, then a collector's own lock; the
 * daemon's thread (handle) takes only att_mu, so the daemon is stopped
 * under reg_mu alone. */
typedef struct server {
    struct MHD_Daemon *d;
    int port;
    int nconn;             /* open connections (the daemon's thread; atomic) */
    sl__collector_t **att; /* attached collectors, oldest first */
    size_t natt, cap;
    struct server *next;
} server_t;

struct sl__prom {
    server_t *s;
    sl__collector_t *c;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t att_mu = PTHREAD_MUTEX_INITIALIZER;
static server_t *servers; /* under reg_mu */

typedef sl__sbuf_t out_t;
#define emit sl__sbuf_printf

static void metric(out_t *o, const char *name, const char *type,
                   const char *help, double v)
{
    emit(o, "# HELP sluice_%s %s\n# TYPE sluice_%s %s\nsluice_%s %.17g\n", name,
         help, name, type, name, v);
}

/* Gauges that may be absent (negative) are left out, not invented. */
static void metric_opt(out_t *o, const char *name, const char *help, double v)
{
    if (v >= 0)
        metric(o, name, "gauge", help, v);
}

/* The per-stage series: one metric family each, one sample per stage. */
typedef enum { ST_INT, ST_I64, ST_DOUBLE } stage_kind_t;
static const struct {
    const char *name, *type, *help;
    stage_kind_t kind;
    size_t off; /* in sl_stage_stats_t */
} stage_series[] = {
    {"workers", "gauge", "Threads set to work, per stage.", ST_INT,
     offsetof(sl_stage_stats_t, workers)},
    {"stage_busy", "gauge", "Busy share of the stage's threads.", ST_DOUBLE,
     offsetof(sl_stage_stats_t, busy)},
    {"stage_items_total", "counter", "Samples through the stage.", ST_I64,
     offsetof(sl_stage_stats_t, items_total)},
    {"queue_depth", "gauge", "Items waiting at the stage.", ST_INT,
     offsetof(sl_stage_stats_t, queue_depth)},
    {"queue_capacity", "gauge", "Capacity of the stage's queue.", ST_INT,
     offsetof(sl_stage_stats_t, queue_capacity)},
};

static void stage_metrics(out_t *o, const sl_snapshot_t *s)
{
    const struct {
        const char *name;
        const sl_stage_stats_t *st;
    } stages[] = {{"read", &s->read}, {"decode", &s->decode}};
    for (size_t m = 0; m < sizeof stage_series / sizeof *stage_series; m++) {
        const char *name = stage_series[m].name;
        emit(o, "# HELP sluice_%s %s\n# TYPE sluice_%s %s\n", name,
             stage_series[m].help, name, stage_series[m].type);
        for (int i = 0; i < 2; i++) {
            const char *at = (const char *)stages[i].st + stage_series[m].off;
            emit(o, "sluice_%s{stage=\"%s\"} ", name, stages[i].name);
            if (stage_series[m].kind == ST_INT)
                emit(o, "%d\n", *(const int *)(const void *)at);
            else if (stage_series[m].kind == ST_I64)
                emit(o, "%lld\n",
                     (long long)*(const int64_t *)(const void *)at);
            else
                emit(o, "%.6g\n", *(const double *)(const void *)at);
        }
    }
}

/* The counters behind the snapshot's rates: a scraper's own interval's
 * rates from them (rate() in PromQL; `sluice top`) do not alias with the
 * 100 ms snapshots the way one snapshot's gauges do. */
static void extra_metrics(out_t *o, const sl_snapshot_t *s,
                          const sl__collector_extra_t *x)
{
    metric(o, "uptime_seconds", "gauge",
           "Seconds since the loader started, at the latest snapshot (the "
           "time of every counter here).",
           s->t);
    metric(o, "consumer_wait_seconds_total", "counter",
           "Time the consumer waited for data (a wait in progress counts).",
           x->wait_s);
    emit(o,
         "# HELP sluice_stage_busy_seconds_total Busy thread-seconds of "
         "the stage (the read stage with asynchronous reads: seconds reads "
         "were in flight, summed; its share is over sluice_io_depth).\n"
         "# TYPE sluice_stage_busy_seconds_total counter\n"
         "sluice_stage_busy_seconds_total{stage=\"read\"} %.17g\n"
         "sluice_stage_busy_seconds_total{stage=\"decode\"} %.17g\n",
         x->read_busy_s, x->decode_busy_s);
}

/* A label value as the format quotes it: \\, \" and \n escaped. */
static void label_value(out_t *o, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            emit(o, "\\%c", *v);
        else if (*v == '\n')
            emit(o, "\\n");
        else
            emit(o, "%c", *v);
    }
}

int sl__prom_format_decisions(const sl__collector_extra_t *x, char *buf,
                              size_t len)
{
    out_t o = {buf, len, 0, 0};
    if (buf && len)
        buf[0] = 0;
    emit(&o,
         "# HELP sluice_decision The scheduler's last %d knob changes "
         "(value: t, seconds since the loader started).\n"
         "# TYPE sluice_decision gauge\n",
         SL__DECISION_LOG);
    for (int i = 0; i < x->ndec; i++) {
        const sl__decision_rec_t *d = &x->dec[i];
        emit(&o, "sluice_decision{seq=\"%lld\",knob=\"", (long long)d->seq);
        label_value(&o, d->knob);
        emit(&o, "\",from=\"%d\",to=\"%d\",reason=\"", d->from, d->to);
        label_value(&o, d->reason);
        emit(&o, "\"} %.6f\n", d->t);
    }
    return o.need;
}

int sl__prom_format(const sl_snapshot_t *s, const sl__collector_extra_t *x,
                    char *buf, size_t len)
{
    out_t o = {buf, len, 0, 0};
    if (buf && len)
        buf[0] = 0;
    if (x)
        extra_metrics(&o, s, x);
    metric(&o, "samples_total", "counter", "Samples handed to the consumer.",
           (double)s->samples_total);
    metric(&o, "batches_total", "counter", "Batches handed to the consumer.",
           (double)s->batches_total);
    metric(&o, "errors_skipped_total", "counter",
           "Samples skipped as bad input.", (double)s->errors_skipped);
    metric(&o, "read_bytes_total", "counter", "Stored bytes read.",
           (double)s->bytes_read_total);
    metric(&o, "cache_hits_total", "counter", "Samples served by the cache.",
           (double)s->cache_hits_total);
    metric(&o, "cache_misses_total", "counter",
           "Samples the cache did not hold (read from storage).",
           (double)s->cache_misses_total);
    metric(&o, "cache_bytes", "gauge", "Bytes the sample cache holds.",
           (double)s->cache_bytes);
    metric(&o, "cache_entries", "gauge", "Samples the cache holds.",
           (double)s->cache_entries);
    metric(&o, "cache_limit_bytes", "gauge", "The sample cache's limit.",
           (double)s->cache_limit_bytes);
    /* The disk tier's: 0 without one (so a dashboard's queries always
     * find them). */
    metric(&o, "cache_disk_hits_total", "counter",
           "Samples the memory tier missed and the disk tier served.",
           (double)s->cache_disk_hits_total);
    metric(&o, "cache_disk_misses_total", "counter",
           "Samples neither cache tier held (with a disk tier).",
           (double)s->cache_disk_misses_total);
    metric(&o, "cache_disk_bytes", "gauge",
           "Bytes of the cache's disk tier file.", (double)s->cache_disk_bytes);
    metric(&o, "cache_disk_entries", "gauge",
           "Samples the cache's disk tier holds.",
           (double)s->cache_disk_entries);
    metric(&o, "cache_disk_limit_bytes", "gauge",
           "The cache's disk tier budget.", (double)s->cache_disk_limit_bytes);
    metric(&o, "cache_disk_errors_total", "counter",
           "Writes and reads of the disk tier that failed (a failed write "
           "stops it admitting).",
           (double)s->cache_disk_errors_total);
    metric(&o, "samples_per_second", "gauge",
           "Samples per second, last "
           "interval.",
           s->samples_per_s);
    metric(&o, "stall_fraction", "gauge",
           "Share of the last interval the consumer waited for data.",
           s->stall_fraction);
    metric(&o, "batch_latency_seconds", "gauge",
           "Mean first-claim-to-ready time of a batch.",
           s->batch_latency_ms / 1e3);
    metric(
        &o, "consumer_wait_seconds", "gauge",
        "Consumer wait per batch handed out in the last interval (with none, "
        "the whole wait).",
        s->consumer_wait_ms / 1e3);
    metric(&o, "prefetch", "gauge", "Batch buffers allowed (knob).",
           s->prefetch);
    metric(&o, "batches_ready", "gauge", "Complete batches waiting.",
           s->batches_ready);
    metric(&o, "io_async", "gauge",
           "1: asynchronous reads (io_uring); 0: a blocking read per read "
           "thread.",
           s->io_async);
    metric(&o, "io_depth", "gauge",
           "Reads in flight allowed, with asynchronous reads (knob).",
           s->io_depth);
    metric(&o, "reads_in_flight", "gauge", "Reads issued and not yet done.",
           s->reads_in_flight);
    metric(&o, "requests_total", "counter",
           "Ranged requests made for samples from URLs (retries not "
           "counted).",
           (double)s->requests_total);
    metric(&o, "request_records_total", "counter",
           "Samples those requests fetched (records per request: its rate "
           "over sluice_requests_total's).",
           (double)s->request_records_total);
    metric(&o, "request_fallbacks_total", "counter",
           "Coalesced requests that failed, their records read again one "
           "by one.",
           (double)s->request_fallbacks_total);
    metric(&o, "decisions_total", "counter", "Knob changes the scheduler made.",
           (double)s->decisions_total);
    stage_metrics(&o, s);
    metric(&o, "cpu_total", "gauge", "Machine CPU busy share (0..1).",
           s->cpu_total);
    metric(&o, "cpu_self", "gauge", "This process's share of the machine.",
           s->cpu_self);
    metric(&o, "cpu_other", "gauge",
           "Other processes' share of the machine (interference).",
           s->cpu_other);
    metric(&o, "run_queue", "gauge", "Runnable threads.", s->run_queue);
    metric_opt(&o, "mem_available_bytes", "MemAvailable.",
               (double)s->mem_available_bytes);
    metric_opt(&o, "rss_bytes", "Resident memory of this process.",
               (double)s->rss_bytes);
    metric_opt(&o, "disk_read_bytes_per_second",
               "Reads of the device holding the data.",
               s->disk_read_bytes_per_s);
    metric_opt(&o, "psi_cpu_some", "CPU pressure, some, avg10 (%).",
               s->psi_cpu_some);
    metric_opt(&o, "psi_io_some", "I/O pressure, some, avg10 (%).",
               s->psi_io_some);
    metric_opt(&o, "psi_memory_some", "Memory pressure, some, avg10 (%).",
               s->psi_mem_some);
    if (s->gpu_present) { /* the GPU stage's GPU, else GPU 0 */
        metric(&o, "gpu_utilization", "gauge",
               "The loader's GPU: utilisation (0..1).", s->gpu_util);
        metric_opt(&o, "gpu_power_watts", "The loader's GPU: power.",
                   s->gpu_power_w);
        metric_opt(&o, "gpu_jpeg_utilization",
                   "The loader's GPU: JPEG decoders' utilisation (0..1).",
                   s->gpu_jpg_util);
        metric_opt(&o, "gpu_memory_used_bytes",
                   "The loader's GPU: memory used.",
                   (double)s->gpu_mem_used_bytes);
    }
    if (s->placement_present) {
        metric(&o, "gpu_stage_share", "gauge",
               "Share of each batch placed on the GPU stage (0..1).",
               s->placement_gpu ? s->gpu_share / 1000.0 : 0.0);
        metric(&o, "gpu_stage_samples_total", "counter",
               "Samples the GPU stage decoded.", (double)s->gpu_samples_total);
        metric(&o, "gpu_stage_refused_total", "counter",
               "Samples the GPU stage handed back to the CPU path.",
               (double)s->gpu_refused_total);
        metric_opt(&o, "gpu_stage_busy",
                   "Share of the period the GPU stage had samples in it "
                   "(0..1).",
                   s->gpu_stage_busy);
        metric_opt(&o, "gpu_stage_cpu_cores",
                   "Cores' worth of CPU the GPU path used: hand-overs and "
                   "the stage's threads.",
                   s->gpu_cpu_busy);
    }
    if (s->energy_j >= 0)
        metric(&o, "energy_joules_total", "counter",
               "Energy since the loader started (RAPL + NVML).", s->energy_j);
    return o.need;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;
    server_t *srv = cls;
    struct MHD_Response *r;
    enum MHD_Result ret;
    int decisions = !strcmp(url, "/decisions");
    if (strcmp(method, "GET") != 0 ||
        (strcmp(url, "/metrics") != 0 && strcmp(url, "/") != 0 && !decisions)) {
        static const char nf[] = "not found: try /metrics or /decisions\n";
        r = MHD_create_response_from_buffer(sizeof nf - 1, (void *)nf,
                                            MHD_RESPMEM_PERSISTENT);
        ret = MHD_queue_response(conn, MHD_HTTP_NOT_FOUND, r);
        MHD_destroy_response(r);
        return ret;
    }
    sl_snapshot_t s;
    sl__collector_extra_t x;
    pthread_mutex_lock(&att_mu);
    int have = srv->natt > 0, ticked = 0;
    if (have)
        ticked = sl__collector_latest_extra(srv->att[srv->natt - 1], &s, &x);
    pthread_mutex_unlock(&att_mu);
    if (!have) { /* the last loader is going away */
        static const char gone[] = "no loader\n";
        r = MHD_create_response_from_buffer(sizeof gone - 1, (void *)gone,
                                            MHD_RESPMEM_PERSISTENT);
        ret = MHD_queue_response(conn, MHD_HTTP_SERVICE_UNAVAILABLE, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (!ticked) {
        /* Before the first snapshot nothing has been read: its zeros are
         * not values (unreadable values are absent, never invented), so
         * no sample is served. A 200 all the same: the job is there (a
         * 503 reads as gone to `sluice top`). */
        static const char early[] = "# sluice: no snapshot yet\n";
        r = MHD_create_response_from_buffer(sizeof early - 1, (void *)early,
                                            MHD_RESPMEM_PERSISTENT);
    } else {
        /* /decisions: the log, apart from /metrics so that a Prometheus
         * server's series stay few (each reason would be a new series). */
        int need = decisions ? sl__prom_format_decisions(&x, NULL, 0)
                             : sl__prom_format(&s, &x, NULL, 0);
        char *buf = malloc((size_t)need + 1);
        if (!buf)
            return MHD_NO;
        if (decisions)
            sl__prom_format_decisions(&x, buf, (size_t)need + 1);
        else
            sl__prom_format(&s, &x, buf, (size_t)need + 1);
        r = MHD_create_response_from_buffer((size_t)need, buf,
                                            MHD_RESPMEM_MUST_FREE);
    }
    MHD_add_response_header(r, "Content-Type",
                            "text/plain; version=0.0.4; charset=utf-8");
    ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static server_t *server_find(int port)
{
    server_t *s = servers;
    while (s && s->port != port)
        s = s->next;
    return s;
}

/* The daemon's thread counts its connections (notify) and refuses one
 * more than SL_PROM_CONNS (accept policy: closed at once). */
static void conn_notify(void *cls, struct MHD_Connection *conn, void **ctx,
                        enum MHD_ConnectionNotificationCode toe)
{
    (void)conn;
    (void)ctx;
    server_t *s = cls;
    __atomic_add_fetch(&s->nconn, toe == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1,
                       __ATOMIC_RELAXED);
}

static enum MHD_Result conn_admit(void *cls, const struct sockaddr *addr,
                                  socklen_t addrlen)
{
    (void)addr;
    (void)addrlen;
    server_t *s = cls;
    return __atomic_load_n(&s->nconn, __ATOMIC_RELAXED) < SL_PROM_CONNS
               ? MHD_YES
               : MHD_NO;
}

static server_t *server_start(int port)
{
    server_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->port = port;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* poll(): the process may hold more than FD_SETSIZE descriptors, which
     * select() could not watch. The daemon's own limit is never reached
     * (conn_admit refuses first): at it, the daemon would stop accepting. */
    s->d = MHD_start_daemon(
        MHD_USE_POLL_INTERNAL_THREAD, (uint16_t)port, conn_admit, s, handle, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(4 * SL_PROM_CONNS),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)SL_PROM_IDLE_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SL_PROM_CONN_MEM,
        MHD_OPTION_NOTIFY_CONNECTION, conn_notify, s, MHD_OPTION_END);
    if (!s->d) {
        free(s);
        return NULL;
    }
    return s;
}

/* Why 127.0.0.1:port cannot be listened on (MHD_start_daemon does not
 * say): a bind of our own, as the daemon makes it (SO_REUSEADDR), gives
 * the errno; 0 when it succeeds (the daemon failed for another cause). */
static int bind_errno(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int e = bind(fd, (struct sockaddr *)&addr, sizeof addr) ? errno : 0;
    close(fd);
    return e;
}

static void server_stop(server_t *s)
{
    MHD_stop_daemon(s->d); /* joins its thread */
    free(s->att);
    free(s);
}

int sl__prom_start(int port, sl__collector_t *c, sl__prom_t **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    if (port < 1 || port > 65535)
        return sl__fail(err, errlen, SL_EINVAL, "bad metrics port %d", port);
    sl__prom_t *p = calloc(1, sizeof *p);
    if (!p)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    p->c = c;
    int rc = 0;
    pthread_mutex_lock(&reg_mu);
    server_t *s = server_find(port);
    int fresh = !s;
    if (fresh && !(s = server_start(port))) {
        int e = bind_errno(port);
        rc = sl__fail(err, errlen, SL_EIO,
                      "cannot serve metrics on 127.0.0.1:%d: %s", port,
                      e ? strerror(e) : "the HTTP server did not start");
    }
    if (!rc) {
        pthread_mutex_lock(&att_mu);
        if (sl__array_reserve(&s->att, &s->cap, s->natt + 1, sizeof *s->att, 4))
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        else
            s->att[s->natt++] = c;
        pthread_mutex_unlock(&att_mu);
    }
    if (!rc && fresh) {
        s->next = servers;
        servers = s;
    } else if (rc && fresh && s) {
        server_stop(s);
    }
    pthread_mutex_unlock(&reg_mu);
    if (rc) {
        free(p);
        return rc;
    }
    p->s = s;
    *out = p;
    return 0;
}

void sl__prom_stop(sl__prom_t *p)
{
    if (!p)
        return;
    server_t *s = p->s;
    pthread_mutex_lock(&reg_mu);
    pthread_mutex_lock(&att_mu); /* handle() reads att under it */
    size_t i = 0;
    while (i < s->natt && s->att[i] != p->c)
        i++;
    if (i < s->natt) {
        memmove(&s->att[i], &s->att[i + 1], (s->natt - i - 1) * sizeof *s->att);
        s->natt--;
    }
    size_t left = s->natt;
    pthread_mutex_unlock(&att_mu);
    if (!left) {
        server_t **at = &servers;
        while (*at != s)
            at = &(*at)->next;
        *at = s->next;
        server_stop(s); /* joins the threads: att_mu is free */
    }
    pthread_mutex_unlock(&reg_mu);
    free(p);
}
