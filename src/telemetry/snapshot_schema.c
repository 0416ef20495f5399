/* The snapshot's JSON schema as a table: see snapshot_schema.h. */
#include "telemetry/snapshot_schema.h"

#include "base/abi.h"
#include "sluice/sluice.h"
#include "sluice/telemetry.h"

#define F(path, kind, member)                                                  \
    {                                                                          \
        path, SL__SK_##kind, offsetof(sl_snapshot_t, member), 0                \
    }
#define S(path, member)                                                        \
    {                                                                          \
        path, SL__SK_STR, offsetof(sl_snapshot_t, member),                     \
            sizeof(((sl_snapshot_t *)0)->member)                               \
    }

/* The members of one stage's object under "stages". */
#define STAGE(name, member)                                                    \
    F("stages." name ".workers", INT, member.workers),                         \
        F("stages." name ".busy", F4, member.busy),                            \
        F("stages." name ".items_per_s", F2, member.items_per_s),              \
        F("stages." name ".items_total", I64, member.items_total),             \
        F("stages." name ".queue_depth", INT, member.queue_depth),             \
        F("stages." name ".queue_capacity", INT, member.queue_capacity)

static const sl__schema_field_t schema[] = {
    F("t", F3, t),
    F("interval_s", F4, interval_s),
    F("ncpu", INT, ncpu),
    F("ncpu_usable", INT, ncpu_usable),
    F("cpu_total", F4, cpu_total),
    F("cpu_self", F4, cpu_self),
    F("cpu_other", F4, cpu_other),
    F("cpu_core", CORES, cpu_core),
    F("run_queue", INT, run_queue),
    F("psi_cpu_some", NUM, psi_cpu_some),
    F("psi_io_some", NUM, psi_io_some),
    F("psi_io_full", NUM, psi_io_full),
    F("psi_mem_some", NUM, psi_mem_some),
    F("psi_mem_full", NUM, psi_mem_full),
    F("mem_total_bytes", NUM_I64, mem_total_bytes),
    F("mem_available_bytes", NUM_I64, mem_available_bytes),
    F("rss_bytes", NUM_I64, rss_bytes),
    F("read_bytes_per_s", NUM, read_bytes_per_s),
    F("disk_read_bytes_per_s", NUM, disk_read_bytes_per_s),
    F("disk_busy", NUM, disk_busy),
    F("self_read_bytes_per_s", NUM, self_read_bytes_per_s),
    F("net_rx_bytes_per_s", NUM, net_rx_bytes_per_s),
    F("net_tx_bytes_per_s", NUM, net_tx_bytes_per_s),
    F("gpu", OBJ_IF, gpu_present),
    F("gpu.count", INT, gpu_count),
    F("gpu.index", INT, gpu_index),
    F("gpu.util", NUM, gpu_util),
    F("gpu.mem_used_bytes", NUM_I64, gpu_mem_used_bytes),
    F("gpu.mem_total_bytes", NUM_I64, gpu_mem_total_bytes),
    F("gpu.power_w", NUM, gpu_power_w),
    F("gpu.pcie_rx_bytes_per_s", NUM, gpu_pcie_rx_bytes_per_s),
    F("gpu.pcie_tx_bytes_per_s", NUM, gpu_pcie_tx_bytes_per_s),
    F("gpu.jpg_util", NUM, gpu_jpg_util),
    F("energy_j", NUM, energy_j),
    F("samples_per_s", F2, samples_per_s),
    F("stall_fraction", F4, stall_fraction),
    F("batch_latency_ms", F3, batch_latency_ms),
    F("consumer_wait_ms", F3, consumer_wait_ms),
    F("samples_total", I64, samples_total),
    F("batches_total", I64, batches_total),
    F("errors_skipped", I64, errors_skipped),
    F("bytes_read_total", I64, bytes_read_total),
    F("queue_depth.read", INT, read.queue_depth),
    F("queue_depth.decode", INT, decode.queue_depth),
    F("queue_depth.batches", INT, batches_ready),
    F("workers.read", INT, read.workers),
    F("workers.decode", INT, decode.workers),
    F("decisions_total", I64, decisions_total),
    F("decision", OBJ_IF, decision_new),
    S("decision.knob", decision_knob),
    F("decision.from", INT, decision_from),
    F("decision.to", INT, decision_to),
    S("decision.reason", decision_reason),
    STAGE("read", read),
    STAGE("decode", decode),
    F("knobs.read_threads", INT, read.workers),
    F("knobs.decode_threads", INT, decode.workers),
    F("knobs.prefetch", INT, prefetch),
    F("knobs.io_depth", INT, io_depth),
    F("batches_filling", INT, batches_filling),
    F("io.async", INT, io_async),
    F("io.depth", INT, io_depth),
    F("io.reads_in_flight", INT, reads_in_flight),
    F("io.requests_total", I64, requests_total),
    F("io.request_records_total", I64, request_records_total),
    F("io.request_fallbacks_total", I64, request_fallbacks_total),
    F("io.requests_per_s", F2, requests_per_s),
    F("io.records_per_request", NUM, records_per_request),
    F("cache.hits_total", I64, cache_hits_total),
    F("cache.misses_total", I64, cache_misses_total),
    F("cache.hit_rate", NUM, cache_hit_rate),
    F("cache.bytes", I64, cache_bytes),
    F("cache.raw_bytes", I64, cache_raw_bytes),
    F("cache.entries", I64, cache_entries),
    F("cache.limit_bytes", I64, cache_limit_bytes),
    S("cache.codec", cache_codec),
    F("cache.codec_choices", I64, cache_codec_choices),
    F("cache.disk", OBJ_IF, cache_disk_present),
    F("cache.disk.hits_total", I64, cache_disk_hits_total),
    F("cache.disk.misses_total", I64, cache_disk_misses_total),
    F("cache.disk.bytes", I64, cache_disk_bytes),
    F("cache.disk.entries", I64, cache_disk_entries),
    F("cache.disk.limit_bytes", I64, cache_disk_limit_bytes),
    F("cache.disk.errors_total", I64, cache_disk_errors_total),
    F("cache.disk.admitting", INT, cache_disk_admitting),
    F("placement", OBJ_IF, placement_present),
    S("placement.asked", placement),
    F("placement.gpu", INT, placement_gpu),
    F("placement.gpu_share", INT, gpu_share),
    S("placement.why", placement_why),
    F("placement.gpu_samples_total", I64, gpu_samples_total),
    F("placement.gpu_refused_total", I64, gpu_refused_total),
    S("placement.gpu_refused_why", gpu_refused_why),
    F("placement.gpu_samples_per_s", F2, gpu_samples_per_s),
    F("placement.gpu_stage_busy", NUM, gpu_stage_busy),
    F("placement.gpu_cpu_busy", NUM, gpu_cpu_busy),
    F("placement.gpu_cpu_total_s", NUM, gpu_cpu_total_s),
    F("placement.gpu_handoff_busy", NUM, gpu_handoff_busy),
    F("placement.gpu_handoff_total_s", NUM, gpu_handoff_total_s),
    F("placement.gpu_roi", INT, gpu_roi),
    F("placement.gpu_decoded_frac", NUM, gpu_decoded_frac),
    F("placement.gpu_bytes", I64, gpu_bytes),
    F("placement.gpu_nvjpeg_bytes", I64, gpu_nvjpeg_bytes),
    S("placement.held", placement_held),
};

const sl__schema_field_t *sl__snapshot_schema(size_t *n)
{
    *n = sizeof schema / sizeof *schema;
    return schema;
}

void sl__snapshot_unknown(sl_snapshot_t *s)
{
    sl__abi_init(s, sizeof *s);
    for (size_t i = 0; i < sizeof schema / sizeof *schema; i++) {
        void *at = (char *)s + schema[i].off;
        if (schema[i].kind == SL__SK_INT)
            *(int *)at = -1;
        else if (schema[i].kind == SL__SK_I64 ||
                 schema[i].kind == SL__SK_NUM_I64)
            *(int64_t *)at = -1;
        else if (schema[i].kind <= SL__SK_NUM) /* a double */
            *(double *)at = -1;
    }
    for (int i = 0; i < SL_SNAPSHOT_MAX_CORES; i++)
        s->cpu_core[i] = -1;
}
