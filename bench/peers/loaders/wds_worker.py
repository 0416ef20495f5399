#!/usr/bin/env python3
"""The `webdataset` package with torch's DataLoader, its documented way:

    wds.WebDataset(urls, shardshuffle=True).shuffle(1000).decode("pil")
       .to_tuple("jpg;jpeg;png", "cls").map_tuple(transform, int)
    torch.utils.data.DataLoader(dataset, batch_size, num_workers=N,
                                persistent_workers=True)

(--opt url=PATTERN: the shards, brace pattern as webdataset users write
it; --opt workers=N, bench/peers/run sweeps 1..4 and reports the best).
Shards are split over the workers by webdataset's default splitter, so
every sample comes once per epoch when there are at least as many shards
as workers. Transforms as torch_worker: RandomResizedCrop(size) (PIL,
bilinear with antialias) + RandomHorizontalFlip + PILToTensor (uint8) or
ToTensor + Normalize (float). --data is the ImageFolder tree the shards
were packed from (the harness counts labels against it).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    import torch
    import torchvision
    import webdataset as wds
    torch.set_num_threads(1)
    C.ready()
    url = a.opts["url"]
    workers = int(a.opts.get("workers", a.threads))
    tf = C.torchvision_transform(a)
    torch.manual_seed(a.seed)

    def build():
        ds = (wds.WebDataset(url, shardshuffle=True, empty_check=False)
              .shuffle(1000).decode("pil").to_tuple("jpg;jpeg;png", "cls")
              .map_tuple(tf, int))
        kw = dict(num_workers=workers)
        if workers > 0:
            kw.update(persistent_workers=True, prefetch_factor=2)
        return torch.utils.data.DataLoader(ds, batch_size=a.batch, pin_memory=False, **kw)

    cfg = (f"wds.WebDataset(URL, shardshuffle=True).shuffle(1000).decode('pil')"
           f".to_tuple(image, cls) + DataLoader(batch_size={a.batch}, num_workers={workers}, "
           f"persistent_workers={workers > 0}); URL {url}")
    C.measure(a, build, lambda L, e: L, C.torch_batch, close=C.close_dataloader,
              version=f"webdataset {getattr(wds, '__version__', '?')}, torch {torch.__version__}, "
                      f"torchvision {torchvision.__version__}", config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
