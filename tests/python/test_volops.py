"""The 3-D U-Net ops (sluice/volops.h) against the MLPerf KiTS19 reference's
arithmetic, re-expressed in NumPy/SciPy/torch here (preprocess_dataset.py:
torch interpolate trilinear/nearest, clip + z-score, np.pad edge;
pytorch_loader.py: RandBalancedCrop, RandFlip, brightness, noise).

ctypes over the shared library named by SL_LIB. Volumes: generated, and the
shared NIfTI files through nibabel when both are present.

Tolerances: resampling is separable in sluice and an 8-corner sum in torch,
so values differ by float rounding: |diff| <= 2e-6 * max|x| + 1e-6.
Nearest, normalisation, padding, crops and flips are exact."""

import ctypes
import os
import sys
from pathlib import Path

import numpy as np
import pytest

LIB = os.environ.get("SL_LIB")
pytestmark = pytest.mark.skipif(not LIB, reason="SL_LIB not set")
scipy_ndimage = pytest.importorskip("scipy.ndimage")
torch = pytest.importorskip("torch")
if os.environ.get("SLUICE"):  # the built package, beside the CLI
    sys.path.insert(0, os.path.join(os.path.dirname(os.environ["SLUICE"]), "python"))
from sluice.volumes_ctypes import Aug, Draw, F64x3, I64x3, bind  # noqa: E402,F401



@pytest.fixture(scope="module")
def lib():
    return bind(ctypes.CDLL(LIB))


def ptr(a):
    assert a.flags.c_contiguous
    return a.ctypes.data


def dims(a):
    return I64x3(*a.shape)


# ---------------------------------------------------------------- offline ops

def sl_resample(lib, img, lbl, spacing, target):
    out = I64x3()
    assert lib.sl_vol_resample_shape(dims(img), F64x3(*spacing), F64x3(*target), out) == 0
    shape = tuple(out)
    ri = np.empty(shape, np.float32)
    rl = np.empty(shape, np.uint8)
    assert lib.sl_vol_resample_linear(ptr(img), dims(img), ptr(ri), out) == 0
    assert lib.sl_vol_resample_nearest(ptr(lbl), dims(lbl), ptr(rl), out) == 0
    return ri, rl


def ref_resample(img, lbl, spacing, target):
    """preprocess_dataset.py's resample3d."""
    new_shape = (np.array(spacing) / np.array(target) * np.array(img.shape)).astype(int).tolist()
    ri = torch.nn.functional.interpolate(torch.from_numpy(img[None, None]), size=new_shape,
                                         mode="trilinear", align_corners=True)[0, 0].numpy()
    rl = torch.nn.functional.interpolate(torch.from_numpy(lbl[None, None]), size=new_shape,
                                         mode="nearest")[0, 0].numpy()
    return ri, rl


def close(a, b):
    tol = 2e-6 * float(np.abs(b).max()) + 1e-6
    return a.shape == b.shape and float(np.abs(a - b).max()) <= tol


@pytest.mark.parametrize("shape,spacing", [
    ((20, 33, 17), (2.5, 0.8, 0.75)),     # up and down on different axes
    ((64, 40, 40), (1.6, 1.2, 1.2)),      # already at the target: identity
    ((9, 128, 128), (5.0, 0.6, 0.6)),     # KiTS-like: thick slices
    ((30, 31, 32), (0.8, 2.4, 1.21)),     # exact doubling on one axis
    ((7, 7, 7), (0.3, 1.2, 1.6)),         # an axis resampled to one voxel
])
def test_resample_equals_torch(lib, shape, spacing):
    rng = np.random.default_rng(sum(shape))
    img = (rng.standard_normal(shape) * 300).astype(np.float32)
    lbl = rng.integers(0, 3, shape, dtype=np.uint8)
    target = (1.6, 1.2, 1.2)
    ri, rl = sl_resample(lib, img, lbl, spacing, target)
    ei, el = ref_resample(img, lbl, spacing, target)
    assert close(ri, ei), float(np.abs(ri - ei).max())
    assert np.array_equal(rl, el)


def test_normalize_and_pad_exact(lib):
    rng = np.random.default_rng(5)
    img = (rng.standard_normal((50, 130, 90)) * 400).astype(np.float32)
    ref = np.clip(img, -79.0, 304.0)
    ref = (ref - 101.0) / 76.9
    out = img.copy()
    lib.sl_vol_normalize(ptr(out), out.size, -79.0, 304.0, 101.0, 76.9)
    assert ref.dtype == np.float32 and np.array_equal(out, ref)
    # pad_to_min_shape
    mins = I64x3(128, 128, 128)
    od = I64x3()
    assert lib.sl_vol_pad_edge(None, dims(out), 4, mins, None, od) == 0
    padded = np.empty(tuple(od), np.float32)
    assert lib.sl_vol_pad_edge(ptr(out), dims(out), 4, mins, ptr(padded), od) == 0
    bounds = [max(0, 128 - s) for s in out.shape]
    eref = np.pad(out, [(b // 2, b - b // 2) for b in bounds], mode="edge")
    assert padded.shape == (128, 130, 128) and np.array_equal(padded, eref)
    lbl = rng.integers(0, 3, out.shape, dtype=np.uint8)
    pl = np.empty(tuple(od), np.uint8)
    assert lib.sl_vol_pad_edge(ptr(lbl), dims(lbl), 1, mins, ptr(pl), od) == 0
    assert np.array_equal(pl, np.pad(lbl, [(b // 2, b - b // 2) for b in bounds], mode="edge"))


def test_bad_arguments_are_refused(lib):
    out = I64x3()
    assert lib.sl_vol_resample_shape(I64x3(10, 10, 10), F64x3(0, 1, 1), F64x3(1, 1, 1), out) != 0
    assert lib.sl_vol_resample_shape(I64x3(10, 10, 10), F64x3(1, 1, 1e-300), F64x3(1, 1, 1),
                                     out) != 0
    assert lib.sl_vol_resample_shape(I64x3(0, 10, 10), F64x3(1, 1, 1), F64x3(1, 1, 1), out) != 0
    assert lib.sl_vol_resample_shape(I64x3(10, 10, 10), F64x3(0.01, 1, 1), F64x3(1, 1, 1),
                                     out) != 0  # an axis would vanish
    a = Aug()
    lib.sl_vol_aug_init(ctypes.byref(a))
    lbl = np.zeros((64, 200, 200), np.uint8)  # smaller than the 128^3 patch
    d = Draw()
    err = ctypes.create_string_buffer(256)
    assert lib.sl_vol_draw(ptr(lbl), dims(lbl), ctypes.byref(a), 1, 0, 0, ctypes.byref(d),
                           err, 256) != 0
    assert b"pad it first" in err.value


# ----------------------------------------------------------------- online ops

def ref_crop_lo(label, patch, d):
    """RandBalancedCrop with the draws sluice made (class, component, ladj)."""
    if not d.foreground:
        return list(d.lo)
    cl = d.cls
    assert cl in np.unique(label[label > 0])
    comps = scipy_ndimage.label(label == cl)[0]
    slices = [s for s in scipy_ndimage.find_objects(comps) if s is not None]
    assert len(slices) == d.ncomponents
    vols = [np.prod([s.stop - s.start for s in sl]) for sl in slices]
    idx = np.argsort(vols, kind="stable")[-2:]
    sl = slices[idx[d.component]]
    lo = []
    for ax in range(3):
        start, stop = sl[ax].start, sl[ax].stop
        assert (d.box_lo[ax], d.box_hi[ax]) == (start, stop)
        diff = patch[ax] - (stop - start)
        sign = -1 if diff < 0 else 1
        diff = abs(diff)
        ladj = d.adj[ax]
        assert 0 <= ladj <= max(diff - 1, 0)
        hadj = diff - ladj
        low = max(0, start - sign * ladj)
        high = min(label.shape[ax], stop + sign * hadj)
        diff = patch[ax] - (high - low)
        if diff > 0 and low == 0:
            high += diff
        elif diff > 0:
            low -= diff
        assert high - low == patch[ax]
        lo.append(low)
    return lo


def blobs(shape, seed):
    """A label volume with a few blobs of classes 1 and 2 (kidney, tumour)."""
    rng = np.random.default_rng(seed)
    lbl = np.zeros(shape, np.uint8)
    for k in range(rng.integers(1, 6)):
        c = [rng.integers(0, s) for s in shape]
        r = [rng.integers(2, max(3, s // 4)) for s in shape]
        sl = tuple(slice(max(0, c[i] - r[i]), c[i] + r[i]) for i in range(3))
        lbl[sl] = 1 + (k % 2)
    return lbl


def test_draws_follow_the_reference_and_the_patch_is_exact(lib):
    a = Aug()
    lib.sl_vol_aug_init(ctypes.byref(a))
    a.patch = I64x3(32, 40, 24)
    a.brightness_prob = a.noise_prob = 0.0
    kinds = {"fg": 0, "uniform": 0, "flips": 0}
    for case in range(40):
        shape = (40 + case % 7, 48 + case % 5, 30 + case % 3)
        lbl = blobs(shape, case) if case % 9 else np.zeros(shape, np.uint8)
        img = np.random.default_rng(case).standard_normal(shape).astype(np.float32)
        for sample in range(3):
            d = Draw()
            assert lib.sl_vol_draw(ptr(lbl), dims(lbl), ctypes.byref(a), 11, case, sample,
                                   ctypes.byref(d), None, 0) == 0
            lo = ref_crop_lo(lbl, list(a.patch), d)
            assert list(d.lo) == lo
            kinds["fg" if d.foreground else "uniform"] += 1
            kinds["flips"] += sum(d.flip)
            oi = np.empty(tuple(a.patch), np.float32)
            ol = np.empty(tuple(a.patch), np.uint8)
            assert lib.sl_vol_apply(ptr(img), ptr(lbl), dims(img), ctypes.byref(a),
                                    ctypes.byref(d), 11, case, sample, ptr(oi), ptr(ol)) == 0
            sl = tuple(slice(lo[i], lo[i] + a.patch[i]) for i in range(3))
            ei, el = img[sl], lbl[sl]
            for ax in range(3):
                if d.flip[ax]:
                    ei, el = np.flip(ei, ax), np.flip(el, ax)
            assert np.array_equal(oi, ei) and np.array_equal(ol, el)
    # The reference's rates: 0.4 foreground (labels with foreground), 1/3 flips.
    assert 20 <= kinds["fg"] <= 80 and 60 <= kinds["flips"] <= 180, kinds


def test_brightness_and_noise(lib):
    a = Aug()
    lib.sl_vol_aug_init(ctypes.byref(a))
    a.patch = I64x3(16, 16, 16)
    a.oversampling = 0.0
    a.flip_prob = 0.0
    a.brightness_prob = a.noise_prob = 1.0
    img = np.full((16, 16, 16), 0.5, np.float32)
    lbl = np.zeros_like(img, dtype=np.uint8)
    d = Draw()
    assert lib.sl_vol_draw(ptr(lbl), dims(lbl), ctypes.byref(a), 3, 0, 7, ctypes.byref(d),
                           None, 0) == 0
    assert d.brightness and 1.7 <= d.brightness_mul < 2.3  # image * (1 + U(0.7, 1.3))
    assert d.noise and 0 <= d.noise_sd < 0.1
    d.noise = 0
    out = np.empty_like(img)
    assert lib.sl_vol_apply(ptr(img), None, dims(img), ctypes.byref(a), ctypes.byref(d), 3, 0, 7,
                            ptr(out), None) == 0
    assert np.array_equal(out, (img.astype(np.float64) * d.brightness_mul).astype(np.float32))
    d.brightness, d.noise, d.noise_sd = 0, 1, 0.05
    outs = []
    for _ in range(2):
        o = np.empty_like(img)
        assert lib.sl_vol_apply(ptr(img), None, dims(img), ctypes.byref(a), ctypes.byref(d), 3,
                                0, 7, ptr(o), None) == 0
        outs.append(o)
    assert np.array_equal(outs[0], outs[1])  # a pure function of (seed, epoch, sample)
    noise = outs[0].astype(np.float64) - 0.5
    assert abs(noise.mean()) < 0.01 and abs(noise.std() - 0.05) < 0.005
    o = np.empty_like(img)
    lib.sl_vol_apply(ptr(img), None, dims(img), ctypes.byref(a), ctypes.byref(d), 3, 0, 8,
                     ptr(o), None)
    assert not np.array_equal(o, outs[0])  # another sample, other noise


def test_shared_nifti_volumes_offline(lib):
    """The offline stage on the real volumes: equal to the reference."""
    nib = pytest.importorskip("nibabel")
    root = Path(os.environ.get("SL_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared"
                               / "data")) / "nifti"
    files = sorted(root.glob("*.nii.gz")) if root.is_dir() else []
    if not files:
        pytest.skip(f"no NIfTI volumes under {root}")
    for f in files:
        im = nib.load(str(f))
        data = im.get_fdata().astype(np.float32)
        if data.ndim != 3:
            continue
        spacing = [float(x) for x in im.header["pixdim"][1:4]]
        img = np.ascontiguousarray(data)
        lbl = (img > np.percentile(img, 90)).astype(np.uint8)
        ri, rl = sl_resample(lib, img, lbl, spacing, (1.6, 1.2, 1.2))
        ei, el = ref_resample(img, lbl, spacing, (1.6, 1.2, 1.2))
        assert close(ri, ei), (f.name, float(np.abs(ri - ei).max()))
        assert np.array_equal(rl, el), f.name
        lib.sl_vol_normalize(ptr(ri), ri.size, -79.0, 304.0, 101.0, 76.9)
        assert close(ri, ((np.clip(ei, -79.0, 304.0) - 101.0) / 76.9).astype(np.float32))


def test_equal_components_tie_like_a_stable_sort(lib):
    """Three components with equal boxes and a smaller one: the two drawn
    from are the last two equal ones in label order (scipy's numbering)."""
    a = Aug()
    lib.sl_vol_aug_init(ctypes.byref(a))
    a.patch = I64x3(8, 8, 8)
    a.oversampling = 1.0
    lbl = np.zeros((40, 40, 40), np.uint8)
    for x in (2, 14, 26):
        lbl[x:x + 4, 5:9, 5:9] = 1
    lbl[30:32, 30:32, 30:32] = 1
    seen = set()
    for sample in range(40):
        d = Draw()
        assert lib.sl_vol_draw(ptr(lbl), dims(lbl), ctypes.byref(a), 5, 0, sample,
                               ctypes.byref(d), None, 0) == 0
        assert d.foreground and d.ncomponents == 4
        assert list(d.lo) == ref_crop_lo(lbl, list(a.patch), d)
        seen.add(d.box_lo[0])
    assert seen == {14, 26}
