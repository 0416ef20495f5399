#include "sim/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

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

/* Nearest rank of sorted v[0..n), in ms. */
static double pct_ms(const double *v, size_t n, double q)
{
    if (!n)
        return 0;
    size_t i = (size_t)ceil(q * (double)n) - (q * (double)n >= 1);
    if (i >= n)
        i = n - 1;
    return v[i] * 1000.0;
}

/* The decision a snapshot reports, as the loader's collector does. */
typedef struct record {
    int64_t decisions;
    int pending; /* a decision to report in the next snapshot */
    char knob[24], reason[SL_SCHED_REASON];
    int from, to;
    char held[96]; /* the last decision's (sched/place.h) */
} record_t;

static void report(record_t *rec, sl_snapshot_t *sn)
{
    sn->decisions_total = rec->decisions;
    memcpy(sn->placement_held, rec->held, sizeof sn->placement_held);
    if (!rec->pending)
        return;
    sn->decision_new = 1;
    snprintf(sn->decision_knob, sizeof sn->decision_knob, "%s", rec->knob);
    sn->decision_from = rec->from;
    sn->decision_to = rec->to;
    snprintf(sn->decision_reason, sizeof sn->decision_reason, "%s",
             rec->reason);
    rec->pending = 0;
}

/* One tick, its changes applied to the model (they always apply). */
static void decide(sl__sched_t *sc, sl__sim_t *s, const sl_snapshot_t *win,
                   int n, const sl__limits_t *lim, sl__knobs_t *k,
                   record_t *rec)
{
    sl__sched_decision_t d;
    int changes = sl__sched_tick(sc, win, n, lim, k, &d);
    memcpy(rec->held, sc->place.held, sizeof rec->held);
    if (!changes)
        return;
    int applied[sizeof d.ch / sizeof d.ch[0]] = {0};
    for (int i = 0; i < d.n; i++) {
        *sl__knob_ref(k, d.ch[i].knob) = d.ch[i].to;
        applied[i] = 1;
    }
    sl__sim_set_knobs(s, k);
    int done =
        sl__sched_report(&d, applied, rec->knob, sizeof rec->knob, &rec->from,
                         &rec->to, rec->reason, sizeof rec->reason);
    rec->decisions += done;
    rec->pending = done > 0;
}

int sl__sim_run(const sl__sim_profile_t *p, const sl__limits_t *lim,
                const sl__knobs_t *start, sl__policy_t *pol,
                const sl__sim_run_opts_t *o, sl__sim_result_t *r)
{
    memset(r, 0, sizeof *r);
    sl__sim_t *s = sl__sim_create(p, start, o->seed);
    if (!s)
        return SL_ENOMEM;
    waits_t w = {0};
    sl__sim_on_batch(s, on_batch, &w);
    sl__sched_t sc;
    sl__sched_init(&sc, pol);
    sl__knobs_t k = *start;
    sl_snapshot_t win[SL_SCHED_PERIODS], sn;
    int nwin = 0;
    record_t rec = {0};
    /* Whole periods: the time simulated (a duration under one period is
     * one period, or the figures would be over a shorter time than ran). */
    int64_t nperiods = (int64_t)ceil(o->duration_s / SL_SIM_PERIOD_S - 1e-9);
    if (nperiods < 1)
        nperiods = 1;
    double cpu_s = 0, peak_rss = 0, t_end = (double)nperiods * SL_SIM_PERIOD_S;
    for (int64_t i = 0; i < nperiods; i++) {
        sl__sim_step(s, SL_SIM_PERIOD_S, &sn);
        report(&rec, &sn);
        cpu_s += sn.cpu_self * sn.ncpu * sn.interval_s;
        if ((double)sn.rss_bytes > peak_rss)
            peak_rss = (double)sn.rss_bytes;
        if (o->on_snapshot)
            o->on_snapshot(o->ctx, &sn);
        if (nwin == SL_SCHED_PERIODS) {
            memmove(win, win + 1, (SL_SCHED_PERIODS - 1) * sizeof win[0]);
            nwin--;
        }
        win[nwin++] = sn;
        if (o->samples > 0 && sn.samples_total >= o->samples) {
            t_end = sn.t;
            break;
        }
        if (pol && sl__sched_due(&sc))
            decide(&sc, s, win, nwin, lim, &k, &rec);
    }
    int64_t samples = (int64_t)w.n * p->batch_size;
    double secs = t_end;
    if (o->samples > 0 && samples >= o->samples) {
        int64_t nb = (o->samples + p->batch_size - 1) / p->batch_size;
        w.n = (size_t)nb;
        samples = nb * p->batch_size;
        secs = w.t[nb - 1] + p->step_ms / 1000.0;
    }
    double wait_total = 0;
    for (size_t i = 0; i < w.n; i++)
        wait_total += w.w[i];
    if (w.n)
        qsort(w.w, w.n, sizeof *w.w, cmp_d);
    r->samples = samples;
    r->batches = (int64_t)w.n;
    r->decisions = rec.decisions;
    r->seconds = secs;
    r->samples_per_s = secs > 0 ? (double)samples / secs : 0;
    r->stall_fraction = secs > 0 ? wait_total / secs : 0;
    r->wait_ms_mean = w.n ? wait_total * 1000.0 / (double)w.n : 0;
    r->wait_ms_p50 = pct_ms(w.w, w.n, 0.5);
    r->wait_ms_p99 = pct_ms(w.w, w.n, 0.99);
    r->cpu_util = secs > 0 ? cpu_s / secs / p->ncpu : 0;
    r->cpu_seconds = cpu_s;
    r->peak_rss_mb = peak_rss / 1e6;
    r->knobs = k;
    r->batch_size = p->batch_size;
    r->policy = pol ? pol->name : "static";
    r->remote = sl__sim_remote_wanted(s);
    sl__sim_remote_stats(s, &r->rm);
    r->batch_bytes = p->batch_bytes;
    r->rm_seconds = t_end;
    free(w.w);
    free(w.t);
    sl__sim_destroy(s);
    return w.oom ? SL_ENOMEM : 0;
}

int sl__sim_result_json(const sl__sim_result_t *r, char *buf, size_t cap)
{
    char rm[512] = "";
    if (r->remote) {
        double t = r->rm_seconds > 0 ? r->rm_seconds : 1;
        double held = r->rm.hand_outs > 0
                          ? (double)r->rm.budget_held / (double)r->rm.hand_outs
                          : 0;
        snprintf(rm, sizeof rm,
                 ", \"remote\": {\"window\": %lld, \"hand_outs\": %lld"
                 ", \"budget_held\": %lld, \"budget_held_share\": %.4f"
                 ", \"in_flight_mean\": %.3f, \"store_batches_mean\": %.3f"
                 ", \"store_bytes_mean\": %.0f}",
                 (long long)r->rm.window, (long long)r->rm.hand_outs,
                 (long long)r->rm.budget_held, held, r->rm.in_flight_s / t,
                 r->rm.store_s / t, r->rm.store_s / t * r->batch_bytes);
    }
    return snprintf(
        buf, cap,
        "{\"simulated\": true, \"samples\": %lld, \"batches\": %lld"
        ", \"seconds\": %.4f, \"samples_per_s\": %.2f"
        ", \"stall_fraction\": %.4f, \"wait_ms_p50\": %.3f"
        ", \"wait_ms_p99\": %.3f, \"cpu_util\": %.4f"
        ", \"cpu_seconds\": %.3f, \"wait_ms_mean\": %.3f"
        ", \"peak_rss_mb\": %.1f, \"threads\": %d, \"read_threads\": %d"
        ", \"prefetch\": %d, \"batch\": %d, \"decisions\": %lld"
        ", \"policy\": \"%s\"%s}",
        (long long)r->samples, (long long)r->batches, r->seconds,
        r->samples_per_s, r->stall_fraction, r->wait_ms_p50, r->wait_ms_p99,
        r->cpu_util, r->cpu_seconds, r->wait_ms_mean, r->peak_rss_mb,
        r->knobs.decode_threads, r->knobs.read_threads, r->knobs.prefetch,
        r->batch_size, (long long)r->decisions, r->policy, rm);
}

int sl__sim_events_parse(const char *s, sl__sim_profile_t *p)
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
