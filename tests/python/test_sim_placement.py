"""bench/gpu/sim_placement.py: issue 19's training cases in the simulator,
on a profile of the H200 machine as measured there. The placement rule
(sched/place.h) in closed loop must stay within 5 % of the better fixed
placement (cpu or gpu) in every case — finding the GPU's share where the
CPU is short, staying on the CPU where the stage would slow the step —
and, when a hog takes the cores from ResNet-18's 16 threads, keep it
well above placement cpu, and never below it in any hog case; with half
the CPU taken, ResNet-50 at batch 256 at 95 % of its bound, and once
the hog leaves, the share back at 0 and the rate placement cpu's. Model
predictions, not GPU figures: what this guards is the rule's
behaviour."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_auto_tracks_the_better_placement():
    sluice = os.environ.get("SLUICE")
    if not sluice:
        pytest.skip("SLUICE not set")
    p = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu" / "sim_placement.py"),
         "--sluice", sluice, "--seeds", "1", "--duration", "30", "--json"],
        capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("sim_placement: ")]
    r = json.loads(line[-1][len("sim_placement: "):])
    assert len(r["cases"]) == 18
    for c in r["cases"]:
        # where the CPU is short the GPU placement is the better one
        if c["threads"] == 2:
            assert c["gpu"] > c["cpu"], c
        assert c["auto_vs_best"] >= 0.95, c
    assert {(h["model"], h["batch"], h["hog_threads"]) for h in r["hog"]} == {
        (m, b, t) for m, b in (("resnet50", 64), ("resnet18", 64),
                               ("resnet50", 256)) for t in (8, 17)}
    for h in r["hog"]:
        # never worse than placement cpu
        assert h["auto"] >= h["cpu"] - 0.01, h
        if h["model"] == "resnet18":  # the hog leaves the CPU short
            assert h["cpu"] < 0.9, h
            assert h["auto"] >= h["cpu"] + 0.05 and h["auto_share"] > 0, h
        elif h["batch"] == 64 and h["hog_threads"] == 8:
            # ResNet-50 at batch 64 needs ~5 of the 8 cores left
            assert h["auto"] >= 0.95, h
        elif (h["batch"], h["hog_threads"], h["gpu_slow"]) == (256, 17, 0):
            # the target: half the CPU taken, steady state. The
            # buffer drains and the trainer's thread starves: the share
            # rises for both (the rule without the starved trainer's
            # raise: 94.3 %)
            assert h["cpu"] < 0.9 and h["auto"] >= 0.95, h
    # The hog gone, the CPU carries it all: the share goes back to 0 and
    # auto runs as placement cpu, also where the stage slows the step (a
    # few per mille left on the GPU cost 1 % at gpu_slow 1).
    assert [g["gpu_slow"] for g in r["hog_gone"]] == [0, 0.3, 1]
    for g in r["hog_gone"]:
        assert g["auto_share"] == 0 and g["auto"] >= g["cpu"] - 0.002, g


def _placing_policy(path, hidden=4):
    """A weights file of the kind that places (docs/POLICY.md, "Weights
    file": 29 features, 4 knobs), every weight zero but the share head's +1
    bias: the CPU heads' argmax stays, the share rises 100 a decision."""
    import struct
    import numpy as np
    xxhash = pytest.importorskip("xxhash")
    n_obs, knobs, h = 29, 4, hidden
    n_params = n_obs * h + h + h * h + h + 3 * knobs * h + 3 * knobs + h + 1
    w = np.zeros(n_params, np.float32)
    bp = n_params - (h + 1) - 3 * knobs  # the heads' biases
    w[bp + 3 * 3 + 2] = 20.0             # the share head's +1
    body = (b"SLPOLICY" + struct.pack("<6I", 1, n_obs, h, knobs, 3, n_params)
            + np.zeros(n_obs, np.float32).tobytes()
            + np.ones(n_obs, np.float32).tobytes() + w.tobytes())
    with open(path, "wb") as f:
        f.write(body + struct.pack("<Q", xxhash.xxh3_64_intdigest(body)))


def test_a_policy_that_places_sets_the_share_through_the_cli(tmp_path):
    """`sluice simulate --policy rl --policy-file F` with a policy that
    places: its share head moves the share (reasons "rl: ... gpu_share
    +1"), up to the most, and the placement rule never runs; the shipped
    rl policy, of the CPU kind, leaves the share to the rule."""
    sluice = os.environ.get("SLUICE")
    if not sluice:
        pytest.skip("SLUICE not set")
    pol = tmp_path / "place.bin"
    _placing_policy(pol)
    prof = tmp_path / "p.json"
    sys.path.insert(0, str(ROOT / "bench" / "gpu"))
    import sim_placement
    prof.write_text(json.dumps(dict(sim_placement.BASE, step_ms=10.0,
                                    gpu_slow=0.0)))
    reasons = {}
    for name, extra in (("place", ["--policy-file", str(pol)]), ("cpu", [])):
        tel = tmp_path / f"{name}.jsonl"
        subprocess.run([sluice, "simulate", "--profile", str(prof),
                        "--max-threads", "3", "--duration", "12", "--seed",
                        "1", "--policy", "rl", "--telemetry", str(tel)]
                       + extra, check=True, capture_output=True, timeout=120)
        rows = [json.loads(x) for x in tel.read_text().splitlines()]
        reasons[name] = [r["decision"]["reason"] for r in rows
                         if (r.get("decision") or {}).get("knob")
                         == "gpu_share"]
        reasons[name + "_share"] = rows[-1]["placement"]["gpu_share"]
    assert len(reasons["place"]) >= 9, reasons["place"]
    assert all(r.startswith("rl:") and "gpu_share +1" in r
               for r in reasons["place"]), reasons["place"]
    assert reasons["place_share"] == 1000
    # the shipped policy: the share moves, by the rule only
    assert reasons["cpu"], "the rule raised nothing where the CPU is short"
    assert all(r.startswith("placement:") for r in reasons["cpu"]), \
        reasons["cpu"]
