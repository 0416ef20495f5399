/* One snapshot as a JSON object: the JSON Lines schema of docs/TELEMETRY.md.
 * Values that could not be read are null, never invented. */
#include <stdio.h>

#include "base/base.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"

typedef sl__sbuf_t jw_t;
#define put sl__sbuf_printf

/* A JSON string body: quotes, backslashes and controls escaped. */
static void put_escaped(jw_t *w, const char *str)
{
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\')
            put(w, "\\%c", *p);
        else if (*p < 0x20)
            put(w, "\\u%04x", *p);
        else
            put(w, "%c", *p);
    }
}

/* A number, or null when negative (= not readable here). */
static void num(jw_t *w, const char *key, double v)
{
    if (v < 0)
        put(w, ", \"%s\": null", key);
    else
        put(w, ", \"%s\": %.6g", key, v);
}

static void stage(jw_t *w, const char *name, const sl_stage_stats_t *s,
                  int first)
{
    put(w,
        "%s\"%s\": {\"workers\": %d, \"busy\": %.4f, \"items_per_s\": %.2f, "
        "\"items_total\": %lld, \"queue_depth\": %d, \"queue_capacity\": %d}",
        first ? "" : ", ", name, s->workers, s->busy, s->items_per_s,
        (long long)s->items_total, s->queue_depth, s->queue_capacity);
}

int sl_snapshot_json(const sl_snapshot_t *s, char *buf, size_t len)
{
    jw_t w = {buf, len, 0, 0};
    if (buf && len)
        buf[0] = 0;
    put(&w, "{\"t\": %.3f, \"interval_s\": %.4f", s->t, s->interval_s);
    put(&w,
        ", \"ncpu\": %d, \"cpu_total\": %.4f, \"cpu_self\": %.4f"
        ", \"cpu_other\": %.4f, \"cpu_core\": [",
        s->ncpu, s->cpu_total, s->cpu_self, s->cpu_other);
    for (int i = 0; i < s->ncpu && i < SL_SNAPSHOT_MAX_CORES; i++)
        put(&w, "%s%.3f", i ? ", " : "", s->cpu_core[i]);
    put(&w, "], \"run_queue\": %d", s->run_queue);
    num(&w, "psi_cpu_some", s->psi_cpu_some);
    num(&w, "psi_io_some", s->psi_io_some);
    num(&w, "psi_io_full", s->psi_io_full);
    num(&w, "psi_mem_some", s->psi_mem_some);
    num(&w, "psi_mem_full", s->psi_mem_full);
    num(&w, "mem_total_bytes", (double)s->mem_total_bytes);
    num(&w, "mem_available_bytes", (double)s->mem_available_bytes);
    num(&w, "rss_bytes", (double)s->rss_bytes);
    num(&w, "read_bytes_per_s", s->read_bytes_per_s);
    num(&w, "disk_read_bytes_per_s", s->disk_read_bytes_per_s);
    num(&w, "disk_busy", s->disk_busy);
    num(&w, "self_read_bytes_per_s", s->self_read_bytes_per_s);
    num(&w, "net_rx_bytes_per_s", s->net_rx_bytes_per_s);
    num(&w, "net_tx_bytes_per_s", s->net_tx_bytes_per_s);
    if (s->gpu_present) {
        put(&w, ", \"gpu\": {\"count\": %d", s->gpu_count);
        num(&w, "util", s->gpu_util);
        num(&w, "mem_used_bytes", (double)s->gpu_mem_used_bytes);
        num(&w, "mem_total_bytes", (double)s->gpu_mem_total_bytes);
        num(&w, "power_w", s->gpu_power_w);
        num(&w, "pcie_rx_bytes_per_s", s->gpu_pcie_rx_bytes_per_s);
        num(&w, "pcie_tx_bytes_per_s", s->gpu_pcie_tx_bytes_per_s);
        put(&w, "}");
    } else {
        put(&w, ", \"gpu\": null");
    }
    num(&w, "energy_j", s->energy_j);
    put(&w,
        ", \"samples_per_s\": %.2f, \"stall_fraction\": %.4f"
        ", \"batch_latency_ms\": %.3f, \"consumer_wait_ms\": %.3f"
        ", \"samples_total\": %lld, \"batches_total\": %lld"
        ", \"errors_skipped\": %lld, \"bytes_read_total\": %lld",
        s->samples_per_s, s->stall_fraction, s->batch_latency_ms,
        s->consumer_wait_ms, (long long)s->samples_total,
        (long long)s->batches_total, (long long)s->errors_skipped,
        (long long)s->bytes_read_total);
    put(&w,
        ", \"queue_depth\": {\"read\": %d, \"decode\": %d, \"batches\": %d}",
        s->read.queue_depth, s->decode.queue_depth, s->batches_ready);
    put(&w, ", \"workers\": {\"read\": %d, \"decode\": %d}", s->read.workers,
        s->decode.workers);
    put(&w, ", \"decisions_total\": %lld", (long long)s->decisions_total);
    if (s->decision_new) {
        put(&w, ", \"decision\": {\"knob\": \"");
        put_escaped(&w, s->decision_knob);
        put(&w, "\", \"from\": %d, \"to\": %d, \"reason\": \"",
            s->decision_from, s->decision_to);
        put_escaped(&w, s->decision_reason);
        put(&w, "\"}");
    } else {
        put(&w, ", \"decision\": null");
    }
    put(&w, ", \"stages\": {");
    stage(&w, "read", &s->read, 1);
    stage(&w, "decode", &s->decode, 0);
    put(&w,
        "}, \"knobs\": {\"read_threads\": %d, \"decode_threads\": %d"
        ", \"prefetch\": %d}, \"batches_filling\": %d}",
        s->read.workers, s->decode.workers, s->prefetch, s->batches_filling);
    return w.need;
}
