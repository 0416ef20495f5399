"""NIfTI volumes (sluice.load_volume) against nibabel: every file of
$SL_SHARED_DATA/nifti/ and generated edge cases (each data type, scaling,
NIfTI-2, 4-D, qform / sform / neither, non-RAS and oblique orientations,
big-endian, extensions, .nii and .nii.gz), as stored and as nibabel's
as_closest_canonical; bad files fail with the file and the cause; volume
datasets (KiTS19 layout, list files).

Tolerances: sluice computes stored x slope + inter in double and rounds
once to float32, as nibabel's get_fdata() computes it in float64, so the
array must equal get_fdata().astype(float32) exactly (|difference| <= half
a float32 ulp of the float64 value). Affines: within 1e-9 (they come out
bit-equal on these files; the qform is computed in long double as nibabel
does). Skips when the module was built without NIfTI support or nibabel is
missing; the shared-data test skips when the data is absent."""
import gzip
import re
import os
import shutil
import struct

import numpy as np
import pytest

SLUICE = os.environ.get("SLUICE")
sluice = pytest.importorskip("sluice", reason="sluice module not built")
nib = pytest.importorskip("nibabel", reason="nibabel not installed "
                          "(scripts/install-deps --python)")
if not getattr(sluice._sluice, "HAVE_NIFTI", 0):
    pytest.skip("sluice built without NIfTI support (-DSL_NIFTI=OFF or no "
                "libnifti2-dev)", allow_module_level=True)

SHARED = os.environ.get("SL_SHARED_DATA", "")
NIFTI_DIR = os.path.join(SHARED, "nifti")
AFFINE_TOL = 1e-9


def check_equal(path, orient="stored"):
    """Loads path with sluice and nibabel; asserts equality; returns the
    max |sluice - nibabel float64| and the affine's max difference."""
    img = nib.load(path)
    if orient == "ras":
        img = nib.as_closest_canonical(img)
    ref = img.get_fdata()
    data, aff = sluice.load_volume(path, orient=orient)
    assert data.dtype == np.float32
    assert data.shape == ref.shape, path
    assert data.flags["F_CONTIGUOUS"]
    diff = np.abs(data.astype(np.float64) - ref)
    assert np.array_equal(data, ref.astype(np.float32), equal_nan=True), (
        f"{path}: max |diff| {np.nanmax(diff)}")
    adiff = np.abs(aff - img.affine).max()
    assert adiff <= AFFINE_TOL, f"{path}: affine differs by {adiff}\n{aff}\n{img.affine}"
    return float(np.nanmax(diff)) if diff.size else 0.0, float(adiff)


def shared_files():
    if not os.path.isdir(NIFTI_DIR):
        return []
    return sorted(f for f in os.listdir(NIFTI_DIR)
                  if f.endswith(".nii") or f.endswith(".nii.gz"))


@pytest.mark.parametrize("orient", ["stored", "ras"])
def test_shared_files_equal_nibabel(orient):
    files = shared_files()
    if not files:
        pytest.skip(f"no NIfTI files in {NIFTI_DIR} (SL_SHARED_DATA)")
    for f in files:
        p = os.path.join(NIFTI_DIR, f)
        d, a = check_equal(p, orient)
        print(f"{f} [{orient}]: max |sluice - nibabel get_fdata()| = {d:.3g}, "
              f"affine max diff = {a:.3g}")


def test_shared_files_native_and_info():
    files = shared_files()
    if not files:
        pytest.skip(f"no NIfTI files in {NIFTI_DIR} (SL_SHARED_DATA)")
    for f in files:
        p = os.path.join(NIFTI_DIR, f)
        img = nib.load(p)
        raw = np.asanyarray(img.dataobj.get_unscaled())
        data, _ = sluice.load_volume(p, native=True)
        assert data.dtype == raw.dtype and np.array_equal(data, raw), f
        info = sluice.volume_info(p)
        assert info["shape"] == img.shape
        assert np.allclose(info["spacing"], img.header.get_zooms(), rtol=0, atol=0)
        assert "".join(nib.aff2axcodes(img.affine)) == info["axcodes"]
        slope = img.dataobj.slope
        assert info["scl_slope"] == pytest.approx(float(slope), rel=0, abs=0)
        assert info["scl_inter"] == float(img.dataobj.inter)


# ------------------------------------------------------------ edge cases

def rot(axis, deg):
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    m = np.eye(4)
    i, j = [(1, 2), (0, 2), (0, 1)][axis]
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def affine(zooms=(1.5, 2.0, 2.5), perm=(0, 1, 2), flips=(1, 1, 1),
           shift=(-10.0, 20.0, 5.5), rotation=None):
    a = np.zeros((4, 4))
    for i, (p, f, z) in enumerate(zip(perm, flips, zooms)):
        a[p, i] = f * z
    a[:3, 3] = shift
    a[3, 3] = 1
    if rotation is not None:
        a = rotation @ a
    return a


def data_of(dtype, shape=(5, 6, 7), seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(shape) * 1000).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)


def save(img, path):
    nib.save(img, str(path))
    return str(path)


def copy(src, dst):
    return str(shutil.copy(src, str(dst)))


def gz(path):
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
        g.write(f.read())
    return path + ".gz"


def patch(path, offset, fmt, *values):
    """Overwrites header bytes of an uncompressed .nii in the file's byte
    order."""
    with open(path, "r+b") as f:
        f.seek(0)
        sz = struct.unpack("<i", f.read(4))[0]
        end = "<" if sz in (348, 540) else ">"
        f.seek(offset)
        f.write(struct.pack(end + fmt, *values))
    return path


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32,
                                   np.float32, np.float64])
@pytest.mark.parametrize("ext", [".nii", ".nii.gz"])
def test_each_dtype(tmp_path, dtype, ext):
    img = nib.Nifti1Image(data_of(dtype), affine())
    img.set_data_dtype(dtype)
    p = save(img, tmp_path / ("v" + ext))
    check_equal(p)
    raw, _ = sluice.load_volume(p, native=True)
    assert raw.dtype == np.dtype(dtype)
    assert np.array_equal(raw, np.asanyarray(nib.load(p).dataobj.get_unscaled()))


@pytest.mark.parametrize("slope,inter", [(0.5, -3.0), (2.2086, 0.0), (1.0, 100.0),
                                         (0.0, 7.0), (float("nan"), 5.0),
                                         (-1.25, 0.5), (float("inf"), 1.0)])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16, np.float32])
def test_scaling(tmp_path, slope, inter, dtype):
    img = nib.Nifti1Image(data_of(dtype, seed=1), affine())
    img.set_data_dtype(dtype)
    p = save(img, tmp_path / "s.nii")
    patch(p, 112, "ff", slope, inter)  # scl_slope, scl_inter
    check_equal(p)
    check_equal(gz(p))
    info = sluice.volume_info(p)
    if slope == 0 or not np.isfinite(slope):
        assert (info["scl_slope"], info["scl_inter"]) == (1.0, 0.0)


def test_invalid_intercept(tmp_path):
    img = nib.Nifti1Image(data_of(np.int16), affine())
    p = save(img, tmp_path / "i.nii")
    patch(p, 112, "ff", 2.0, float("inf"))
    with pytest.raises(Exception):
        nib.load(p).get_fdata()
    with pytest.raises(sluice.Error, match=r"i\.nii: scl_inter inf is not finite"):
        sluice.load_volume(p)


@pytest.mark.parametrize("ext", [".nii", ".nii.gz"])
def test_nifti2_and_4d(tmp_path, ext):
    d = data_of(np.int16, (4, 5, 6, 3), seed=2)
    img = nib.Nifti2Image(d, affine(perm=(1, 0, 2), flips=(-1, 1, -1)))
    img.header.set_slope_inter(0.25, 10)
    p = save(img, tmp_path / ("n2" + ext))
    assert sluice.volume_info(p)["nifti_version"] == 2
    for o in ("stored", "ras"):
        check_equal(p, o)
    img1 = nib.Nifti1Image(d, affine(rotation=rot(2, 30)))
    p1 = save(img1, tmp_path / ("n1_4d" + ext))
    for o in ("stored", "ras"):
        check_equal(p1, o)
    assert sluice.load_volume(p1)[0].shape == (4, 5, 6, 3)


ORIENTATIONS = {
    "RAS": dict(),
    "LPS": dict(flips=(-1, -1, 1)),
    "LAS": dict(flips=(-1, 1, 1)),
    "ASL": dict(perm=(1, 2, 0), flips=(1, 1, -1)),
    "SPR": dict(perm=(2, 1, 0), flips=(1, -1, 1)),
    "IRP": dict(perm=(2, 0, 1), flips=(-1, 1, -1)),
    "oblique": dict(rotation=rot(0, 20) @ rot(1, -35) @ rot(2, 50)),
    "oblique45": dict(perm=(1, 0, 2), rotation=rot(2, 44.9)),
}


@pytest.mark.parametrize("name", sorted(ORIENTATIONS))
@pytest.mark.parametrize("xform", ["sform", "qform", "both"])
def test_orientations(tmp_path, name, xform):
    a = affine(**ORIENTATIONS[name])
    img = nib.Nifti1Image(data_of(np.float32, (4, 5, 6), seed=3), None)
    if xform in ("sform", "both"):
        img.set_sform(a, code=2)
    if xform in ("qform", "both"):
        img.set_qform(a, code=1)
    p = save(img, tmp_path / f"{name}.nii.gz")
    info = sluice.volume_info(p)
    assert info["affine_source"] == ("qform" if xform == "qform" else "sform")
    assert info["axcodes"] == "".join(nib.aff2axcodes(nib.load(p).affine))
    for o in ("stored", "ras"):
        check_equal(p, o)
    ras, aff = sluice.load_volume(p, orient="ras")
    assert "".join(nib.aff2axcodes(aff)) == "RAS"


def test_neither_form_uses_pixdims(tmp_path):
    img = nib.Nifti1Image(data_of(np.int16, (5, 6, 7)), affine())
    img.set_sform(None, code=0)
    img.set_qform(None, code=0)
    img.header.set_zooms((1.5, 2.0, 2.5))
    p = save(img, tmp_path / "none.nii")
    assert sluice.volume_info(p)["affine_source"] == "pixdim"
    check_equal(p)
    check_equal(p, "ras")  # the fallback is LAS: x flips


def test_qform_qfac_negative_and_odd_pixdims(tmp_path):
    """qfac -1 (a reflection in the qform), a negative and a zero pixdim and
    an invalid qfac (nibabel fixes them on load: abs, 1, qfac 1)."""
    a = affine(flips=(1, 1, -1), rotation=rot(1, 15))
    img = nib.Nifti1Image(data_of(np.int16, (4, 5, 6)), None)
    img.set_qform(a, code=1)
    img.set_sform(None, code=0)
    p = save(img, tmp_path / "q.nii")
    check_equal(p)
    check_equal(p, "ras")
    patch(p, 76, "ffff", 0.5, -1.5, 0.0, 2.0)  # pixdim[0..3]: bad qfac
    check_equal(p)
    check_equal(p, "ras")


def test_big_endian_and_extension(tmp_path):
    hdr = nib.Nifti1Header(endianness=">")
    d = data_of(np.int32, (3, 4, 5), seed=4)
    img = nib.Nifti1Image(d, affine(), header=hdr)
    img.header.extensions.append(nib.nifti1.Nifti1Extension("comment", b"x" * 100))
    p = save(img, tmp_path / "be.nii")
    info = sluice.volume_info(p)
    assert info["big_endian"] and info["vox_offset"] > 352
    check_equal(p)
    check_equal(gz(p))


def test_low_dims(tmp_path):
    for shape in [(7,), (6, 5)]:
        img = nib.Nifti1Image(data_of(np.int16, shape), affine())
        p = save(img, tmp_path / f"d{len(shape)}.nii")
        check_equal(p)
        assert sluice.load_volume(p)[0].shape == shape


def test_data_stays_alive():
    """The array owns the volume: it outlives every other reference."""
    files = shared_files()
    if not files:
        pytest.skip("no shared NIfTI files")
    a = sluice.load_volume(os.path.join(NIFTI_DIR, files[0]))[0]
    s = a[::7, ::5, ::3].copy()
    import gc
    gc.collect()
    assert np.array_equal(a[::7, ::5, ::3], s)


# ---------------------------------------------------------------- errors

@pytest.fixture
def good(tmp_path):
    img = nib.Nifti1Image(data_of(np.int16, (8, 9, 10)), affine())
    return save(img, tmp_path / "good.nii")


def expect(path, pattern, exc=sluice.Error, **kw):
    with pytest.raises(exc) as e:
        sluice.load_volume(path, **kw)
    msg = str(e.value)
    assert os.path.basename(path) in msg, msg
    assert re.search(pattern, msg), msg
    return msg


def test_truncated(tmp_path, good):
    raw = open(good, "rb").read()
    t = str(tmp_path / "trunc.nii")
    open(t, "wb").write(raw[:-100])
    expect(t, r"truncated.*need 1440 bytes from offset 352, the file has 1692")
    with gzip.open(str(tmp_path / "trunc2.nii.gz"), "wb") as g:
        g.write(raw[:-100])
    expect(str(tmp_path / "trunc2.nii.gz"), r"truncated: the data ends after 1340 of its 1440")
    gzb = gzip.compress(raw)
    for cut in (10, len(gzb) // 2, len(gzb) - 4):
        p = str(tmp_path / f"cut{cut}.nii.gz")
        open(p, "wb").write(gzb[:cut])
        expect(p, r"damaged gzip|truncated|not a NIfTI")
    open(str(tmp_path / "hdr.nii"), "wb").write(raw[:200])
    expect(str(tmp_path / "hdr.nii"), r"200 bytes, shorter than a header")
    bad = bytearray(gzb)
    bad[len(bad) // 2] ^= 0xFF
    open(str(tmp_path / "flip.nii.gz"), "wb").write(bytes(bad))
    expect(str(tmp_path / "flip.nii.gz"), r"damaged gzip|truncated")


def test_lying_headers(tmp_path, good):
    p = patch(copy(good, tmp_path / "big.nii"), 40, "hhhhh", 4, 32767, 32767, 32767, 32767)
    expect(p, r"truncated, or a header that lies")
    p = patch(copy(good, tmp_path / "neg.nii"), 40, "hhhh", 3, 8, -9, 10)
    expect(p, r"dim\[2\] = -9 \(a size must be >= 1\)")
    p = patch(copy(good, tmp_path / "zero.nii"), 40, "h", 0)
    expect(p, r"dim\[0\] = 0")
    p = patch(copy(good, tmp_path / "five.nii"), 40, "hhhhhh", 5, 8, 9, 10, 1, 2)
    expect(p, r"5 dimensions \(1 to 4 are supported\)")
    p = patch(copy(good, tmp_path / "off.nii"), 108, "f", 1e9)
    expect(p, r"need 1440 bytes from offset 1000000000")
    p = patch(copy(good, tmp_path / "offlow.nii"), 108, "f", 16.0)
    expect(p, r"vox_offset 16 lies inside the header")
    p = patch(copy(good, tmp_path / "offnan.nii"), 108, "f", float("nan"))
    expect(p, r"vox_offset nan is not a file offset")
    # A gzip of a few KB that claims 32767^3 int16 values: refused before
    # anything is allocated, by what the gzip can inflate to.
    p = patch(copy(good, tmp_path / "bomb.nii"), 40, "hhhh", 3, 32767, 32767, 32767)
    expect(gz(p), r"more than a gzip file of \d+ bytes can hold")
    # NIfTI-2: dims whose product overflows 64 bits
    img2 = nib.Nifti2Image(data_of(np.int16, (4, 4, 4)), affine())
    p2 = save(img2, tmp_path / "ovf.nii")
    patch(p2, 16, "qqqqq", 4, 2**40, 2**40, 2**40, 2**40)
    expect(p2, r"overflow")


def test_unsupported_and_not_nifti(tmp_path, good):
    img = nib.Nifti1Image(data_of(np.int64), affine(), dtype=np.int64)
    p = save(img, tmp_path / "i64.nii.gz")
    e = expect(p, r"datatype 1024 \(INT64\) is not supported")
    assert "uint8, int8, int16, uint16, int32, uint32, float32, float64" in e
    p = patch(copy(good, tmp_path / "dt.nii"), 70, "h", 999)
    expect(p, r"datatype 999 \(not a NIfTI code\) is not supported")
    junk = str(tmp_path / "junk.nii")
    open(junk, "wb").write(b"\0" * 400)
    expect(junk, r"not a NIfTI file \(sizeof_hdr 0")
    p = patch(copy(good, tmp_path / "ana.nii"), 344, "4s", b"\0\0\0\0")
    expect(p, r"Analyze 7.5")
    p = patch(copy(good, tmp_path / "pair.nii"), 344, "4s", b"ni1\0")
    expect(p, r"two-file")
    expect(str(tmp_path / "missing.nii"), r"missing\.nii", sluice.Error)
    fifo = str(tmp_path / "fifo.nii")
    os.mkfifo(fifo)
    expect(fifo, r"not a regular file")  # refused at once, not waited on
    expect(good, r"max_bytes allows", MemoryError, max_bytes=1000)
    with pytest.raises(ValueError):
        sluice.load_volume(good, orient="lps")


def test_qform_not_unit(tmp_path, good):
    p = patch(copy(good, tmp_path / "q.nii"), 252, "hh", 1, 0)  # qform 1, sform 0
    patch(p, 256, "fff", 0.9, 0.9, 0.9)  # quatern b, c, d
    with pytest.raises(Exception):
        nib.load(p).affine
    expect(p, r"quaternion .* longer than 1")


# --------------------------------------------------------------- datasets

def make_case(root, name, label=True, ext=".nii.gz"):
    d = os.path.join(root, name)
    os.makedirs(d)
    img = nib.Nifti1Image(data_of(np.int16, (4, 5, 6)), affine())
    save(img, os.path.join(d, "imaging" + ext))
    if label:
        seg = nib.Nifti1Image((data_of(np.uint8, (4, 5, 6)) % 3).astype(np.uint8), affine())
        save(seg, os.path.join(d, "segmentation" + ext))


def test_kits_layout(tmp_path):
    root = str(tmp_path / "kits")
    make_case(root, "case_00001")
    make_case(root, "case_00000", ext=".nii")
    os.makedirs(os.path.join(root, "notes"))  # not a case: left out
    cases = sluice.volume_dataset(root)
    assert [c[0] for c in cases] == ["case_00000", "case_00001"]
    assert cases[0][1].endswith("case_00000/imaging.nii")
    assert cases[1][2].endswith("case_00001/segmentation.nii.gz")
    for _, im, lab in cases:
        check_equal(im)
        seg, _ = sluice.load_volume(lab, native=True)
        assert seg.dtype == np.uint8
    make_case(root, "case_00002", label=False)
    with pytest.raises(sluice.Error, match=r"case_00002: no label volume"):
        sluice.volume_dataset(root)
    assert sluice.volume_dataset(root, unlabeled=True)[2][2] is None
    os.remove(os.path.join(root, "case_00002", "imaging.nii.gz"))
    save(nib.Nifti1Image(np.zeros((2, 2, 2), np.uint8), np.eye(4)),
         os.path.join(root, "case_00002", "segmentation.nii.gz"))
    with pytest.raises(sluice.Error, match=r"case_00002: a label .* without its image"):
        sluice.volume_dataset(root)
    with pytest.raises(sluice.Error, match=r"no case folders"):
        sluice.volume_dataset(str(tmp_path))


def test_list_file(tmp_path):
    root = str(tmp_path / "kits")
    make_case(root, "a")
    make_case(root, "b", label=False)
    lst = tmp_path / "list.txt"
    lst.write_text("# image label\n\nkits/a/imaging.nii.gz kits/a/segmentation.nii.gz\r\n"
                   f"{root}/a/imaging.nii.gz\tkits/a/segmentation.nii.gz\n")
    cases = sluice.volume_dataset(str(lst))
    assert [c[0] for c in cases] == ["kits/a/imaging.nii.gz", f"{root}/a/imaging.nii.gz"]
    assert all(os.path.isfile(c[1]) and os.path.isfile(c[2]) for c in cases)
    lst.write_text("kits/a/imaging.nii.gz kits/a/segmentation.nii.gz\nkits/b/imaging.nii.gz\n")
    with pytest.raises(sluice.Error, match=r"list\.txt:2: kits/b/imaging\.nii\.gz has no label"):
        sluice.volume_dataset(str(lst))
    assert sluice.volume_dataset(str(lst), unlabeled=True)[1][2] is None
    lst.write_text("kits/a/imaging.nii.gz kits/a/nope.nii.gz\n")
    with pytest.raises(sluice.Error, match=r"list\.txt:1: label .*nope\.nii\.gz: not found"):
        sluice.volume_dataset(str(lst))
    lst.write_text("a b c\n")
    with pytest.raises(sluice.Error, match=r"list\.txt:1: 3 fields"):
        sluice.volume_dataset(str(lst))


# ------------------------------------------------------ packs of volumes

def pack(src, out, *extra):
    import subprocess
    if not SLUICE:
        pytest.skip("SLUICE not set")
    return subprocess.run([SLUICE, "pack", "--volumes", str(src), str(out), *extra],
                          capture_output=True, text=True)


def test_pack_roundtrip(tmp_path):
    root = tmp_path / "kits"
    make_case(str(root), "case_00000")
    # a big-endian int32 image and a NIfTI-2 4-D label, uncompressed
    d = root / "case_00001"
    d.mkdir()
    hdr = nib.Nifti1Header(endianness=">")
    img = nib.Nifti1Image(data_of(np.int32, (5, 4, 3), seed=7),
                          affine(perm=(2, 0, 1), flips=(-1, 1, 1)), header=hdr)
    img.header.set_slope_inter(0.5, 3)
    save(img, d / "imaging.nii")
    save(nib.Nifti2Image(data_of(np.uint8, (5, 4, 3, 2)), affine()), d / "segmentation.nii")
    make_case(str(root), "case_00002", label=False)
    r = pack(root, tmp_path / "p")
    assert r.returncode == 1 and "case_00002: no label volume" in r.stderr
    assert not (tmp_path / "p").exists()
    r = pack(root, tmp_path / "p", "--unlabeled")
    assert r.returncode == 0, r.stderr
    assert "packed 3 volume cases" in r.stdout and "[codec zstd]" in r.stdout
    with pytest.raises(sluice.Error, match=r"record 2 \(case_00002\) has no label volume"):
        sluice.VolumeDataset(tmp_path / "p")
    packed = sluice.VolumeDataset(tmp_path / "p", unlabeled=True)
    files = sluice.VolumeDataset(root, unlabeled=True)
    assert [c[0] for c in packed.cases] == [c[0] for c in files.cases]
    assert [c[3] for c in packed.cases] == [True, True, False]
    assert packed.cases[0][1] is None
    for i in range(len(packed)):
        for orient in ("stored", "ras"):
            for native in (False, True):
                (a, af), (l, lf) = packed.load(i, orient, native)
                (b, bf), (m, mf) = files.load(i, orient, native)
                assert a.dtype == b.dtype and np.array_equal(a, b)
                assert np.array_equal(af, bf)
                if l is None:
                    assert m is None and i == 2
                else:
                    assert np.array_equal(l, m) and np.array_equal(lf, mf)
        check_equal(files.cases[i][1])  # and the files equal nibabel's
    (img1, aff1), _ = packed[1]
    ref = nib.load(str(d / "imaging.nii"))
    assert np.array_equal(img1, ref.get_fdata().astype(np.float32))
    assert np.abs(aff1 - ref.affine).max() <= AFFINE_TOL
    with pytest.raises(MemoryError, match=r"max_bytes allows"):
        packed.load(0, max_bytes=100)


def test_pack_damage_and_foreign_packs(tmp_path):
    root = tmp_path / "kits"
    make_case(str(root), "case_00000")
    assert pack(root, tmp_path / "p", "--codec", "none").returncode == 0
    shard = tmp_path / "p" / "shard-00000.sls"
    raw = bytearray(shard.read_bytes())
    raw[200] ^= 0x40  # inside the record: its checksum no longer matches
    shard.write_bytes(bytes(raw))
    ds = sluice.VolumeDataset(tmp_path / "p")
    with pytest.raises(sluice.Error, match=r"shard-00000\.sls: record 0 \(case_00000\).*checksum"):
        ds.load(0)
    # zstd: the record is streamed (decompressed a piece at a time, its
    # checksum checked at its end); a flipped byte or a record cut short is
    # still an error naming the shard and the record, for loads and readers
    assert pack(root, tmp_path / "z").returncode == 0
    shard = tmp_path / "z" / "shard-00000.sls"
    good = shard.read_bytes()
    raw = bytearray(good)
    raw[len(raw) // 3] ^= 0x40
    shard.write_bytes(bytes(raw))
    ds = sluice.VolumeDataset(tmp_path / "z")
    with pytest.raises(sluice.Error,
                       match=r"shard-00000\.sls: record 0 \(case_00000\).*(checksum|zstd)"):
        ds.load(0)
    shard.write_bytes(good)
    ds = sluice.VolumeDataset(tmp_path / "z")
    shard.write_bytes(good[:len(good) // 2])  # cut while open
    with pytest.raises(sluice.Error,
                       match=r"shard-00000\.sls: record 0 \(case_00000\).*ended early"):
        ds.load(0)
    # a text pack is not a pack of volumes
    import subprocess
    txt = tmp_path / "docs.txt"
    txt.write_text("one document\nanother\n")
    r = subprocess.run([SLUICE, "pack", "--text", str(txt), "-o", str(tmp_path / "t")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ds = sluice.VolumeDataset(tmp_path / "t", unlabeled=True)
    with pytest.raises(sluice.Error, match=r"record 0 .*not a volume record"):
        ds.load(0)
