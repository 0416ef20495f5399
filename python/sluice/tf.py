"""sluice for TensorFlow / Keras (and JAX).

    import sluice.tf
    ds = sluice.tf.dataset("data/train", batch_size=64, image_size=224)
    model.fit(ds, epochs=3)          # Keras: (images NHWC, labels) batches

`dataset(...)` is a `tf.data.Dataset` built with `from_generator` and an
explicit `output_signature` (images N x H x W x 3, TF's channels-last, uint8
or float32 normalised; labels int64). It streams `epochs` epochs per
iteration (default 1; `repeat=True` for an endless stream, the way Keras
`fit(steps_per_epoch=...)` likes it). Decoding, cropping and flipping run in
sluice's C threads, never in TF's; `from_generator` hands each batch to TF
through `tf.py_function`, which copies it once into a TF tensor — the one
copy TF's generator interface forces.

Zero-copy where TF allows: `batches(...)` yields eager `tf.Tensor`s made with
DLPack from the engine's buffer (no copy) for custom training loops;
`jax_batches(...)` does the same for JAX (`jax.dlpack.from_dlpack`). A batch
keeps its engine buffer out of the pool while any tensor made from it lives.

Keyword options are sluice.Loader's (mode, dtype, threads, prefetch, seed,
shuffle, rank, world_size, on_error, ...); layout is "hwc" (default, NHWC
batches) or "chw" (NCHW, for channels_first models: the engine writes that
layout itself, so no transpose runs in TF).
"""
from . import _sluice

__all__ = ["dataset", "batches", "jax_batches"]


def _layout(options):
    lay = options.get("layout", "hwc")
    if lay not in ("hwc", "chw"):
        raise ValueError("sluice.tf: layout is 'hwc' (channels-last, TF's "
                         f"default) or 'chw' (channels_first models), not {lay!r}")
    return lay


def _loader(source, batch_size, image_size, options):
    options = dict(options, layout=_layout(options))
    return _sluice.Loader(source, batch_size, image_size, **options)


def _dtype(tf, options):
    d = options.get("dtype", "uint8")
    if d in ("uint8", None):
        return tf.uint8
    if d in ("float32", "float"):
        return tf.float32
    raise ValueError(f"sluice.tf: dtype must be 'uint8' or 'float32', not {d!r}")


def dataset(source, batch_size=64, image_size=224, epochs=1, repeat=False,
            **options):
    """A tf.data.Dataset of (images, labels) batches from a folder or
    shards. The loader is made (and the source scanned) here, so errors
    surface at once; each iteration of the dataset starts the next epoch."""
    import tensorflow as tf

    elem = _dtype(tf, options)
    loader = _loader(source, batch_size, image_size, dict(options, epochs=1))
    state = {"epoch": 0}

    def gen():
        n = 0
        while repeat or n < epochs:
            loader.start(state["epoch"], 0)
            state["epoch"] += 1
            n += 1
            for images, labels in loader:
                yield images, labels

    shape = ((None, image_size, image_size, 3) if _layout(options) == "hwc"
             else (None, 3, image_size, image_size))
    sig = (tf.TensorSpec(shape=shape, dtype=elem),
           tf.TensorSpec(shape=(None,), dtype=tf.int64))
    ds = tf.data.Dataset.from_generator(gen, output_signature=sig)
    ds._sluice_loader = loader  # stats(), knobs: ds._sluice_loader.set(...)
    return ds


def batches(source, batch_size=64, image_size=224, **options):
    """Eager (images, labels) tf.Tensors, zero-copy views of the engine's
    buffers through DLPack (TF aliases 64-byte-aligned host memory)."""
    import tensorflow as tf

    from_dlpack = tf.experimental.dlpack.from_dlpack
    for images, labels in _loader(source, batch_size, image_size, options):
        yield from_dlpack(images.__dlpack__()), from_dlpack(labels.__dlpack__())


def jax_batches(source, batch_size=64, image_size=224, **options):
    """(images, labels) jax.Arrays on the CPU, zero-copy through DLPack
    where JAX accepts the buffer (64-byte aligned host memory)."""
    import jax.dlpack

    for images, labels in _loader(source, batch_size, image_size, options):
        yield jax.dlpack.from_dlpack(images), jax.dlpack.from_dlpack(labels)
