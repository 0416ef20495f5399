"""The Grafana dashboard (dashboards/grafana/sluice.json) against the metrics
sluice's Prometheus endpoint really serves.

No Grafana installs here (not in Debian, not on PyPI), so the dashboard is
checked three ways: its JSON structure; every query's metric names against
a live scrape of `sluice run --metrics-port P` (counters through rate(),
gauges plain); and, where Debian's `prometheus` is installed, every query
run by a real Prometheus that scrapes that loader.
"""
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import synthetic_folder

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GRAFANA = os.path.join(ROOT, "dashboards", "grafana")
DASH = os.path.join(GRAFANA, "sluice.json")
PROM_C = os.path.join(ROOT, "src", "telemetry", "prom.c")

# Served only where the machine has them (src/telemetry/prom.c: metric_opt,
# the GPU block, RAPL/NVML energy): may be absent from a scrape here.
OPTIONAL = {
    "sluice_gpu_utilization", "sluice_gpu_power_watts",
    "sluice_gpu_memory_used_bytes", "sluice_energy_joules_total",
    "sluice_disk_read_bytes_per_second", "sluice_psi_cpu_some",
    "sluice_psi_io_some", "sluice_psi_memory_some",
}
# PromQL words that look like identifiers but name no metric.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
            "offset", "bool", "and", "or", "unless", "inf", "nan"}
COUNTER_FUNCS = {"rate", "irate", "increase"}


def load_dashboard():
    with open(DASH, encoding="utf-8") as f:
        return json.load(f)


def queries(dash):
    """(panel title, expr) of every target of every panel."""
    return [(p["title"], t["expr"]) for p in dash["panels"]
            for t in p.get("targets", [])]


def metric_names(expr):
    """Metric names an expr selects: identifiers not inside strings, label
    matchers, ranges or grouping lists, not Grafana variables, not
    functions (followed by `(`) nor keywords."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " {} ", e)
    e = re.sub(r"\[[^\]]*\]", " [] ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
               " ", e)
    e = re.sub(r"\$\{?\w+\}?", " ", e)
    names = []
    for m in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        if rest.startswith("(") or m.group().lower() in KEYWORDS:
            continue
        names.append(m.group())
    return names


def counter_args(expr):
    """Metric names passed straight to rate()/irate()/increase()."""
    return re.findall(r"\b(?:%s)\s*\(\s*([A-Za-z_:][A-Za-z0-9_:]*)"
                      % "|".join(COUNTER_FUNCS), expr)


def parse_scrape(text):
    """{metric family: type} of a Prometheus text-format scrape, plus the
    names that have samples."""
    types, sampled = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split()
            types[name] = typ
        elif line and not line.startswith("#"):
            sampled.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group())
    return types, sampled


# ------------------------------------------------------------ no loader


def test_metric_names_scanner():
    assert metric_names('sum by (instance) (rate(a_total{x=~"b(c)"}[5m])) / b') \
        == ["a_total", "b"]
    assert metric_names('changes(k{i=~"$instance"}[$__range]) + on(i) m') \
        == ["k", "m"]
    assert metric_names("avg_over_time(g[1m]) * 1e3 > bool 0.5") == ["g"]
    assert counter_args("rate(a_total{x=\"1\"}[1m]) + irate( b_total[1m])") \
        == ["a_total", "b_total"]


def test_dashboard_structure():
    d = load_dashboard()
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"])
    assert d["title"]
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36
    names = [v["name"] for v in d["templating"]["list"]]
    assert "datasource" in names and "instance" in names
    ids, titles = set(), set()
    for p in d["panels"]:
        assert p["id"] not in ids
        ids.add(p["id"])
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0
        if p["type"] == "row":
            continue
        titles.add(p["title"])
        assert p.get("datasource") == {"type": "prometheus", "uid": "${datasource}"}, \
            p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), p["title"]
        for t in p["targets"]:
            assert t.get("datasource") == p["datasource"], p["title"]
            assert t["expr"] and metric_names(t["expr"]), (p["title"], t["expr"])
            assert 'instance=~"$instance"' in t["expr"], (p["title"], t["expr"])
    # The panels issue 18 asks for.
    for want in ("Throughput", "Stall", "Consumer wait and batch latency",
                 "CPU: own and other", "Memory", "Knobs", "Scheduler decisions",
                 "GPU utilisation", "GPU memory"):
        assert want in titles, want


def test_read_busy_is_over_io_depth():
    """With io_uring the read stage's busy seconds are reads in flight:
    the Stage busy panel divides the read stage's rate by sluice_io_depth
    (where sluice_io_async is 1), the other stages' by their threads."""
    panel = next(p for p in load_dashboard()["panels"]
                 if p.get("title") == "Stage busy")
    rates = [t["expr"] for t in panel["targets"]
             if t["expr"].startswith("rate(")]
    read = [e for e in rates if 'stage="read"' in e.split(")")[0]]
    rest = [e for e in rates if 'stage!="read"' in e.split(")")[0]]
    assert len(read) == 1 and len(rest) == 1, rates
    assert "sluice_io_depth" in read[0] and "sluice_io_async" in read[0]
    assert "sluice_io_depth" not in rest[0]


def test_dashboard_is_generated():
    """sluice.json is what make_dashboard.py writes (edit the script)."""
    spec = importlib.util.spec_from_file_location(
        "make_dashboard", os.path.join(GRAFANA, "make_dashboard.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(DASH, encoding="utf-8") as f:
        assert f.read() == mod.render(), \
            "sluice.json is stale: run python3 dashboards/grafana/make_dashboard.py"


def test_optional_metrics_are_in_the_formatter():
    """Names that a scrape here may lack still have to be ones the endpoint
    serves somewhere (GPU, PSI, RAPL machines)."""
    with open(PROM_C, encoding="utf-8") as f:
        src = f.read()
    used = {n for _, e in queries(load_dashboard()) for n in metric_names(e)}
    for name in sorted(used & OPTIONAL):
        assert '"%s"' % name[len("sluice_"):] in src, name


# ------------------------------------------------------------ live loader


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


@pytest.fixture(scope="module")
def loader(tmp_path_factory):
    """A `sluice run` serving /metrics for about 40 s; yields (port, scrape)."""
    ds = synthetic_folder(tmp_path_factory, "grafana", 64, 4)
    port = free_port()
    err = open(tmp_path_factory.mktemp("grafana-run") / "stderr", "w+")
    proc = subprocess.Popen(
        [os.environ["SLUICE"], "run", ds, "--metrics-port", str(port),
         "--duration", "40", "--size", "32", "--batch", "8", "--step-ms", "5"],
        stdout=subprocess.DEVNULL, stderr=err)
    text, deadline = "", time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                err.seek(0)
                msg = err.read()
                if "built without the Prometheus endpoint" in msg:
                    pytest.skip("sluice built without SL_PROMETHEUS: " + msg.strip())
                pytest.fail("sluice run exited %d: %s" % (proc.returncode, msg))
            try:
                text = get("http://127.0.0.1:%d/metrics" % port)
                m = re.search(r"^sluice_samples_total (\S+)$", text, re.M)
                if m and float(m.group(1)) > 0:
                    break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        else:
            pytest.fail("no samples on /metrics within 20 s:\n" + text)
        yield port, text
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err.close()


def test_every_query_metric_is_served(loader):
    _, text = loader
    types, sampled = parse_scrape(text)
    missing = []
    for title, expr in queries(load_dashboard()):
        for name in metric_names(expr):
            if name not in sampled and name not in OPTIONAL:
                missing.append("%s: %s (%s)" % (title, name, expr))
    assert not missing, "not served by /metrics:\n" + "\n".join(missing)
    # And the dashboard covers every family served here.
    used = {n for _, e in queries(load_dashboard()) for n in metric_names(e)}
    unused = sorted(set(types) - used - {"sluice_samples_per_second"})
    assert not unused, "served but on no panel: %s" % unused


def test_counters_rate_gauges_plain(loader):
    _, text = loader
    types, _ = parse_scrape(text)

    def kind(name):  # a name absent here: by the naming convention
        return types.get(name, "counter" if name.endswith("_total") else "gauge")

    bad = []
    for title, expr in queries(load_dashboard()):
        rated = counter_args(expr)
        for name in metric_names(expr):
            if kind(name) == "counter" and name not in rated:
                bad.append("%s: counter %s used without rate(): %s"
                           % (title, name, expr))
        for name in rated:
            if kind(name) != "counter":
                bad.append("%s: gauge %s under rate(): %s" % (title, name, expr))
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------ real Prometheus


def grafana_vars(expr):
    """The Grafana variables the dashboard uses, as a Prometheus sees them."""
    return (expr.replace("$instance", ".*").replace("$__rate_interval", "4s")
            .replace("$__range", "1m"))


def test_queries_run_in_prometheus(loader, tmp_path):
    """Each query, run by a real Prometheus scraping the loader every
    second, parses and (metrics served here) returns series."""
    prom = shutil.which("prometheus")
    if not prom:
        pytest.skip("no prometheus binary (Debian: apt-get install prometheus)")
    port, text = loader
    _, sampled = parse_scrape(text)
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                   "scrape_configs:\n- job_name: sluice\n  static_configs:\n"
                   "  - targets: ['127.0.0.1:%d']\n" % port)
    pport = free_port()
    api = "http://127.0.0.1:%d/api/v1/" % pport
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen(
        [prom, "--config.file=%s" % cfg, "--storage.tsdb.path=%s" % (tmp_path / "db"),
         "--web.listen-address=127.0.0.1:%d" % pport], stdout=log, stderr=log)

    def query(expr):
        url = api + "query?" + urllib.parse.urlencode({"query": expr})
        try:
            return json.loads(get(url))
        except urllib.error.HTTPError as e:  # 400: the query does not parse
            return json.loads(e.read().decode())

    try:
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:  # up, and rate() has 2+ samples
            try:
                r = query("count_over_time(sluice_samples_total[4s])")
                if r["data"]["result"] and \
                        float(r["data"]["result"][0]["value"][1]) >= 3:
                    break
            except (urllib.error.URLError, OSError, KeyError, ValueError):
                pass
            time.sleep(0.5)
        else:
            pytest.fail("Prometheus did not scrape the loader within 25 s: %s"
                        % (tmp_path / "prometheus.log").read_text()[-2000:])
        bad = []
        for title, expr in queries(load_dashboard()):
            r = query(grafana_vars(expr))
            if r.get("status") != "success":
                bad.append("%s: %s: %s" % (title, expr, r.get("error")))
            elif not r["data"]["result"] and \
                    all(n in sampled for n in metric_names(expr)):
                bad.append("%s: no series: %s" % (title, expr))
        # The `instance` variable: label_values(sluice_samples_total, instance)
        # is Grafana's call of this endpoint.
        r = json.loads(get(api + "label/instance/values?" + urllib.parse.urlencode(
            {"match[]": "sluice_samples_total"})))
        assert "127.0.0.1:%d" % port in r["data"], r
        assert not bad, "\n".join(bad)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
