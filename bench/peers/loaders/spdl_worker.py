#!/usr/bin/env python3
"""SPDL (Meta's Scalable and Performant Data Loading), as its image
dataloading guide builds it: PipelineBuilder
  add_source(shuffled (path, label) of this epoch)
  -> pipe(decode, concurrency=--threads)    demux_image + decode_packets with an
       FFmpeg filter graph doing the crop (torchvision's RandomResizedCrop box,
       drawn here), scale to size x size (swscale bilinear) and hflip
  -> aggregate(batch)
  -> pipe(collate)                          convert_frames (one contiguous
       batch buffer) -> torch tensor -> CHW (uint8) or float ImageNet-normalised
  -> add_sink(2) ; build(num_threads=--threads)
one pipeline per epoch (auto_stop).  SPDL releases the GIL in its FFmpeg
calls, so threads decode in parallel.
"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def rrc_box(rng, w, h, scale=C.SCALE, ratio=C.RATIO):
    """torchvision RandomResizedCrop.get_params: (x, y, cw, ch)."""
    area = w * h
    log_r = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        t = area * rng.uniform(scale[0], scale[1])
        ar = math.exp(rng.uniform(*log_r))
        cw = int(round(math.sqrt(t * ar)))
        ch = int(round(math.sqrt(t / ar)))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, w - cw), rng.randint(0, h - ch), cw, ch
    in_ratio = w / h
    if in_ratio < ratio[0]:
        cw, ch = w, int(round(w / ratio[0]))
    elif in_ratio > ratio[1]:
        ch, cw = h, int(round(h * ratio[1]))
    else:
        cw, ch = w, h
    return (w - cw) // 2, (h - ch) // 2, cw, ch


def main():
    a = C.parse_args()
    import numpy as np
    import spdl
    import spdl.io
    from spdl.pipeline import PipelineBuilder
    import torch
    torch.set_num_threads(1)
    spdl.io.demux_image  # noqa: B018 - load libspdl (FFmpeg) now, not in the timed window
    C.ready()
    S = a.size
    rng = random.Random(a.seed)
    mean = torch.tensor(C.IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(C.IMAGENET_STD).view(1, 3, 1, 1)
    scale_algo = a.opts.get("scale", "bilinear")

    def decode(item):
        path, label, r1, r2 = item
        packets = spdl.io.demux_image(path)
        w, h = packets.width, packets.height
        x, y, cw, ch = rrc_box(random.Random(r1), w, h)
        fd = f"crop={cw}:{ch}:{x}:{y},scale={S}:{S}:flags={scale_algo}"
        if r2 < 0.5:
            fd += ",hflip"
        fd += ",format=pix_fmts=rgb24"
        return spdl.io.decode_packets(packets, filter_desc=fd), label

    def collate(items):
        frames = [f for f, _l in items]
        labels = torch.tensor([lab for _f, lab in items], dtype=torch.int64)
        x = torch.from_numpy(spdl.io.to_numpy(spdl.io.convert_frames(frames)))  # N H W C uint8
        if a.out == "uint8":
            x = x.permute(0, 3, 1, 2).contiguous()
        else:
            x = ((x.permute(0, 3, 1, 2).float() / 255.0) - mean) / std
        return x, labels

    _classes, samples = C.list_imagefolder(a.data)

    def epoch(_L, e):
        order = list(samples)
        rng.shuffle(order)
        src = [(p, lab, rng.getrandbits(64), rng.random()) for p, lab in order]
        pipe = (PipelineBuilder()
                .add_source(src)
                .pipe(decode, concurrency=a.threads, output_order="completion")
                .aggregate(a.batch, drop_last=False)
                .pipe(collate)
                .add_sink(2)
                .build(num_threads=a.threads))
        with pipe.auto_stop():
            for b in pipe:
                yield b

    def to_numpy(b):
        x, y = b
        return str(x.dtype).replace("torch.", ""), tuple(x.shape), y.numpy()

    ver = getattr(spdl, "__version__", None)
    if not ver:
        from importlib.metadata import version
        ver = version("spdl")
    cfg = (f"PipelineBuilder: source(shuffled) -> pipe(demux_image+decode_packets, FFmpeg filter "
           f"crop+scale(flags={scale_algo})+hflip, concurrency={a.threads}) -> aggregate({a.batch}) -> "
           f"pipe(convert_frames -> torch CHW{' normalise' if a.out == 'float' else ''}) -> sink(2); "
           f"build(num_threads={a.threads}); one pipeline per epoch")
    C.measure(a, lambda: None, epoch, to_numpy, version=f"spdl {ver} (FFmpeg libs of the OS)", config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
