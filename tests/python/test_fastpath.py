"""The exact crop-decode fast path of generic mode (python/sluice/_fastpath.py):
pixel equality with the ordinary torchvision/PIL dataset[i] on real photos
and on every JPEG flavour we can make, fallbacks that leave no trace, and the
datasets it must decline."""

import io
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")
np = pytest.importorskip("numpy")
_built = os.path.join(os.path.dirname(os.environ.get("SLUICE", "/nonexistent")), "python")
if os.path.isdir(os.path.join(_built, "sluice")):
    sys.path.insert(0, _built)
sluice = pytest.importorskip("sluice", reason="sluice module not built")
from PIL import Image  # noqa: E402
from torchvision import transforms as T  # noqa: E402

from sluice import _fastpath  # noqa: E402
import sluice.torch  # noqa: E402
from sluice._generic import GenericLoader  # noqa: E402

PHOTOS = (Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
          / "imagenet-sample").resolve()


def one(ds, fast, i, seed):
    """(ordinary dataset[i], fast path's) under the same torch seed."""
    torch.manual_seed(seed)
    want = ds[i]
    torch.manual_seed(seed)
    got = fast(i)
    return want, got


def assert_equal_samples(want, got, what):
    assert got is not None, f"{what}: the fast path declined"
    assert torch.equal(want[0], got[0]), f"{what}: pixels differ"
    assert want[1] == got[1], f"{what}: target differs"


def rgb_noise(w, h, seed):
    """A photo-like image: smooth gradients plus noise (not flat, so every
    DCT block has detail)."""
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1),
                     (x + y) * 255 // max(w + h - 2, 1)], -1)
    return Image.fromarray(np.clip(base + r.integers(-40, 41, (h, w, 3)), 0, 255)
                           .astype(np.uint8))


FLAVOURS = {
    "420": dict(subsampling=2, quality=90),
    "422": dict(subsampling=1, quality=85),
    "444": dict(subsampling=0, quality=95),
    "progressive": dict(subsampling=2, quality=80, progressive=True),
    "optimized-q50": dict(subsampling=2, quality=50, optimize=True),
}


@pytest.fixture(scope="module")
def jpeg_folder(tmp_path_factory):
    """An ImageFolder of JPEG flavours and odd sizes, plus a grey one, a CMYK
    one, a PNG and a JPEG with a corrupt-data warning (fallbacks)."""
    root = tmp_path_factory.mktemp("fastpath") / "ds"
    sizes = [(333, 257), (640, 480), (17, 900), (1001, 31), (224, 224), (96, 500)]
    k = 0
    for name, kw in FLAVOURS.items():
        d = root / f"c_{name}"
        d.mkdir(parents=True)
        for w, h in sizes:
            rgb_noise(w, h, k).save(d / f"{k:03d}.jpg", "JPEG", **kw)
            k += 1
    d = root / "c_other"
    d.mkdir()
    rgb_noise(300, 200, 90).convert("L").save(d / "grey.jpg", "JPEG", quality=90)
    rgb_noise(300, 200, 91).convert("CMYK").save(d / "cmyk.jpg", "JPEG", quality=90)
    rgb_noise(300, 200, 92).save(d / "image.png", "PNG")
    buf = io.BytesIO()
    rgb_noise(300, 200, 93).save(buf, "JPEG", quality=90)
    data = bytearray(buf.getvalue())
    sos = data.index(b"\xff\xda")
    at = sos + 200
    while data[at] == 0xFF or data[at - 1] == 0xFF:
        at += 1
    data[at:at] = b"\xff\xd5"  # a stray RST marker in the scan: a libjpeg warning
    (d / "warn.jpg").write_bytes(bytes(data))
    return str(root)


def rrc_folder(root, **kw):
    tf = T.Compose([T.RandomResizedCrop(kw.pop("size", 224), **kw), T.RandomHorizontalFlip(),
                    T.PILToTensor()])
    return tv.datasets.ImageFolder(root, transform=tf)


def test_equal_on_every_jpeg_flavour_and_size(jpeg_folder):
    ds = rrc_folder(jpeg_folder)
    fast, why = _fastpath.plan(ds)
    assert fast is not None, why
    checked = 0
    for i, (path, _) in enumerate(ds.samples):
        if not path.endswith(".jpg") or "warn" in path or "cmyk" in path:
            continue
        for seed in range(6):
            want, got = one(ds, fast, i, seed * 1000 + i)
            assert_equal_samples(want, got, f"{os.path.basename(path)} seed {seed}")
            checked += 1
    assert checked == 6 * (len(FLAVOURS) * 6 + 1)


@pytest.mark.parametrize("kw", [dict(size=(160, 96)), dict(size=64, scale=(0.5, 1.0)),
                                dict(size=300, ratio=(0.5, 2.0))])
def test_equal_with_other_sizes_scales_and_ratios(jpeg_folder, kw):
    ds = rrc_folder(jpeg_folder, **kw)
    fast, why = _fastpath.plan(ds)
    assert fast is not None, why
    for i, (path, _) in enumerate(ds.samples):
        if "c_420" in path or "c_444" in path:
            want, got = one(ds, fast, i, i)
            assert_equal_samples(want, got, os.path.basename(path))


def test_fallbacks_return_none(jpeg_folder):
    """PNG, a JPEG with a corrupt-data warning: None (the caller then runs
    the ordinary dataset[i]); CMYK (Adobe, as PIL writes it) is converted
    with PIL's own formula: equal."""
    ds = rrc_folder(jpeg_folder)
    fast, _ = _fastpath.plan(ds)
    names = {os.path.basename(p): i for i, (p, _) in enumerate(ds.samples)}
    assert fast(names["image.png"]) is None
    assert fast(names["warn.jpg"]) is None
    for seed in range(4):
        want, got = one(ds, fast, names["cmyk.jpg"], seed)
        assert_equal_samples(want, got, "cmyk.jpg")


def test_decompression_bomb_limit_is_left_to_pil(jpeg_folder, monkeypatch):
    """Over PIL's MAX_IMAGE_PIXELS PIL warns or raises: the fast path steps
    aside so that the same warning / error comes."""
    ds = rrc_folder(jpeg_folder)
    fast, _ = _fastpath.plan(ds)
    i = next(k for k, (p, _) in enumerate(ds.samples) if p.endswith("c_420/001.jpg"))  # 640x480
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 640 * 480 - 1)
    assert fast(i) is None
    with pytest.warns(Image.DecompressionBombWarning):
        ds[i]
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 640 * 480)
    assert fast(i) is not None


@pytest.mark.skipif(not PHOTOS.is_dir(), reason=f"no photo folder at {PHOTOS}")
def test_equal_on_every_imagenet_photo():
    """All 1,000 photos, RandomResizedCrop + flip + ToTensor + Normalize and a
    target_transform: float tensors equal, not close."""
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = tv.datasets.ImageFolder(str(PHOTOS), transform=tf, target_transform=lambda t: t + 1000)
    fast, why = _fastpath.plan(ds)
    assert fast is not None, why
    declined = 0
    for i in range(len(ds)):
        torch.manual_seed(i)
        want = ds[i]
        torch.manual_seed(i)
        got = fast(i)
        if got is None:  # allowed (then the ordinary path runs), but counted
            declined += 1
            continue
        assert torch.equal(want[0], got[0]), ds.samples[i][0]
        assert want[1] == got[1] >= 1000
    assert declined <= 5, f"{declined} photos declined"


@pytest.mark.skipif(not PHOTOS.is_dir(), reason=f"no photo folder at {PHOTOS}")
def test_eval_transform_equal_on_imagenet_photos():
    """Resize(256) + CenterCrop(224) + ToTensor + Normalize on every 4th photo."""
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = tv.datasets.ImageFolder(str(PHOTOS), transform=tf)
    fast, why = _fastpath.plan(ds)
    assert fast is not None, why
    for i in range(0, len(ds), 4):
        got = fast(i)
        assert got is not None and torch.equal(ds[i][0], got[0]), ds.samples[i][0]


def test_plan_declines_what_it_cannot_reproduce(jpeg_folder):
    base = dict(root=jpeg_folder)
    declined = [
        tv.datasets.ImageFolder(transform=T.Compose([T.CenterCrop(224), T.Resize(256)]), **base),
        tv.datasets.ImageFolder(transform=T.Resize(
            64, interpolation=T.InterpolationMode.BICUBIC), **base),
        tv.datasets.ImageFolder(transform=T.RandomResizedCrop(
            64, interpolation=T.InterpolationMode.NEAREST), **base),
        tv.datasets.ImageFolder(transform=T.Compose([T.RandomResizedCrop(64, antialias=False)]),
                                **base),
        tv.datasets.ImageFolder(transform=T.RandomResizedCrop(64),
                                loader=lambda p: Image.open(p).convert("RGB"), **base),
        tv.datasets.ImageFolder(transform=None, **base),
    ]

    class Sub(tv.datasets.ImageFolder):
        def __getitem__(self, i):
            return super().__getitem__(i)

    class MyCrop(T.RandomResizedCrop):
        pass

    declined += [Sub(transform=T.RandomResizedCrop(64), **base),
                 tv.datasets.ImageFolder(transform=MyCrop(64), **base)]
    patched = T.RandomResizedCrop(64)
    patched.get_params = lambda *a: (0, 0, 1, 1)
    declined.append(tv.datasets.ImageFolder(transform=patched, **base))
    try:
        from torchvision.transforms import v2
        declined += [
            tv.datasets.ImageFolder(transform=v2.Compose([v2.RandomCrop(32), v2.Resize(64)]),
                                    **base),
            tv.datasets.ImageFolder(transform=v2.RandomResizedCrop(
                64, interpolation=T.InterpolationMode.BICUBIC), **base)]
    except ImportError:
        pass
    for ds in declined:
        fast, why = _fastpath.plan(ds)
        assert fast is None and why


@pytest.mark.parametrize("first", [
    lambda: T.Resize(256), lambda: T.Resize((100, 60)), lambda: T.Resize(64, max_size=80),
    lambda: T.Resize(224), lambda: T.Resize([31])])
def test_resize_first_equal(jpeg_folder, first):
    """Resize (+ CenterCrop, the eval transform): the whole image decoded and
    resized to the size F.resize computes; a 224-pixel short side under
    Resize(224) is F.resize's early return (same pixels)."""
    tf = T.Compose([first(), T.CenterCrop(48), T.PILToTensor()])
    ds = tv.datasets.ImageFolder(jpeg_folder, transform=tf)
    fast, why = _fastpath.plan(ds)
    assert fast is not None and "Resize" in why, why
    n = 0
    for i, (path, _) in enumerate(ds.samples):
        if path.endswith(".jpg") and "warn" not in path:
            want, got = one(ds, fast, i, i)
            if got is None:  # declined: only where sluice's output cap (8192 a side) is passed
                assert max(Image.open(path).size) * 256 / min(Image.open(path).size) > 8192
                continue
            assert_equal_samples(want, got, os.path.basename(path))
            n += 1
    assert n >= len(FLAVOURS) * 4 + 2  # 17x900 and 1001x31 pass the cap under Resize(256)


@pytest.mark.parametrize("which", ["train", "eval"])
def test_transforms_v2_equal(jpeg_folder, which):
    """torchvision.transforms.v2 (the documented API now): make_params draws
    the crop; ToImage / ToDtype / Normalize run as written."""
    v2 = pytest.importorskip("torchvision.transforms.v2")
    tail = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
            v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
    if which == "train":
        tf = v2.Compose([v2.RandomResizedCrop(56), v2.RandomHorizontalFlip()] + tail)
    else:
        tf = v2.Compose([v2.Resize(72), v2.CenterCrop(56)] + tail)
    ds = tv.datasets.ImageFolder(jpeg_folder, transform=tf)
    fast, why = _fastpath.plan(ds)
    assert fast is not None and why.startswith("torchvision DatasetFolder + v2."), why
    n = 0
    for i, (path, _) in enumerate(ds.samples):
        if path.endswith(".jpg") and "warn" not in path:
            for seed in range(3):
                want, got = one(ds, fast, i, 100 * i + seed)
                assert_equal_samples(want, got, f"{os.path.basename(path)} seed {seed}")
                n += 1
    assert n == 3 * (len(FLAVOURS) * 6 + 2)


def test_subset_and_bare_transform(jpeg_folder):
    full = tv.datasets.ImageFolder(jpeg_folder, transform=T.RandomResizedCrop(48))
    idx = [i for i, (p, _) in enumerate(full.samples) if p.endswith(".jpg")][::3]
    ds = torch.utils.data.Subset(torch.utils.data.Subset(full, idx), list(range(len(idx)))[::-1])
    fast, why = _fastpath.plan(ds)
    assert fast is not None, why
    for j in range(len(ds)):
        torch.manual_seed(j)
        want = ds[j]
        torch.manual_seed(j)
        got = fast(j)
        if got is None:
            assert "warn" in full.samples[idx[::-1][j]][0] or "cmyk" in full.samples[idx[::-1][j]][0]
            continue
        assert np.array_equal(np.asarray(want[0]), np.asarray(got[0])) and want[1] == got[1]


@pytest.mark.parametrize("workers", [1, 3])
def test_loader_batches_equal_with_and_without_fast_path(jpeg_folder, workers):
    """Whole epochs through GenericLoader: fast path on == off, fallbacks
    (PNG, warning JPEG) counted, and the stream the same for any worker count."""
    ds = rrc_folder(jpeg_folder, size=64)
    runs = {}
    for fp in (True, False):
        with GenericLoader(ds, batch_size=7, shuffle=True, num_workers=workers, seed=3,
                           fast_path=fp) as gl:
            runs[fp] = [(x.clone(), y.clone()) for x, y in gl]
            st = gl.stats()
        if fp:
            assert st["fast_path_samples"] + st["fast_path_fallbacks"] == len(ds)
            assert st["fast_path_fallbacks"] >= 2  # the PNG and the warning JPEG
            assert "RandomResizedCrop" in st["fast_path"]
        else:
            assert st["fast_path_samples"] == 0 and st["fast_path"].startswith("off")
    assert len(runs[True]) == len(runs[False]) == -(-len(ds) // 7)
    for (a, la), (b, lb) in zip(runs[True], runs[False]):
        assert torch.equal(a, b) and torch.equal(la, lb)


def test_drop_in_dataloader_uses_it(jpeg_folder):
    ds = rrc_folder(jpeg_folder, size=32)
    dl = sluice.torch.DataLoader(ds, batch_size=8, num_workers=2, seed=0)
    n = sum(x.shape[0] for x, _ in dl)
    st = dl.stats()
    assert n == len(ds) and st["fast_path_samples"] > 0
    off = sluice.torch.DataLoader(ds, batch_size=8, num_workers=2, seed=0, fast_path=False)
    assert sum(x.shape[0] for x, _ in off) == len(ds) and off.stats()["fast_path_samples"] == 0


def test_in_process_equals_torch_dataloader(jpeg_folder):
    """num_workers=0 shares the global torch RNG with the transforms, as
    torch's DataLoader does: equal batches prove the fast path draws what
    RandomResizedCrop draws, and that a fallback after the draw (the JPEG
    with a warning) puts the RNG back."""
    ds = rrc_folder(jpeg_folder, size=40)
    torch.manual_seed(11)
    ref = [(x.clone(), y.clone()) for x, y in
           torch.utils.data.DataLoader(ds, batch_size=5, shuffle=True, num_workers=0)]
    torch.manual_seed(11)
    gl = GenericLoader(ds, batch_size=5, shuffle=True, num_workers=0)
    got = [(x.clone(), y.clone()) for x, y in gl]
    st = gl.stats()
    assert st["fast_path_samples"] > 0 and st["fast_path_fallbacks"] >= 2
    assert len(got) == len(ref)
    for k, ((a, la), (b, lb)) in enumerate(zip(got, ref)):
        assert torch.equal(a, b) and torch.equal(la, lb), f"batch {k}"
