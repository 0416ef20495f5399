#!/usr/bin/env python3
"""The online 3-D U-Net pipeline (balanced crop 128^3, flips, cast,
brightness, noise; batch 2) three ways, on the same KiTS-like cases,
alternating, medians of patches/s:

  reference  torch DataLoader over a Dataset applying the MLPerf
             reference's NumPy/SciPy transforms (pytorch_loader.py's logic)
             to the preprocessed volumes held in memory; num_workers 0..W,
             the best reported
  monai      monai.data.DataLoader over a CacheDataset of the same
             preprocessed volumes with the equivalent MONAI transforms
             (RandCropByPosNegLabeld pos 0.4, RandFlipd per axis 1/3,
             CastToTyped, RandScaleIntensityd 0.1, RandGaussianNoised 0.1);
             num_workers 0..W, the best
  sluice     sluice.volumes.DataLoader (threads = cores), offline stage
             cached in epoch 0, which is excluded

Each measures --epochs epochs after one warm-up epoch. --largest N adds N
cases of the issue's largest size class (600 x 512^2; balance.make_data)
to the set, in their own folder by default.

    PYTHONPATH=build/python .venv/bin/python bench/volumes/peers.py [--runs 3] [--json]
        [--largest 1]
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import balance  # noqa: E402  (make_data; puts build/python on the path)
import ops_compare  # noqa: E402  (ref_offline, ref_online)
from sluice.volumes import DataLoader as SluiceVolumes  # noqa: E402


class RefDataset(torch.utils.data.Dataset):
    def __init__(self, vols):
        self.vols = vols

    def __len__(self):
        return len(self.vols)

    def __getitem__(self, i):
        img, lbl = ops_compare.ref_online(*self.vols[i])
        return img[None], lbl[None]


def preprocessed(data):
    import nibabel as nib
    out = []
    for d in sorted(p for p in Path(data).iterdir() if p.name.startswith("case_")):
        im = nib.load(str(d / "imaging.nii.gz"))
        sp = im.header["pixdim"][1:4].tolist()
        img = im.get_fdata().astype(np.float32)
        lbl = nib.load(str(d / "segmentation.nii.gz")).get_fdata().astype(np.uint8)
        out.append(ops_compare.ref_offline(img, lbl, sp))
    return out


def timed_epochs(loader, epochs):
    for _ in loader:  # warm-up epoch (workers start; sluice: offline stage)
        pass
    n = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for b in loader:
            x = b[0] if isinstance(b, (list, tuple)) else b["image"]
            n += x.shape[0]
    return n / (time.perf_counter() - t0)


def run_ref(vols, workers, epochs):
    dl = torch.utils.data.DataLoader(RefDataset(vols), batch_size=2, shuffle=True,
                                     num_workers=workers, persistent_workers=workers > 0)
    return timed_epochs(dl, epochs)


def run_monai(vols, workers, epochs):
    from monai.data import CacheDataset
    from monai.data import DataLoader as MDL
    from monai.transforms import (CastToTyped, Compose, RandCropByPosNegLabeld, RandFlipd,
                                  RandGaussianNoised, RandScaleIntensityd)
    keys = ["image", "label"]
    tf = Compose([
        RandCropByPosNegLabeld(keys=keys, label_key="label", spatial_size=(128, 128, 128),
                               pos=0.4, neg=0.6, num_samples=1),
        RandFlipd(keys=keys, prob=1 / 3, spatial_axis=0),
        RandFlipd(keys=keys, prob=1 / 3, spatial_axis=1),
        RandFlipd(keys=keys, prob=1 / 3, spatial_axis=2),
        CastToTyped(keys=keys, dtype=(np.float32, np.uint8)),
        RandScaleIntensityd(keys="image", factors=0.3, prob=0.1),
        RandGaussianNoised(keys="image", prob=0.1, mean=0.0, std=0.1),
    ])
    data = [{"image": img[None], "label": lbl[None]} for img, lbl in vols]
    ds = CacheDataset(data, transform=tf, cache_rate=1.0, num_workers=1, progress=False)
    dl = MDL(ds, batch_size=2, shuffle=True, num_workers=workers,
             persistent_workers=workers > 0)
    return timed_epochs(dl, epochs)


def run_sluice(data, threads, epochs):
    with SluiceVolumes(data, batch_size=2, patch=(128, 128, 128), threads=threads) as dl:
        return timed_epochs(dl, epochs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None,
                    help="the set's folder (/tmp/sluice-kits-bench, -xl with --largest)")
    ap.add_argument("--cases", type=int, default=12)
    ap.add_argument("--largest", type=int, default=0,
                    help="cases of the largest size class (600 x 512^2) added")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-workers", type=int, default=os.cpu_count())
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.data is None:
        a.data = "/tmp/sluice-kits-bench" + ("-xl" if a.largest else "")
    data = balance.make_data(a.data, a.cases, largest=a.largest)
    vols = preprocessed(data)
    cores = os.cpu_count()
    res = {}
    for r in range(a.runs):
        cfgs = [("sluice", cores)] + [(p, w) for w in range(a.max_workers + 1)
                                      for p in ("reference", "monai")]
        if r % 2:
            cfgs.reverse()
        for peer, w in cfgs:
            f = (run_sluice(data, w, a.epochs) if peer == "sluice" else
                 run_ref(vols, w, a.epochs) if peer == "reference" else
                 run_monai(vols, w, a.epochs))
            res.setdefault((peer, w), []).append(f)
            print(f"run {r + 1}: {peer} {'threads' if peer == 'sluice' else 'workers'}={w}: "
                  f"{f:.2f} patches/s", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in res.items()}
    best = {p: max((v, w) for (q, w), v in med.items() if q == p)
            for p in ("sluice", "reference", "monai")}
    out = {"patches_per_s": {f"{p}/{w}": v for (p, w), v in med.items()},
           "best": {p: {"patches_per_s": v, "workers": w} for p, (v, w) in best.items()},
           "vs_reference": best["sluice"][0] / best["reference"][0],
           "vs_monai": best["sluice"][0] / best["monai"][0], "settings": vars(a)}
    if a.json:
        print(json.dumps(out))
    else:
        for p, (v, w) in best.items():
            print(f"{p:10s} {v:6.2f} patches/s (best at {w})")
        print(f"sluice / reference = {out['vs_reference']:.2f}x, "
              f"sluice / monai = {out['vs_monai']:.2f}x")


if __name__ == "__main__":
    main()
