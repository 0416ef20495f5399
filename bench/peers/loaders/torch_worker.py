#!/usr/bin/env python3
"""torchvision ImageFolder + torch.utils.data.DataLoader, configured as the
PyTorch docs advise for throughput: num_workers worker processes
(--opt workers=N; bench/peers/run sweeps 1..4 and reports the best),
persistent_workers=True (workers survive across epochs), prefetch_factor
(--opt prefetch=2, the default), pin_memory=False (no GPU here),
torch.set_num_threads(1) in the main process (it only receives batches).
Transforms: RandomResizedCrop(size) (PIL, bilinear with antialias) +
RandomHorizontalFlip + PILToTensor (uint8) or ToTensor + Normalize (float).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    import torch
    import torchvision
    from torchvision.datasets import ImageFolder
    import PIL
    torch.set_num_threads(1)
    C.ready()
    workers = int(a.opts.get("workers", a.threads))
    prefetch = int(a.opts.get("prefetch", 2))
    tf = C.torchvision_transform(a)
    torch.manual_seed(a.seed)

    def build():
        ds = ImageFolder(a.data, transform=tf)
        kw = dict(num_workers=workers)
        if workers > 0:
            kw.update(persistent_workers=True, prefetch_factor=prefetch)
        return torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                           pin_memory=False, drop_last=False, **kw)

    cfg = (f"ImageFolder + DataLoader(batch_size={a.batch}, shuffle=True, num_workers={workers}, "
           f"persistent_workers={workers > 0}, prefetch_factor={prefetch if workers else None}, "
           f"pin_memory=False); main torch threads 1; PIL {PIL.__version__} "
           f"(RandomResizedCrop bilinear+antialias, PILToTensor{'' if a.out == 'uint8' else '->ToTensor+Normalize'})")
    C.measure(a, build, lambda L, e: L, C.torch_batch, close=C.close_dataloader,
              version=f"torch {torch.__version__}, torchvision {torchvision.__version__}", config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
