"""sl_image_transform against PIL / torchvision on real photos.

ctypes over the shared library named by SL_LIB; photos from
$SL_SHARED_DATA/imagenet-sample. Skips cleanly when either is missing."""
import ctypes
import glob
import os

import numpy as np
import pytest

LIB = os.environ.get("SL_LIB")
DATA = os.path.join(os.environ.get("SL_SHARED_DATA", ""), "imagenet-sample")

pytestmark = [
    pytest.mark.skipif(not LIB, reason="SL_LIB not set"),
    pytest.mark.skipif(not os.path.isdir(DATA), reason="no shared photos"),
]

Image = pytest.importorskip("PIL.Image")


class Transform(ctypes.Structure):
    """sl_transform_t: `size` first (the ABI's growth rule), set to this
    layout's size as sl_transform_init does."""
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("crop_x", ctypes.c_int), ("crop_y", ctypes.c_int),
        ("crop_w", ctypes.c_int), ("crop_h", ctypes.c_int),
        ("out_w", ctypes.c_int), ("out_h", ctypes.c_int),
        ("flip", ctypes.c_int), ("dtype", ctypes.c_int),
        ("layout", ctypes.c_int),
        ("mean", ctypes.c_float * 3), ("std", ctypes.c_float * 3),
        ("no_dct_scale", ctypes.c_int), ("strict", ctypes.c_int),
    ]


@pytest.fixture(scope="module")
def lib():
    lb = ctypes.CDLL(LIB)
    lb.sl_image_transform.argtypes = [
        ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(Transform),
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    return lb


def transform(lib, data, box, size=224, flip=0, dtype=0, dct=False,
              mean=(0, 0, 0), std=(0, 0, 0)):
    x, y, w, h = box
    t = Transform(ctypes.sizeof(Transform), x, y, w, h, size, size, flip,
                  dtype, 1,
                  (ctypes.c_float * 3)(*mean), (ctypes.c_float * 3)(*std),
                  0 if dct else 1)
    out = np.zeros((size, size, 3), np.float32 if dtype else np.uint8)
    err = ctypes.create_string_buffer(256)
    rc = lib.sl_image_transform(data, len(data), ctypes.byref(t),
                                out.ctypes.data, err, 256)
    assert rc == 0, err.value
    return out


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def photos(n=50):
    files = sorted(glob.glob(os.path.join(DATA, "*", "*.JPEG")))
    grey = [f for f in files if Image.open(f).mode != "RGB"][:8]
    step = max(1, len(files) // (n - len(grey)))
    return grey + files[::step][: n - len(grey)]


def random_box(rng, W, H):
    w = int(rng.integers(max(1, W // 8), W + 1))
    h = int(rng.integers(max(1, H // 8), H + 1))
    return (int(rng.integers(0, W - w + 1)), int(rng.integers(0, H - h + 1)),
            w, h)


def test_matches_pil_resized_crop(lib):
    rng = np.random.default_rng(0)
    worst, mads, greys = 0.0, [], 0
    for f in photos():
        data = open(f, "rb").read()
        im = Image.open(f)
        greys += im.mode == "L"
        im = im.convert("RGB")
        for _ in range(3):
            box = random_box(rng, *im.size)
            x, y, w, h = box
            ref = np.asarray(im.crop((x, y, x + w, y + h))
                             .resize((224, 224), Image.BILINEAR))
            got = transform(lib, data, box)
            mad = np.abs(got.astype(int) - ref).mean()
            mads.append(mad)
            worst = max(worst, mad)
            assert mad <= 2, (f, box, mad)
            flipped = transform(lib, data, box, flip=1)
            assert np.array_equal(flipped, got[:, ::-1]), (f, box)
    print(f"PIL resized-crop: {len(mads)} crops ({greys} grey photos), "
          f"mean MAD {np.mean(mads):.4f}, worst {worst:.4f}, "
          f"exact {sum(m == 0 for m in mads)}/{len(mads)}")
    assert greys > 0


def test_matches_torchvision(lib):
    F = pytest.importorskip("torchvision.transforms.functional")
    T = pytest.importorskip("torchvision.transforms")
    torch = pytest.importorskip("torch")
    f = photos()[10]
    data = open(f, "rb").read()
    im = Image.open(f).convert("RGB")
    x, y, w, h = 31, 17, 300, 211
    ref = F.resized_crop(im, y, x, h, w, [224, 224],
                         interpolation=T.InterpolationMode.BILINEAR)
    ref = np.asarray(ref)
    got = transform(lib, data, (x, y, w, h))
    assert np.abs(got.astype(int) - ref).mean() <= 2
    assert np.array_equal(transform(lib, data, (x, y, w, h), flip=1),
                          np.asarray(F.hflip(Image.fromarray(ref))))
    # float: ToTensor + Normalize (ImageNet defaults when mean/std are 0)
    norm = T.Compose([T.ToTensor(), T.Normalize([0.485, 0.456, 0.406],
                                                [0.229, 0.224, 0.225])])
    want = norm(Image.fromarray(got)).permute(1, 2, 0).numpy()
    gotf = transform(lib, data, (x, y, w, h), dtype=1)
    assert np.allclose(gotf, want, atol=1e-5), np.abs(gotf - want).max()
    mean, std = (0.5, 0.25, 0.1), (0.2, 0.3, 0.4)
    want = T.Normalize(mean, std)(T.ToTensor()(Image.fromarray(got)))
    gotf = transform(lib, data, (x, y, w, h), dtype=1, mean=mean, std=std)
    assert np.allclose(gotf, want.permute(1, 2, 0).numpy(), atol=1e-5)
    del torch


def test_dct_scaled_close_to_full(lib):
    rng = np.random.default_rng(1)
    worst, vals = 99.0, []
    for f in photos():
        data = open(f, "rb").read()
        W, H = Image.open(f).size
        for size in (64, 112, 224):
            box = random_box(rng, W, H)
            full = transform(lib, data, box, size=size)
            scaled = transform(lib, data, box, size=size, dct=True)
            q = psnr(full, scaled)
            vals.append(q)
            worst = min(worst, q)
            assert q >= 30, (f, box, size, q)
    print(f"DCT-scaled vs full: {len(vals)} crops, median PSNR "
          f"{np.median(vals):.1f} dB, worst {worst:.1f} dB")


def test_rrc_distribution_like_torchvision():
    """Our RRC sampler is C-side; here we only pin torchvision's numbers
    that tests/unit/test_image.c checks ours against (mean area 0.478)."""
    T = pytest.importorskip("torchvision.transforms")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    im = Image.new("RGB", (2000, 2000))
    a = [np.prod(T.RandomResizedCrop.get_params(im, (0.08, 1.0),
                                                (3 / 4, 4 / 3))[2:]) / 4e6
         for _ in range(2000)]
    assert abs(np.mean(a) - 0.478) < 0.02
