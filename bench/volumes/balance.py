#!/usr/bin/env python3
"""The volume loader's cost-aware balancer (issue 17 item 3): consumer wait
and batch-ready latency (p50, p99) with `balance=True` (least slack first
within the prefetch window, idle threads running later cases' offline
stages ahead, a large case's offline stage split in slabs over the free
threads) against `balance=False` (samples in order), same data, same
run, alternating, medians.

Data: a KiTS19-layout folder generated from the shared NIfTI volumes
(../shared/data/nifti), resampled to mixed sizes (64-300 slices of
128^2-512^2, slice thickness 0.5-5 mm) with synthetic kidney/tumour labels,
written once to --data (default /tmp/sluice-kits-bench; --plain: `.nii`
files, the large cases thick-sliced so that the stage resamples them to
2-3x their slices, to /tmp/sluice-kits-bench-plain: the case where a
stage split over threads should pay, gzip's inflate no longer the bulk of
it). The consumer holds
each batch for a step equal to --step-frac (0.8) x the loader's mean time
per batch, measured first with the balancer off and no step (the issue's
setting). Epoch 0 (the offline stage, cached) is excluded. With the whole
set cached the online stage's costs are alike (a noise draw ~10x a plain
patch); with --cache-mb below the set (datasets larger than RAM, as
KiTS19's 29 GB) evicted large cases are prepared again, at 10-100x a
patch: the regime a balancer is for. --largest adds cases of the issue's
largest size class (600 x 512^2); --memory-mb bounds the loader's memory
(the peak it held is reported).

    PYTHONPATH=build/python .venv/bin/python bench/volumes/balance.py [--runs 3] [--json]
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "build" / "python"))  # after PYTHONPATH
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kits_like import kidney_labels  # noqa: E402
from sluice.volumes import DataLoader  # noqa: E402


def make_data(out, n, seed=0, largest=0, plain=False):
    """n KiTS-like cases (a quarter 200-300 x 512^2, the rest 64-120 x
    128-256^2) and `largest` of the issue's largest size class, 600 x 512^2
    at 1.6 x 1.2 x 1.2 mm (resampled to itself: 157 M voxels, 630 MB as
    float32), each written once (a case already there is kept). plain:
    uncompressed `.nii` files, and the large quarter 120-200 x 512^2 with
    thick slices (3.2-4.8 mm) that the stage resamples to 1.6 mm (2-3x the
    slices: 240-600 x 512^2 out): reading is cheap and seekable, resampling
    heavy -- the cases whose offline stage splitting over threads is for."""
    import os

    import nibabel as nib
    import torch
    out = Path(out)
    shared = Path(os.environ.get("SL_SHARED_DATA", ROOT.parent / "shared" / "data")) / "nifti"
    files = None
    rng = np.random.default_rng(seed)
    for c in range(n + largest):
        big = c % 4 == 0  # a quarter of the cases are large
        xl = c >= n
        shape = [int(rng.integers(200, 300)) if big else int(rng.integers(64, 120)),
                 512 if big else int(rng.choice([128, 192, 256])), 0]
        shape[2] = shape[1]
        thick = float(rng.uniform(0.5, 5.0)) if not big else 1.6
        inpl = float(rng.uniform(0.6, 0.9)) if not big else 1.2
        if plain and big:
            shape[0] = int(rng.integers(120, 200))
            thick = float(rng.uniform(3.2, 4.8))
        if xl:
            shape, thick, inpl = [600, 512, 512], 1.6, 1.2
        d = out / f"case_{c:05d}"
        ext = ".nii" if plain else ".nii.gz"
        if (d / f"segmentation{ext}").exists():
            continue
        if files is None:
            files = [f for f in sorted(shared.glob("*.nii*")) if nib.load(str(f)).ndim == 3]
            if not files:
                sys.exit(f"balance: no 3-D NIfTI volumes under {shared} (skipped)")
        src = nib.load(str(files[c % len(files)])).get_fdata().astype(np.float32)
        img = torch.nn.functional.interpolate(torch.from_numpy(src[None, None]), size=shape,
                                              mode="trilinear", align_corners=True)[0, 0].numpy()
        img = (img * 4.0 - 200.0).astype(np.int16)
        lbl = kidney_labels(shape)
        aff = np.diag([thick, inpl, inpl, 1.0])
        d.mkdir(parents=True, exist_ok=True)
        for name, arr in (("segmentation", lbl), ("imaging", img))[::-1]:
            im = nib.Nifti1Image(arr, aff)
            im.header.set_zooms((thick, inpl, inpl))
            nib.save(im, str(d / f"{name}{ext}"))  # the label last: the mark of a case done
        print(f"case {c}: {shape} spacing {thick:.2f},{inpl:.2f}", file=sys.stderr)
    return out


def run(data, balance, step, epochs, a, split=True):
    import os
    if split:
        os.environ.pop("SL_VLOADER_SPLIT_MIN_VOX", None)
    else:  # read by the loader at create: no case is split
        os.environ["SL_VLOADER_SPLIT_MIN_VOX"] = "1e30"
    dl = DataLoader(data, batch_size=a.batch, patch=(a.patch,) * 3, seed=a.seed,
                    threads=a.threads, prefetch=a.prefetch, balance=balance,
                    cache_bytes=(a.cache_mb << 20) or None,  # 0: the default
                    memory_bytes=a.memory_mb << 20)
    try:
        for _ in dl:  # epoch 0: the offline stage fills the cache
            pass
        dl.reset_stats()
        waits = []
        t0 = time.perf_counter()
        for _ in range(epochs):
            it = iter(dl)
            while True:
                w0 = time.perf_counter()
                b = next(it, None)
                if b is None:
                    break
                waits.append(time.perf_counter() - w0)
                if step > 0:
                    time.sleep(step)
        wall = time.perf_counter() - t0
        s1 = dl.stats()
    finally:
        dl.close()
    return {"wait_s": sum(waits), "wall_s": wall, "batches": len(waits),
            "per_batch_s": wall / max(1, len(waits)),
            "p50_s": s1["latency_p50_s"], "p99_s": s1["latency_p99_s"],
            "pred_vs_actual": s1["predicted_s"] / max(1e-9, s1["actual_s"]),
            "offline_runs": s1["offline_runs"], "offline_ahead": s1["offline_ahead"],
            "offline_split": s1["offline_split"], "offline_helped": s1["offline_helped"],
            "memory_peak_mb": s1["memory_peak"] / 2**20}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None,
                    help="where the set is written once (default "
                         "/tmp/sluice-kits-bench, with --plain /tmp/sluice-kits-bench-plain)")
    ap.add_argument("--cases", type=int, default=12)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step-frac", type=float, default=0.8)
    ap.add_argument("--cache-mb", type=int, default=0,
                    help="offline results kept (0: the default, 2 GiB: all of them); "
                         "smaller than the set, large cases are prepared again")
    ap.add_argument("--largest", type=int, default=0,
                    help="cases of the largest size class (600 x 512^2) added to the set")
    ap.add_argument("--memory-mb", type=int, default=0,
                    help="the loader's memory budget (0: none but the cache's)")
    ap.add_argument("--split-off", action="store_true",
                    help="also the balancer without split offline stages, alternating")
    ap.add_argument("--plain", action="store_true",
                    help="uncompressed .nii cases, the large ones thick-sliced (heavy "
                         "resampling): where splitting a stage over threads should pay")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.data is None:
        a.data = "/tmp/sluice-kits-bench" + ("-plain" if a.plain else "")
    data = make_data(a.data, a.cases, largest=a.largest, plain=a.plain)
    cap = run(data, False, 0.0, a.epochs, a)
    step = a.step_frac * cap["per_batch_s"]
    print(f"loader alone (balance off): {cap['per_batch_s'] * 1e3:.0f} ms/batch; "
          f"step {step * 1e3:.0f} ms", file=sys.stderr)
    res = {True: [], False: []}
    pol = [True, False] + (["nosplit"] if a.split_off else [])
    if a.split_off:
        res["nosplit"] = []
    for r in range(a.runs):
        for bal in (pol if r % 2 == 0 else pol[::-1]):
            x = run(data, bal is True or bal == "nosplit", step, a.epochs, a, split=bal != "nosplit")
            res[bal].append(x)
            print(f"run {r + 1} balance={bal}: wait {x['wait_s']:.2f} s of {x['wall_s']:.1f} s, "
                  f"p50 {x['p50_s'] * 1e3:.0f} ms, p99 {x['p99_s'] * 1e3:.0f} ms, "
                  f"predicted/actual {x['pred_vs_actual']:.2f}, offline {x['offline_runs']} "
                  f"({x['offline_ahead']} ahead, {x['offline_split']} split, "
                  f"{x['offline_helped']} slabs helped), peak {x['memory_peak_mb']:.0f} MB",
                  file=sys.stderr)
    med = {b: {k: statistics.median(x[k] for x in v) for k in v[0]} for b, v in res.items()}
    out = {"step_ms": step * 1e3, "capacity_ms_per_batch": cap["per_batch_s"] * 1e3,
           "balanced": med[True], "in_order": med[False],
           "balanced_no_split": med.get("nosplit"),
           "wait_reduction": 1 - med[True]["wait_s"] / max(1e-9, med[False]["wait_s"]),
           "p99_ratio": med[False]["p99_s"] / max(1e-9, med[True]["p99_s"]),
           "settings": vars(a)}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"consumer wait: balanced {med[True]['wait_s']:.2f} s, in order "
              f"{med[False]['wait_s']:.2f} s -> {100 * out['wait_reduction']:.0f} % lower")
        print(f"batch-ready p99: balanced {med[True]['p99_s'] * 1e3:.0f} ms, in order "
              f"{med[False]['p99_s'] * 1e3:.0f} ms -> {out['p99_ratio']:.2f}x")
        print(f"batch-ready p50: balanced {med[True]['p50_s'] * 1e3:.0f} ms, in order "
              f"{med[False]['p50_s'] * 1e3:.0f} ms")
        if a.split_off:
            n = med["nosplit"]
            print(f"balanced without split stages: wait {n['wait_s']:.2f} s, "
                  f"p50 {n['p50_s'] * 1e3:.0f} ms, p99 {n['p99_s'] * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
