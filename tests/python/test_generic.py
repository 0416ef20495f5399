"""Generic mode (python/sluice/_generic.py): equality with torch's DataLoader,
resume, live worker changes, errors, clean shutdown."""

import importlib.util
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

ROOT = Path(__file__).resolve().parents[2]
PHOTOS = (ROOT / ".." / "shared" / "data" / "imagenet-sample").resolve()

# Load the module from its file: it needs neither the compiled extension nor
# the package's __init__ (which does).
_spec = importlib.util.spec_from_file_location(
    "sluice_generic_under_test", ROOT / "python" / "sluice" / "_generic.py")
_generic = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _generic
_spec.loader.exec_module(_generic)
GenericLoader = _generic.GenericLoader


def same(a, b):
    """Deep equality of collated batches (tensors bytes-equal, same types)."""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def assert_streams_equal(xs, ys):
    assert len(xs) == len(ys)
    for k, (x, y) in enumerate(zip(xs, ys)):
        assert same(x, y), f"batch {k} differs"


class Synth(torch.utils.data.Dataset):
    """Deterministic samples of several kinds; optional per-sample sleep."""

    def __init__(self, n=100, kind="tuple", sleep=0.0):
        self.n, self.kind, self.sleep = n, kind, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        img = torch.arange(48, dtype=torch.uint8).view(3, 4, 4) + i
        if self.kind == "tuple":
            return img, i
        if self.kind == "dict":
            return {"img": img.float(), "label": i, "w": i / 7.0,
                    "pair": (torch.tensor([i, -i]), np.full(3, i, dtype=np.int16))}
        if self.kind == "ragged":  # shapes vary: only a custom collate can batch it
            return torch.ones(i % 5 + 1) * i, f"name{i}"
        if self.kind == "random":  # an "augmentation": uses the worker's RNG
            return torch.rand(4), i
        raise ValueError(self.kind)


class Failing(Synth):
    def __getitem__(self, i):
        if i == 7:
            raise ValueError("bad record seven")
        return super().__getitem__(i)


def torch_loader(ds, **kw):
    return torch.utils.data.DataLoader(ds, **kw)


def shm_names():
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


# -- equality on real photos -------------------------------------------------

@pytest.fixture(scope="module")
def photos():
    tv = pytest.importorskip("torchvision")
    if not PHOTOS.is_dir():
        pytest.skip(f"no photo folder at {PHOTOS}")
    from torchvision import transforms as T
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    full = tv.datasets.ImageFolder(str(PHOTOS), transform=tf)
    # 120 photos spread over the classes: 7.5 batches of 16, so drop_last matters.
    return torch.utils.data.Subset(full, list(range(0, len(full), 8))[:120])


@pytest.mark.parametrize("drop_last,how", [(False, "generator"), (True, "seed")])
def test_equal_to_torch_on_photos(photos, drop_last, how):
    if how == "generator":
        ours = GenericLoader(photos, batch_size=16, shuffle=True, num_workers=2,
                             drop_last=drop_last, generator=torch.Generator().manual_seed(5))
    else:  # seed=s is documented as equal to generator=Generator().manual_seed(s)
        ours = GenericLoader(photos, batch_size=16, shuffle=True, num_workers=2,
                             drop_last=drop_last, seed=5)
    ref = torch_loader(photos, batch_size=16, shuffle=True, num_workers=2, drop_last=drop_last,
                       generator=torch.Generator().manual_seed(5))
    with ours:
        got = list(ours)
        assert ours.stats()["fast_batches"] == len(got) - 1  # shared-memory path used
    want = list(ref)
    assert len(got) == len(ours) == len(ref) == (7 if drop_last else 8)
    assert_streams_equal(got, want)


def test_global_rng_matches_torch_and_epochs_continue():
    ds = Synth(50)
    ours = GenericLoader(ds, batch_size=8, shuffle=True, num_workers=2)
    ref = torch_loader(ds, batch_size=8, shuffle=True, num_workers=2)
    torch.manual_seed(123)
    got = [list(ours), list(ours)]
    torch.manual_seed(123)
    want = [list(ref), list(ref)]
    assert_streams_equal(got[0], want[0])
    assert_streams_equal(got[1], want[1])
    assert not same(got[0][0], got[1][0])
    ours.close()


def test_generator_persistent_workers_two_epochs():
    ds = Synth(40)
    ours = GenericLoader(ds, batch_size=6, shuffle=True, num_workers=2, persistent_workers=True,
                         generator=torch.Generator().manual_seed(9))
    ref = torch_loader(ds, batch_size=6, shuffle=True, num_workers=2, persistent_workers=True,
                       generator=torch.Generator().manual_seed(9))
    for _ in range(2):
        assert_streams_equal(list(ours), list(ref))
    ours.close()


def test_sequential_sampler_and_custom_samplers():
    ds = Synth(37, "dict")
    for kw in ({"batch_size": 5}, {"batch_size": 5, "drop_last": True},
               {"batch_size": 4, "sampler": list(range(36, -1, -3))},
               {"batch_sampler": [[3, 1], [4, 1, 5, 9, 2], [6]]},
               {"batch_size": None}):
        with GenericLoader(ds, num_workers=2, **kw) as ours:
            assert_streams_equal(list(ours), list(torch_loader(ds, num_workers=0, **kw)))
    # In-process mode is torch's num_workers=0.
    ours = GenericLoader(ds, batch_size=5, num_workers=0)
    assert_streams_equal(list(ours), list(torch_loader(ds, batch_size=5)))


def test_dicts_tuples_ints_take_the_shared_memory_path():
    ds = Synth(64, "dict")
    with GenericLoader(ds, batch_size=8, num_workers=2) as ours:
        got = list(ours)
        st = ours.stats()
    assert_streams_equal(got, list(torch_loader(ds, batch_size=8)))
    assert st["fast_batches"] >= 6 and st["slots"] > 0


def test_custom_collate_and_ragged_samples():
    ds = Synth(30, "ragged")

    def collate(batch):
        return [x.sum().item() for x, _ in batch], [name for _, name in batch]

    with GenericLoader(ds, batch_size=4, num_workers=2, collate_fn=collate) as ours:
        got = list(ours)
        assert ours.stats()["fast_batches"] == 0
    assert got == list(torch_loader(ds, batch_size=4, collate_fn=collate))


def test_set_workers_mid_epoch_keeps_the_stream():
    ds = Synth(96, "random", sleep=0.004)
    ref = list(GenericLoader(ds, batch_size=8, shuffle=True, seed=1, num_workers=1))
    ours = GenericLoader(ds, batch_size=8, shuffle=True, seed=1, num_workers=2)
    got, counts = [], []
    for k, b in enumerate(ours):
        got.append(b)
        if k == 2:
            ours.set_workers(3)
        if k == 5:
            ours.set_workers(1)
        if k == 8:
            ours.set_workers(2)
        counts.append(ours.stats()["workers"])
    assert_streams_equal(got, ref)  # random "augmentations" included
    assert 3 in counts and 1 in counts
    ours.close()
    assert not multiprocessing.active_children()


@pytest.mark.parametrize("mode", ["seed", "generator", "global"])
def test_resume_mid_epoch(mode):
    ds = Synth(70, "random")

    def make():
        kw = {"seed": 4} if mode == "seed" else (
            {"generator": torch.Generator().manual_seed(4)} if mode == "generator" else {})
        return GenericLoader(ds, batch_size=8, shuffle=True, num_workers=2, **kw)

    torch.manual_seed(77)
    a = make()
    first = list(a)  # epoch 0
    full = list(a)   # epoch 1, uninterrupted
    torch.manual_seed(77)
    b = make()
    list(b)
    it = iter(b)
    head = [next(it) for _ in range(3)]
    sd = b.state_dict()
    assert sd["epoch"] == 1 and sd["batches_done"] == 3
    del it
    b.close()
    torch.manual_seed(1000)  # whatever the global RNG did meanwhile
    c = make()
    c.load_state_dict(sd)
    rest = list(c)
    assert len(first) == len(full) == 9
    assert_streams_equal(head + rest, full)
    for x in (a, c):
        x.close()


def test_worker_exception_names_index_and_cause():
    with GenericLoader(Failing(20), batch_size=4, num_workers=2) as ours:
        got = []
        with pytest.raises(ValueError) as ei:
            for b in ours:
                got.append(b)
    assert len(got) == 1  # batches before the failing one arrive
    msg = str(ei.value)
    assert "dataset[7]" in msg and "bad record seven" in msg
    assert not multiprocessing.active_children()


def test_killed_worker_is_reported_without_hanging():
    ds = Synth(200, sleep=0.01)
    ours = GenericLoader(ds, batch_size=4, num_workers=2)
    it = iter(ours)
    next(it)
    pool = ours._state["pool"]
    victim = next(iter(pool.workers.values()))[0]
    t0 = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r"worker \d+ \(pid \d+\) was killed by signal SIGKILL"):
        for _ in it:
            pass
    assert time.monotonic() - t0 < 10
    ours.close()
    assert not multiprocessing.active_children()


def test_no_leaked_shared_memory_or_processes():
    # Checks this loader's own segments (other processes on the machine may
    # create and remove /dev/shm entries meanwhile).
    ds = Synth(64)
    ours = GenericLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    list(ours)
    mine = {s.name for s in ours._state["slots"].shms}
    assert mine and mine <= shm_names()  # slots exist while the loader lives
    it = iter(ours)
    next(it)  # abandoned mid-epoch
    del it, ours
    import gc
    gc.collect()
    assert mine & shm_names() == set()
    assert not multiprocessing.active_children()
    # close() after a finished epoch, and twice
    ours = GenericLoader(ds, batch_size=8, num_workers=2)
    list(ours)
    mine = {s.name for s in ours._state["slots"].shms}
    assert mine <= shm_names()
    ours.close()
    ours.close()
    assert mine & shm_names() == set()
    assert not multiprocessing.active_children()


def test_batches_lent_from_shared_memory_stay_valid_and_slots_recycle():
    # Fast-path batches view their shared-memory slot (no copy); a slot is
    # reused only once every tensor made from its batch is gone.
    ds = Synth(400)
    want = list(torch_loader(ds, batch_size=8))
    ours = GenericLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    kept = {}
    for k, b in enumerate(ours):  # most batches dropped at once, a few kept
        if k % 10 == 0:
            kept[k] = (b[0][2:5], b[1])  # views keep the slot too
    n_slots = ours.stats()["slots"]
    assert n_slots <= 2 * 2 * 2  # bounded ring: 2 x prefetch_factor x workers
    held = list(ours)  # keeping every batch: beyond the ring they are copies
    assert ours.stats()["slots"] == n_slots
    assert_streams_equal(held, want)
    for k, (img, lab) in kept.items():
        assert torch.equal(img, want[k][0][2:5]) and torch.equal(lab, want[k][1])
    ours.close()
    # Lent batches outlive the loader (segments unlinked, mappings kept).
    assert_streams_equal(held, want)
    assert not multiprocessing.active_children()
