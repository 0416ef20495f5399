"""sluice.Loader(max_memory=...): a memory budget from Python (issue 14
item 10). Holding more batches than the budget holds fails next() instead
of growing the pool; without a budget, growing past 256 held batches says
so (ResourceWarning) instead of silently heading for 4096 buffers."""
import warnings

import pytest
from conftest import synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")

RESERVE = 32 << 20  # sched/limits.h: the least working memory of a budget


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "mem", 300, 2)


def test_budget_bounds_what_is_held(ds):
    batch_bytes = 16 * 32 * 32 * 3
    ld = sluice.Loader(ds, 16, 32, seed=1, threads=1, prefetch=2,
                       max_memory=RESERVE + 3 * batch_bytes)
    held = []
    with pytest.raises(Exception) as e:
        for b in ld:
            held.append(b)
    assert len(held) == 3  # the budget's three buffers, then an error
    assert "held" in str(e.value)


def test_budget_must_be_positive(ds):
    with pytest.raises(ValueError):
        sluice.Loader(ds, 16, 32, max_memory=0)


def test_unbudgeted_growth_warns(ds):
    ld = sluice.Loader(ds, 1, 8, seed=1, threads=1, prefetch=2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        held = list(ld)
    assert len(held) == 300
    assert any(issubclass(x.category, ResourceWarning) and
               "max_memory" in str(x.message) for x in w)
