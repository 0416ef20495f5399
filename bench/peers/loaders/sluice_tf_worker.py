#!/usr/bin/env python3
"""sluice inside tf.data: sluice.tf.dataset(DIR) (TensorFlow imported, torch
never), the way a Keras user would feed model.fit.

sluice decodes, crops and flips in its C threads (--threads) straight into
NCHW batches (layout="chw", the layout every loader here delivers);
from_generator hands each batch to TF, copied once into memory TF owns
(sluice.tf.dataset's default; --opt copy=0, the sluice-tf-alias run, hands
TF the engine's buffer itself).
Its row shows sluice's memory and speed next to tf.data's own pipeline under
the same framework import.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    import tensorflow as tf
    import sluice
    import sluice.tf
    C.ready()
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    dt = "uint8" if a.out == "uint8" else "float32"
    copy = a.opts.get("copy", "1") != "0"  # --opt copy=0: sluice-tf-alias

    def build():
        ds = sluice.tf.dataset(a.data, batch_size=a.batch, image_size=a.size, dtype=dt,
                               layout="chw", shuffle=True, seed=a.seed, threads=a.threads,
                               epochs=1, copy=copy)
        keep = ds._sluice_loader
        ds = ds.prefetch(1)
        ds._sluice_loader = keep
        return ds

    def to_numpy(b):
        x, y = b
        return x.dtype.name, tuple(x.shape), y.numpy()

    cfg = (f"sluice.tf.dataset(DIR, batch_size={a.batch}, image_size={a.size}, dtype='{dt}', "
           f"layout='chw', shuffle=True, threads={a.threads}, epochs=1, copy={copy}) -> prefetch(1); "
           f"TF inter-op threads {a.threads}; one iteration per epoch")
    C.measure(a, build, lambda L, e: L, to_numpy, close=lambda L: L._sluice_loader.close(),
              version=f"{getattr(sluice, '__version__', None) or '0.1.0'} + tensorflow-cpu {tf.__version__}",
              config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
