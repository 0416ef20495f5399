"""sluice.analyze and sluice.calibrate: the `sluice analyze` and `sluice
calibrate` tools as calls returning dicts, with the CLI's figures.

Datasets are generated with the CLI (`make-dataset --synthetic`); the
telemetry for calibrate comes from the simulator, which is deterministic.
The ImageNet sample test skips when ../shared/data is absent."""
import json
import os
import subprocess

import pytest

from conftest import synthetic_folder

SLUICE = os.environ.get("SLUICE")
sluice = pytest.importorskip("sluice", reason="sluice module not built")

QUICK = dict(batch_size=8, image_size=64, threads=1, seconds=0.3)


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "analysis", 60, 3)


@pytest.fixture(scope="module")
def telemetry(tmp_path_factory):
    """Telemetry of a simulated run of a known profile (see e2e calibrate.sh)."""
    if not SLUICE:
        pytest.skip("SLUICE not set")
    d = tmp_path_factory.mktemp("calib")
    known = d / "known.json"
    known.write_text(json.dumps({"ncpu": 2, "batch_size": 32, "read_ms": 0.2,
                                 "read_cv": 0.5, "decode_ms": 2.5, "decode_cv": 0.4,
                                 "item_bytes": 50000, "interfere": 1.0}))
    path = d / "known.jsonl"
    subprocess.run([SLUICE, "simulate", "--profile", str(known), "--policy", "static",
                    "--threads", "2", "--prefetch", "4", "--duration", "20",
                    "--step-ms", "30", "--telemetry", str(path)],
                   check=True, capture_output=True)
    return path


def test_analyze_trickle_is_consumer_bound(ds):
    r = sluice.analyze(ds, rate=1, **QUICK)
    assert r["bound"] == "consumer"
    assert r["predicted_stall"] == 0
    assert r["measured_stall"] < 0.05
    assert r["samples"] == 60
    assert r["batch"] == 8 and r["size"] == 64 and r["threads"] == 1
    assert len(r["prep_rate_by_threads"]) == 1
    for k in ("prep_rate", "fetch_rate_cold", "fetch_rate_warm", "dataset_bytes"):
        assert r[k] > 0, k
    assert "sweep" not in r


def test_analyze_flood_stalls(ds):
    r = sluice.analyze(ds, rate=1e7, **QUICK)
    assert r["bound"] in ("prep", "fetch")
    assert r["predicted_stall"] > 0.9
    assert r["bandwidth_needed_bytes_per_s"] > 0


def test_analyze_sweep_levels(ds):
    r = sluice.analyze(ds, sweep=True, **QUICK)
    assert [round(lv["predicted_stall"], 3) for lv in r["sweep"]] == [0, 0, 0.333]
    assert r["prep_rate_after"] > 0


def test_analyze_errors(ds, tmp_path):
    with pytest.raises(ValueError, match="demand"):
        sluice.analyze(ds, **QUICK)
    with pytest.raises(ValueError, match="not both"):
        sluice.analyze(ds, rate=5, step_ms=10, **QUICK)
    with pytest.raises(ValueError, match="decode_threads"):
        sluice.analyze(ds, rate=5, threads=100000)
    with pytest.raises(ValueError):
        sluice.analyze(ds, rate=5, dtype="int16")
    with pytest.raises(sluice.Error):
        sluice.analyze(str(tmp_path / "nope"), rate=5, seconds=0.3)


def test_calibrate_recovers_profile(telemetry, tmp_path):
    r = sluice.calibrate(telemetry)
    fit, profile = r["fit"], r["profile"]
    assert abs(fit["decode_ms"] - 2.5) < 0.25
    assert abs(fit["step_ms"] - 30) < 1.5
    assert fit["batch_size"] == 32 and profile["batch_size"] == 32
    assert abs(fit["foreign_demand"] - 1) < 0.2
    assert profile["decode_ms"] == pytest.approx(fit["decode_ms"], abs=1e-4)
    # the same figures as the CLI, and the profile simulate loads
    cli = subprocess.run([SLUICE, "calibrate", str(telemetry), "-o",
                          str(tmp_path / "cli.json"), "--json"],
                         check=True, capture_output=True, text=True)
    assert json.loads(cli.stdout) == fit
    assert json.loads((tmp_path / "cli.json").read_text()) == profile
    p = tmp_path / "p.json"
    p.write_text(json.dumps(profile))
    subprocess.run([SLUICE, "simulate", "--profile", str(p), "--duration", "1"],
                   check=True, capture_output=True)


def test_calibrate_options(telemetry):
    base = sluice.calibrate(telemetry)["profile"]
    r = sluice.calibrate(telemetry, step_ms=12, consumer_cpu=0.5, batch_bytes=1000)
    assert r["profile"]["step_ms"] == 12
    assert r["profile"]["consumer_cpu"] == 0.5
    assert r["profile"]["batch_bytes"] == 1000
    assert sluice.calibrate(telemetry, step_ms=0)["profile"]["step_ms"] == 0
    # skip_s=0 keeps the early periods, the default leaves 1 s out
    assert sluice.calibrate(telemetry, skip_s=0)["fit"]["used"] > \
        sluice.calibrate(telemetry)["fit"]["used"]
    assert base["step_ms"] > 0


def test_calibrate_errors(tmp_path):
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n")
    with pytest.raises(sluice.Error, match="too few steady periods"):
        sluice.calibrate(junk)
    with pytest.raises(sluice.Error):
        sluice.calibrate(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="consumer_cpu"):
        sluice.calibrate(junk, consumer_cpu=2)
    with pytest.raises(ValueError):
        sluice.calibrate(junk, skip_s=-1)


def test_analyze_imagenet_sample():
    shared = os.environ.get("SL_SHARED_DATA") or os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "shared", "data")
    root = os.path.join(shared, "imagenet-sample")
    if not os.path.isdir(root):
        pytest.skip(f"{root} absent")
    r = sluice.analyze(root, rate=1, batch_size=16, threads=1, seconds=0.3)
    assert r["bound"] == "consumer"
    assert r["samples"] > 0 and r["dataset_bytes"] > 1e6
