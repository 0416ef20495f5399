"""sluice.tf: a tf.data.Dataset that Keras trains on (tensorflow-cpu from
PyPI, in the project venv), eager TF tensors and JAX arrays made through
DLPack without a copy. Skips (saying why) when TF or JAX is not installed."""
import os
import sys

import numpy as np
import pytest
from conftest import synthetic_folder

SLUICE = os.environ.get("SLUICE")
PYDIR = os.path.join(os.path.dirname(SLUICE), "python") if SLUICE else None
if PYDIR and os.path.isdir(os.path.join(PYDIR, "sluice")):
    sys.path.insert(0, PYDIR)
sluice = pytest.importorskip("sluice", reason="sluice module not built")

B, S = 8, 32


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ds", 48, 3)


def reference(ds, **kw):
    return [(x.copy(), y.copy()) for x, y in
            sluice.Loader(ds, B, S, layout="hwc", seed=5, **kw)]


def test_tf_dataset_matches_the_engine_and_keras_trains(ds):
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    data = stf.dataset(ds, batch_size=B, image_size=S, dtype="float32", seed=5,
                       epochs=1)
    assert data.element_spec[0].shape.as_list() == [None, S, S, 3]
    assert data.element_spec[0].dtype == tf.float32
    ref = reference(ds, dtype="float32")
    got = [(x.numpy(), y.numpy()) for x, y in data]
    assert len(got) == len(ref) == 6
    for (x, y), (rx, ry) in zip(got, ref):
        assert np.array_equal(x, rx) and np.array_equal(y, ry)
    # the next iteration is the next epoch: a new shuffle, same samples
    again = [(x.numpy(), y.numpy()) for x, y in data]
    assert not np.array_equal(again[0][1], got[0][1]) or not np.array_equal(
        again[1][1], got[1][1])
    assert sorted(np.concatenate([y for _, y in again])) == sorted(
        np.concatenate([y for _, y in got]))

    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((S, S, 3)),
        tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True))
    train = stf.dataset(ds, batch_size=B, image_size=S, dtype="float32",
                        repeat=True)
    hist = model.fit(train, epochs=2, steps_per_epoch=6, verbose=0)
    loss = hist.history["loss"]
    assert len(loss) == 2 and all(np.isfinite(loss))


def test_tf_dataset_uint8_and_errors(ds, tmp_path):
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    x, y = next(iter(stf.dataset(ds, batch_size=B, image_size=S)))
    assert x.dtype == tf.uint8 and x.shape == (B, S, S, 3) and y.dtype == tf.int64
    with pytest.raises(ValueError):
        stf.dataset(ds, batch_size=B, image_size=S, layout="nchw")
    # layout="chw": NCHW written by the engine, the same pixels transposed
    xc, yc = next(iter(stf.dataset(ds, batch_size=B, image_size=S, layout="chw")))
    assert xc.shape == (B, 3, S, S) and np.array_equal(yc.numpy(), y.numpy())
    assert np.array_equal(xc.numpy(), np.transpose(x.numpy(), (0, 3, 1, 2)))
    with pytest.raises(sluice.Error, match="nope"):
        stf.dataset(str(tmp_path / "nope"), batch_size=B, image_size=S)


def test_tf_eager_batches_are_zero_copy(ds):
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    ref = reference(ds)
    for (x, y), (rx, ry) in zip(stf.batches(ds, batch_size=B, image_size=S,
                                            seed=5), ref):
        assert isinstance(x, tf.Tensor)
        assert np.array_equal(x.numpy(), rx) and np.array_equal(y.numpy(), ry)
    # zero copy: the tensor aliases the engine's buffer (a write shows through)
    ld = sluice.Loader(ds, B, S, layout="hwc")
    a, _ = next(iter(ld))
    t = tf.experimental.dlpack.from_dlpack(a.__dlpack__())
    a.setflags(write=True) if not a.flags.writeable else None
    a[0, 0, 0, 0] = 7
    assert int(t[0, 0, 0, 0]) == 7
    a[0, 0, 0, 0] = 9
    assert int(t[0, 0, 0, 0]) == 9


def test_jax_arrays_are_zero_copy(ds):
    jax = pytest.importorskip("jax", reason="jax not installed")
    import sluice.tf as stf
    ref = reference(ds)
    for (x, y), (rx, ry) in zip(stf.jax_batches(ds, batch_size=B, image_size=S,
                                                seed=5), ref):
        assert np.array_equal(np.asarray(x), rx) and np.array_equal(np.asarray(y), ry)
    ld = sluice.Loader(ds, B, S, layout="hwc")
    a, _ = next(iter(ld))
    j = jax.dlpack.from_dlpack(a)
    assert j.unsafe_buffer_pointer() == a.__array_interface__["data"][0]
    assert isinstance(jax.numpy.asarray(a), jax.Array)
