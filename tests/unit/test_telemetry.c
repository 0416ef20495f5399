/* Telemetry collector: a CPU hog started here shows up as other-process
 * CPU within 3 samples; the ring keeps order; JSON carries every
 * documented key; the Prometheus endpoint answers over loopback; no GPU
 * means null, not zero. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/sluice.h"
#include "sluice/version.h" /* SL_HAVE_PROMETHEUS */
#include "telemetry/collector.h"
#include "telemetry/top.h"
#include "testutil.h"

static _Atomic int64_t fake_samples, fake_decisions;
static void fake_pipe(void *arg, sl__pipe_sample_t *o)
{
    (void)arg;
    memset(o, 0, sizeof *o);
    o->samples = fake_samples;
    o->wait_ns = 250000000;
    o->decode_busy_ns = 1500000000;
    o->decisions = fake_decisions;
    snprintf(o->decision_knob, sizeof o->decision_knob, "prefetch");
    o->decision_from = 4;
    o->decision_to = 5;
    snprintf(o->decision_reason, sizeof o->decision_reason,
             "waits \"in bursts\"\\ \nof %lld", (long long)fake_decisions);
    o->read_workers = 1;
    o->decode_workers = 2;
    o->decode_capacity = 32;
    o->read_capacity = 32;
}

/* A consumer that waits the whole time and gets no batch. */
static _Atomic int64_t stalled_wait_ns, stalled_batches;
static void stalled_pipe(void *arg, sl__pipe_sample_t *o)
{
    (void)arg;
    memset(o, 0, sizeof *o);
    o->wait_ns = stalled_wait_ns;
    o->batches = stalled_batches;
    o->read_workers = 1;
    o->decode_workers = 1;
}

/* consumer_wait_ms is the interval's wait per batch handed out; in an
 * interval with no batch, the whole wait: a total stall is not 0. */
static void test_wait_in_a_total_stall_is_not_zero(void **state)
{
    (void)state;
    sl__collector_opts_t o = {1000000, "/",  NULL, 0,
                              4,       NULL, NULL, NULL}; /* manual ticks */
    sl__collector_t *c;
    char err[256];
    assert_int_equal(sl__collector_start(&o, stalled_pipe, NULL, &c, err, 256),
                     0);
    sl__collector_tick(c);
    stalled_wait_ns += 50000000; /* 50 ms, no batch */
    sl__collector_tick(c);
    sl_snapshot_t s;
    sl__collector_latest(c, &s);
    assert_true(fabs(s.consumer_wait_ms - 50) < 1e-9);
    stalled_wait_ns += 50000000; /* 50 ms over 2 batches */
    stalled_batches += 2;
    sl__collector_tick(c);
    sl__collector_latest(c, &s);
    assert_true(fabs(s.consumer_wait_ms - 25) < 1e-9);
    sl__collector_tick(c); /* no wait, no batch */
    sl__collector_latest(c, &s);
    assert_true(s.consumer_wait_ms == 0);
    sl__collector_stop(c);
}

static void test_hog_shows_as_other_cpu(void **state)
{
    (void)state;
    sl__collector_opts_t o = {100, "/", NULL, 0, 100, NULL, NULL, NULL};
    sl__collector_t *c;
    char err[256];
    assert_int_equal(sl__collector_start(&o, fake_pipe, NULL, &c, err, 256), 0);
    usleep(250000);
    pid_t pid = fork();
    if (pid == 0) {
        volatile unsigned long x = 0;
        for (;;)
            x++;
    }
    /* Three periods after the hog starts, one snapshot must see it: a
     * whole core is 1/ncpu of the machine. */
    usleep(350000);
    sl_snapshot_t s[8];
    int n = sl__collector_recent(c, s, 3);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_true(n == 3);
    double best = 0;
    for (int i = 0; i < n; i++)
        if (s[i].cpu_other > best)
            best = s[i].cpu_other;
    double core = 1.0 / s[n - 1].ncpu;
    printf("hog: best cpu_other %.3f, one core = %.3f of the machine\n", best,
           core);
    assert_true(best >= 0.7 * core);
    assert_true(s[n - 1].cpu_self < 0.5 * core); /* the hog is not us */
    sl__collector_stop(c);
}

/* What on_warning heard: how many calls and the last message. */
typedef struct warned {
    int n;
    char msg[1024];
} warned_t;
static void on_warning(void *arg, const char *msg)
{
    warned_t *w = arg;
    w->n++;
    snprintf(w->msg, sizeof w->msg, "%s", msg);
}
static void warn_pipe(void *arg, sl__pipe_sample_t *o)
{
    (void)arg;
    memset(o, 0, sizeof *o);
}

/* A --telemetry file whose writes fail (a full disk: /dev/full) is said
 * once through on_warning, naming it and the cause, and no more is
 * written (was: every line silently lost); a FIFO with no reader fails the
 * start at once (was: the open waited for a reader for ever). */
static void test_jsonl_write_failure_is_said(void **state)
{
    (void)state;
    char err[512];
    warned_t w = {0};
    sl__collector_t *c = NULL;
    struct stat st;
    if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
        sl__collector_opts_t o = {1000000, "/",  "/dev/full", 0,
                                  4,       NULL, NULL,        on_warning};
        assert_int_equal(
            sl__collector_start(&o, warn_pipe, &w, &c, err, sizeof err), 0);
        sl__collector_tick(c);
        sl__collector_tick(c);
        sl__collector_stop(c);
        assert_int_equal(w.n, 1);
        assert_non_null(strstr(w.msg, "telemetry /dev/full: write failed: "
                                      "No space left on device"));
    } else {
        printf("no /dev/full: its part skipped\n");
    }

    char *dir = tu_tmpdir("tel-fifo");
    char fifo[1024];
    snprintf(fifo, sizeof fifo, "%s/tel.jsonl", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(30); /* a hang fails the test */
    sl__collector_opts_t o = {1000000, "/", fifo, 0, 4, NULL, NULL, NULL};
    c = NULL;
    assert_int_not_equal(
        sl__collector_start(&o, warn_pipe, &w, &c, err, sizeof err), 0);
    alarm(0);
    assert_null(c);
    assert_non_null(strstr(err, "a FIFO with no reader"));
    tu_rmtree(dir);
    free(dir);
}

static void test_ring_order_and_pipeline_rates(void **state)
{
    (void)state;
    sl__collector_opts_t o = {1000000, "/",  NULL, 0,
                              4,       NULL, NULL, NULL}; /* manual ticks */
    sl__collector_t *c;
    char err[256];
    assert_int_equal(sl__collector_start(&o, fake_pipe, NULL, &c, err, 256), 0);
    for (int i = 0; i < 6; i++) {
        fake_samples += 100;
        usleep(10000);
        sl__collector_tick(c);
    }
    sl_snapshot_t s[8];
    int n = sl__collector_recent(c, s, 8);
    assert_int_equal(n, 4);
    for (int i = 1; i < n; i++)
        assert_true(s[i].t > s[i - 1].t);
    assert_int_equal(s[n - 1].samples_total, 600);
    assert_true(s[n - 1].samples_per_s > 1000); /* 100 per ~10 ms */
    assert_int_equal(s[n - 1].decode.workers, 2);
    sl_snapshot_t last;
    sl__collector_latest(c, &last);
    assert_true(last.t == s[n - 1].t);
    sl__collector_stop(c);
}

static void test_json_has_every_documented_key(void **state)
{
    (void)state;
    sl__collector_opts_t o = {1000000, "/", NULL, 0, 4, NULL, NULL, NULL};
    sl__collector_t *c;
    char err[256];
    assert_int_equal(sl__collector_start(&o, fake_pipe, NULL, &c, err, 256), 0);
    usleep(20000);
    sl__collector_tick(c);
    sl_snapshot_t s;
    sl__collector_latest(c, &s); /* the collector's: its size set */
    char buf[16384];
    int need = sl_snapshot_json(&s, buf, sizeof buf);
    assert_true(need > 0 && (size_t)need < sizeof buf);
    const char *keys[] = {"\"t\": ",
                          "\"cpu_total\": ",
                          "\"cpu_other\": ",
                          "\"mem_available_bytes\": ",
                          "\"rss_bytes\": ",
                          "\"read_bytes_per_s\": ",
                          "\"samples_per_s\": ",
                          "\"stall_fraction\": ",
                          "\"queue_depth\": {",
                          "\"workers\": {",
                          "\"gpu\": ",
                          "\"energy_j\": ",
                          "\"cpu_core\": [",
                          "\"run_queue\": ",
                          "\"psi_cpu_some\": ",
                          "\"disk_read_bytes_per_s\": ",
                          "\"net_rx_bytes_per_s\": ",
                          "\"batch_latency_ms\": ",
                          "\"consumer_wait_ms\": ",
                          "\"knobs\": {"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (!strstr(buf, keys[i]))
            fail_msg("missing %s in %s", keys[i], buf);
    }
    if (!s.gpu_present) /* no NVIDIA driver: null, not zeros */
        assert_non_null(strstr(buf, "\"gpu\": null"));
    /* A short buffer: truncated but terminated, and the needed size. */
    char small[16];
    assert_int_equal(sl_snapshot_json(&s, small, sizeof small), need);
    assert_int_equal(strlen(small), sizeof small - 1);
    sl__collector_stop(c);
}

static int http_get(int port, const char *path, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, buf + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = 0;
    close(fd);
    return (int)got;
}

/* Before the loader's first snapshot nothing has been read: /metrics
 * serves no sample (no invented zeros: sluice_mem_available_bytes 0,
 * sluice_uptime_seconds 0), with 200 so that the job reads as there. */
static void test_prometheus_before_the_first_snapshot(void **state)
{
    (void)state;
#if !SL_HAVE_PROMETHEUS
    skip();
#endif
    sl__collector_opts_t o = {1000000, "/",  NULL, 0,
                              4,       NULL, NULL, NULL}; /* manual ticks */
    sl__collector_t *c = NULL;
    char err[256];
    int port = 0, rc = -1;
    for (int p = 21000 + getpid() % 1000; p < 23000 && rc; p += 7) {
        o.metrics_port = p;
        rc = sl__collector_start(&o, fake_pipe, NULL, &c, err, sizeof err);
        port = p;
    }
    assert_int_equal(rc, 0);
    static char buf[65536];
    assert_true(http_get(port, "/metrics", buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, " 200 "));
    assert_null(strstr(buf, "sluice_uptime_seconds"));
    assert_null(strstr(buf, "sluice_mem_available_bytes"));
    assert_null(strstr(buf, "sluice_rss_bytes"));
    assert_non_null(strstr(buf, "no snapshot yet"));
    sl__collector_tick(c);
    assert_true(http_get(port, "/metrics", buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "\nsluice_uptime_seconds "));
    sl__collector_stop(c);
}

static void test_prometheus_over_loopback(void **state)
{
    (void)state;
    sl__collector_opts_t o = {50, "/", NULL, 0, 16, NULL, NULL, NULL};
    sl__collector_t *c = NULL;
    char err[256];
    int port = 0, rc = -1;
#if !SL_HAVE_PROMETHEUS /* -DSL_PROMETHEUS=OFF: a port is refused, clearly */
    o.metrics_port = 19000;
    rc = sl__collector_start(&o, fake_pipe, NULL, &c, err, sizeof err);
    assert_int_equal(rc, SL_EUNSUPPORTED);
    assert_null(c);
    assert_non_null(strstr(err, "built without the Prometheus endpoint"));
    return;
#endif
    for (int p = 19000 + getpid() % 1000; p < 21000 && rc; p += 7) {
        o.metrics_port = p;
        rc = sl__collector_start(&o, fake_pipe, NULL, &c, err, sizeof err);
        port = p;
    }
    assert_int_equal(rc, 0);
    fake_samples = 4242;
    usleep(120000);
    static char buf[65536];
    assert_true(http_get(port, "/metrics", buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "HTTP/1.0 200") ? buf : strstr(buf, "200 OK"));
    assert_non_null(strstr(buf, "text/plain; version=0.0.4"));
    assert_non_null(strstr(buf, "# TYPE sluice_samples_total counter"));
    assert_non_null(strstr(buf, "\nsluice_samples_total 4242\n"));
    assert_non_null(strstr(buf, "sluice_workers{stage=\"decode\"} 2"));
    assert_non_null(strstr(buf, "sluice_cpu_other "));
    assert_non_null(strstr(buf, "\nsluice_consumer_wait_seconds_total 0.25\n"));
    assert_non_null(strstr(
        buf, "\nsluice_stage_busy_seconds_total{stage=\"decode\"} 1.5\n"));
    assert_true(http_get(port, "/nope", buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "404"));

    /* What `sluice top` reads: /metrics through its own client and parser,
     * and the decision log, a decision per tick that made one, the reason
     * escaped so that it reads back byte for byte. */
    sl__url_t u = {"127.0.0.1", port, "/metrics"}, du;
    sl__prom_set_t set = {0};
    assert_int_equal(sl__top_scrape(&u, 2000, &set, err, sizeof err), 0);
    assert_true(sl__prom_get(&set, "sluice_samples_total", NULL, NULL, -1) ==
                4242);
    assert_true(sl__prom_get(&set, "sluice_uptime_seconds", NULL, NULL, -1) >
                0);
    assert_int_equal(sl__top_decisions_url(&u, &du), 0);
    assert_string_equal(du.path, "/decisions");
    for (int i = 1; i <= 3; i++) { /* one change a tick, seen by each */
        fake_decisions = i;
        sl_snapshot_t snap;
        for (int k = 0; k < 500; k++) {
            sl__collector_latest(c, &snap);
            if (snap.decisions_total == i)
                break;
            usleep(10000);
        }
        assert_int_equal(snap.decisions_total, i);
    }
    assert_int_equal(sl__top_scrape(&du, 2000, &set, err, sizeof err), 0);
    assert_int_equal(set.n, 3);
    for (int i = 0; i < 3; i++) {
        char want[64];
        snprintf(want, sizeof want, "waits \"in bursts\"\\ \nof %d", i + 1);
        assert_string_equal(sl__prom_label(&set.s[i], "reason"), want);
        assert_string_equal(sl__prom_label(&set.s[i], "knob"), "prefetch");
        assert_string_equal(sl__prom_label(&set.s[i], "from"), "4");
        assert_string_equal(sl__prom_label(&set.s[i], "to"), "5");
    }
    /* Attach by pid: this process listens on the port. */
    int ports[64], n = sl__pid_listen_ports(getpid(), ports, 64, err, 256);
    int found = 0;
    for (int i = 0; i < n; i++)
        found |= ports[i] == port;
    assert_true(found);
    assert_int_equal(sl__top_attach_pid(getpid(), 2000, &u, err, sizeof err),
                     0);
    assert_int_equal(u.port, port);
    sl__prom_set_free(&set);
    sl__collector_stop(c);
    /* The job gone: refused, which top reports as the end (SL_EEND). */
    u.port = port;
    assert_int_equal(sl__top_scrape(&u, 2000, &set, err, sizeof err), SL_EEND);
    /* The port is free again once the collector is gone. */
    assert_true(http_get(port, "/metrics", buf, sizeof buf) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hog_shows_as_other_cpu),
        cmocka_unit_test(test_ring_order_and_pipeline_rates),
        cmocka_unit_test(test_wait_in_a_total_stall_is_not_zero),
        cmocka_unit_test(test_json_has_every_documented_key),
        cmocka_unit_test(test_prometheus_over_loopback),
        cmocka_unit_test(test_prometheus_before_the_first_snapshot),
        cmocka_unit_test(test_jsonl_write_failure_is_said),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
