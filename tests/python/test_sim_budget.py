"""sluice.ray's byte budget (object_store_bytes) in the simulator of the
Ray path (src/sim/remote.{h,c}, driven by bench/scale/model_sim.py).

The window rule lives twice: python/sluice/ray.py's _window (the
reference, what the trainer runs) and the simulator's
sl__sim_remote_window (reached through the extension's private
_sim_remote_window; libsluice.so does not export it). They must agree on
every input. model_sim.py: a small budget lowers the batches in flight
and the run goes on (no deadlock), and the output says how often the
budget held the window."""
import itertools
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
MODEL_SIM = os.path.join(ROOT, "bench", "scale", "model_sim.py")


def test_window_rule_agrees_with_ray():
    _sluice = pytest.importorskip("sluice._sluice", reason="sluice module not built")
    ray_mod = pytest.importorskip("sluice.ray")
    sim = _sluice._sim_remote_window
    grid = itertools.product(
        (0, 1, 8, 64, 1000),                      # count
        (0, 1, 999, 1000, 7999, 8000, 64000, 1 << 40),  # budget
        (0, 1, 1000, 3333, 1 << 30),              # batch bytes
        (0, 1, 4, 16),                            # live
        (1, 2, 8))                                # chunk
    n = 0
    seen = set()
    for count, budget, bb, live, chunk in grid:
        want = ray_mod._window(count, budget, bb, live, chunk)
        got = sim(count, budget, bb, live, chunk)
        assert got == want, (count, budget, bb, live, chunk, got, want)
        n += 1
        if budget and bb:  # which branch of the rule decided
            seen.add("count" if want == count else "floor" if want == live * chunk
                     else "budget")
    assert n > 2000 and len(seen) == 3, seen


def model_sim(tmp_path, name, *args):
    sluice = os.environ.get("SLUICE")
    if not sluice:
        pytest.skip("SLUICE not set")
    out = tmp_path / (name + ".json")
    r = subprocess.run([sys.executable, MODEL_SIM, "--sluice", sluice, "--seeds", "1",
                        "--json", str(out), *args],
                       check=True, capture_output=True, text=True, timeout=300)
    return json.load(open(out)), r.stdout


def test_model_sim_budget_lowers_in_flight(tmp_path):
    # 16 preparers, chunk 4 x depth 2: a count window of 128 batches,
    # one chunk per preparer 64
    d, text = model_sim(tmp_path, "b", "--sweeps", "5", "--chunk", "4",
                        "--duration", "10")
    rows = d["budget"]
    none, low = rows[0], rows[-1]
    assert none["object_store_bytes"] == 0 and low["object_store_bytes"] == 1
    assert none["window"] == 128 and none["budget_held_share"] == 0
    # 1 byte: below one chunk per preparer, the floor
    assert low["window"] == 64 and low["budget_held_share"] > 0.5
    assert low["in_flight"] < 0.75 * none["in_flight"], (low, none)
    assert 0 <= low["chunk_held"] < 4
    # no deadlock: every preparer still gets a whole chunk
    assert low["rate"] > 0.5 * none["rate"], (low, none)
    # the budget of the whole count changes nothing
    assert rows[1]["window"] == 128 and rows[1]["rate"] == none["rate"]
    assert "budget held" in text and "| 1 B | 64 |" in text


def test_model_sim_flag_sets_the_budget(tmp_path):
    # --object-store-bytes in sweeps 1-4: counted and said at the end
    off, _ = model_sim(tmp_path, "off", "--sweeps", "4", "--duration", "4")
    on, text = model_sim(tmp_path, "on", "--sweeps", "4", "--duration", "4",
                         "--object-store-bytes", "1")
    assert off["budget_held"]["held"] == 0 and off["budget_held"]["hand_outs"] > 0
    assert on["budget_held"]["held"] > 0
    assert "the byte budget held the window at" in text
    # a negative budget is refused
    r = subprocess.run([sys.executable, MODEL_SIM, "--sluice", os.environ["SLUICE"],
                        "--object-store-bytes", "-1"], capture_output=True, text=True)
    assert r.returncode != 0 and "object-store-bytes" in r.stderr
