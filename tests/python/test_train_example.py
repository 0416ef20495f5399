"""examples/train.py runs a few real training steps with each loader (the
README's example must not rot): JSON summary, finite loss, the steps asked."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import synthetic_folder

pytest.importorskip("torch")
pytest.importorskip("torchvision")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "train", images=48, classes=4)


@pytest.mark.parametrize("loader", ["torch", "sluice", "sluice-generic"])
def test_train_example_runs(folder, loader):
    built = Path(os.environ["SLUICE"]).parent / "python"
    if not (built / "sluice").is_dir() and loader != "torch":
        pytest.skip("sluice module not built")
    env = dict(os.environ, PYTHONPATH=str(built))
    p = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train.py"), "--loader", loader,
         "--data", folder, "--steps", "3", "--warmup", "1", "--batch", "8", "--size", "32",
         "--workers", "1", "--json"],
        env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["loader"] == loader and r["steps"] == 3 and r["samples_per_s"] > 0
    assert math.isfinite(r["final_loss"])
