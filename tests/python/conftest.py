"""Shared helpers of the Python tests."""
import os
import subprocess
import sys

import pytest

# This build's Python package (BUILD/python, beside the CLI that $SLUICE
# names) goes first on sys.path, before any test file is collected, so
# each file's `pytest.importorskip("sluice")` imports this build's, not an
# installed one. PYDIR: that folder, or None (a subprocess's PYTHONPATH).
_cli = os.environ.get("SLUICE")
PYDIR = os.path.join(os.path.dirname(_cli), "python") if _cli else None
if PYDIR and os.path.isdir(os.path.join(PYDIR, "sluice")):
    sys.path.insert(0, PYDIR)


def synthetic_folder(tmp_path_factory, name, images, classes):
    """A generated ImageFolder (`sluice make-dataset --synthetic`) of
    `images` JPEGs in `classes` classes; skips when SLUICE is not set."""
    sluice = os.environ.get("SLUICE")
    if not sluice:
        pytest.skip("SLUICE not set")
    d = str(tmp_path_factory.mktemp(name) / "ds")
    subprocess.run([sluice, "make-dataset", "--synthetic", d, "--images", str(images),
                    "--classes", str(classes)], check=True, capture_output=True)
    return d


SERVER = os.path.join(os.path.dirname(__file__), "..", "e2e", "faulty_http.py")


def remote_tars(tmp_path_factory, name, images, classes, *extra):
    """A synthetic set packed as WebDataset tars (with sidecar indexes) in
    ROOT/wds, served on 127.0.0.1 by tests/e2e/faulty_http.py (range
    requests; `extra`: its options, e.g. "--delay-ms", "2"). A generator for
    a fixture: yields (root, base URL, brace pattern of the tars); the
    server stops after. Skips when SLUICE is not set or sluice was built
    without libcurl."""
    import sys
    import time
    sluice = os.environ.get("SLUICE")
    if not sluice:
        pytest.skip("SLUICE not set")
    root = tmp_path_factory.mktemp(name)
    r = subprocess.run([sluice, "run", "http://127.0.0.1:1/x.tar"],
                       capture_output=True, text=True)
    if "built without libcurl" in r.stderr:
        pytest.skip("sluice built without libcurl: " + r.stderr.strip())
    subprocess.run([sluice, "make-dataset", "--synthetic", str(root / "ds"),
                    "--images", str(images), "--classes", str(classes)],
                   check=True, capture_output=True)
    subprocess.run([sluice, "pack", str(root / "ds"), str(root / "wds"),
                    "--format", "webdataset", "--shard-size", "600K"],
                   check=True, capture_output=True)
    n = len([f for f in os.listdir(root / "wds") if f.endswith(".tar")])
    pat = "wds/shard-{000000..%06d}.tar" % (n - 1)
    port = root / "port"
    p = subprocess.Popen([sys.executable, SERVER, str(root), str(port), *extra],
                         stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if port.exists():
                break
            time.sleep(0.05)
        yield root, f"http://127.0.0.1:{port.read_text()}", pat
    finally:
        p.terminate()
        p.wait()
