"""Remote sources from Python (issue 15 item 1): sluice.Loader(URL) over
WebDataset tars and sluice shards served on 127.0.0.1 by the test's own
range-capable server (tests/e2e/faulty_http.py, without faults) gives the
batches of the same files read locally; a missing URL raises naming it.
Skips when sluice was built without libcurl."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

SLUICE = os.environ.get("SLUICE")
PYDIR = os.path.join(os.path.dirname(SLUICE), "python") if SLUICE else None
if PYDIR and os.path.isdir(os.path.join(PYDIR, "sluice")):
    sys.path.insert(0, PYDIR)
sluice = pytest.importorskip("sluice", reason="sluice module not built")
SERVER = os.path.join(os.path.dirname(__file__), "..", "e2e", "faulty_http.py")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    if not SLUICE:
        pytest.skip("SLUICE not set")
    root = tmp_path_factory.mktemp("www")
    r = subprocess.run([SLUICE, "run", "http://127.0.0.1:1/x.tar"],
                       capture_output=True, text=True)
    if "built without libcurl" in r.stderr:
        pytest.skip("sluice built without libcurl: " + r.stderr.strip())
    subprocess.run([SLUICE, "make-dataset", "--synthetic", str(root / "ds"),
                    "--images", "24", "--classes", "3"], check=True,
                   capture_output=True)
    subprocess.run([SLUICE, "pack", str(root / "ds"), str(root / "wds"),
                    "--format", "webdataset", "--shard-size", "600K"],
                   check=True, capture_output=True)
    port = root / "port"
    p = subprocess.Popen([sys.executable, SERVER, str(root), str(port)],
                         stderr=subprocess.DEVNULL)
    for _ in range(100):
        if port.exists():
            break
        time.sleep(0.05)
    yield root, f"http://127.0.0.1:{port.read_text()}"
    p.terminate()
    p.wait()


def batches(src):
    out = []
    with sluice.Loader(src, batch_size=4, seed=7) as L:
        for b in L:
            out.append((np.array(b[0]).copy(), np.array(b[1]).copy()))
    return out


def test_loader_url_equals_local(served):
    root, url = served
    n = len([f for f in os.listdir(root / "wds") if f.endswith(".tar")])
    pat = "wds/shard-{000000..%06d}.tar" % (n - 1)
    local, remote = batches(str(root / pat)), batches(f"{url}/{pat}")
    assert len(local) == len(remote) == 6
    for (a, la), (b, lb) in zip(local, remote):
        assert np.array_equal(a, b) and np.array_equal(la, lb)


def test_missing_url_names_it(served):
    _, url = served
    with pytest.raises(Exception, match="nothere.tar.*404"):
        sluice.Loader(f"{url}/wds/nothere.tar", batch_size=4)
