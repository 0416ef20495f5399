"""bench/scenarios (issue 4): one short scenario run for real (the JSON the
issue asks for, the storage throttle applied, torch's io-slowdown skip), and
the table's arithmetic (seed lists, ratios of mean waits with a paired
t-test, failed and skipped runs shown, never dropped) on crafted results."""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import synthetic_folder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCEN = os.path.join(ROOT, "bench", "scenarios")
SLUICE = os.environ.get("SLUICE")


def _load_table():
    pytest.importorskip("scipy")
    pytest.importorskip("matplotlib")
    loader = importlib.machinery.SourceFileLoader("scenario_table", os.path.join(SCEN, "table"))
    spec = importlib.util.spec_from_loader("scenario_table", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "scen", 256, 4)


def _run(folder, tmp_path, *extra):
    cmd = [sys.executable, os.path.join(SCEN, "run"), "--data", folder, "--sluice", SLUICE,
           "--seed", "1", "--duration", "6", "--capacity", "400",
           "--oracle-file", str(tmp_path / "oracle.json"), "--json", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_one_run_reports_the_issue_fields(folder, tmp_path):
    r = _run(folder, tmp_path, "--scenario", "io-slowdown", "--policy", "heuristic")
    for k in ("mean_wait_ms", "p99_wait_ms", "stall_fraction", "samples_per_s", "cpu_seconds"):
        assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r[k])
    assert 0 <= r["stall_fraction"] <= 1
    assert r["samples_per_s"] > 0 and r["cpu_seconds"] > 0
    assert r["config"]["policy"] == "heuristic"
    th = r["plan"]["throttle"]  # the slow-storage window, a third of the run
    assert th["latency_ms"] > 0 and th["bytes_per_s"] > 0
    assert th["from_s"] == pytest.approx(2.0) and th["to_s"] == pytest.approx(4.0)
    # demand at 70 % of the given capacity: 64 / (0.7 x 400) s a step
    assert r["plan"]["step_ms"] == pytest.approx(1000 * 64 / (0.7 * 400))
    assert th["latency_ms"] == pytest.approx(1000 / (0.35 * 400), abs=1e-3)


def test_torch_skips_io_slowdown_with_its_reason(folder, tmp_path):
    r = _run(folder, tmp_path, "--scenario", "io-slowdown", "--policy", "torch")
    assert "skipped" in r and "throttle" in r["skipped"]


def test_seed_lists():
    t = _load_table()
    assert t.seeds_of("3") == [1, 2, 3]
    assert t.seeds_of("4,") == [4]
    assert t.seeds_of("2,5") == [2, 5]


def test_table_ratios_and_missing_runs(tmp_path):
    t = _load_table()

    class A:
        duration = 60

    res = {}
    for s, (w_static, w_heur) in enumerate([(2.0, 1.0), (4.0, 2.1), (3.0, 1.4)], start=1):
        base = {"p99_wait_ms": 1, "stall_fraction": 0.01, "samples_per_s": 100,
                "cpu_seconds": 10}
        res[("steady", "static-default", s)] = dict(base, mean_wait_ms=w_static,
                                                    config={"policy": "static"})
        res[("steady", "heuristic", s)] = dict(base, mean_wait_ms=w_heur,
                                               config={"policy": "heuristic"})
        res[("steady", "rl", s)] = {"error": "bench/scenarios/run: no rl in this build"}
        res[("steady", "torch", s)] = {"skipped": "torch cannot run here"}
    md = t.table(A(), res, ["steady"], ["static-default", "torch", "heuristic", "rl"], [1, 2, 3])
    heur = next(line for line in md.splitlines() if line.startswith("| heuristic "))
    # mean 1.5 / mean 3.0 = 0.50; paired over the 3 seeds: a clear drop
    assert "0.50 (p=0.0" in heur
    assert "3.00 ± 1.00" in next(line for line in md.splitlines()
                                 if line.startswith("| static-default "))
    assert "| rl | — | n/a" in md and "no rl in this build" in md  # shown, not dropped
    assert "| torch | — | n/a" in md and "torch cannot run here" in md
