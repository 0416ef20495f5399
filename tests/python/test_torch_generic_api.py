"""sluice.torch.DataLoader in generic mode (dataset=) as a PyTorch user
meets it: batch_size=None, close(), multiprocessing_context, torch's
argument checks, and resuming with set_epoch. Small in-memory datasets:
quick (the spawn case starts two Python processes)."""
import gc
import multiprocessing
import os

import pytest

sluice = pytest.importorskip("sluice", reason="sluice module not built")
torch = pytest.importorskip("torch", reason="no torch")
import sluice.torch as st  # noqa: E402

# Set in the test process only: a forked worker sees it, a spawned one
# (which imports this module afresh) does not.
PARENT_ONLY = {"mark": None}


class Numbers(torch.utils.data.Dataset):
    def __init__(self, n=20):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((3,), float(i)), PARENT_ONLY["mark"] or "fresh"


class Tensors(Numbers):
    """Tensors and ints only: batches go through the shared memory slots."""

    def __getitem__(self, i):
        return torch.full((3,), float(i)), i


def shm_names():
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


def test_batch_size_none_turns_batching_off():
    """torch's batch_size=None: one sample at a time, not batches of one
    (before, None was taken for "not given" and became 1)."""
    ds = Numbers(4)
    want = list(torch.utils.data.DataLoader(ds, batch_size=None))
    got = list(st.DataLoader(ds, batch_size=None))
    assert len(got) == len(want) == 4
    for (x, m), (wx, wm) in zip(got, want):
        assert x.shape == wx.shape == (3,) and torch.equal(x, wx) and m == wm
    assert len(st.DataLoader(ds, batch_size=None)) == 4
    b = list(st.DataLoader(ds))  # not given: 1, as torch's
    assert b[0][0].shape == (1, 3)


def test_close_stops_workers_and_frees_shared_memory():
    """close() in generic mode stops the workers and frees their shared
    memory (before, it did nothing there), and iterating afterwards raises
    instead of starting workers nothing would clean up."""
    l = st.DataLoader(Tensors(), batch_size=4, num_workers=2,
                      persistent_workers=True)
    assert len(list(l)) == 5
    mine = {s.name for s in l._generic._state["slots"].shms}
    assert mine and mine <= shm_names()
    assert multiprocessing.active_children()
    l.close()
    assert not multiprocessing.active_children()
    assert not mine & shm_names()
    with pytest.raises(ValueError, match="closed"):
        iter(l)
    l.close()  # twice: nothing
    del l
    gc.collect()
    assert not multiprocessing.active_children()


def test_multiprocessing_context_is_honoured():
    """multiprocessing_context="spawn" starts the workers with spawn (a
    global set after import is not in them), with the same stream as
    fork's (before, fork was used whatever was asked, without a word)."""
    PARENT_ONLY["mark"] = "forked"
    try:
        got = {}
        for ctx in (None, "spawn"):
            l = st.DataLoader(Numbers(), batch_size=4, num_workers=2,
                              shuffle=True, seed=7, multiprocessing_context=ctx)
            got[ctx] = [(x, m) for x, m in l]
            l.close()
    finally:
        PARENT_ONLY["mark"] = None
    assert all(m == ("forked",) * 4 for _, m in got[None])
    assert all(m == ("fresh",) * 4 for _, m in got["spawn"])
    assert [torch.equal(a, b) for (a, _), (b, _) in zip(got[None], got["spawn"])] == [True] * 5
    with pytest.raises(ValueError, match="start method"):
        st.DataLoader(Numbers(), num_workers=1, multiprocessing_context="nope")
    with pytest.raises(TypeError, match="context object"):
        st.DataLoader(Numbers(), num_workers=1, multiprocessing_context=3)


@pytest.mark.parametrize("kw,what", [
    ({"batch_size": 0}, "batch_size should be a positive integer"),
    ({"batch_size": -2}, "batch_size should be a positive integer"),
    ({"batch_size": "2"}, "batch_size should be a positive integer"),
    ({"timeout": -1, "num_workers": 1}, "timeout option should be non-negative"),
    ({"prefetch_factor": 0, "num_workers": 1}, "prefetch_factor should be a positive"),
    ({"drop_last": "no"}, "drop_last should be a boolean value, but got drop_last='no'"),
])
def test_torchs_argument_checks(kw, what):
    """Refused at construction with torch's words (before: a
    ZeroDivisionError from len(), or accepted silently)."""
    with pytest.raises(ValueError, match=what):
        st.DataLoader(Numbers(), **kw)


def test_resume_then_set_epoch():
    """load_state_dict, then set_epoch of the loaded epoch: the rest of it;
    set_epoch of another epoch: that epoch whole (before, the loaded
    epoch's rest was streamed under the other epoch's number)."""
    def make():
        return st.DataLoader(Numbers(28), batch_size=4, shuffle=True, seed=5)
    ref = make()
    e0, e1, e2 = ([x for x, _ in ref] for _ in range(3))
    a = make()
    it = iter(a)
    for _ in range(3):
        next(it)
    sd = a.state_dict()
    del it
    b = make()
    b.load_state_dict(sd)
    b.set_epoch(0)
    rest = [x for x, _ in b]
    assert len(rest) == 4 and all(torch.equal(x, y) for x, y in zip(rest, e0[3:]))
    c = make()
    c.load_state_dict(sd)
    c.set_epoch(2)
    got = [x for x, _ in c]
    assert len(got) == 7 and all(torch.equal(x, y) for x, y in zip(got, e2))
    del e1
