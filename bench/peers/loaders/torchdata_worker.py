#!/usr/bin/env python3
"""torchdata.nodes: SamplerWrapper(RandomSampler) -> ParallelMapper(load +
transform, method="thread", num_workers=--threads, in_order=False) ->
Batcher -> Mapper(default_collate) -> Prefetcher -> Loader, as torchdata's
docs show for thread-based loading (PIL releases the GIL while it decodes
and resizes).  Same torchvision transforms as the torch loader.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    import torch
    import torchdata
    import torchvision
    from torchdata.nodes import Batcher, Loader, Mapper, ParallelMapper, Prefetcher, SamplerWrapper
    from torchvision.datasets import ImageFolder
    from torch.utils.data import RandomSampler, default_collate
    torch.set_num_threads(1)
    C.ready()
    workers = int(a.opts.get("workers", a.threads))
    in_order = a.opts.get("in_order", "0") == "1"
    prefetch = int(a.opts.get("prefetch", 2))
    tf = C.torchvision_transform(a)
    torch.manual_seed(a.seed)

    def build():
        ds = ImageFolder(a.data, transform=tf)
        g = torch.Generator()
        g.manual_seed(a.seed)
        node = SamplerWrapper(RandomSampler(ds, generator=g))
        node = ParallelMapper(node, map_fn=ds.__getitem__, num_workers=workers, method="thread",
                              in_order=in_order)
        node = Batcher(node, batch_size=a.batch, drop_last=False)
        node = Mapper(node, default_collate)
        node = Prefetcher(node, prefetch_factor=prefetch)
        return Loader(node)

    cfg = (f"torchdata.nodes SamplerWrapper(RandomSampler) -> ParallelMapper(ImageFolder.__getitem__, "
           f"num_workers={workers}, method='thread', in_order={in_order}) -> Batcher({a.batch}) -> "
           f"Mapper(default_collate) -> Prefetcher({prefetch}) -> Loader; torchvision transforms (PIL)")
    C.measure(a, build, lambda L, e: L, C.torch_batch,
              version=f"torchdata {getattr(torchdata, '__version__', '?')}, torch {torch.__version__}, "
                      f"torchvision {torchvision.__version__}", config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
