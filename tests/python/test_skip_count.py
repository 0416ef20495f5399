"""sluice.Loader's skip count and list: only samples of batches the
consumer was handed. The Loader runs the engine for many epochs and ends
an iteration itself, so batches of the next epoch are read ahead; their
skips were counted as they were decoded (11 of 8 over one epoch, 'epoch 1:'
in skipped()), where `sluice run` said 8. Also: files in a format sluice
does not decode are one warning in skipped(), not a skip."""
import json
import os
import shutil
import subprocess
import time

import pytest
from conftest import synthetic_folder

SLUICE = os.environ.get("SLUICE")
sluice = pytest.importorskip("sluice", reason="sluice module not built")

B, S, BAD = 8, 32, 8


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """20 good JPEGs in 2 classes and 8 text files named .jpg in one."""
    ds = synthetic_folder(tmp_path_factory, "src", 20, 2)
    d = str(tmp_path_factory.mktemp("many") / "ds")
    shutil.copytree(ds, d)
    cls = sorted(os.listdir(d))[0]
    for i in range(BAD):
        with open(os.path.join(d, cls, f"bad{i}.jpg"), "w") as f:
            f.write(f"not an image {i}\n")
    return d


def cli_skipped(src, *args):
    r = subprocess.run([SLUICE, "run", src, "--on-error", "skip", "--json",
                        "--batch", str(B), "--size", str(S), *args],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("{")][-1]
    return json.loads(line)["errors_skipped"]


@pytest.mark.parametrize("epochs", [1, 2])
def test_skips_of_the_epochs_asked_for(many, epochs):
    L = sluice.Loader(many, B, S, on_error="skip", epochs=epochs, prefetch=8)
    n = sum(len(y) for _, y in L)
    assert n == 20 * epochs
    time.sleep(0.3)  # the read-ahead into the next epoch decodes meanwhile
    skipped = L.skipped()
    assert L.stats()["errors_skipped"] == BAD * epochs, skipped
    assert len(skipped) == BAD * epochs
    for e in range(epochs):
        assert sum(m.startswith(f"epoch {e}: ") for m in skipped) == BAD
    assert cli_skipped(many, "--epochs", str(epochs)) == BAD * epochs
    # The next iteration continues the same pipeline: its skips count once.
    n = sum(len(y) for _, y in L)
    assert n == 20 * epochs
    assert L.stats()["errors_skipped"] == 2 * BAD * epochs
    L.close()


def test_foreign_formats_warned(many, tmp_path):
    d = str(tmp_path / "ds")
    shutil.copytree(many, d)
    cls = sorted(os.listdir(d))[1]
    for ext in ("webp", "bmp", "tif"):
        with open(os.path.join(d, cls, f"x.{ext}"), "wb") as f:
            f.write(b"\0" * 16)
    L = sluice.Loader(d, B, S, on_error="skip")
    assert sum(len(y) for _, y in L) == 20
    warn = [m for m in L.skipped() if "does not decode" in m]
    assert len(warn) == 1
    assert warn[0].startswith("warning: 3 files in a format sluice does not "
                              "decode (.bmp 1, .tif 1, .webp 1; JPEG and PNG "
                              "only) left out, the first: ")
    assert L.stats()["errors_skipped"] == BAD
    L.close()
