"""sluice.Loader(max_memory=...): a memory budget from Python (issue 14
item 10). Holding more batches than the budget holds fails next() instead
of growing the pool; without a budget, growing past 256 held batches says
so (ResourceWarning) instead of silently heading for 4096 buffers; under
a cgroup's default budget the warning names that budget, not max_memory."""
import os
import subprocess
import sys
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
    # "pass max_memory" with no budget in force; in a container with a
    # memory limit, the default budget named instead (below)
    assert any(issubclass(x.category, ResourceWarning) and
               ("pass max_memory" in str(x.message) or
                "(the default: 1/2 of the cgroup" in str(x.message))
               for x in w)


def _cgroup_200m():
    """A fresh memory cgroup limited to 200 MB (v1, or v2 with memory for
    children), its folder; None where none can be made (not root)."""
    v1 = "/sys/fs/cgroup/memory"
    try:
        if os.access(v1 + "/cgroup.procs", os.W_OK):
            g, limit = "%s/sluice-py-%d" % (v1, os.getpid()), "memory.limit_in_bytes"
        elif "memory" in open("/sys/fs/cgroup/cgroup.subtree_control").read().split():
            g, limit = "/sys/fs/cgroup/sluice-py-%d" % os.getpid(), "memory.max"
        else:
            return None
        os.mkdir(g)
    except OSError:
        return None
    try:
        with open(os.path.join(g, limit), "w") as f:
            f.write("200M\n")
    except OSError:
        os.rmdir(g)
        return None
    return g


def test_default_budget_growth_warning(ds):
    """Under a cgroup's default budget (half its 200 MB limit) the warning
    past 256 held batches names that budget and where it came from; it
    said "pass max_memory to bound it", as if nothing bounded the pool."""
    g = _cgroup_200m()
    if g is None:
        pytest.skip("no writable cgroup memory controller here (not root, or none mounted)")
    script = """
import sys, warnings, sluice
ld = sluice.Loader(sys.argv[1], 1, 8, seed=1, threads=1, prefetch=2)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    held = list(ld)
print(len(held))
for x in w:
    if issubclass(x.category, ResourceWarning):
        print(x.message)
"""
    join = lambda: open(os.path.join(g, "cgroup.procs"), "w").write("%d\n" % os.getpid())
    env = dict(os.environ)  # the sluice this test imported
    here = os.path.dirname(os.path.dirname(sluice.__file__))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    try:
        r = subprocess.run([sys.executable, "-c", script, ds], preexec_fn=join, env=env,
                           capture_output=True, text=True, timeout=60)
    finally:
        os.rmdir(g)
    print(r.stdout, r.stderr)
    assert r.returncode == 0
    assert r.stdout.split("\n")[0] == "300"
    assert "256 batches held, the pool grows with them up to the memory budget of 100 MB " \
        "(the default: 1/2 of the cgroup's memory limit of 200 MB" in r.stdout
    assert "pass max_memory" not in r.stdout
