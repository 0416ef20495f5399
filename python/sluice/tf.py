"""sluice for TensorFlow / Keras (and JAX).

    import sluice.tf
    ds = sluice.tf.dataset("data/train", batch_size=64, image_size=224)
    model.fit(ds, epochs=3)          # Keras: (images NHWC, labels) batches
    ds.close()                       # or let ds go: its loader closes with it

`dataset(...)` is a `tf.data.Dataset` built with `from_generator` and an
explicit `output_signature` (images N x H x W x 3, TF's channels-last, uint8
or float32; labels int64). Each iteration of it streams the next `epochs`
epochs (default 1, so Keras's `fit(epochs=E)` sees a new shuffle and new
crops every epoch; `repeat=True` for an endless stream, the way
`fit(steps_per_epoch=...)` likes it; `batches()` and `jax_batches()`
take repeat= too). Decoding, cropping and flipping run in sluice's C
threads, never in TF's.

Copies: `from_generator` hands TF each batch through `tf.numpy_function`,
which wraps the numpy arrays in TF tensors without a copy when their
memory is aligned, as the engine's is. Tensors over the engine's buffers
would keep them out of its pool for as long as TF holds them, and tf.data
holds batches at will (`cache()` all of them, `shuffle(n)` n of them), so
`dataset()` copies each batch once, on purpose, into memory TF then owns
(aligned, so TF takes it without a second copy). `copy=False` hands TF the
engine's buffers instead (no copy; only where nothing in the pipeline
holds many batches: the pool grows with every batch held, with a
ResourceWarning past 256).

Zero-copy for custom loops: `batches(...)` yields eager `tf.Tensor`s made
with DLPack over the engine's buffer, `jax_batches(...)` jax.Arrays
(`jax.dlpack.from_dlpack`); a batch keeps its buffer out of the pool while
any tensor made from it lives. Both return an iterable whose each
iteration streams the next `epochs` epochs, as `dataset()` does. JAX with
x64 off (its default) has no int64: labels come out int32 (a copy of
them; the images stay zero-copy).

All three take start_epoch= and start_batch= (resume: the stream from
(start_epoch, start_batch) is, batch for batch, the rest of an
uninterrupted run's from that position; Keras `fit(initial_epoch=k)`
wants start_epoch=k; under a tf.distribute strategy each fit() first
takes a batch from an iteration of its own to build the model, so its
epochs train on the dataset's next ones, and a resume still lines up)
and have `.loader` (the sluice.Loader: knobs with
`.loader.set(...)`), `.stats()`, `.skipped()` (samples skipped under
on_error='skip', "epoch E: FILE: cause", as sluice.torch's skipped();
an epoch that ends with new skips also warns, naming how many and the
first few), `.class_names` (as Keras's image_dataset_from_directory) and
`.close()` (frees the loader's threads and buffers; an iteration under way
then raises RuntimeError instead of ending as if the epoch were done). The
batches objects are also context managers, and their state_dict() is
{"epoch", "batch"}, the position after the batches handed out so far
(skips counted): start_epoch= / start_batch= from it resume exactly
mid-epoch (a checkpoint's iterator state, as grain's get_state()). A
dataset has none: tf.data prefetches, so the engine's position runs
ahead of the model's; nor can tf.train.Checkpoint(iterator=iter(ds))
save its iterator (TF: "PyFunc is stateful"): resume a dataset at an
epoch, with start_epoch=. One iteration at a time per
object: a second one while the first runs (two iterators over one
dataset, `Dataset.zip((ds, ds))`, `interleave(cycle_length > 1)` over a
function that makes the dataset: it is traced once, so one dataset
serves every call) raises RuntimeError saying so; make a second dataset
for a second stream.

image_size is the crops' side, or (side, side) as Keras's
image_dataset_from_directory takes it. Keyword options are
sluice.Loader's (mode, threads, prefetch, seed, shuffle, rank,
world_size, on_error, mean, std, ...). dtype: uint8
(default) or float32, as a string, numpy or TF dtype; float32 is
(x / 255 - mean) / std per channel with ImageNet's mean (0.485, 0.456,
0.406) and std (0.229, 0.224, 0.225) unless mean= / std= say otherwise.
layout is "hwc" (default, NHWC batches) or "chw" (NCHW, for channels_first
models: the engine writes that layout itself, so no transpose runs in TF).
"""
import numbers
import threading
import warnings
import weakref

import numpy as np

from . import _sluice

__all__ = ["dataset", "batches", "jax_batches"]

# How many skip messages an end-of-epoch warning quotes.
_SKIPS_QUOTED = 3

# TF wraps a numpy array without copying it only when its memory is aligned
# to Eigen's widest vector (EIGEN_MAX_ALIGN_BYTES, at most 64).
_ALIGN = 64


def _layout(options):
    lay = options.get("layout", "hwc")
    if lay not in ("hwc", "chw"):
        raise ValueError("sluice.tf: layout is 'hwc' (channels-last, TF's "
                         f"default) or 'chw' (channels_first models), not {lay!r}")
    return lay


def _dtype_name(d):
    """'uint8' or 'float32' from a string, a numpy dtype or a tf.DType."""
    if d is None:
        return "uint8"
    if isinstance(d, str):
        name = "float32" if d == "float" else d
    else:
        name = getattr(d, "name", None)  # tf.DType, numpy dtype
        if not isinstance(name, str):
            try:
                name = np.dtype(d).name  # np.float32, the type
            except TypeError:
                name = None
    if name not in ("uint8", "float32"):
        raise ValueError("sluice.tf: dtype must be uint8 or float32 (a "
                         f"string, numpy or TF dtype), not {d!r}")
    return name


def _owned(a):
    """A copy of a in fresh memory aligned to _ALIGN, so TF wraps it as it
    is (one copy in all)."""
    buf = np.empty(a.nbytes + _ALIGN, np.uint8)
    off = -buf.ctypes.data % _ALIGN
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    np.copyto(out, a)
    return out


def _flag(what, name, value, hint=""):
    """value as a bool, or a TypeError naming it: a truthy non-bool must
    not pass for True (copy="no" would copy, repeat=3 stream forever)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what}: {name} must be True or False, got "
                        f"{value!r}{hint}")
    return bool(value)


class _Feed:
    """One loader and the position the next iteration starts at, shared by
    the iterations of a dataset or a batches object: one iteration at a
    time, each the next `epochs` epochs. Holds no reference to its owner,
    so the owner's finalizer can close it (TF keeps the generator of
    `from_generator`, and with it this object, for the process's life)."""

    def __init__(self, what, source, batch_size, image_size, options,
                 epochs, repeat, start_epoch, start_batch):
        self.what = what
        if isinstance(image_size, (tuple, list)):
            # Keras's image_dataset_from_directory takes (height, width)
            if len(image_size) != 2 or image_size[0] != image_size[1]:
                raise ValueError(f"{what}: image_size is one side (the "
                                 f"crops are square) or (side, side), not "
                                 f"{image_size!r}")
            image_size = image_size[0]
        # checked before a loader is made: a float or a negative count
        # would make the cardinality and the loop disagree (the sizes'
        # ranges are the Loader's to check; their type is named here)
        for name, v, lo in (("batch_size", batch_size, None),
                            ("image_size", image_size, None),
                            ("epochs", epochs, 1), ("start_epoch", start_epoch, 0),
                            ("start_batch", start_batch, 0)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise TypeError(f"{what}: {name} must be an int, not {v!r}")
            if lo is not None and v < lo:
                raise ValueError(f"{what}: {name} must be >= {lo}, not {v!r}")
        batch_size, image_size = int(batch_size), int(image_size)
        # tf.data's repeat(count) takes a count: repeat=3 must not
        # quietly mean forever
        repeat = _flag(what, "repeat", repeat, "; epochs= counts epochs")
        epochs, start_epoch, start_batch = int(epochs), int(start_epoch), int(start_batch)
        try:
            self.loader = _sluice.Loader(source, batch_size, image_size,
                                         **dict(options, epochs=1))
        except TypeError as e:
            more = (" (the keyword options are sluice.Loader's)"
                    if "keyword argument" in str(e) else "")
            raise TypeError(f"{what}: {e}{more}") from e
        nb = self.loader.batches_per_epoch
        if start_epoch < 0 or not 0 <= start_batch < max(nb, 1):
            self.loader.close()
            raise ValueError(f"{what}: start (epoch {start_epoch}, batch "
                             f"{start_batch}) is outside epoch >= 0, batch "
                             f"0..{nb - 1}")
        self.epochs, self.repeat = epochs, repeat
        self.epoch, self.batch = start_epoch, start_batch
        self.lock = threading.Lock()
        self.busy = self.closed = False
        self.warned = 0  # skip messages the warnings have covered
        self.final_skips = None  # skipped(), kept at close

    def check_free(self):
        if self.closed:
            raise ValueError(f"{self.what} is closed")
        if self.busy:
            raise RuntimeError(
                f"{self.what}: one iteration at a time (another iteration "
                "of it is under way: two iterators over one dataset, "
                "Dataset.zip((ds, ds)), or interleave(cycle_length > 1) "
                "over a function that makes it: traced once, that is one "
                "dataset for every call); make a second dataset for a "
                "second stream")

    def run(self, wrap):
        """The batches of one iteration, through wrap(images, labels)."""
        with self.lock:
            self.check_free()
            self.busy = True
        try:
            n = 0
            while self.repeat or n < self.epochs:
                if self.closed:
                    self._closed_midway()
                epoch = self.epoch
                self.loader.start(epoch, self.batch)
                self.epoch, self.batch = epoch + 1, 0
                n += 1
                try:
                    for images, labels in self.loader:
                        yield wrap(images, labels)
                except ValueError as e:  # the loader closed under it
                    if not self.closed:
                        raise
                    self._closed_midway(e)
                if self.closed:
                    self._closed_midway()
                self._warn_skips(epoch)
        finally:
            self.busy = False

    def position(self):
        """(epoch, batch) after the batches handed out so far: the engine's
        while an iteration runs, else where the next one starts."""
        with self.lock:
            if self.busy and not self.closed:
                return tuple(self.loader.position)
            return self.epoch, self.batch

    def _closed_midway(self, cause=None):
        raise RuntimeError(
            f"{self.what} was closed during an iteration") from cause

    def _warn_skips(self, epoch):
        sk = self.loader.skipped()
        if len(sk) < self.warned:  # a restarted engine lists afresh
            self.warned = 0
        new = sk[self.warned:]
        if not new:
            return
        self.warned = len(sk)
        more = " ..." if len(new) > _SKIPS_QUOTED else ""
        warnings.warn(f"{self.what}: {len(new)} sample(s) skipped by epoch "
                      f"{epoch}'s end (on_error='skip'; skipped() lists "
                      f"them all): {'; '.join(new[:_SKIPS_QUOTED])}{more}",
                      UserWarning, stacklevel=3)

    def skipped(self):
        if self.final_skips is not None:
            return list(self.final_skips)
        return self.loader.skipped()

    def close(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
        try:
            self.final_skips = self.loader.skipped()
        except ValueError:  # closed by hand through .loader
            self.final_skips = []
        self.loader.close()


def _feed(what, source, batch_size, image_size, options, epochs=1,
          repeat=False, start_epoch=0, start_batch=0):
    options = dict(options, layout=_layout(options),
                   dtype=_dtype_name(options.get("dtype")))
    return _Feed(what, source, batch_size, image_size, options, epochs,
                 repeat, start_epoch, start_batch)


def _attach(ds, feed):
    """The public face of a dataset's feed, as attributes (a
    tf.data.Dataset's type is TF's: no methods or `with` of ours)."""
    ds.loader = feed.loader
    ds._sluice_loader = feed.loader  # the name before `loader`
    ds.close = feed.close
    ds.skipped = feed.skipped
    ds.stats = feed.loader.stats
    ds.class_names = list(feed.loader.classes)


def dataset(source, batch_size=64, image_size=224, epochs=1, repeat=False,
            start_epoch=0, start_batch=0, copy=True, **options):
    """A tf.data.Dataset of (images, labels) batches from a folder or
    shards. The loader is made (and the source scanned) here, so errors
    surface at once; each iteration of the dataset streams the next
    `epochs` epochs (forever with repeat=True), the first from
    (start_epoch, start_batch). copy=True: each batch copied once into
    memory TF owns; False: TF's tensors share the engine's buffers (see the
    module's docstring). Its cardinality is the batches of one iteration
    where they are known (not with on_error='skip' or start_batch > 0),
    INFINITE with repeat=True. The loader closes with ds.close() or when
    the dataset (and every dataset and iterator made from it) is gone."""
    import tensorflow as tf

    # before the loader is made: a refused call leaves nothing open
    copy = _flag("sluice.tf.dataset", "copy", copy)
    feed = _feed("sluice.tf.dataset", source, batch_size, image_size,
                 options, epochs, repeat, start_epoch, start_batch)
    elem = tf.float32 if feed.loader.options["dtype"] == "float32" else tf.uint8
    if copy:
        def wrap(images, labels):
            return _owned(images), _owned(labels)
    else:
        def wrap(images, labels):
            return images, labels

    def gen():
        return feed.run(wrap)

    side = feed.loader.options["image_size"]
    shape = ((None, side, side, 3) if _layout(options) == "hwc"
             else (None, 3, side, side))
    sig = (tf.TensorSpec(shape=shape, dtype=elem),
           tf.TensorSpec(shape=(None,), dtype=tf.int64))
    ds = tf.data.Dataset.from_generator(gen, output_signature=sig)
    if repeat:
        ds = ds.apply(tf.data.experimental.assert_cardinality(
            tf.data.INFINITE_CARDINALITY))
    elif start_batch == 0 and options.get("on_error", "fail") != "skip":
        ds = ds.apply(tf.data.experimental.assert_cardinality(
            feed.loader.batches_per_epoch * epochs))
    if feed.loader.options["world_size"] > 1:
        # Sharded here (rank=): tf.distribute's auto-shard would shard the
        # rank's stream again (from_generator reads no files, so AUTO
        # means DATA: each worker keeping 1 / world_size of its own part)
        opt = tf.data.Options()
        opt.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF)
        ds = ds.with_options(opt)
    _attach(ds, feed)
    if tf.executing_eagerly() and not tf.inside_function():
        # Not where TF traces (flat_map, interleave, tf.function): there
        # the Python object goes when tracing ends while the graph keeps
        # running the generator; that loader lives with the process.
        weakref.finalize(ds, feed.close)
    return ds


def _jax_process():
    """(jax.process_index(), jax.process_count()) where asking starts no
    backend (jax.distributed.initialize() must come before that), else
    None. The checks are JAX's private state: None where they are gone."""
    import jax
    try:
        from jax._src import distributed, xla_bridge
        ready = (distributed.global_state.client is not None
                 or xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return None
    return (jax.process_index(), jax.process_count()) if ready else None


class _Batches:
    """An iterable of batches: each iteration streams the next `epochs`
    epochs from one sluice.Loader (`loader`); skipped(), stats(), close(),
    class_names and `with` as sluice.tf.dataset's."""

    def __init__(self, feed, wrap):
        self._feed, self._wrap = feed, wrap
        self._it = None  # next()'s own iteration
        self.class_names = list(feed.loader.classes)
        weakref.finalize(self, feed.close)

    def __iter__(self):
        self._feed.check_free()  # at iter(), not at the first next()
        return self._run()

    def __next__(self):
        # next(batches(...)) as when these were generators: one iteration
        # of its own, begun at the first call.
        if self._it is None:
            self._it = iter(self)
        try:
            return next(self._it)
        except StopIteration:
            self._it = None
            raise

    def _run(self):
        # A generator of this object's: the object lives while its
        # iteration does (`for x in batches(...)` keeps no other reference).
        yield from self._feed.run(self._wrap)

    @property
    def loader(self):
        return self._feed.loader

    def skipped(self):
        return self._feed.skipped()

    def state_dict(self):
        """{"epoch": E, "batch": B}: the position after the batches handed
        out so far (skips counted), so that a new object made with
        start_epoch=E, start_batch=B streams exactly the rest."""
        epoch, batch = self._feed.position()
        return {"epoch": epoch, "batch": batch}

    def stats(self):
        return self._feed.loader.stats()

    def close(self):
        self._feed.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def batches(source, batch_size=64, image_size=224, epochs=1, repeat=False,
            start_epoch=0, start_batch=0, **options):
    """An iterable of eager (images, labels) tf.Tensors, zero-copy views of
    the engine's buffers through DLPack (TF aliases 64-byte-aligned host
    memory); each iteration streams the next `epochs` epochs (forever
    with repeat=True, for loops counted in steps)."""
    import tensorflow as tf

    from_dlpack = tf.experimental.dlpack.from_dlpack

    def wrap(images, labels):
        return from_dlpack(images.__dlpack__()), from_dlpack(labels.__dlpack__())

    return _Batches(_feed("sluice.tf.batches", source, batch_size, image_size,
                          options, epochs, repeat, start_epoch, start_batch),
                    wrap)


def jax_batches(source, batch_size=64, image_size=224, epochs=1,
                repeat=False, start_epoch=0, start_batch=0, **options):
    """An iterable of (images, labels) jax.Arrays on the CPU, zero-copy
    through DLPack where JAX accepts the buffer (64-byte aligned host
    memory); each iteration streams the next `epochs` epochs (forever
    with repeat=True, for loops counted in steps). Labels are int32 (a
    copy) while JAX's x64 is off, its default. rank / world_size default
    to jax.process_index() / process_count() once jax.distributed is
    initialised (or JAX's backends are), so each host of a multi-host job
    streams its own part (as sluice.torch defaults to torch.distributed's);
    made before jax.distributed.initialize(), it streams all of it."""
    import jax.dlpack

    from_dlpack = jax.dlpack.from_dlpack
    if "rank" not in options and "world_size" not in options:
        proc = _jax_process()
        if proc is not None:
            options = dict(options, rank=proc[0], world_size=proc[1])

    def wrap(images, labels):
        return from_dlpack(images), from_dlpack(labels)

    return _Batches(_feed("sluice.tf.jax_batches", source, batch_size,
                          image_size, options, epochs, repeat, start_epoch,
                          start_batch), wrap)
