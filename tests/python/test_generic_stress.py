"""Generic mode under stress (issue 14 item 4): 16 worker processes, many
epochs, workers killed with SIGKILL mid-epoch, early breaks, persistent and
per-epoch workers, pin_memory requested. Every epoch either delivers every
sample exactly once, or stops with a RuntimeError naming the dead worker and
the sample it was loading; no hang; at the end no shared-memory segment of
the loaders is left in /dev/shm and no worker process is alive.

Short by default (about 30 s on 2 cores, 8 epochs); SL_GENERIC_STRESS_EPOCHS=200 for a
long run."""

import gc
import importlib.util
import multiprocessing
import os
import random
import re
import signal
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "sluice_generic_stress", ROOT / "python" / "sluice" / "_generic.py")
_generic = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _generic
_spec.loader.exec_module(_generic)

EPOCHS = int(os.environ.get("SL_GENERIC_STRESS_EPOCHS", "8"))
WORKERS = 16
N, B = 192, 8
DEATH = re.compile(r"sluice GenericLoader worker (\d+) \(pid \d+\) was killed by signal "
                   r"SIGKILL unexpectedly (while loading dataset\[(\d+)\]|between samples)")


class Augmented(torch.utils.data.Dataset):
    """Small images with a random crop offset and flip (the worker's RNG),
    and a short wait so that workers are busy when one is killed."""

    def __len__(self):
        return N

    def __getitem__(self, i):
        time.sleep(0.002)
        x = torch.full((3, 12, 12), i % 251, dtype=torch.uint8)
        if torch.rand(()) < 0.5:
            x = x.flip(-1)
        o = int(torch.randint(0, 5, ()))
        return x[:, o:o + 8, o:o + 8].clone(), i


def shm_exists(name):
    return os.path.exists("/dev/shm/" + name)


def kill_a_busy_worker(ld, wait=2.0):
    """SIGKILLs a worker that is loading a sample (waits up to `wait` s for
    one; with the prefetch window full all may be idle). @return its id, or
    None."""
    pool = ld._state["pool"]
    cur = getattr(pool, "cur", {})
    end = time.monotonic() + wait
    while time.monotonic() < end:
        busy = [(wid, p) for wid, (p, _) in pool.workers.items()
                if wid in cur and cur[wid][0] >= 0]
        if busy:
            wid, p = busy[0]
            os.kill(p.pid, signal.SIGKILL)
            return wid
        time.sleep(0.001)
    return None


@pytest.mark.parametrize("persistent", [False, True])
def test_many_epochs_with_kills_and_breaks(persistent):
    rng = random.Random(1234 + persistent)
    ld = _generic.GenericLoader(Augmented(), batch_size=B, shuffle=True, seed=7,
                                num_workers=WORKERS, persistent_workers=persistent,
                                pin_memory=True, timeout=60)
    names = set()
    kills = named = 0
    # A worker killed just after it handed its sample over (`cur` not yet
    # updated) loses nothing: that epoch ends whole and, with persistent
    # workers, the death is reported by the next one.
    unreported = None
    t0 = time.monotonic()
    for epoch in range(EPOCHS):
        act = ("kill", "full", "break")[epoch % 3] if epoch < 3 else rng.choice(
            ["kill", "full", "full", "break"])
        stop_at = rng.randint(1, N // B - 2)
        seen = []
        try:
            for k, (x, y) in enumerate(ld):
                assert x.shape == (len(y), 3, 8, 8) and x.dtype == torch.uint8
                assert torch.equal(x[:, 0, 0, 0].long(), y % 251)
                seen += y.tolist()
                names |= {s.name for s in ld._state["slots"].shms}
                if act == "break" and k == stop_at:
                    break
                if act == "kill" and k == stop_at:
                    victim = kill_a_busy_worker(ld)
                    if victim is None:
                        act = "full"
        except RuntimeError as e:
            m = DEATH.search(str(e))
            assert (act == "kill" or unreported is not None) and m, f"epoch {epoch} ({act}): {e}"
            assert int(m.group(1)) in (victim if act == "kill" else None, unreported)
            unreported = None
            kills += 1
            if m.group(3) is not None:
                assert 0 <= int(m.group(3)) < N
                named += 1
            continue
        if act in ("full", "kill"):
            assert sorted(seen) == list(range(N)), f"epoch {epoch}: samples lost or repeated"
        if act == "kill" and persistent:
            unreported = victim
        elif not persistent:
            unreported = None
    assert kills >= 1 and named >= 1, (kills, named)
    live = {s.name for s in ld._state["slots"].shms}
    assert live and all(shm_exists(n) for n in live)
    ld.close()
    gc.collect()
    left = [n for n in names if shm_exists(n)]
    assert left == [], f"{len(left)} shared-memory segments left in /dev/shm"
    assert not multiprocessing.active_children()
    assert time.monotonic() - t0 < 60 * max(1, EPOCHS / 8)


def test_death_releases_shared_memory_when_dropped():
    """A loader whose worker died, dropped without close(): its segments go
    when it is collected."""
    ld = _generic.GenericLoader(Augmented(), batch_size=B, num_workers=4)
    it = iter(ld)
    next(it)
    names = {s.name for s in ld._state["slots"].shms}
    assert names
    victim = None
    with pytest.raises(RuntimeError, match=DEATH.pattern):
        for _ in it:
            if victim is None:
                victim = kill_a_busy_worker(ld, 0.05)
    assert victim is not None
    del it, ld
    gc.collect()
    assert [n for n in names if shm_exists(n)] == []
    assert not multiprocessing.active_children()


def test_full_dev_shm_degrades_to_pickled_batches(monkeypatch):
    """/dev/shm without room for a slot (before the reservation: a SIGBUS
    in a worker on first touch): a RuntimeWarning naming /dev/shm, every
    sample still delivered (pickled), and no segment left behind. With a
    real small tmpfs: test_generic_shm.py."""
    import errno

    def full(fd, off, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    before = set(os.listdir("/dev/shm"))
    monkeypatch.setattr(_generic.os, "posix_fallocate", full)
    ld = _generic.GenericLoader(Augmented(), batch_size=B, num_workers=2)
    with pytest.warns(RuntimeWarning, match=r"cannot reserve a .* batch slot in /dev/shm"):
        seen = sorted(i for _, y in ld for i in y.tolist())
    assert seen == list(range(N))
    assert len(ld._state["slots"].shms) == 0
    ld.close()
    assert not [n for n in set(os.listdir("/dev/shm")) - before if n.startswith("psm_")]
    assert not multiprocessing.active_children()
