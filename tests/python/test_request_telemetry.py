"""The ranged-request counters in telemetry (issue 15 item 3, coalesced
reads): a run over URLs writes them in every JSON Lines snapshot
(io.requests_total, io.request_records_total, io.request_fallbacks_total,
io.requests_per_s, io.records_per_request), serves them on the Prometheus
endpoint (sluice_requests_total, ...) and `sluice plot` draws them; each
equals stats()['requests'] at the end. In stored order with coalescing a
request fetches several records, without it one; a local run makes none.
WebDataset tars served by tests/e2e/faulty_http.py (conftest.remote_tars).
"""
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from conftest import remote_tars

SLUICE = os.environ.get("SLUICE")
sluice = pytest.importorskip("sluice", reason="sluice module not built")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from remote_tars(tmp_path_factory, "reqtel", 48, 3)


def settled(L):
    """stats()['requests'] once the engine's reads have stopped: it reads
    ahead into the next epoch while the iteration ends, until its batch
    buffers are full."""
    last = None
    for _ in range(50):
        now = L.stats()["requests"]
        if now == last:
            return now
        last = now
        time.sleep(0.3)
    return last


def run(src, tel, **kw):
    """One epoch in stored order; returns stats()['requests'] at the end."""
    with sluice.Loader(src, batch_size=8, image_size=32, shuffle=False,
                       io_depth=8, telemetry_ms=20, telemetry_path=str(tel),
                       **kw) as L:
        n = sum(len(b[1]) for b in L)
        reqs = settled(L)
    assert n == 48
    return reqs


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def test_snapshots_count_requests(served, tmp_path):
    root, url, pat = served
    for coalesce in (None, "off"):
        tel = tmp_path / f"tel-{coalesce}.jsonl"
        reqs = run(f"{url}/{pat}", tel, coalesce=coalesce)
        snaps = lines(tel)
        io = [s["io"] for s in snaps]
        last = io[-1]
        # The last snapshot (taken at close) holds the final counts.
        assert last["requests_total"] == reqs["count"] > 0
        assert last["request_records_total"] == reqs["records"] >= 48
        assert last["request_fallbacks_total"] == reqs["fallbacks"] == 0
        # Counters never go down; the interval's figures add up to them.
        tot = [x["requests_total"] for x in io]
        assert tot == sorted(tot)
        assert any(x["requests_per_s"] > 0 for x in io)
        per = [x["records_per_request"] for x in io
               if x["records_per_request"] is not None]
        assert per, "no interval with requests"
        if coalesce == "off":
            assert reqs["count"] == reqs["records"]  # one a record
            assert all(abs(p - 1) < 1e-9 for p in per)
        else:
            assert reqs["count"] < reqs["records"]
            assert max(per) > 1
    # A local run makes no requests: zeros, and null records per request.
    tel = tmp_path / "local.jsonl"
    reqs = run(str(root / pat), tel)
    assert reqs["count"] == 0
    for s in lines(tel):
        assert s["io"]["requests_total"] == 0
        assert s["io"]["records_per_request"] is None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prometheus_serves_requests(served, tmp_path):
    _, url, pat = served
    port = free_port()
    try:
        L = sluice.Loader(f"{url}/{pat}", batch_size=8, image_size=32,
                          shuffle=False, io_depth=8, telemetry_ms=20,
                          metrics_port=port)
    except Exception as e:  # noqa: BLE001
        if "Prometheus" in str(e):
            pytest.skip(str(e))
        raise
    with L:
        for _ in L:
            pass
        reqs = settled(L)
        time.sleep(0.2)  # a snapshot after the last read
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=5) as r:
            text = r.read().decode()

    def value(name):
        m = re.search(r"^%s (\S+)$" % name, text, re.M)
        assert m, name + " not served"
        return float(m.group(1))

    assert "# TYPE sluice_requests_total counter" in text
    assert value("sluice_requests_total") == reqs["count"] > 0
    assert value("sluice_request_records_total") == reqs["records"]
    assert value("sluice_request_fallbacks_total") == reqs["fallbacks"]


def test_plot_draws_requests(served, tmp_path):
    if not shutil.which("gnuplot"):
        pytest.skip("gnuplot not installed")
    root, url, pat = served
    remote, local = tmp_path / "remote.jsonl", tmp_path / "local.jsonl"
    run(f"{url}/{pat}", remote)
    run(str(root / pat), local)
    for tel, want in ((remote, True), (local, False)):
        svg = tmp_path / (tel.stem + ".svg")
        subprocess.run([SLUICE, "plot", str(tel), "-o", str(svg)], check=True,
                       capture_output=True)
        text = svg.read_text()
        assert ("requests/s" in text) == want, tel
        assert ("records per request" in text) == want, tel
