#!/usr/bin/env python3
"""Writes sluice.json, the Grafana dashboard of sluice's Prometheus endpoint
(`sluice run ... --metrics-port P`, metric names in docs/TELEMETRY.md).

    python3 dashboards/grafana/make_dashboard.py   # rewrites sluice.json

The panels are listed once here; the JSON beside it is what Grafana loads
(provisioned-file format) and is checked against this script and against a
live scrape by tests/python/test_grafana_dashboard.py.

PromQL by metric type: counters (`*_total`) through rate() over
$__rate_interval, which does not alias the way the loader's own
per-100-ms `samples_per_second` gauge does when scraped every few seconds;
gauges plain.
"""
import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'instance=~"$instance"'


def sel(extra=""):
    return "{" + SEL + (", " + extra if extra else "") + "}"


def target(expr, legend, ref):
    return {"datasource": DS, "expr": expr, "legendFormat": legend,
            "refId": ref, "range": True}


def timeseries(title, desc, unit, exprs, *, stack=False, step=False,
               vmax=None, w=12, h=8, unstacked=()):
    """A time series panel; `unstacked`: refIds drawn as plain lines over
    a stacked panel."""
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 20 if stack else 0,
              "showPoints": "never", "spanNulls": False,
              "lineInterpolation": "stepAfter" if step else "linear",
              "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    defaults = {"unit": unit, "min": 0, "custom": custom}
    if vmax is not None:
        defaults["max"] = vmax
    return {"type": "timeseries", "title": title, "description": desc,
            "datasource": DS,
            "fieldConfig": {"defaults": defaults, "overrides": [
                {"matcher": {"id": "byFrameRefID", "options": ref},
                 "properties": [
                     {"id": "custom.stacking", "value": {"mode": "none", "group": "A"}},
                     {"id": "custom.fillOpacity", "value": 0},
                     {"id": "custom.lineStyle", "value": {"fill": "dash",
                                                          "dash": [10, 10]}}]}
                for ref in unstacked]},
            "options": {"legend": {"displayMode": "list", "placement": "bottom",
                                   "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "none"}},
            "targets": [target(e, l, chr(ord("A") + i))
                        for i, (e, l) in enumerate(exprs)],
            "_size": (w, h)}


def stat(title, desc, unit, exprs, w=6, h=8):
    return {"type": "stat", "title": title, "description": desc, "datasource": DS,
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                          "values": False},
                        "colorMode": "value", "graphMode": "none",
                        "textMode": "auto", "orientation": "auto"},
            "targets": [target(e, l, chr(ord("A") + i))
                        for i, (e, l) in enumerate(exprs)],
            "_size": (w, h)}


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "panels": [],
            "_size": (24, 1)}


RI = "[$__rate_interval]"


def decisions(fn, window):
    """The scheduler's knob changes over `window` (rate or increase)."""
    return fn + "(sluice_decisions_total" + sel() + window + ")"

PANELS = [
    row("Throughput"),
    timeseries("Throughput", "Samples and batches handed to the consumer per "
               "second: rate() of the counters.", "short", [
                   ("rate(sluice_samples_total" + sel() + RI + ")",
                    "{{instance}} samples/s"),
                   ("rate(sluice_batches_total" + sel() + RI + ")",
                    "{{instance}} batches/s")]),
    timeseries("Stage throughput", "Samples through each stage per second.",
               "short", [("rate(sluice_stage_items_total" + sel() + RI + ")",
                          "{{instance}} {{stage}}")]),
    timeseries("Read bandwidth", "Stored bytes the loader read (page cache or "
               "not), and the block device's reads where known.", "Bps", [
                   ("rate(sluice_read_bytes_total" + sel() + RI + ")",
                    "{{instance}} loader"),
                   ("sluice_disk_read_bytes_per_second" + sel(),
                    "{{instance}} device")]),
    timeseries("Skipped samples", "Bad samples skipped per second "
               "(--on-error skip).", "short", [
                   ("rate(sluice_errors_skipped_total" + sel() + RI + ")",
                    "{{instance}} skipped/s")]),
    row("Consumer"),
    timeseries("Stall", "Share of the time the consumer waited for data: "
               "rate() of its wait counter over the scrape window, and the "
               "loader's last 100 ms interval (dashed). Near 0: the loader "
               "keeps up.", "percentunit",
               [("rate(sluice_consumer_wait_seconds_total" + sel() + RI + ")",
                 "{{instance}} stall"),
                ("sluice_stall_fraction" + sel(), "{{instance}} last 0.1 s")],
               vmax=1, unstacked=("B",)),
    timeseries("Consumer wait and batch latency", "Consumer wait per batch "
               "handed out in the loader's last interval (with none handed "
               "out, the interval's whole wait: a total stall is not 0), and "
               "mean time from a batch's first claim to ready.", "s", [
                   ("sluice_consumer_wait_seconds" + sel(), "{{instance}} wait"),
                   ("sluice_batch_latency_seconds" + sel(),
                    "{{instance}} batch latency")]),
    timeseries("Batches ready", "Complete batches waiting for the consumer, "
               "against the prefetch knob (buffers allowed).", "short", [
                   ("sluice_batches_ready" + sel(), "{{instance}} ready"),
                   ("sluice_prefetch" + sel(), "{{instance}} prefetch")],
               step=True),
    stat("Loader uptime", "Seconds since the loader started, at its latest "
         "snapshot.", "s", [("sluice_uptime_seconds" + sel(), "{{instance}}")],
         w=12, h=8),
    row("Machine"),
    timeseries("CPU: own and other", "Machine CPU share used by this loader "
               "process and by other processes (interference), stacked; "
               "dashed: the machine's busy share.", "percentunit", [
                   ("sluice_cpu_self" + sel(), "{{instance}} sluice"),
                   ("sluice_cpu_other" + sel(), "{{instance}} other"),
                   ("sluice_cpu_total" + sel(), "{{instance}} machine")],
               stack=True, vmax=1, unstacked=("C",)),
    timeseries("Memory", "Resident memory of the loader process, and the "
               "machine's MemAvailable.", "bytes", [
                   ("sluice_rss_bytes" + sel(), "{{instance}} RSS"),
                   ("sluice_mem_available_bytes" + sel(),
                    "{{instance}} available")]),
    timeseries("Run queue", "Runnable threads on the machine.", "short", [
        ("sluice_run_queue" + sel(), "{{instance}} runnable")]),
    timeseries("Pressure (PSI)", "Linux pressure stall information, avg10 "
               "(absent where the kernel has no PSI).", "percent", [
                   ("sluice_psi_cpu_some" + sel(), "{{instance}} cpu"),
                   ("sluice_psi_io_some" + sel(), "{{instance}} io"),
                   ("sluice_psi_memory_some" + sel(), "{{instance}} memory")]),
    row("Knobs and scheduler"),
    timeseries("Knobs", "Values in force: read and decode threads, prefetch "
               "(batch buffers), and with asynchronous reads (io_async 1: "
               "io_uring) the I/O depth, reads in flight allowed.", "short", [
                   ("sluice_workers" + sel('stage="read"'),
                    "{{instance}} read threads"),
                   ("sluice_workers" + sel('stage="decode"'),
                    "{{instance}} decode threads"),
                   ("sluice_prefetch" + sel(), "{{instance}} prefetch"),
                   ("sluice_io_depth" + sel(), "{{instance}} io_depth"),
                   ("sluice_io_async" + sel(), "{{instance}} io_async")],
               step=True, w=10),
    timeseries("Scheduler decisions", "Knob changes the scheduler made per "
               "second (rate() of sluice_decisions_total; the reasons are in "
               "the --telemetry JSON Lines).", "short", [
                   (decisions("rate", RI), "{{instance}} decisions/s")],
               w=8),
    stat("Decisions in range", "Knob changes the scheduler made over the "
         "dashboard's time range (their reasons: `sluice top`, or "
         "/decisions).", "short", [
             (decisions("increase", "[$__range]"), "{{instance}}")]),
    timeseries("Stage busy", "Busy share of each stage: rate() of its "
               "busy seconds over its slots (its threads; with asynchronous "
               "reads, io_async 1, the read stage's seconds are reads in "
               "flight and its slots are io_depth), and the loader's last "
               "100 ms interval (dashed).",
               "percentunit", [
                   ("rate(sluice_stage_busy_seconds_total" +
                    sel('stage!="read"') + RI + ") / sluice_workers" + sel(),
                    "{{instance}} {{stage}}"),
                   ("rate(sluice_stage_busy_seconds_total" +
                    sel('stage="read"') + RI + ") / ignoring(stage) "
                    "((sluice_io_depth" + sel() + " and sluice_io_async" +
                    sel() + " == 1) or ignoring(stage) sluice_workers" +
                    sel('stage="read"') + ")", "{{instance}} read"),
                   ("sluice_stage_busy" + sel(),
                    "{{instance}} {{stage}} last 0.1 s")],
               vmax=1, unstacked=("C",)),
    timeseries("Queues", "Items waiting at each stage, the queue's "
               "capacity, and reads issued and not yet done.", "short", [
                   ("sluice_queue_depth" + sel(), "{{instance}} {{stage}} depth"),
                   ("sluice_queue_capacity" + sel(),
                    "{{instance}} {{stage}} capacity"),
                   ("sluice_reads_in_flight" + sel(),
                    "{{instance}} reads in flight")], step=True),
    row("GPU and energy (where present)"),
    timeseries("GPU utilisation", "GPU 0 (NVML); no data without a GPU.",
               "percentunit", [("sluice_gpu_utilization" + sel(),
                                "{{instance}} GPU 0")], vmax=1, w=8),
    timeseries("GPU memory", "GPU 0 memory used.", "bytes", [
        ("sluice_gpu_memory_used_bytes" + sel(), "{{instance}} GPU 0")], w=8),
    timeseries("Power", "GPU 0 power (NVML), and the mean power of RAPL + "
               "NVML energy since the loader started: rate() of the energy "
               "counter.", "watt", [
                   ("sluice_gpu_power_watts" + sel(), "{{instance}} GPU 0"),
                   ("rate(sluice_energy_joules_total" + sel() + RI + ")",
                    "{{instance}} RAPL + NVML")], w=8),
    timeseries("GPU stage share", "The share of each batch placed on the "
               "GPU stage (placement gpu, or auto with a gpu_share).",
               "percentunit", [("sluice_gpu_stage_share" + sel(),
                                "{{instance}} share")], vmax=1, step=True,
               w=12),
    timeseries("GPU stage samples", "Samples the GPU stage decoded, and "
               "those it handed back to the CPU path (grayscale, CMYK, "
               "progressive, PNG), per second.", "ops", [
                   ("rate(sluice_gpu_stage_samples_total" + sel() + RI + ")",
                    "{{instance}} on the GPU"),
                   ("rate(sluice_gpu_stage_refused_total" + sel() + RI + ")",
                    "{{instance}} refused")], w=12),
    row("Remote reads (URLs)"),
    timeseries("Requests", "Ranged requests the loader made for samples "
               "from URLs per second (retries not counted), and coalesced "
               "requests that failed and were read again record by record.",
               "reqps", [
                   ("rate(sluice_requests_total" + sel() + RI + ")",
                    "{{instance}} requests/s"),
                   ("rate(sluice_request_fallbacks_total" + sel() + RI + ")",
                    "{{instance}} fallbacks/s")], w=12),
    timeseries("Records per request", "Samples each request fetched over "
               "the window: above 1 when neighbouring records are coalesced "
               "into one range request (--coalesce).", "short", [
                   ("rate(sluice_request_records_total" + sel() + RI +
                    ") / rate(sluice_requests_total" + sel() + RI + ")",
                    "{{instance}} records/request")], w=12),
    row("Sample cache (where on)"),
    timeseries("Cache hits and misses", "Samples served from the cache and "
               "read from storage, per second.", "ops", [
                   ("rate(sluice_cache_hits_total" + sel() + RI + ")",
                    "{{instance}} hits"),
                   ("rate(sluice_cache_misses_total" + sel() + RI + ")",
                    "{{instance}} misses")], w=12),
    timeseries("Cache memory", "Bytes held (compressed), the limit, and "
               "entries.", "bytes", [
                   ("sluice_cache_bytes" + sel(), "{{instance}} held"),
                   ("sluice_cache_limit_bytes" + sel(), "{{instance}} limit"),
                   ("sluice_cache_entries" + sel(), "{{instance}} entries")],
               w=12),
    timeseries("Cache disk tier", "The disk tier (--cache-dir): samples "
               "it served and samples neither tier held, per second, and "
               "its failed writes and reads (a failed write, the disk full, "
               "stops it admitting).", "ops", [
                   ("rate(sluice_cache_disk_hits_total" + sel() + RI + ")",
                    "{{instance}} disk hits"),
                   ("rate(sluice_cache_disk_misses_total" + sel() + RI + ")",
                    "{{instance}} misses"),
                   ("rate(sluice_cache_disk_errors_total" + sel() + RI + ")",
                    "{{instance}} errors")], w=12),
    timeseries("Cache disk bytes", "Bytes of the disk tier's file, its "
               "budget, and entries.", "bytes", [
                   ("sluice_cache_disk_bytes" + sel(), "{{instance}} held"),
                   ("sluice_cache_disk_limit_bytes" + sel(),
                    "{{instance}} limit"),
                   ("sluice_cache_disk_entries" + sel(),
                    "{{instance}} entries")], w=12),
]


def layout(panels):
    """Grid positions left to right, wrapping at 24; ids in order."""
    x = y = rowh = 0
    out = []
    for i, p in enumerate(panels, 1):
        p = dict(p)
        w, h = p.pop("_size")
        if x + w > 24:
            x, y, rowh = 0, y + rowh, 0
        p["id"] = i
        p["gridPos"] = {"x": x, "y": y, "w": w, "h": h}
        x, rowh = x + w, max(rowh, h)
        if x >= 24:
            x, y, rowh = 0, y + rowh, 0
        out.append(p)
    return out


def dashboard():
    return {
        "uid": "sluice-loader",
        "title": "sluice data loader",
        "description": "sluice's Prometheus endpoint (sluice run --metrics-port P). "
                       "Generated by dashboards/grafana/make_dashboard.py.",
        "tags": ["sluice", "data-loader"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "5s",
        "time": {"from": "now-15m", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource",
             "query": "prometheus", "current": {}, "hide": 0, "refresh": 1,
             "regex": "", "options": []},
            {"name": "instance", "label": "Loader", "type": "query",
             "datasource": DS,
             "query": {"query": "label_values(sluice_samples_total, instance)",
                       "refId": "instance"},
             "definition": "label_values(sluice_samples_total, instance)",
             "includeAll": True, "multi": True, "allValue": ".*",
             "current": {}, "hide": 0, "refresh": 2, "regex": "", "sort": 1,
             "options": []},
        ]},
        "panels": layout(PANELS),
    }


def render():
    return json.dumps(dashboard(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sluice.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render())
    print("wrote", path)
