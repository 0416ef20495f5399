"""sluice.Loader(policy=...): the scheduler policy from Python, as the CLI's
--policy (the scenario benchmarks drive sluice through it)."""

import pytest
from conftest import synthetic_folder

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


def test_io_depth_and_budget_keywords(ds):
    """io_depth / max_threads / policy_file as the CLI's --io-depth,
    --max-threads and --policy-file."""
    def io(**kw):
        l = sluice.Loader(ds, 8, 32, policy="static", threads=1, read_threads=1,
                          prefetch=2, epochs=2, telemetry_ms=1, **kw)
        assert sum(int(x.shape[0]) for x, _ in l) == 80
        return l.stats()["telemetry"]["io"]
    on = io(io_depth=6)
    assert on["depth"] == 6 or not on["async"]  # io_uring refused here: blocking reads
    assert io(io_depth="off")["async"] == 0
    # the heuristic never goes past the thread budget (decode threads + 1)
    h = sluice.Loader(ds, 8, 32, max_threads=2, epochs=3)
    for _ in h:
        pass
    assert h.stats()["threads"] <= 1
    for bad in (0, "deep", 1.5):
        with pytest.raises((ValueError, TypeError), match="io_depth"):
            sluice.Loader(ds, 8, 32, io_depth=bad)
    with pytest.raises(ValueError, match="max_threads"):
        sluice.Loader(ds, 8, 32, max_threads=1)


def test_policy_file_is_read(ds, tmp_path):
    missing = tmp_path / "no-such-policy.bin"
    with pytest.raises(Exception, match="no-such-policy.bin"):
        l = sluice.Loader(ds, 8, 32, policy="rl", policy_file=str(missing))
        for _ in l:
            pass
