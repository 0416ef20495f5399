#!/usr/bin/env python3
"""sluice through its Python package: sluice.torch.DataLoader(source=DATA).
--opt url=PATTERN reads the same images from shards at a URL (WebDataset
tars over HTTP: bench/storage/remote.py); --opt cache_bytes=N adds the
sample cache.

The engine's own decode threads = --threads (num_workers), shuffle, seed,
torch tensors that are zero-copy views of the engine's batch buffers.
The package comes from SLUICE_PYTHONPATH (bench/peers/run puts the
build-peers/python directory there) or from an installed `sluice`.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main_numpy(a):
    """--opt api=numpy: sluice.Loader, numpy arrays, no torch imported."""
    import sluice
    C.ready()
    dt = "uint8" if a.out == "uint8" else "float32"

    def build():
        return sluice.Loader(a.data, a.batch, a.size, dtype=dt, shuffle=True, seed=a.seed,
                             threads=a.threads, epochs=1)

    def to_numpy(b):
        x, y = b
        return str(x.dtype), tuple(x.shape), y

    cfg = (f"sluice.Loader(DIR, batch_size={a.batch}, image_size={a.size}, dtype='{dt}', shuffle=True, "
           f"threads={a.threads}, epochs=1): numpy views, no torch imported; one iteration per epoch")
    C.measure(a, build, lambda L, e: L, to_numpy, close=lambda L: L.close(),
              version=getattr(sluice, "__version__", None) or "0.1.0", config=cfg)


def main():
    a = C.parse_args()
    if a.opts.get("api") == "numpy":
        return main_numpy(a)
    import numpy  # noqa: F401
    import torch
    import sluice
    import sluice.torch
    torch.set_num_threads(1)
    C.ready()
    dtype = torch.uint8 if a.out == "uint8" else torch.float32
    prefetch = a.opts.get("prefetch")
    kw = {"prefetch": int(prefetch)} if prefetch else {}
    if a.opts.get("cache_bytes"):
        kw["cache_bytes"] = int(float(a.opts["cache_bytes"]))
    # --opt url=PATTERN: the same images from shards at a URL (or a shard
    # pattern on disk); --data stays the ImageFolder the checks count.
    source = a.opts.get("url") or a.data

    def build():
        return sluice.torch.DataLoader(source=source, batch_size=a.batch, image_size=a.size,
                                       shuffle=True, seed=a.seed, num_workers=a.threads,
                                       dtype=dtype, **kw)

    def to_numpy(b):
        x, y = b
        return str(x.dtype).replace("torch.", ""), tuple(x.shape), y.numpy()

    ver = getattr(sluice, "__version__", None) or "0.1.0"
    cfg = (f"sluice.torch.DataLoader(source={a.opts.get('url') or 'DIR'}, batch_size={a.batch}, image_size={a.size}, "
           f"shuffle=True, num_workers={a.threads} decode threads, dtype=torch.{dtype}"
           f"{', prefetch=' + prefetch if prefetch else ''}"
           f"{', cache_bytes=' + str(kw['cache_bytes']) if 'cache_bytes' in kw else ''}); one iteration per epoch; "
           f"package from {os.path.dirname(sluice.__file__)}")
    C.measure(a, build, lambda L, e: L, to_numpy, version=ver, config=cfg.replace("torch.torch.", "torch."))


if __name__ == "__main__":
    C.main_guard(main)
