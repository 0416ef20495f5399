"""Pixels of sluice.torch.DataLoader (eval mode) against torchvision's
Resize(256) + CenterCrop(224) + PILToTensor on the first 64 photos of the
ImageNet sample, with and without DCT scaling: how many are identical,
the largest difference and the PSNR of the others (the README's claim).

    PYTHONPATH=build/python .venv/bin/python bench/pixels_vs_torchvision.py
"""
import os
import sys

import numpy as np
from torchvision import datasets
from torchvision import transforms as T

import sluice.torch

N = 64
D = os.path.join(os.environ.get("SL_SHARED_DATA", "../shared/data"),
                 "imagenet-sample")
if not os.path.isdir(D):
    sys.exit(f"skip: {D} is absent")
tv = datasets.ImageFolder(D, T.Compose([T.Resize(256), T.CenterCrop(224),
                                        T.PILToTensor()]))
for dct in (True, False):
    dl = sluice.torch.DataLoader(D, batch_size=N, shuffle=False, mode="eval",
                                 dct_scale=dct)
    x, _ = next(iter(dl))
    same, worst, psnr = 0, 0, []
    for i in range(N):
        d = np.abs(x[i].numpy().astype(np.int32) -
                   tv[i][0].numpy().astype(np.int32))
        worst = max(worst, int(d.max()))
        if d.max() == 0:
            same += 1
        else:
            psnr.append(10 * np.log10(255 ** 2 / (d.astype(np.float64) ** 2).mean()))
    print(f"dct_scale={dct}: {same}/{N} identical, max |diff| {worst}, "
          f"PSNR of the others {', '.join(f'{p:.1f}' for p in sorted(psnr)) or '-'} dB")
