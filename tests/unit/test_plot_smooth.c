/* sluice plot's smoothing (telemetry/plot_smooth.c, through the table
 * plot_table.c writes): a steady rate that 100 ms snapshots quantize into
 * one or two batches zig-zags raw; the plotted (smoothed) columns must hold
 * it steady. Also the window rule itself, and the decisions gathered. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry/plot_internal.h"
#include "testutil.h"

/* A telemetry file: 960 img/s in batches of 64 (15 batches/s, so one or
 * two per 100 ms snapshot), the consumer stalled in the snapshots that got
 * one batch; a knob change at t 2.0. */
static char *steady_file(size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    long prev = 0;
    for (int i = 1; i <= 60; i++) {
        double t = 0.1 * i;
        long batches = (long)(15 * t + 1e-9);
        long nb = batches - prev;
        prev = batches;
        fprintf(f,
                "{\"t\": %.1f, \"interval_s\": 0.1, \"samples_per_s\": %ld, "
                "\"stall_fraction\": %d, \"samples_total\": %ld, "
                "\"batches_total\": %ld, \"stages\": {\"read\": "
                "{\"items_per_s\": %ld}, \"decode\": {\"items_per_s\": %ld}}",
                t, nb * 640, nb == 1, batches * 64, batches, nb * 640,
                nb * 640);
        if (i == 20)
            fprintf(f, ", \"decisions_total\": 1, \"decision\": {\"knob\": "
                       "\"decode_threads\", \"from\": 2, \"to\": 3, "
                       "\"reason\": \"consumer waits 50%%: decode +1\"}");
        fprintf(f, "}\n");
    }
    fclose(f);
    return buf;
}

/* The column named `name` in the table's header, or -1. */
static int column(const char *header, const char *name)
{
    char h[4096];
    snprintf(h, sizeof h, "%s", header);
    int i = 0;
    for (char *save, *tok = strtok_r(h + 1, " \n", &save); tok;
         tok = strtok_r(NULL, " \n", &save), i++)
        if (!strcmp(tok, name))
            return i;
    return -1;
}

/* min and max of column c over the rows with t >= from. */
static void spread(const char *table, int c, double from, double *lo,
                   double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    const char *p = strchr(table, '\n') + 1;
    while (*p) {
        double v[64];
        char *end;
        int n = 0;
        while (*p && *p != '\n' && n < 64) {
            v[n++] = strtod(p, &end);
            p = end;
            while (*p == ' ')
                p++;
        }
        if (*p == '\n')
            p++;
        if (c < n && v[0] >= from && isfinite(v[c])) {
            *lo = fmin(*lo, v[c]);
            *hi = fmax(*hi, v[c]);
        }
    }
}

static void test_steady_rate_is_steady(void **state)
{
    (void)state;
    size_t len;
    char *in = steady_file(&len);
    FILE *fi = fmemopen(in, len, "r");
    char *out = NULL;
    size_t olen;
    FILE *fo = open_memstream(&out, &olen);
    static sl__plot_table_t tb;
    assert_int_equal(sl__plot_table_write(fi, fo, &tb), 0);
    fclose(fi);
    fclose(fo);
    assert_int_equal(tb.st.points, 60);

    double lo, hi;
    int raw = column(out, "samples_per_s");
    assert_true(raw >= 0);
    spread(out, raw, 1.5, &lo, &hi);
    assert_true(lo == 640 && hi == 1280); /* the zig-zag */
    /* Every smoothed rate: after the first window, within 8 % of 960. */
    const char *rates[] = {"samples_per_s.smoothed",
                           "stages.read.items_per_s.smoothed",
                           "stages.decode.items_per_s.smoothed"};
    for (int i = 0; i < 3; i++) {
        int c = column(out, rates[i]);
        if (c < 0)
            fail_msg("no column %s in the table", rates[i]);
        spread(out, c, 1.5, &lo, &hi);
        if (!(lo > 0.92 * 960 && hi < 1.08 * 960))
            fail_msg("%s spreads %g..%g", rates[i], lo, hi);
    }
    /* The stall: raw 0 or 1, smoothed near its mean (1/2). */
    int c = column(out, "stall_fraction.smoothed");
    if (c < 0)
        fail_msg("no column stall_fraction.smoothed in the table");
    spread(out, c, 1.5, &lo, &hi);
    if (!(lo > 0.35 && hi < 0.65))
        fail_msg("stall_fraction.smoothed spreads %g..%g", lo, hi);

    assert_int_equal(tb.ndec, 1);
    assert_int_equal(tb.ndec_all, 1);
    assert_string_equal(tb.dec[0].knob, "decode_threads");
    assert_int_equal(tb.dec[0].to, 3);
    assert_string_equal(tb.dec[0].reason, "consumer waits 50%: decode +1");
    sl__plot_table_free(&tb);
    free(in);
    free(out);
}

/* The window: >= 1 s and >= 3 batches; slower batches widen it (to at most
 * 10 s); without batch counts, 1 s; never more than WINDOW_ROWS rows. */
static size_t window_after(sl__plot_smooth_t *sm, int rows, double dt,
                           int batch_every, double *mean)
{
    sl__plot_smooth_init(sm);
    for (int i = 0; i < rows; i++) {
        double v[SL__PC_NRATES], out[SL__PC_NRATES];
        for (int c = 0; c < SL__PC_NRATES; c++)
            v[c] = i % 2 ? NAN : 2.0; /* NaN rows are left out */
        double nb = batch_every < 0 ? NAN : batch_every && i % batch_every == 0;
        sl__plot_smooth_add(sm, dt, nb, v, out);
        *mean = out[0];
    }
    return sm->n;
}

static void test_window_rule(void **state)
{
    (void)state;
    static sl__plot_smooth_t sm;
    double mean;
    /* dt 0.125 is exact in binary, and so are the sums. */
    /* One batch per 0.5 s: 3 batches take 1.25..1.5 s (10..12 rows). */
    size_t n = window_after(&sm, 200, 0.125, 4, &mean);
    assert_true(n >= 9 && n <= 12);
    assert_true(sm.span >= 1.0 && sm.batches >= 3);
    assert_true(fabs(mean - 2.0) < 1e-12);
    /* Many batches: 1 s (8 rows). */
    assert_int_equal(window_after(&sm, 200, 0.125, 1, &mean), 8);
    /* Nothing completes: the 10 s cap (80 rows). */
    assert_int_equal(window_after(&sm, 200, 0.125, 0, &mean), 80);
    /* No batch counts: 1 s. */
    assert_int_equal(window_after(&sm, 200, 0.125, -1, &mean), 8);
    /* Tiny intervals: the row cap bounds the window. */
    assert_int_equal(
        window_after(&sm, 3 * SL__PLOT_WINDOW_ROWS, 1e-6, 1, &mean),
        SL__PLOT_WINDOW_ROWS);
}

/* A remote run's file: 50 requests/s of 4 records each (records per
 * request over the window 4), and the script's request panel; a file
 * without requests has none. */
static void test_request_panel(void **state)
{
    (void)state;
    for (int remote = 0; remote < 2; remote++) {
        char *in = NULL;
        size_t len;
        FILE *f = open_memstream(&in, &len);
        for (int i = 1; i <= 30; i++)
            fprintf(f,
                    "{\"t\": %.1f, \"interval_s\": 0.1, \"io\": "
                    "{\"requests_total\": %d, \"requests_per_s\": %d, "
                    "\"records_per_request\": %s}}\n",
                    0.1 * i, remote * 5 * i, remote * 50,
                    remote ? (i % 2 ? "3" : "5") : "null");
        fclose(f);
        FILE *fi = fmemopen(in, len, "r");
        char *out = NULL, *script = NULL;
        size_t olen, slen;
        FILE *fo = open_memstream(&out, &olen);
        static sl__plot_table_t tb;
        assert_int_equal(sl__plot_table_write(fi, fo, &tb), 0);
        fclose(fi);
        fclose(fo);
        FILE *fs = open_memstream(&script, &slen);
        sl__plot_script_write(fs, "t.dat", "o.svg", 0, 0, "title", &tb);
        fclose(fs);
        double lo, hi;
        int c = column(out, "io.records_per_request.smoothed");
        assert_true(c >= 0);
        spread(out, c, 1.5, &lo, &hi);
        if (remote) {
            if (!(lo > 3.9 && hi < 4.1))
                fail_msg("records per request spreads %g..%g", lo, hi);
            assert_non_null(strstr(script, "layout 6,1"));
            assert_non_null(strstr(script, "'requests/s'"));
            assert_non_null(strstr(script, "axes x1y2"));
        } else {
            assert_true(lo == INFINITY); /* no value at all */
            assert_non_null(strstr(script, "layout 5,1"));
            assert_null(strstr(script, "requests/s"));
        }
        sl__plot_table_free(&tb);
        free(in);
        free(out);
        free(script);
    }
}

/* A run with io_uring and more decisions than fit a screen's list: the
 * knob panel draws io_depth (the heuristic's read knob there), and every
 * decision is marked, the 88th too (only the first 64 were). */
static void test_io_depth_and_every_decision_marked(void **state)
{
    (void)state;
    enum { N = 88 };
    char *in = NULL;
    size_t len;
    FILE *f = open_memstream(&in, &len);
    for (int i = 1; i <= N; i++)
        if (i == 2) /* a policy event: the rl guard's trip, no knob moved */
            fprintf(f, "{\"t\": 0.2, \"interval_s\": 0.1, \"samples_per_s\": "
                       "100, \"knobs\": {\"read_threads\": 1, "
                       "\"decode_threads\": 2, \"prefetch\": 4, \"io_depth\": "
                       "10}, \"io\": {\"async\": 1, \"depth\": 10}, "
                       "\"decisions_total\": 2, \"decision\": {\"knob\": "
                       "\"policy\", \"from\": 0, \"to\": 0, \"reason\": \"rl "
                       "guard: heuristic from now on\"}}\n");
        else
            fprintf(f,
                    "{\"t\": %.1f, \"interval_s\": 0.1, \"samples_per_s\": "
                    "100, \"knobs\": {\"read_threads\": 1, "
                    "\"decode_threads\": 2, \"prefetch\": 4, \"io_depth\": "
                    "%d}, \"io\": {\"async\": 1, \"depth\": %d}, "
                    "\"decisions_total\": %d, \"decision\": {\"knob\": "
                    "\"io_depth\", \"from\": %d, \"to\": %d, \"reason\": "
                    "\"step %d\"}}\n",
                    0.1 * i, 8 + i % 3, 8 + i % 3, i, 8 + (i - 1) % 3,
                    8 + i % 3, i);
    fclose(f);
    FILE *fi = fmemopen(in, len, "r");
    char *out = NULL, *script = NULL;
    size_t olen, slen;
    FILE *fo = open_memstream(&out, &olen);
    static sl__plot_table_t tb;
    assert_int_equal(sl__plot_table_write(fi, fo, &tb), 0);
    fclose(fi);
    fclose(fo);
    assert_int_equal(tb.ndec_all, N);
    assert_int_equal(tb.ndec, N);
    assert_string_equal(tb.dec[N - 1].reason, "step 88");
    assert_true(tb.max[SL__PC_K_IO_DEPTH] == 10);
    double lo, hi;
    int c = column(out, "io.depth");
    assert_true(c >= 0);
    spread(out, c, 0, &lo, &hi);
    assert_true(lo == 8 && hi == 10);
    FILE *fs = open_memstream(&script, &slen);
    sl__plot_script_write(fs, "t.dat", "o.svg", 0, 0, "title", &tb);
    fclose(fs);
    assert_non_null(strstr(script, "title 'io_depth'"));
    assert_non_null(strstr(script, "'88' at 8.8"));
    assert_non_null(strstr(script, "decisions (88):"));
    /* a policy event is listed as the event it is, not as a knob moved */
    assert_non_null(strstr(script, "'2  t 0.20 s  policy: rl guard: "
                                   "heuristic from now on'"));
    assert_null(strstr(script, "policy 0 -> 0"));
    assert_non_null(strstr(script, "'1  t 0.10 s  io_depth 8 -> 9: step 1'"));
    sl__plot_table_free(&tb);
    free(in);
    free(out);
    free(script);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_panel),
        cmocka_unit_test(test_steady_rate_is_steady),
        cmocka_unit_test(test_window_rule),
        cmocka_unit_test(test_io_depth_and_every_decision_marked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
