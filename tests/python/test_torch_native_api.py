"""sluice.torch.DataLoader in native mode (source=) as a PyTorch user meets
it: one live iterator at a time (a superseded one says so), generator= and
torch's other arguments, dataset / skipped(), pin_memory's truth and
warning, argument errors that name the argument, a missing path that is a
FileNotFoundError. A small synthetic folder: quick."""
import errno
import os
import shutil
import warnings

import pytest
from conftest import synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")
torch = pytest.importorskip("torch", reason="no torch")
import sluice.torch as st  # noqa: E402

B, S = 16, 32  # 96 images: 6 batches an epoch


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ds", 96, 3)


@pytest.fixture(scope="module")
def bad(ds, tmp_path_factory):
    """Three good JPEGs and a truncated one, in two classes."""
    d = tmp_path_factory.mktemp("bad")
    good = sorted(os.path.join(r, f) for r, _, fs in os.walk(ds) for f in fs)
    for cls, names in (("a", ["ok1.jpg"]), ("b", ["ok2.jpg", "ok3.jpg"])):
        os.makedirs(d / cls)
        for n in names:
            shutil.copy(good.pop(), d / cls / n)
    with open(d / "a" / "broken.jpg", "wb") as f:
        f.write(open(good.pop(), "rb").read()[:300])
    return str(d)


def dl(ds, **kw):
    kw.setdefault("batch_size", B)
    kw.setdefault("image_size", S)
    return st.DataLoader(ds, **kw)


def labels(it):
    return [y.clone() for _, y in it]


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


# ------------------------------------------------- one iteration at a time

def test_torch_superseded_iterator_raises(ds):
    ref = dl(ds, seed=3)
    epoch0 = labels(ref)
    l = dl(ds, seed=3)
    i1 = iter(l)
    next(i1)
    i2 = iter(l)  # epoch 1 from its first batch
    with pytest.raises(RuntimeError, match=r"superseded by a newer iter\(loader\)"
                       r".*one iteration at a time.*two DataLoaders"):
        next(i1)
    # i1 took none of i2's batches: i2 is epoch 1, whole.
    assert same([y.clone() for _, y in i2], labels(ref))
    with pytest.raises(RuntimeError, match="superseded"):
        sum(1 for _ in zip(l, l))
    l.set_epoch(0)
    assert same(labels(l), epoch0)  # a plain loop afterwards: unchanged


def test_torch_load_state_dict_supersedes(ds):
    l = dl(ds, seed=4)
    it = iter(l)
    next(it)
    next(it)
    sd = l.state_dict()
    l.load_state_dict(sd)
    with pytest.raises(RuntimeError, match=r"superseded by load_state_dict\(\)"):
        next(it)
    assert len(labels(l)) == len(l) - 2  # the rest of that epoch


def test_torch_break_restart_and_set_epoch(ds):
    l = dl(ds, seed=5)
    e0 = labels(l)
    for i, _ in enumerate(l):  # epoch 1, left early
        if i == 1:
            break
    assert len(labels(l)) == len(l)  # epoch 2, whole
    l.set_epoch(0)
    got = []
    for i, (_, y) in enumerate(l):
        got.append(y.clone())
        if i == 0:
            l.set_epoch(0)  # for the next iteration; this one goes on
    assert same(got, e0)
    assert same(labels(l), e0)


# --------------------------------------------------- torch's arguments

def test_torch_generator_sets_seed(ds):
    g = torch.Generator().manual_seed(11)
    l = dl(ds, generator=g)
    want = int(torch.empty((), dtype=torch.int64)
               .random_(generator=torch.Generator().manual_seed(11)).item())
    assert l.seed == want != 0 and l.state_dict()["seed"] == want
    assert same(labels(l), labels(dl(ds, seed=want)))
    assert dl(ds).seed == 0  # no generator: DistributedSampler's default
    with pytest.raises(ValueError, match="seed or generator"):
        dl(ds, seed=1, generator=torch.Generator())


def test_torch_prefetch_factor(ds):
    l = dl(ds, num_workers=2, prefetch_factor=3, policy="static")
    assert l.loader.get("prefetch") == 6  # batches in flight: 3 x 2 threads
    with pytest.raises(TypeError, match="prefetch_factor"):
        dl(ds, prefetch_factor=2, prefetch=4)
    with pytest.raises(ValueError, match="prefetch_factor"):
        dl(ds, prefetch_factor=0)


def test_torch_timeout(ds):
    """timeout= bounds a wait for a batch, as torch's: RuntimeError naming
    it (a batch of 96 whole decodes on one thread takes ~0.2 s); a loader
    whose batches come in time is unaffected."""
    l = dl(ds, batch_size=96, num_workers=1, policy="static", dct_scale=False,
           dtype=torch.float32, timeout=0.02)
    with pytest.raises(RuntimeError, match="timed out after 0.02 seconds"):
        next(iter(l))
    l = dl(ds, batch_size=8, timeout=60)
    assert sum(len(y) for _, y in l) == 96
    with pytest.raises(ValueError, match="timeout"):
        dl(ds, timeout=-1)


@pytest.mark.parametrize("kw", [{"persistent_workers": True},
                                {"multiprocessing_context": "spawn"},
                                {"pin_memory_device": "cuda"}])
def test_torch_ignored_arguments_warn(ds, kw):
    name = next(iter(kw))
    with pytest.warns(UserWarning, match=f"{name}=.* does nothing in native mode"):
        dl(ds, **kw)


def test_torch_pin_memory(ds):
    doc = st.DataLoader.__doc__
    assert "no copy" in doc and "copies each batch" not in doc
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: pin_memory pins (test_host_alloc)")
    with pytest.warns(UserWarning, match="no accelerator is found"):
        l = dl(ds, pin_memory=True)
    assert not l.pin_memory
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dl(ds)  # no warning without pin_memory


# ------------------------------------------------- dataset and skipped()

def test_torch_dataset_view(ds):
    l = dl(ds, rank=1, world_size=2)
    d = l.dataset
    classes = sorted(os.listdir(ds))
    assert len(d) == 96 and d.root == ds  # the whole source, all ranks
    assert d.classes == classes
    assert d.class_to_idx == {c: i for i, c in enumerate(classes)}
    assert len(l) == 3


def test_torch_skipped(bad):
    l = dl(bad, batch_size=2, on_error="skip")
    assert l.skipped() == []
    n = sum(len(y) for _, y in l)
    assert n == 3
    assert any("broken.jpg" in m for m in l.skipped())
    assert "skipped()" in st.DataLoader.__doc__


# --------------------------------------------------------- bad arguments

@pytest.mark.parametrize("kw,err,match", [
    ({"epochs": 2}, TypeError, r"epochs is not a DataLoader argument.*"
                               r"once per epoch.*sluice\.Loader"),
    ({"image_size": (32, 48)}, ValueError, r"image_size=\(32, 48\).*square"),
    ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
    ({"batch_size": 0}, ValueError, "batch_size should be a positive integer"),
    ({"batch_size": 2.5}, ValueError, "batch_size should be a positive integer"),
    # torch's words; before, bool("no") made it True
    ({"drop_last": "no"}, ValueError,
     "drop_last should be a boolean value, but got drop_last='no'"),
    ({"threads": 2}, TypeError, "num_workers"),
])
def test_torch_bad_arguments_named(ds, kw, err, match):
    with pytest.raises(err, match=match):
        dl(ds, **kw)


def test_torch_square_tuple_size(ds):
    x, _ = next(iter(dl(ds, image_size=(S, S))))
    assert x.shape == (B, 3, S, S)


# ------------------------------------------------------------ missing path

def test_torch_missing_path_is_file_not_found(tmp_path):
    where = str(tmp_path / "does-not-exist")
    for make in (lambda: st.DataLoader(where), lambda: sluice.Loader(where)):
        with pytest.raises(FileNotFoundError) as e:
            make()
        assert isinstance(e.value, sluice.Error)
        assert isinstance(e.value, sluice.NotFoundError)
        assert e.value.errno == errno.ENOENT
        assert e.value.code == sluice._sluice.ENOTFOUND
        assert "does-not-exist" in str(e.value)
    with pytest.raises(sluice.Error):  # still caught as before
        st.DataLoader(where)


# ------------------------------------------------------------- resuming

def test_resume_loop_with_set_epoch_yields_the_rest(ds):
    """The module docstring's loop, resumed: load_state_dict, then
    set_epoch(ckpt["epoch"]) at the top of each epoch. The loaded epoch
    keeps the loaded position (before, set_epoch started it over and the
    batches already trained on came again); set_epoch of another epoch
    drops it, as in generic mode."""
    ref = dl(ds, seed=3)
    e0, e1 = labels(ref), labels(ref)
    a = dl(ds, seed=3)
    it = iter(a)
    for _ in range(2):
        next(it)
    ckpt = a.state_dict()
    del it
    assert (ckpt["epoch"], ckpt["batch"]) == (0, 2)
    b = dl(ds, seed=3)
    b.load_state_dict(ckpt)
    got = []
    for epoch in range(ckpt["epoch"], 2):
        b.set_epoch(epoch)
        got.append(labels(b))
    assert same(got[0], e0[2:]) and same(got[1], e1)
    c = dl(ds, seed=3)
    c.load_state_dict(ckpt)
    c.set_epoch(1)
    assert same(labels(c), e1)
    with pytest.raises(TypeError):
        c.set_epoch(1.5)


def test_position_at_the_end_of_an_epoch_is_the_next_epoch(ds):
    """(e, batches per epoch) is where epoch e ends: the iteration is the
    next epoch's, and state_dict says so after it (before, the epoch after
    was streamed again and state_dict ran one ahead)."""
    ref = dl(ds, seed=3)
    labels(ref)
    e1, e2 = labels(ref), labels(ref)
    l = dl(ds, seed=3)
    sd = l.state_dict()
    sd["batch"] = len(l)
    l.load_state_dict(sd)
    assert same(labels(l), e1)
    assert l.state_dict()["epoch"] == 2
    assert same(labels(l), e2)


def test_seed_range_and_type(ds):
    """A seed outside -2**63 .. 2**64-1 is refused, not reduced modulo
    2**64 (2**64 streamed as 0); a float is a TypeError; a negative seed is
    its two's complement, as before."""
    for s in (2**64, -2**63 - 1):
        with pytest.raises(ValueError, match="seed must be in"):
            dl(ds, seed=s)
        with pytest.raises(ValueError, match="seed must be in"):
            sluice.Loader(ds, B, S, seed=s)
    with pytest.raises(TypeError):
        dl(ds, seed=1.5)
    with pytest.raises(TypeError, match="seed must be an int"):
        sluice.Loader(ds, B, S, seed=1.5)
    assert same(labels(dl(ds, seed=-1)), labels(dl(ds, seed=2**64 - 1)))
