"""torchvision's batched nvJPEG decode on the GPU (the issue's GPU peer and
ceiling), on the same photos as sluice's GPU stage: decode only, and
decode + RandomResizedCrop(224) + flip per image on the GPU in Python.

    python3 bench/gpu/peer_nvjpeg.py PHOTOS [--batch 256] [--seconds 3]

Prints "peer: {...}" with img/s for each."""
import argparse
import json
import os
import time

import torch
import torchvision
from torchvision.io import decode_jpeg, read_file
from torchvision.transforms import v2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    paths = sorted(os.path.join(r, f) for r, _, fs in os.walk(a.photos) for f in fs)
    data = [read_file(p) for p in paths]
    # nvJPEG's batched path takes 3-channel baseline photos; grayscale ones
    # go in too (decode_jpeg converts with mode RGB).
    out = {"torchvision": torchvision.__version__, "photos": len(data),
           "batch": a.batch}
    pool = data * (4 * a.batch // len(data) + 1)
    batches = [pool[i * a.batch:(i + 1) * a.batch] for i in range(4)]
    for b in batches[:2]:  # warm-up: nvJPEG handles, allocations
        decode_jpeg(b, device="cuda", mode=torchvision.io.ImageReadMode.RGB)
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        for b in batches:
            decode_jpeg(b, device="cuda", mode=torchvision.io.ImageReadMode.RGB)
            n += len(b)
    torch.cuda.synchronize()
    out["decode_only"] = round(n / (time.perf_counter() - t0), 1)
    rrc = v2.Compose([v2.RandomResizedCrop(224, antialias=True),
                      v2.RandomHorizontalFlip()])
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        imgs = decode_jpeg(batches[0], device="cuda",
                           mode=torchvision.io.ImageReadMode.RGB)
        torch.stack([rrc(i) for i in imgs])
        n += len(imgs)
    torch.cuda.synchronize()
    out["decode_rrc_python_loop"] = round(n / (time.perf_counter() - t0), 1)
    print(f"torchvision nvJPEG batched decode: {out['decode_only']:.0f} img/s "
          f"decode only; {out['decode_rrc_python_loop']:.0f} with per-image "
          "GPU crop/resize/flip", flush=True)
    print("peer: " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
