"""bench/peers (issue 6): the suite's harness, run for real on a small
generated ImageFolder with the loaders the project venv has (sluice through
torch, numpy, the CLI and tf.data; torch's DataLoader when torchvision is there; a
peer that is not installed must appear with its error, never be dropped),
and its correctness check, which must catch a loader that loses or repeats
images or delivers the wrong shape."""
import importlib.util
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout

import pytest
from conftest import synthetic_folder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEERS = os.path.join(ROOT, "bench", "peers")
SLUICE = os.environ.get("SLUICE")
BUILD = os.path.dirname(SLUICE) if SLUICE else None

sys.path.insert(0, os.path.join(PEERS, "loaders"))
import _common as C  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "peers", 48, 3)


def _have(mod):
    return importlib.util.find_spec(mod) is not None


def test_suite_runs_and_reports_every_loader(folder, tmp_path):
    if not os.path.isdir(os.path.join(BUILD, "python", "sluice")):
        pytest.skip("sluice Python module not built")
    loaders = ["sluice", "sluice-numpy", "sluice-cli"]
    if _have("torchvision"):
        loaders.append("torch")
    if _have("tensorflow"):
        loaders.append("sluice-tf")
    missing = "dali" if not _have("nvidia.dali") else None
    if missing:
        loaders.append(missing)
    out = tmp_path / "full.json"
    cmd = [sys.executable, os.path.join(PEERS, "run.py"), "--loaders", ",".join(loaders),
           "--data", folder, "--python", sys.executable, "--sluice-build", BUILD,
           "--batch", "16", "--size", "64", "--epochs", "2", "--repeats", "2",
           "--torch-workers", "1", "--timeout", "240", "--workdir", str(tmp_path / "w"),
           "--json", "--json-out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    got = res["loaders"]
    assert set(got) == set(loaders)  # nothing dropped
    for name in loaders:
        e = got[name]
        if name == missing:
            assert "error" in e and e["error"], e  # reported with its cause
            continue
        assert "error" not in e, (name, e)
        assert e["correct"], (name, e["correctness_errors"])
        assert e["runs"] == 2 and e["img_s"] > 0 and e["peak_pss_mb"] > 0
        assert e["cpu_s_per_img"] and e["cpu_s_per_img"] > 0
        if name != "sluice-cli":
            assert e["first_batch_s"] is not None and e["first_batch_s"] > 0
    # the sluice rows carry their ratio and a paired t-test against sluice
    full = json.loads(out.read_text())
    assert len(full["runs"]["sluice"]["sluice"]) == 2
    assert "sluice vs peer loaders" in p.stdout and "sluice-numpy" in p.stdout


class _Args:
    data = None
    out = "uint8"
    batch = 4
    size = 8
    epochs = 1
    step_ms = 0.0


def _measure(folder, batches):
    import numpy as np

    a = _Args()
    a.data = folder
    buf = io.StringIO()
    with redirect_stdout(buf):
        C.measure(a, lambda: batches, lambda L, e: L,
                  lambda b: ("uint8", b[0], np.asarray(b[1])), version="t", config="t")
    return json.loads(buf.getvalue().strip().splitlines()[-1])


def _labels(folder):
    return [lab for _p, lab in C.list_imagefolder(folder)[1]]


def test_check_passes_an_exact_epoch(folder):
    labs = _labels(folder)
    bs = [((len(labs[i:i + 4]), 3, 8, 8), labs[i:i + 4]) for i in range(0, len(labs), 4)]
    r = _measure(folder, bs)
    assert r["ok"] and r["images"] == len(labs) and r["n_errors"] == 0


def test_check_catches_lost_repeated_and_misshapen(folder):
    labs = _labels(folder)
    bs = [((len(labs[i:i + 4]), 3, 8, 8), labs[i:i + 4]) for i in range(0, len(labs), 4)]
    lost = _measure(folder, bs[:-1])
    assert not lost["ok"] and any("images delivered" in e for e in lost["errors"])
    rep = list(bs)
    rep[-1] = rep[0]  # same image count, wrong images
    r = _measure(folder, rep)
    assert not r["ok"] and any("classes over" in e for e in r["errors"])
    bad = list(bs)
    bad[0] = ((4, 8, 8, 3), bs[0][1])  # HWC where CHW is due
    r = _measure(folder, bad)
    assert not r["ok"] and any("shape" in e for e in r["errors"])
