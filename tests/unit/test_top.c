/* sluice top's library side: the Prometheus text reader (grammar, escapes,
 * errors with line numbers, bounds), the frame model (rates over two
 * scrapes from the counters and the job's clock; gauges until then or
 * after a restart; decisions newest first), the drawing (width, height,
 * what it shows), and the readers of outside bytes around them (URL, HTTP
 * reply, /proc/net/tcp). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/sluice.h"
#include "telemetry/promtext.h"
#include "telemetry/scrape.h"
#include "telemetry/top.h"
#include "testutil.h"

static int parse(const char *t, sl__prom_set_t *set, char *err)
{
    return sl__promtext_parse(t, strlen(t), set, err, 256);
}

static void test_parse_grammar(void **state)
{
    (void)state;
    sl__prom_set_t set = {0};
    char err[256];
    const char *t = "# HELP a_total Things.\n"
                    "# TYPE a_total counter\n"
                    "a_total 42\n"
                    "\n"
                    "  b{stage=\"read\"}   0.5   1700000000000\r\n"
                    "b{stage=\"decode\",x=\"q\\\"uo\\\\te\\nnl\",} -1.5e3\n"
                    "c:rule NaN\n"
                    "d +Inf\n"
                    "e{} -Inf";
    assert_int_equal(parse(t, &set, err), 0);
    assert_int_equal(set.n, 6);
    assert_true(sl__prom_get(&set, "a_total", NULL, NULL, -1) == 42);
    assert_true(sl__prom_get(&set, "b", "stage", "read", -1) == 0.5);
    const sl__prom_sample_t *s = sl__prom_find(&set, "b", "stage", "decode");
    assert_non_null(s);
    assert_true(s->value == -1500);
    assert_string_equal(sl__prom_label(s, "x"), "q\"uo\\te\nnl");
    assert_null(sl__prom_label(s, "y"));
    assert_true(isnan(sl__prom_get(&set, "c:rule", NULL, NULL, 0)));
    assert_true(sl__prom_get(&set, "d", NULL, NULL, 0) == INFINITY);
    assert_true(sl__prom_get(&set, "e", NULL, NULL, 0) == -INFINITY);
    assert_true(sl__prom_get(&set, "nope", NULL, NULL, 7) == 7);
    assert_null(sl__prom_find(&set, "b", "stage", "nope"));
    /* Not NUL-terminated: only len bytes are read. */
    assert_int_equal(sl__promtext_parse("x 1\ny 2", 3, &set, err, 256), 0);
    assert_int_equal(set.n, 1);
    sl__prom_set_free(&set);
}

static void test_parse_errors_name_the_line(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"ok 1\n9bad 1\n", "line 2: expected a metric name"},
        {"a\n", "line 1: expected a space and a value"},
        {"a 1 2 3\n", "line 1: bad timestamp"},
        {"a abc\n", "line 1: bad value"},
        {"a 0x10\n", "line 1: bad value"},
        {"a infinity\n", "line 1: bad value"},
        {"# c\na{b=\"x} 1\n", "line 2: expected a quoted label value"},
        {"a{b=\"x\\q\"} 1\n", "line 1: expected a quoted label value"},
        {"a{b=x} 1\n", "line 1: expected a quoted label value"},
        {"a{=\"x\"} 1\n", "line 1: expected a label name"},
        {"a{b \"x\"} 1\n", "line 1: expected '='"},
        {"a{b=\"x\" c=\"y\"} 1\n", "line 1: expected ',' or '}'"},
        {"a{b=\"x\"}1\n", "line 1: expected a space and a value"},
    };
    sl__prom_set_t set = {0};
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(parse(bad[i].text, &set, err), SL_ECORRUPT);
        if (!strstr(err, bad[i].msg))
            fail_msg("%s: got '%s', want '%s'", bad[i].text, err, bad[i].msg);
        assert_int_equal(set.n, 0);
    }
    sl__prom_set_free(&set);
}

static void test_parse_bounds(void **state)
{
    (void)state;
    sl__prom_set_t set = {0};
    char err[256];
    /* A name or a label value past the fields, or a 7th label: skipped,
     * counted, the rest kept. */
    char t[2048];
    memset(t, 'n', 100);
    snprintf(t + 100, sizeof t - 100,
             " 1\nv{l=\"%0300d\"} 2\nw{a=\"1\",b=\"2\",c=\"3\",d=\"4\",e=\"5\","
             "f=\"6\",g=\"7\"} 3\nkept 4\n",
             0);
    assert_int_equal(parse(t, &set, err), 0);
    assert_int_equal(set.n, 1);
    assert_int_equal(set.skipped, 3);
    assert_string_equal(set.s[0].name, "kept");
    /* More samples than SL__PROM_SAMPLES: an error, not unbounded. */
    size_t cap = (SL__PROM_SAMPLES + 1) * 4 + 1;
    char *many = malloc(cap);
    size_t n = 0;
    for (int i = 0; i <= SL__PROM_SAMPLES; i++)
        n += (size_t)snprintf(many + n, cap - n, "a 1\n");
    assert_int_equal(sl__promtext_parse(many, n, &set, err, 256), SL_ECORRUPT);
    assert_non_null(strstr(err, "more than 4096 samples"));
    free(many);
    sl__prom_set_free(&set);
}

/* Two scrapes of a job one second of its clock apart. */
static const char scrape0[] =
    "sluice_uptime_seconds 10\n"
    "sluice_consumer_wait_seconds_total 2\n"
    "sluice_stage_busy_seconds_total{stage=\"read\"} 1\n"
    "sluice_stage_busy_seconds_total{stage=\"decode\"} 20\n"
    "sluice_samples_total 10000\nsluice_batches_total 160\n"
    "sluice_samples_per_second 999\nsluice_stall_fraction 0.9\n"
    "sluice_workers{stage=\"read\"} 2\nsluice_workers{stage=\"decode\"} 4\n"
    "sluice_gpu_stage_samples_total 4000\n";
static const char scrape1[] =
    "sluice_uptime_seconds 11\n"
    "sluice_consumer_wait_seconds_total 2.25\n"
    "sluice_stage_busy_seconds_total{stage=\"read\"} 1.5\n"
    "sluice_stage_busy_seconds_total{stage=\"decode\"} 23\n"
    "sluice_samples_total 11280\nsluice_batches_total 180\n"
    "sluice_errors_skipped_total 3\n"
    "sluice_samples_per_second 640\nsluice_stall_fraction 0.5\n"
    "sluice_consumer_wait_seconds 0.004\n"
    "sluice_prefetch 6\nsluice_batches_ready 2\nsluice_decisions_total 9\n"
    "sluice_workers{stage=\"read\"} 2\nsluice_workers{stage=\"decode\"} 4\n"
    "sluice_stage_busy{stage=\"read\"} 0.1\n"
    "sluice_stage_busy{stage=\"decode\"} 0.2\n"
    "sluice_queue_depth{stage=\"read\"} 5\n"
    "sluice_queue_capacity{stage=\"read\"} 96\n"
    "sluice_queue_depth{stage=\"decode\"} 7\n"
    "sluice_queue_capacity{stage=\"decode\"} 32\n"
    "sluice_cpu_self 0.75\nsluice_cpu_other 0.05\nsluice_cpu_total 0.8\n"
    "sluice_run_queue 3\nsluice_rss_bytes 536870912\n"
    "sluice_mem_available_bytes 21474836480\n"
    "sluice_gpu_stage_share 0.674\nsluice_gpu_stage_samples_total 4860\n"
    "sluice_gpu_stage_busy 0.97\nsluice_gpu_stage_cpu_cores 2.25\n";
static const char decisions[] =
    "# TYPE sluice_decision gauge\n"
    "sluice_decision{seq=\"8\",knob=\"decode_threads\",from=\"3\",to=\"4\","
    "reason=\"decoders busy 97%\"} 4.5\n"
    "sluice_decision{seq=\"9\",knob=\"prefetch\",from=\"4\",to=\"6\","
    "reason=\"waits come in bursts\"} 8.25\n";

/* The two scrapes and the decisions above, parsed. */
static void parse3(sl__prom_set_t *a, sl__prom_set_t *b, sl__prom_set_t *d)
{
    char err[256];
    assert_int_equal(parse(scrape0, a, err), 0);
    assert_int_equal(parse(scrape1, b, err), 0);
    assert_int_equal(parse(decisions, d, err), 0);
}

static void free3(sl__prom_set_t *a, sl__prom_set_t *b, sl__prom_set_t *d)
{
    sl__prom_set_free(a);
    sl__prom_set_free(b);
    sl__prom_set_free(d);
}

static void test_frame_rates_from_counters(void **state)
{
    (void)state;
    sl__prom_set_t a = {0}, b = {0}, d = {0};
    parse3(&a, &b, &d);
    sl__top_frame_t f;
    sl__top_frame_make(&a, &b, &d, &f);
    assert_true(f.span_s == 1);
    assert_true(fabs(f.samples_per_s - 1280) < 1e-9); /* not the gauge's 640 */
    assert_true(fabs(f.batches_per_s - 20) < 1e-9);
    assert_true(fabs(f.stall - 0.25) < 1e-9);
    assert_true(fabs(f.wait_ms - 12.5) < 1e-9); /* 0.25 s over 20 batches */
    assert_int_equal(f.nstages, 2);
    assert_string_equal(f.stage[0].name, "read");
    assert_int_equal(f.stage[0].threads, 2);
    assert_true(fabs(f.stage[0].busy - 0.25) < 1e-9);
    assert_true(fabs(f.stage[1].busy - 0.75) < 1e-9);
    assert_int_equal(f.stage[1].queue, 7);
    assert_int_equal(f.stage[1].capacity, 32);
    assert_int_equal(f.prefetch, 6);
    assert_int_equal(f.ndec, 2);
    assert_string_equal(f.dec[1].knob, "prefetch");
    assert_int_equal(f.dec[1].from, 4);
    assert_int_equal(f.dec[1].to, 6);
    assert_true(f.dec[1].t == 8.25);
    assert_int_equal(f.dec[1].seq, 9);
    /* the GPU stage: its samples/s from the counter */
    assert_true(fabs(f.gpu_samples_per_s - 860) < 1e-9);
    assert_true(f.gpu_share == 0.674 && f.gpu_busy == 0.97);
    assert_true(f.gpu_cpu_cores == 2.25);
    /* The first frame, and a job whose counters went back (a restarted
     * loader on the port): the job's own last-interval gauges. */
    sl__top_frame_make(NULL, &b, NULL, &f);
    assert_true(f.span_s == 0 && f.samples_per_s == 640 && f.stall == 0.5);
    assert_true(f.batches_per_s < 0);
    assert_true(fabs(f.stage[1].busy - 0.2) < 1e-9);
    sl__top_frame_make(&b, &a, NULL, &f);
    assert_true(f.span_s == 0 && f.samples_per_s == 999);
    /* Absent metrics are unknown (negative), never zero. */
    sl__prom_set_t empty = {0};
    sl__top_frame_make(NULL, &empty, NULL, &f);
    assert_true(f.samples_per_s < 0 && f.cpu_self < 0 && f.rss_bytes < 0);
    assert_true(f.gpu_share < 0 && f.gpu_samples_per_s < 0);
    assert_int_equal(f.nstages, 0);
    free3(&a, &b, &d);
}

/* With asynchronous reads the read stage's busy seconds are reads in
 * flight: its share is over sluice_io_depth, not its threads. 64 slots,
 * 6.4 s of reads in flight in 1 s: 10 %. */
static void test_frame_read_busy_over_io_depth(void **state)
{
    (void)state;
    static const char s0[] =
        "sluice_uptime_seconds 10\nsluice_samples_total 0\n"
        "sluice_batches_total 0\n"
        "sluice_stage_busy_seconds_total{stage=\"read\"} 10\n"
        "sluice_workers{stage=\"read\"} 1\n"
        "sluice_io_async 1\nsluice_io_depth 64\n";
    static const char s1[] =
        "sluice_uptime_seconds 11\nsluice_samples_total 100\n"
        "sluice_batches_total 2\n"
        "sluice_stage_busy_seconds_total{stage=\"read\"} 16.4\n"
        "sluice_workers{stage=\"read\"} 1\n"
        "sluice_io_async 1\nsluice_io_depth 64\n";
    sl__prom_set_t a = {0}, b = {0};
    char err[256];
    assert_int_equal(parse(s0, &a, err), 0);
    assert_int_equal(parse(s1, &b, err), 0);
    sl__top_frame_t f;
    sl__top_frame_make(&a, &b, NULL, &f);
    assert_int_equal(f.stage[0].threads, 1);
    assert_int_equal(f.stage[0].slots, 64);
    assert_true(fabs(f.stage[0].busy - 0.1) < 1e-9);
    sl__prom_set_free(&a);
    sl__prom_set_free(&b);
}

static int count_lines(const char *t, int *widest)
{
    int n = 0;
    *widest = 0;
    for (const char *p = t, *nl; (nl = strchr(p, '\n')); p = nl + 1, n++)
        if (nl - p > *widest)
            *widest = (int)(nl - p);
    return n;
}

static void test_render_fits_and_shows(void **state)
{
    (void)state;
    sl__prom_set_t a = {0}, b = {0}, d = {0};
    parse3(&a, &b, &d);
    sl__top_frame_t f;
    sl__top_frame_make(&a, &b, &d, &f);
    static char buf[16384];
    int need =
        sl__top_render(&f, "127.0.0.1:9100/metrics", 100, 40, buf, sizeof buf);
    assert_int_equal(need, (int)strlen(buf));
    int w, lines = count_lines(buf, &w);
    assert_true(w <= 100 && lines <= 40);
    assert_non_null(strstr(buf, "127.0.0.1:9100/metrics"));
    assert_non_null(strstr(buf, "samples/s      1280.0"));
    assert_non_null(strstr(buf, "stall          25.0 %"));
    assert_non_null(strstr(buf, "read_threads 2   decode_threads 4   "
                                "prefetch 6"));
    assert_non_null(strstr(buf, "75 %"));
    assert_non_null(strstr(buf, "7/32"));
    assert_non_null(strstr(buf, "rss 512.0 MiB"));
    assert_non_null(strstr(buf, "available 20.0 GiB"));
    assert_non_null(strstr(buf, "placement  GPU share 67.4 %   stage 860/s, "
                                "busy 97.0 %   its CPU 2.25 cores"));
    /* Newest decision first. */
    char *p1 = strstr(buf, "prefetch 4 -> 6: waits come in bursts");
    char *p2 = strstr(buf, "decode_threads 3 -> 4: decoders busy 97%");
    assert_true(p1 && p2 && p1 < p2);
    assert_null(strstr(buf, "(rates: the job's last"));
    /* A small screen: cut to its width and height, nothing longer. */
    for (int sw = 1; sw <= 30; sw += 7)
        for (int sh = 0; sh <= 6; sh += 3) {
            sl__top_render(&f, "x", sw, sh, buf, sizeof buf);
            lines = count_lines(buf, &w);
            assert_true(w <= sw && lines <= sh);
        }
    /* A short buffer: cut, terminated, the need still told. */
    char small[16];
    assert_int_equal(sl__top_render(&f, "127.0.0.1:9100/metrics", 100, 40,
                                    small, sizeof small),
                     need);
    assert_int_equal(strlen(small), sizeof small - 1);
    /* A long reason wraps at a space, indented, on up to 3 lines. */
    strcpy(f.dec[1].reason, "consumer waits 98% of the time; decode busy "
                            "90%, read busy 37%, others use 5% CPU: the end");
    sl__top_render(&f, "x", 60, 40, buf, sizeof buf);
    assert_non_null(strstr(buf, "prefetch 4 -> 6: consumer waits 98% of the "
                                "time;\n            decode busy 90%, read "
                                "busy 37%, others use 5%\n            CPU: "
                                "the end\n"));
    lines = count_lines(buf, &w);
    assert_true(w <= 60);
    /* Bytes the job sent that a terminal would act on are shown as '?'. */
    /* A policy event (the rl guard's trip: no knob moved) is shown as the
     * event it is. */
    strcpy(f.dec[0].knob, "policy");
    f.dec[0].from = f.dec[0].to = 0;
    strcpy(f.dec[0].reason, "rl guard: heuristic from now on");
    sl__top_render(&f, "x", 200, 60, buf, sizeof buf);
    assert_non_null(strstr(buf, "  policy: rl guard: heuristic from now on\n"));
    assert_null(strstr(buf, "policy 0 -> 0"));
    assert_non_null(strstr(buf, "prefetch 4 -> 6: consumer waits"));
    strcpy(f.dec[1].reason, "esc\x1b[2J bell\a \xc3\xa9");
    sl__top_render(&f, "x", 200, 60, buf, sizeof buf);
    assert_non_null(strstr(buf, "esc?[2J bell? ??"));
    free3(&a, &b, &d);
}

static void test_url(void **state)
{
    (void)state;
    sl__url_t u, d;
    char err[256];
    assert_int_equal(
        sl__url_parse("http://127.0.0.1:9100/metrics", &u, err, 256), 0);
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 9100);
    assert_string_equal(u.path, "/metrics");
    assert_int_equal(sl__top_decisions_url(&u, &d), 0);
    assert_string_equal(d.path, "/decisions");
    assert_int_equal(sl__url_parse("http://localhost", &u, err, 256), 0);
    assert_int_equal(u.port, 80);
    assert_string_equal(u.path, "/metrics");
    assert_int_equal(sl__url_parse("http://[::1]:9/job/metrics", &u, err, 256),
                     0);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 9);
    assert_int_equal(sl__top_decisions_url(&u, &d), 0);
    assert_string_equal(d.path, "/job/decisions");
    assert_int_equal(sl__url_parse("http://h:1/other", &u, err, 256), 0);
    assert_int_equal(sl__top_decisions_url(&u, &d), -1);
    static const char *const bad[] = {
        "https://h/metrics", "h:9100",         "http://",
        "http://h:0/",       "http://h:x",     "http://h:70000/",
        "http://[::1/",      "http://h:1/a b", "http://h?x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(sl__url_parse(bad[i], &u, err, 256), SL_EINVAL);
}

static void test_http_reply(void **state)
{
    (void)state;
    int st;
    size_t off;
    char err[256];
    const char ok[] =
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nx 1\n";
    assert_int_equal(
        sl__http_reply_parse(ok, sizeof ok - 1, &st, &off, err, 256), 0);
    assert_int_equal(st, 200);
    assert_string_equal(ok + off, "x 1\n");
    const char lf[] = "HTTP/1.1 503 Gone\nA: b\n\n";
    assert_int_equal(
        sl__http_reply_parse(lf, sizeof lf - 1, &st, &off, err, 256), 0);
    assert_int_equal(st, 503);
    assert_int_equal(off, sizeof lf - 1);
    static const char *const bad[] = {"", "HTTP/1.0 200 OK\r\n", "SSH-2.0-x",
                                      "HTTP/1.0 2x0 OK\r\n\r\n",
                                      "HTTP/2 200\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(
            sl__http_reply_parse(bad[i], strlen(bad[i]), &st, &off, err, 256),
            SL_ECORRUPT);
}

static void test_net_tcp(void **state)
{
    (void)state;
    const char t[] =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when "
        "retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:238C 00000000:0000 0A 00000000:00000000 00:00000000 "
        "00000000  1000        0 123456 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:9C40 0100007F:238C 01 00000000:00000000 00:00000000 "
        "00000000  1000        0 654321 1 0000000000000000 20 4 30 10 -1\n"
        "   2: 00000000000000000000000001000000:1F90 "
        "00000000000000000000000000000000:0000 0A 00000000:00000000 "
        "00:00000000 00000000  1000        0 777 1 0000000000000000 100 0 0 "
        "10 0\n";
    int ports[4];
    unsigned long inodes[4];
    assert_int_equal(sl__parse_net_tcp(t, sizeof t - 1, ports, inodes, 4), 2);
    assert_int_equal(ports[0], 0x238C);
    assert_int_equal(inodes[0], 123456);
    assert_int_equal(ports[1], 8080);
    assert_int_equal(inodes[1], 777);
    assert_int_equal(sl__parse_net_tcp(t, sizeof t - 1, ports, inodes, 1), 1);
    const char bad[] = "   0: 0100007F 00000000:0000 0A\n";
    assert_int_equal(sl__parse_net_tcp(bad, sizeof bad - 1, ports, inodes, 4),
                     SL_ECORRUPT);
    char err[256];
    int p[4];
    assert_int_equal(sl__pid_listen_ports(0x7ffffff0, p, 4, err, 256),
                     SL_ENOTFOUND);
    assert_non_null(strstr(err, "no process"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_grammar),
        cmocka_unit_test(test_parse_errors_name_the_line),
        cmocka_unit_test(test_parse_bounds),
        cmocka_unit_test(test_frame_rates_from_counters),
        cmocka_unit_test(test_frame_read_busy_over_io_depth),
        cmocka_unit_test(test_render_fits_and_shows),
        cmocka_unit_test(test_url),
        cmocka_unit_test(test_http_reply),
        cmocka_unit_test(test_net_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
