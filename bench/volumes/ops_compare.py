#!/usr/bin/env python3
"""The 3-D U-Net preprocessing ops: sluice (C, sluice/volops.h) against the
MLPerf KiTS19 reference's NumPy/SciPy/torch code, one thread each, on the
same volumes, alternating, medians.

Volumes: each shared NIfTI file (../shared/data/nifti, 3-D ones) resampled
by the reference's own torch call to KiTS-like shapes (64-300 slices of
128^2-512^2), with a synthetic
label (a kidney-like ellipsoid of class 1 holding a class-2 tumour, and
a second kidney), spacing drawn like KiTS's (slice thickness 0.5-5 mm).

Offline = resample (image trilinear, label nearest) + clip/z-score + pad
to 128^3. Online = balanced crop (oversampling 0.4) + flips + cast +
brightness + noise, 128^3 patch, per sample.

    SL_LIB=build/libsluice.so .venv/bin/python bench/volumes/ops_compare.py [--runs 5] [--samples 8] [--json]
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.ndimage
import torch

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
TARGET = (1.6, 1.2, 1.2)
sys.path.append(str(ROOT / "build" / "python"))  # after PYTHONPATH
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kits_like import kidney_labels  # noqa: E402
from sluice.volumes_ctypes import Aug, Draw, F64x3, I64x3, bind  # noqa: E402,F401


def load_lib(path):
    return bind(ctypes.CDLL(path))


def D(a):
    return I64x3(*a.shape)


# ------------------------------------------------------------------ sluice

def sl_offline(L, img, lbl, spacing):
    out = I64x3()
    assert L.sl_vol_resample_shape(D(img), F64x3(*spacing), F64x3(*TARGET), out) == 0
    ri = np.empty(tuple(out), np.float32)
    rl = np.empty(tuple(out), np.uint8)
    assert L.sl_vol_resample_linear(img.ctypes.data, D(img), ri.ctypes.data, out) == 0
    assert L.sl_vol_resample_nearest(lbl.ctypes.data, D(lbl), rl.ctypes.data, out) == 0
    L.sl_vol_normalize(ri.ctypes.data, ri.size, -79.0, 304.0, 101.0, 76.9)
    mins, od = I64x3(128, 128, 128), I64x3()
    L.sl_vol_pad_edge(None, out, 4, mins, None, od)
    pi = np.empty(tuple(od), np.float32)
    pl = np.empty(tuple(od), np.uint8)
    L.sl_vol_pad_edge(ri.ctypes.data, out, 4, mins, pi.ctypes.data, od)
    L.sl_vol_pad_edge(rl.ctypes.data, out, 1, mins, pl.ctypes.data, od)
    return pi, pl


def sl_online(L, aug, img, lbl, sample):
    d = Draw()
    assert L.sl_vol_draw(lbl.ctypes.data, D(lbl), ctypes.byref(aug), 1, 0, sample,
                         ctypes.byref(d), None, 0) == 0
    oi = np.empty((128, 128, 128), np.float32)
    ol = np.empty((128, 128, 128), np.uint8)
    assert L.sl_vol_apply(img.ctypes.data, lbl.ctypes.data, D(img), ctypes.byref(aug),
                          ctypes.byref(d), 1, 0, sample, oi.ctypes.data, ol.ctypes.data) == 0
    return oi, ol


# --------------------------------------------- the reference (MLPerf code's logic)

def ref_offline(img, lbl, spacing):
    new_shape = (np.array(spacing) / np.array(TARGET) * np.array(img.shape)).astype(int).tolist()
    ri = torch.nn.functional.interpolate(torch.from_numpy(img[None, None]), size=new_shape,
                                         mode="trilinear", align_corners=True)[0, 0].numpy()
    rl = torch.nn.functional.interpolate(torch.from_numpy(lbl[None, None]), size=new_shape,
                                         mode="nearest")[0, 0].numpy()
    ri = (np.clip(ri, -79.0, 304.0) - 101.0) / 76.9
    bounds = [max(0, 128 - s) for s in ri.shape]
    pads = [(b // 2, b - b // 2) for b in bounds]
    return np.pad(ri, pads, mode="edge"), np.pad(rl, pads, mode="edge")


def ref_online(img, lbl, patch=(128, 128, 128)):
    def randrange(n):
        return 0 if n == 0 else random.randrange(n)

    if random.random() < 0.4:
        cl = np.random.choice(np.unique(lbl[lbl > 0]))
        sls = scipy.ndimage.find_objects(scipy.ndimage.label(lbl == cl)[0])
        sls = [s for s in sls if s is not None]
        vols = [np.prod([s.stop - s.start for s in sl]) for sl in sls]
        sl = [sls[i] for i in np.argsort(vols)[-2:]][random.randrange(min(2, len(sls)))]
        lo = []
        for ax in range(3):
            diff = patch[ax] - (sl[ax].stop - sl[ax].start)
            sign = -1 if diff < 0 else 1
            diff = abs(diff)
            ladj = randrange(diff)
            low = max(0, sl[ax].start - sign * ladj)
            high = min(lbl.shape[ax], sl[ax].stop + sign * (diff - ladj))
            diff = patch[ax] - (high - low)
            if diff > 0 and low == 0:
                high += diff
            elif diff > 0:
                low -= diff
            lo.append(low)
    else:
        lo = [randrange(s - p) for s, p in zip(lbl.shape, patch)]
    sl = tuple(slice(lo[i], lo[i] + patch[i]) for i in range(3))
    image, label = img[sl], lbl[sl]
    for ax in range(3):
        if random.random() < 1 / 3:
            image, label = np.flip(image, ax).copy(), np.flip(label, ax).copy()
    image, label = image.astype(np.float32), label.astype(np.uint8)
    if random.random() < 0.1:
        image = (image * (1 + np.random.uniform(0.7, 1.3, size=1))).astype(image.dtype)
    if random.random() < 0.1:
        scale = np.random.uniform(0.0, 0.1)
        image = image + np.random.normal(0.0, scale, size=image.shape).astype(image.dtype)
    return image, label


# ------------------------------------------------------------------ volumes

def volumes(n):
    import nibabel as nib
    shared = Path(os.environ.get("SL_SHARED_DATA", ROOT.parent / "shared" / "data")) / "nifti"
    files = [f for f in sorted(shared.glob("*.nii*")) if nib.load(str(f)).ndim == 3]
    if not files:
        sys.exit(f"ops_compare: no 3-D NIfTI volumes under {shared} (skipped)")
    rng = np.random.default_rng(0)
    out = []
    for k in range(n):
        src = nib.load(str(files[k % len(files)])).get_fdata().astype(np.float32)
        thick = float(rng.uniform(0.5, 5.0))
        inplane = float(rng.uniform(0.6, 0.9))
        # KiTS-like: 64-300 slices of 128^2-512^2 (the issue's range, capped
        # at 300 slices to fit a 2-core VM's minutes).
        shape = [int(rng.integers(64, 300)), int(rng.choice([128, 256, 384, 512])), 0]
        shape[2] = shape[1]
        img = torch.nn.functional.interpolate(torch.from_numpy(src[None, None]), size=shape,
                                              mode="trilinear", align_corners=True)[0, 0].numpy()
        img = np.ascontiguousarray(img * 4.0 - 200.0 + rng.normal(0, 20, img.shape)
                                   .astype(np.float32))
        lbl = kidney_labels(shape)
        out.append((img, lbl, (thick, inplane, inplane)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--volumes", type=int, default=4)
    ap.add_argument("--samples", type=int, default=8, help="online patches per volume per run")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    lib = os.environ.get("SL_LIB", str(ROOT / "build" / "libsluice.so"))
    L = load_lib(lib)
    aug = Aug()
    L.sl_vol_aug_init(ctypes.byref(aug))
    vols = volumes(a.volumes)
    print(f"{len(vols)} volumes: " + ", ".join("x".join(map(str, v[0].shape)) for v in vols),
          file=sys.stderr)
    prepared = [sl_offline(L, *v) for v in vols]
    times = {"sluice_offline": [], "ref_offline": [], "sluice_online": [], "ref_online": []}
    for run in range(a.runs):
        random.seed(run)
        np.random.seed(run)
        for side in (("sluice", "ref") if run % 2 == 0 else ("ref", "sluice")):
            t0 = time.perf_counter()
            for v in vols:
                (sl_offline(L, *v) if side == "sluice" else ref_offline(*v))
            times[f"{side}_offline"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for img, lbl in prepared:
                for s in range(a.samples):
                    (sl_online(L, aug, img, lbl, run * 1000 + s) if side == "sluice"
                     else ref_online(img, lbl))
            times[f"{side}_online"].append(time.perf_counter() - t0)
        print(f"run {run + 1}/{a.runs}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in
                                                       times.items()), file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    n_on = len(prepared) * a.samples
    res = {
        "volumes": [list(v[0].shape) for v in vols],
        "offline_ms_per_volume": {s: 1e3 * med[f"{s}_offline"] / len(vols) for s in ("sluice", "ref")},
        "online_ms_per_patch": {s: 1e3 * med[f"{s}_online"] / n_on for s in ("sluice", "ref")},
        "offline_speedup": med["ref_offline"] / med["sluice_offline"],
        "online_speedup": med["ref_online"] / med["sluice_online"],
        "runs": a.runs, "samples": a.samples,
    }
    if a.json:
        print(json.dumps(res))
    else:
        print(f"offline: sluice {res['offline_ms_per_volume']['sluice']:.0f} ms/volume, reference "
              f"{res['offline_ms_per_volume']['ref']:.0f} -> {res['offline_speedup']:.2f}x")
        print(f"online:  sluice {res['online_ms_per_patch']['sluice']:.1f} ms/patch, reference "
              f"{res['online_ms_per_patch']['ref']:.1f} -> {res['online_speedup']:.2f}x")


if __name__ == "__main__":
    main()
