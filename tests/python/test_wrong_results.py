"""Issue 14 item 11 through the Python binding: an epoch whose every sample
was skipped raises instead of ending as an empty epoch; an unordered loader
has positions only between epochs: a start inside an epoch is refused
(before, it began at a count of batches handed out, repeating some and never
yielding others)."""
import os
import subprocess
import sys

import pytest
from conftest import synthetic_folder

from conftest import PYDIR  # noqa: E402  (this build's package)
sluice = pytest.importorskip("sluice", reason="sluice module not built")

B, S = 16, 32


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ds", 96, 3)


def test_all_skipped_raises(tmp_path):
    """In a child with a deadline: before, the loader (which streams many
    epochs ahead) went through epoch after epoch of skips and never
    returned."""
    for c in ("a", "b"):
        os.makedirs(tmp_path / c)
        for i in range(3):
            (tmp_path / c / f"x{i}.jpg").write_bytes(b"not a jpeg")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import sluice\n"
            "ld = sluice.Loader(sys.argv[2], 2, 32, on_error='skip', "
            "threads=1)\n"
            "try:\n"
            "    n = sum(len(y) for _, y in ld)\n"
            "    print('no error,', n, 'samples')\n"
            "except sluice.Error as e:\n"
            "    print('raised:', e)\n")
    out = subprocess.run([sys.executable, "-c", code, PYDIR or "",
                          str(tmp_path)], capture_output=True, text=True,
                         timeout=120).stdout
    assert "raised:" in out and "every sample was skipped" in out, out


def test_unordered_positions(ds):
    ld = sluice.Loader(ds, B, S, seed=2, unordered=True, threads=2)
    nb = len(ld)
    assert nb == 6
    for _ in ld:
        break  # one batch of epoch 0 taken; the iteration stays open
    rest = [y for _, y in ld]  # its remaining batches, none twice
    assert len(rest) == nb - 1
    assert sum(len(y) for y in rest) == 96 - B
    assert ld.position == (1, 0)
    with pytest.raises(ValueError) as e:  # SL_EINVAL
        ld.start(0, 1)  # a count inside an epoch is no position here
    assert "ordered" in str(e.value)
    ld.start(1, 0)  # between epochs: fine
    assert sum(len(y) for _, y in ld) == 96
