"""bench/scenarios/regimes (issue 20 item 2): two short regimes for real on
the ImageNet sample (the harness's output well-formed, the oracle finding
more readers where storage is slow, the heuristic against the oracle with a
loose threshold), and the harness's arithmetic on crafted input: regimes
drawn from a seed, the plan's mid-run changes, the model's bound, time to
90 %, knob reversals and the targets' PASS/FAIL.

The full grid is a benchmark, not a test (hours):
    bench/scenarios/regimes --seeds 30 --duration 20"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCEN = os.path.join(ROOT, "bench", "scenarios")
SLUICE = os.environ.get("SLUICE")
SHARED = os.environ.get("SL_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
IMAGENET = os.path.join(SHARED, "imagenet-sample")
LATENCY = "latency_ms=20,bw_mb_s=0,step_ms=0,hog=0,change=latency_ms:5@0.5,name=latency"
MIXED = "latency_ms=3,bw_mb_s=40,step_ms=60,hog=1,change=bw_mb_s:0@0.5,name=mixed"


def _load():
    loader = importlib.machinery.SourceFileLoader("regimes", os.path.join(SCEN, "regimes"))
    spec = importlib.util.spec_from_loader("regimes", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


R = _load()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if not SLUICE:
        pytest.skip("SLUICE not set")
    if not os.path.isdir(IMAGENET):
        pytest.skip(f"no ImageNet sample at {IMAGENET} (SL_SHARED_DATA)")
    tmp = tmp_path_factory.mktemp("regimes")
    cmd = [sys.executable, os.path.join(SCEN, "regimes"), "--sluice", SLUICE, "--data", IMAGENET,
           "--regime", LATENCY, "--regime", MIXED, "--duration", "4", "--coarse-oracle",
           "--policies", "heuristic,static-default", "--oracle-file", str(tmp / "oracle.json"),
           "--results", str(tmp / "res")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    return {"doc": doc, "md": p.stdout, "dir": tmp / "res", "stderr": p.stderr}


def test_report_is_well_formed(report):
    doc = report["doc"]
    assert [e["regime"]["name"] for e in doc["regimes"]] == ["latency", "mixed"]
    assert doc["settings"]["prep_capacity"] > 0
    for e in doc["regimes"]:
        assert len(e["bound"]["phases"]) == 2 and e["bound"]["run"] > 0
        assert set(e["runs"]) == {"heuristic", "static-default", "oracle-static"}
        assert e["oracle"]["points"] == 4  # the coarse stage
        for pol, r in e["runs"].items():
            for k in ("samples_per_s", "mean_wait_ms", "stall_fraction", "cpu_seconds",
                      "rate_ratio", "wait_ratio"):
                assert isinstance(r[k], (int, float)) and r[k] >= 0, (pol, k, r[k])
            assert r["samples_per_s"] > 0 and 0 <= r["stall_fraction"] <= 1
            assert r["t90_start_s"] is None or 0 < r["t90_start_s"] <= 2.0 + 1e-6
            assert "t90_change_s" in r and isinstance(r["reversals_total"], int)
            assert os.path.exists(report["dir"] / f"{e['regime']['name']}__{pol}.json")
        assert e["runs"]["oracle-static"]["rate_ratio"] == 1.0
        assert e["runs"]["static-default"]["reversals_total"] == 0
    for pol in ("heuristic", "static-default"):
        s = doc["summary"][pol]
        assert s["regimes"] == 2
        assert [t["result"] in ("PASS", "FAIL", "n/a") for t in s["targets"]] == [True] * 5
    md = report["md"]
    assert "| regime | policy | img/s | /oracle |" in md
    assert "fewer: not the issue's grid" in md and "**" in md
    assert (report["dir"] / "regimes.md").exists() and (report["dir"] / "regimes.json").exists()


def test_slow_storage_needs_more_readers(report):
    """The emulated latency and its change reach the runs: one reader
    delivers at most 50 reads/s at 20 ms, 200 at 5 ms, so 125 over the run
    (a ceiling however loaded the machine is), and the oracle takes more."""
    e = report["doc"]["regimes"][0]
    assert e["runs"]["static-default"]["samples_per_s"] < 1.3 * 125
    assert e["oracle"]["chosen"]["read_threads"] >= 4
    assert e["bound"]["phases"][0]["latency"] == pytest.approx(24 / 0.020)


def test_heuristic_finds_the_storage_bound(report):
    # Before issue 20 item 1 the heuristic stayed at 1-3 readers with slow
    # storage (20 % of the oracle measured); the stall model's jump gets
    # there in the first decision. Loose (50 %) for a loaded machine.
    e = report["doc"]["regimes"][0]
    assert e["runs"]["heuristic"]["rate_ratio"] >= 0.5


# -------------------------------------------------------- arithmetic only

def test_regimes_from_seeds_are_fixed_and_in_range():
    a = [R.draw(s) for s in range(1, 201)]
    assert a == [R.draw(s) for s in range(1, 201)]
    for r in a:
        assert 0 <= r["latency_ms"] <= 50 and 0 <= r["step_ms"] <= 200
        assert r["bw_mb_s"] == 0 or 20 <= r["bw_mb_s"] <= 500
        assert r["hog"] in (0, 1, 2)
        ch = r["change"]
        assert 0.3 <= ch["at"] <= 0.7 and ch["value"] != r[ch["param"]]
    assert {r["change"]["param"] for r in a} == set(R.PARAMS)
    assert any(r["bw_mb_s"] == 0 for r in a) and any(r["step_ms"] == 0 for r in a)


def test_plan_changes_each_parameter():
    reg = R.parse_regime(MIXED, 1)
    plan = R.plan_of(reg, 10)
    assert plan["storage"] == {"latency_ms": 3.0, "bytes_per_s": 40_000_000}
    assert plan["sets"] == ["5.00s:read-bw=0"] and plan["hogs"] == [[0, 1]]
    reg["change"] = {"at": 0.4, "param": "bw_mb_s", "value": 22}
    assert R.plan_of(reg, 10)["sets"] == ["4.00s:read-bw=22000000"]
    reg["change"] = {"at": 0.4, "param": "step_ms", "value": 0}
    assert R.plan_of(reg, 10)["sets"] == ["4.00s:step-ms=0"]
    reg["change"] = {"at": 0.5, "param": "hog", "value": 2}
    p = R.plan_of(reg, 10)
    assert p["sets"] == [] and p["hogs"] == [[0, 1], [5.0, 2]]


def test_bound_is_the_least_of_the_model():
    args = SimpleNamespace(batch=64)
    reg = R.parse_regime("latency_ms=40,bw_mb_s=22,step_ms=100,hog=2,change=step_ms:0@0.25", 1)
    b = R.bound(reg, args, 1000.0, 110_000, 2)
    p1, p2 = b["phases"]
    assert p1["demand"] == pytest.approx(640) and p1["latency"] == pytest.approx(600)
    assert p1["link"] == pytest.approx(200) and p1["prep"] == pytest.approx(500)
    assert p1["by"] == "link" and p2["demand"] is None and p2["by"] == "link"
    assert b["run"] == pytest.approx(200, abs=0.1)


def _tel(rates, dt=0.1, decisions=()):
    """Crafted telemetry: samples/s per interval, decisions {i: (knob, from, to)}."""
    rows, s = [], 0
    dec = dict(decisions)
    for i, r in enumerate(rates):
        s += r * dt
        d = dec.get(i)
        rows.append({"t": round((i + 1) * dt, 3), "samples_total": s,
                     "decision": {"knob": d[0], "from": d[1], "to": d[2]} if d else None,
                     "decisions_total": 0})
    return rows


def test_time_to_90_percent_and_reversals():
    # 2 s at 100/s, then 800/s: from the start, ~2 s plus most of a window
    rows = _tel([100] * 20 + [800] * 80)
    t, steady, w = R.t90(rows, 0.0, 10.0, 8)
    assert steady == pytest.approx(800) and w == 1.0
    assert 2.0 < t <= 3.0
    # a change at 5 s to 400/s: reached within the first half-window
    rows = _tel([800] * 50 + [400] * 50)
    t, steady, _ = R.t90(rows, 5.0, 10.0, 8)
    assert steady == pytest.approx(400) and t <= 0.6
    # never reaching it: the rate keeps climbing
    t, steady, _ = R.t90(_tel([i * 10 for i in range(100)]), 0.0, 10.0, 8)
    assert t is not None and t > 5
    rt = "read_threads"
    rev = R.reversals(_tel([0] * 10, decisions={1: (rt, 1, 2), 2: (rt, 2, 3), 3: (rt, 3, 2),
                                                5: ("prefetch", 2, 4), 6: (rt, 2, 3)}))
    assert rev == {"read_threads": 2, "prefetch": 0}


def test_targets_pass_and_fail():
    def entry(rate, wait, t90, cpu=1.0):
        orc = {"samples_per_s": 100.0, "mean_wait_ms": 10.0, "cpu_seconds": 1.0}
        r = {"samples_per_s": rate, "mean_wait_ms": wait, "cpu_seconds": cpu,
             "t90_start_s": t90, "t90_change_s": 1.0, "reversals_total": 1}
        R.ratios(r, orc, 1.0)
        return {"runs": {"heuristic": r}, "oracle_run": orc,
                "bound": {"phases": [{"fraction": 1.0, "demand": 100.0}]}}
    good = [entry(95, 10, 1.0) for _ in range(9)] + [entry(75, 12, 4.0)]
    s = R.summarize(good, "heuristic", 2)
    res = {t["target"]: t["result"] for t in s["targets"]}
    assert s["frac_rate_ge_90"] == 0.9 and s["min_rate_ratio"] == 0.75
    assert s["frac_converged_3s"] == 0.9 and s["mean_wait_ratio"] == pytest.approx(1.02)
    assert list(res.values()) == ["PASS"] * 5
    bad = good[:8] + [entry(60, 30, None, cpu=2.0)] * 2
    res = [t["result"] for t in R.summarize(bad, "heuristic", 2)["targets"]]
    assert res == ["FAIL"] * 5
    assert R.summarize(bad, "heuristic", 2)["max_cpu_per_sample"] == pytest.approx(2.0 * 100 / 60,
                                                                                  abs=1e-3)


def test_cpu_target_counts_regimes_whose_oracle_meets_the_runs_demand():
    """The oracle meets 'demand' only over the whole run: a slow phase met
    and a fast one missed does not count (the policy delivering more there
    would be charged for the extra samples), nor does a phase with no step."""
    def entry(phases, oracle_rate, cpu):
        orc = {"samples_per_s": oracle_rate, "mean_wait_ms": 1.0, "cpu_seconds": 1.0}
        r = {"samples_per_s": oracle_rate, "mean_wait_ms": 1.0, "cpu_seconds": cpu,
             "t90_start_s": 1.0, "t90_change_s": 1.0, "reversals_total": 0}
        R.ratios(r, orc, 1.0)
        return {"runs": {"heuristic": r}, "oracle_run": orc, "bound": {"phases": phases}}
    slow_fast = [{"fraction": 0.5, "demand": 100.0}, {"fraction": 0.5, "demand": 400.0}]
    assert R.run_demand({"phases": slow_fast}) == 250.0
    assert R.run_demand({"phases": [{"fraction": 1.0, "demand": None}]}) == float("inf")
    met = entry([{"fraction": 1.0, "demand": 100.0}], 100.0, 1.05)
    s = R.summarize([met, entry(slow_fast, 120.0, 2.0)], "heuristic", 2)
    assert s["cpu_regimes"] == 1 and s["frac_cpu_ok"] == 1.0
    s = R.summarize([met, entry(slow_fast, 240.0, 2.0)], "heuristic", 2)
    assert s["cpu_regimes"] == 2 and s["frac_cpu_ok"] == 0.5
