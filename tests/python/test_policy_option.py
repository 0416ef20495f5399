"""sluice.Loader(policy=...): the scheduler policy from Python, as the CLI's
--policy (the scenario benchmarks drive sluice through it)."""
import os
import sys

import pytest
from conftest import synthetic_folder

SLUICE = os.environ.get("SLUICE")
PYDIR = os.path.join(os.path.dirname(SLUICE), "python") if SLUICE else None
if PYDIR and os.path.isdir(os.path.join(PYDIR, "sluice")):
    sys.path.insert(0, PYDIR)
sluice = pytest.importorskip("sluice", reason="sluice module not built")


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ds", 40, 2)


def test_policy_names(ds):
    assert sluice.Loader(ds, 8, 32).options["policy"] == "heuristic"
    for name in ("heuristic", "static"):
        l = sluice.Loader(ds, 8, 32, policy=name)
        assert l.options["policy"] == name
        assert sum(int(x.shape[0]) for x, _ in l) == 40


def test_static_keeps_the_knobs(ds):
    l = sluice.Loader(ds, 8, 32, policy="static", threads=1, read_threads=1,
                      prefetch=2, epochs=3)
    for _ in l:
        pass
    st = l.stats()
    assert (st["threads"], st["read_threads"], st["prefetch"]) == (1, 1, 2)


def test_bad_policy(ds):
    with pytest.raises(ValueError, match="policy"):
        sluice.Loader(ds, 8, 32, policy="bogus")
    with pytest.raises(ValueError, match="policy"):
        sluice.Loader(ds, 8, 32, policy=3)
