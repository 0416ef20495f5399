#!/usr/bin/env python3
"""Generic mode vs torch's DataLoader on a PIL-based torchvision ImageFolder.

Transform: RandomResizedCrop(224) + RandomHorizontalFlip + PILToTensor
(--transform eval: Resize(256) + CenterCrop(224) + PILToTensor), shuffle,
batch 64.  Runs alternate (torch with each num_workers, then sluice's
GenericLoader with each, then GenericLoader with fast_path=False) inside every
repeat, so drifting machine load hits all alike; prints the median samples/s
of each configuration and the ratio of GenericLoader's best to torch's best.
GenericLoader comes from build/python (the built package, with its exact
crop-decode fast path) when that exists, else from python/sluice/_generic.py
alone (no fast path).  Check `uptime` first: others may be benchmarking on
the same cores.

  .venv/bin/python bench/generic_compare.py [--root DIR] [--images N] [--json]
"""

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torchvision
from torchvision import transforms as T

ROOT = Path(__file__).resolve().parents[1]


def load_generic():
    built = ROOT / "build" / "python"
    if (built / "sluice" / "_generic.py").exists():
        sys.path.insert(0, str(built))
        from sluice._generic import GenericLoader
        return GenericLoader
    spec = importlib.util.spec_from_file_location(
        "sluice_generic_bench", ROOT / "python" / "sluice" / "_generic.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.GenericLoader


def run(loader, epochs):
    n = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for images, labels in loader:
            n += images.shape[0]
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str((ROOT / ".." / "shared" / "data" / "imagenet-sample").resolve()))
    ap.add_argument("--images", type=int, default=0, help="use the first N images (0: all)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--torch-workers", default="1,2,3,4")
    ap.add_argument("--sluice-workers", default="2,3")
    ap.add_argument("--nofast-workers", default="2",
                    help="GenericLoader with fast_path=False at these num_workers ('' : none)")
    ap.add_argument("--transform", choices=("train", "eval"), default="train",
                    help="train: RandomResizedCrop(224)+RandomHorizontalFlip+PILToTensor; "
                         "eval: Resize(256)+CenterCrop(224)+PILToTensor")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    GenericLoader = load_generic()
    if a.transform == "train":
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    else:
        tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
    if a.images:
        ds = torch.utils.data.Subset(ds, range(min(a.images, len(ds))))
    tw = [int(x) for x in a.torch_workers.split(",")]
    sw = [int(x) for x in a.sluice_workers.split(",")]
    res = {f"torch_w{w}": [] for w in tw}
    nw = [int(x) for x in a.nofast_workers.split(",") if x]
    res.update({f"sluice_w{w}": [] for w in sw})
    res.update({f"nofast_w{w}": [] for w in nw})

    fast = "none"
    for rep in range(a.repeats):
        for w in tw:
            dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=w,
                                             persistent_workers=True)
            res[f"torch_w{w}"].append(run(dl, a.epochs))
            del dl
        for w in sw:
            with GenericLoader(ds, batch_size=a.batch, shuffle=True, num_workers=w,
                               persistent_workers=True, seed=rep) as gl:
                res[f"sluice_w{w}"].append(run(gl, a.epochs))
                fast = gl.stats().get("fast_path", "none")
        for w in nw:
            with GenericLoader(ds, batch_size=a.batch, shuffle=True, num_workers=w,
                               persistent_workers=True, seed=rep, fast_path=False) as gl:
                res[f"nofast_w{w}"].append(run(gl, a.epochs))
        print(f"repeat {rep}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in res.items()),
              file=sys.stderr, flush=True)

    med = {k: statistics.median(v) for k, v in res.items()}
    tbest = max((k for k in med if k.startswith("torch")), key=med.get)
    sbest = max((k for k in med if k.startswith("sluice")), key=med.get)
    print(f"images {len(ds)}, batch {a.batch}, epochs {a.epochs}, repeats {a.repeats} "
          f"(median samples/s); sluice fast path: {fast}")
    for k, v in med.items():
        print(f"  {k:10s} {v:8.1f}   runs: " + " ".join(f"{x:.1f}" for x in res[k]))
    ratio = med[sbest] / med[tbest]
    r2 = med.get("sluice_w2", float("nan")) / med[tbest]
    print(f"torch best {tbest} {med[tbest]:.1f}; sluice best {sbest} {med[sbest]:.1f}; "
          f"ratio {ratio:.3f} (sluice w2 / torch best: {r2:.3f})")
    if a.json:
        print(json.dumps({"torch_best": tbest, "torch_samples_per_s": med[tbest],
                          "sluice_best": sbest, "sluice_samples_per_s": med[sbest],
                          "ratio": ratio, "fast_path": fast, "medians": med, "runs": res}))


if __name__ == "__main__":
    main()
