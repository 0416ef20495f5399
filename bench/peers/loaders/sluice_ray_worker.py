#!/usr/bin/env python3
"""sluice scaled out on Ray: sluice.ray.DataLoader(DIR) with --threads
actors of 1 decode thread each (--opt actor_threads=T), each actor a
sluice engine in a Ray worker process, batches in order through Ray's
object store as torch tensors. A local Ray cluster of this process's own
with num_cpus = --threads (one per actor), started before the timed window
(the actors start inside it).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    import torch
    torch.set_num_threads(1)
    t = int(a.opts.get("actor_threads", "1"))
    ray = C.start_ray(a.threads * t)
    import sluice
    import sluice.ray
    C.ready()
    dtype = "uint8" if a.out == "uint8" else "float32"

    def build():
        return sluice.ray.DataLoader(a.data, a.batch, a.size, shuffle=True, seed=a.seed,
                                     dtype=dtype, num_actors=a.threads, actor_threads=t)
    import inspect  # the configuration as built: chunk and depth are sluice.ray's defaults
    params = inspect.signature(sluice.ray.DataLoader.__init__).parameters
    chunk, depth = params["chunk"].default, params["depth"].default

    def epoch(L, e):
        L.set_epoch(e)
        return L

    cfg = (f"sluice.ray.DataLoader(DIR, batch_size={a.batch}, image_size={a.size}, shuffle=True, "
           f"dtype={dtype}, num_actors={a.threads}, actor_threads={t}, chunk={chunk}, depth={depth}): torch "
           f"tensors from Ray's object store; ray.init(num_cpus={a.threads * t})")
    C.measure_ray(a, build, epoch, C.torch_batch, close=lambda L: L.close(),
              version=f"sluice {getattr(sluice, '__version__', None) or '0.1.0'}, ray {ray.__version__}",
              config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
