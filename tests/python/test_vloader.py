"""The volume loader (sluice/vloader.h) on a generated KiTS19-layout
dataset: each patch equals the reference pipeline composed by hand
(nibabel -> torch resample -> clip/z-score -> np.pad edge -> the same draws
through sl_vol_draw/sl_vol_apply), the stream is the same whatever the
threads, the balancer and the cache, and a damaged case is an error naming
it. ctypes over SL_LIB (the public C API)."""

import ctypes
import hashlib
import os

import numpy as np
import pytest

from test_volops import Aug, Draw, I64x3, lib  # noqa: F401  (the fixture)

nib = pytest.importorskip("nibabel")
torch = pytest.importorskip("torch")

from sluice.volumes_ctypes import Batch, Opts, Stats  # noqa: E402


@pytest.fixture(scope="module")
def vl(lib):  # noqa: F811
    return lib  # bound by test_volops's fixture (volumes_ctypes.bind)


PATCH = (24, 32, 20)  # (x, y, z), as the options take it


def make_dataset(root, n=5, seed=0):
    rng = np.random.default_rng(seed)
    for c in range(n):
        shape = (int(rng.integers(20, 40)), int(rng.integers(30, 50)), int(rng.integers(12, 30)))
        sp = (float(rng.uniform(0.8, 2.0)), float(rng.uniform(0.8, 1.6)),
              float(rng.uniform(1.0, 3.0)))
        img = (rng.standard_normal(shape) * 150 + 60).astype(np.int16)
        lbl = np.zeros(shape, np.uint8)
        for k in range(int(rng.integers(0, 4))):
            ctr = [int(rng.integers(0, s)) for s in shape]
            r = [int(rng.integers(2, 6)) for _ in shape]
            lbl[tuple(slice(max(0, ctr[i] - r[i]), ctr[i] + r[i]) for i in range(3))] = 1 + k % 2
        aff = np.diag(sp + (1.0,))
        d = root / f"case_{c:05d}"
        d.mkdir(parents=True)
        ii = nib.Nifti1Image(img, aff)
        ii.header.set_zooms(sp)
        nib.save(ii, str(d / "imaging.nii.gz"))
        li = nib.Nifti1Image(lbl, aff)
        li.header.set_zooms(sp)
        nib.save(li, str(d / "segmentation.nii.gz"))
    return root


def reference_offline(case_dir):
    """preprocess_dataset.py: load, resample, normalise, pad (x, y, z)."""
    im = nib.load(str(case_dir / "imaging.nii.gz"))
    lb = nib.load(str(case_dir / "segmentation.nii.gz"))
    sp = im.header["pixdim"][1:4].tolist()
    img = im.get_fdata().astype(np.float32)
    lbl = lb.get_fdata().astype(np.uint8)
    new_shape = (np.array(sp) / np.array([1.6, 1.2, 1.2]) * np.array(img.shape)).astype(int)
    img = torch.nn.functional.interpolate(torch.from_numpy(img[None, None]),
                                          size=new_shape.tolist(), mode="trilinear",
                                          align_corners=True)[0, 0].numpy()
    lbl = torch.nn.functional.interpolate(torch.from_numpy(lbl[None, None]),
                                          size=new_shape.tolist(), mode="nearest")[0, 0].numpy()
    img = (np.clip(img, -79.0, 304.0) - 101.0) / 76.9
    bounds = [max(0, PATCH[i] - img.shape[i]) for i in range(3)]
    pads = [(b // 2, b - b // 2) for b in bounds]
    return np.pad(img, pads, mode="edge"), np.pad(lbl, pads, mode="edge")


def opts(vl, **kw):
    o = Opts()
    vl.sl_vloader_options_init(ctypes.byref(o))
    o.batch_size = 2
    o.seed = 9
    o.threads = 2
    o.aug.patch = I64x3(*PATCH)
    o.aug.noise_prob = 0.5  # exercise every op more often than the reference
    o.aug.brightness_prob = 0.5
    o.aug.oversampling = 0.6
    for k, v in kw.items():
        setattr(o, k, v)
    return o


def stream(vl, root, epochs=2, **kw):
    h = ctypes.c_void_p()
    err = ctypes.create_string_buffer(512)
    o = opts(vl, **kw)
    rc = vl.sl_vloader_create(str(root).encode(), ctypes.byref(o), ctypes.byref(h), err, 512)
    assert rc == 0, err.value
    out = []
    try:
        nb = vl.sl_vloader_batches_per_epoch(h)
        pv = int(np.prod(PATCH))
        for _ in range(epochs * nb):
            b = ctypes.POINTER(Batch)()
            assert vl.sl_vloader_next(h, ctypes.byref(b), err, 512) == 0, err.value
            n = b.contents.n
            dims = tuple(b.contents.dims)
            img = np.ctypeslib.as_array(b.contents.image, (n * pv,)).reshape((n,) + dims).copy()
            lbl = np.ctypeslib.as_array(b.contents.label, (n * pv,)).reshape((n,) + dims).copy()
            cases = [b.contents.cases[i] for i in range(n)]
            out.append((b.contents.epoch, cases, img, lbl))
            vl.sl_vloader_release(h, b)
        st = Stats()
        st.size = ctypes.sizeof(Stats)
        assert vl.sl_vloader_stats(h, ctypes.byref(st)) == 0
    finally:
        vl.sl_vloader_destroy(h)
    return out, st


def digest(out):
    h = hashlib.sha256()
    for e, cases, img, lbl in out:
        h.update(repr((e, cases)).encode())
        h.update(img.tobytes())
        h.update(lbl.tobytes())
    return h.hexdigest()


def test_patches_equal_the_reference_pipeline(vl, tmp_path):
    root = make_dataset(tmp_path / "kits")
    out, st = stream(vl, root, epochs=2)
    # Delivered 6 batches; the window prepares ahead, into epoch 2.
    assert st.batches == 6 and st.samples >= 10
    # Each case prepared once (a sample counts when done, a hit when begun).
    assert st.offline_runs == 5 and st.cache_hits >= st.samples - 5
    a = opts(vl).aug
    a.patch = I64x3(*PATCH[::-1])  # C order (z, y, x)
    cases = sorted(p for p in root.iterdir())
    seen = set()
    for epoch, cs, img, lbl in out:
        for j, c in enumerate(cs):
            seen.add((epoch, c))
            ri, rl = reference_offline(cases[c])
            ri, rl = np.ascontiguousarray(ri.T), np.ascontiguousarray(rl.T)
            d = Draw()
            assert vl.sl_vol_draw(rl.ctypes.data, I64x3(*rl.shape), ctypes.byref(a), 9, epoch, c,
                                  ctypes.byref(d), None, 0) == 0
            ei = np.empty(PATCH[::-1], np.float32)
            el = np.empty(PATCH[::-1], np.uint8)
            assert vl.sl_vol_apply(ri.ctypes.data, rl.ctypes.data, I64x3(*ri.shape),
                                   ctypes.byref(a), ctypes.byref(d), 9, epoch, c, ei.ctypes.data,
                                   el.ctypes.data) == 0
            assert np.array_equal(lbl[j], el), (epoch, c)
            tol = 2e-5 * float(np.abs(ei).max()) + 1e-5
            assert float(np.abs(img[j] - ei).max()) <= tol, (epoch, c)
    assert seen == {(e, c) for e in (0, 1) for c in range(5)}  # each case once per epoch


def test_same_stream_whatever_threads_balancer_and_cache(vl, tmp_path):
    root = make_dataset(tmp_path / "kits", n=7, seed=3)
    ref, _ = stream(vl, root, epochs=2, threads=1, no_balance=1)
    for kw in ({"threads": 3}, {"threads": 2, "prefetch": 4}, {"threads": 2, "cache_bytes": 1}):
        out, st = stream(vl, root, epochs=2, **kw)
        assert digest(out) == digest(ref), kw
        if kw.get("cache_bytes") == 1:
            assert st.offline_runs > 7  # nothing kept: cases prepared again
    other, _ = stream(vl, root, epochs=2, seed=10)
    assert digest(other) != digest(ref)


def test_a_damaged_case_is_named(vl, tmp_path):
    root = make_dataset(tmp_path / "kits", n=3)
    bad = root / "case_00001" / "imaging.nii.gz"
    bad.write_bytes(bad.read_bytes()[:200])
    h = ctypes.c_void_p()
    err = ctypes.create_string_buffer(512)
    o = opts(vl)
    assert vl.sl_vloader_create(str(root).encode(), ctypes.byref(o), ctypes.byref(h), err,
                                512) != 0
    assert b"case_00001" in err.value, err.value


def test_a_pack_streams_as_its_folder(vl, tmp_path):
    """`sluice pack --volumes` of the folder: the same patches, bit for bit
    (the cases decode through the same code from their records)."""
    import subprocess
    cli = os.environ.get("SLUICE")
    if not cli:
        pytest.skip("SLUICE not set")
    root = make_dataset(tmp_path / "kits", n=4, seed=5)
    subprocess.run([cli, "pack", "--volumes", str(root), str(tmp_path / "pack")],
                   check=True, capture_output=True)
    ref, _ = stream(vl, root, epochs=1)
    out, _ = stream(vl, tmp_path / "pack", epochs=1)
    assert digest(out) == digest(ref)


def test_python_dataloader(tmp_path):
    """sluice.volumes.DataLoader: torch tensors (n, 1, z, y, x), each case
    once per epoch, the stream independent of threads and balance."""
    sv = pytest.importorskip("sluice.volumes")
    root = make_dataset(tmp_path / "kits", n=5, seed=4)
    runs = []
    for kw in ({"threads": 1, "balance": False}, {"threads": 3}):
        with sv.DataLoader(root, batch_size=2, patch=PATCH, seed=1, **kw) as dl:
            assert len(dl) == 3
            got = []
            for epoch in range(2):
                cases = []
                for img, lbl in dl:
                    assert img.dtype == torch.float32 and lbl.dtype == torch.uint8
                    assert tuple(img.shape[1:]) == (1,) + PATCH[::-1]
                    got.append((img.clone(), lbl.clone()))
                    cases.append(img.shape[0])
                assert sum(cases) == 5
            st = dl.stats()
            assert st["batches"] == 6 and st["offline_runs"] == 5
            assert st["latency_p99_s"] >= st["latency_p50_s"] > 0
        runs.append(got)
    for (a, b), (c, d) in zip(*runs):
        assert torch.equal(a, c) and torch.equal(b, d)
    with pytest.raises(Exception, match="case_00000|no cases|not found|No such"):
        sv.DataLoader(tmp_path / "nothing-here")


def test_python_dataloader_batch_size_and_cache_bytes(tmp_path):
    """batch_size 0 is refused (ValueError), as sluice.torch.DataLoader
    refuses it, not taken as C's default 2; cache_bytes=0 is no cache, as
    for the image loader (cases prepared again each epoch), None the
    default cache (each case prepared once)."""
    sv = pytest.importorskip("sluice.volumes")
    root = make_dataset(tmp_path / "kits", n=5, seed=4)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="batch_size"):
            sv.DataLoader(root, batch_size=bad, patch=PATCH)
    runs = {}
    for cache in (None, 0):
        with sv.DataLoader(root, batch_size=2, patch=PATCH, threads=1,
                           cache_bytes=cache) as dl:
            for _ in range(2):
                for _ in dl:
                    pass
            runs[cache] = dl.stats()["offline_runs"]
    assert runs[None] == 5 and runs[0] > 5, runs


def test_python_dataloader_resume(tmp_path):
    """state_dict / load_state_dict / set_epoch: a run resumed mid-epoch
    (a new loader, its engine started at the saved stream position) yields
    exactly the batches an uninterrupted one does from there; the resume
    loop's set_epoch of the loaded epoch keeps the position, another epoch
    starts whole; a state of other stream options is refused."""
    sv = pytest.importorskip("sluice.volumes")
    root = make_dataset(tmp_path / "kits", n=5, seed=4)

    def make(**kw):
        return sv.DataLoader(root, batch_size=2, patch=PATCH, seed=1, threads=2, **kw)

    def epoch(dl):
        return [(img.clone(), lbl.clone()) for img, lbl in dl]

    def same(a, b):
        return len(a) == len(b) and all(torch.equal(x, y) and torch.equal(u, v)
                                        for (x, u), (y, v) in zip(a, b))

    with make() as dl:
        e0, e1 = epoch(dl), epoch(dl)
        assert dl.state_dict()["epoch"] == 2 and dl.state_dict()["batch"] == 0
    with make() as dl:
        it = iter(dl)
        next(it)
        sd = dl.state_dict()
        del it
    assert (sd["epoch"], sd["batch"]) == (0, 1)
    with make() as dl:
        dl.load_state_dict(sd)
        for ep in range(sd["epoch"], 2):
            dl.set_epoch(ep)
            got = epoch(dl)
            assert same(got, e0[1:] if ep == 0 else e1), ep
    with make() as dl:
        dl.load_state_dict(sd)
        dl.set_epoch(1)
        assert same(epoch(dl), e1)
        dl.set_epoch(0)  # back: the engine made again at epoch 0
        assert same(epoch(dl), e0)
    with make() as dl:
        with pytest.raises(ValueError, match="seed"):
            dl.load_state_dict(dict(sd, seed=2))
        with pytest.raises(ValueError, match="outside"):
            dl.load_state_dict(dict(sd, batch=99))
