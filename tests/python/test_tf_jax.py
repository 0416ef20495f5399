"""sluice.tf: a tf.data.Dataset that Keras trains on (tensorflow-cpu from
PyPI, in the project venv), eager TF tensors and JAX arrays made through
DLPack without a copy. Skips (saying why) when TF or JAX is not installed."""
import importlib.util
import os

import numpy as np
import pytest
from conftest import synthetic_folder

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


# ---------------------------------------------------------------- review
# What a tf.data / Keras / JAX user runs into: loaders that outlive their
# dataset, epochs that repeat, skips out of sight, two iterations at once,
# TF holding the engine's buffers, resume, the small things.

def labels_of(it):
    return [np.asarray(y).tolist() for _, y in it]


def threads():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("Threads:"))


@pytest.fixture(scope="module")
def bad(ds, tmp_path_factory):
    """Five good JPEGs and a truncated one, in two classes."""
    import shutil
    d = tmp_path_factory.mktemp("bad")
    good = sorted(os.path.join(r, f) for r, _, fs in os.walk(ds) for f in fs)
    for cls, names in (("a", ["ok1.jpg", "ok2.jpg"]),
                       ("b", ["ok3.jpg", "ok4.jpg", "ok5.jpg"])):
        os.makedirs(d / cls)
        for n in names:
            shutil.copy(good.pop(), d / cls / n)
    with open(d / "a" / "broken.jpg", "wb") as f:
        f.write(open(good.pop(), "rb").read()[:300])
    return str(d)


def test_dataset_loader_closes_with_the_dataset_or_close(ds):
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import gc
    import sluice.tf as stf
    # TF's from_generator registry keeps the generator for the process's
    # life: the loader must not live as long as it.
    next(iter(stf.dataset(ds, batch_size=B, image_size=S)))  # TF's own threads
    gc.collect()
    before, loaders = threads(), []
    for _ in range(4):
        d = stf.dataset(ds, batch_size=B, image_size=S)
        next(iter(d))
        loaders.append(d.loader)
        del d
    gc.collect()
    assert all(ld.closed for ld in loaders)
    assert threads() <= before + 2, (before, threads())
    # a running iteration keeps its dataset (and its loader) alive
    it = iter(stf.dataset(ds, batch_size=B, image_size=S))
    gc.collect()
    assert len(list(it)) == 6
    # close(): at once; an iteration under way raises, never a quiet end
    d = stf.dataset(ds, batch_size=B, image_size=S)
    it = iter(d)
    next(it)
    d.close()
    assert d.loader.closed
    with pytest.raises(tf.errors.OpError, match="closed during an iteration"):
        next(it)
    with pytest.raises(tf.errors.OpError, match="is closed"):
        next(iter(d))
    with stf.batches(ds, batch_size=B, image_size=S) as b:
        it = iter(b)
        next(it)
    assert b.loader.closed
    with pytest.raises(RuntimeError, match="closed during an iteration"):
        next(it)


def test_dataset_made_where_tf_traces(ds):
    """A dataset made inside traced code (flat_map, tf.function) runs after
    the tracing's Python object is gone (its loader is not closed then)."""
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    d = tf.data.Dataset.range(1).flat_map(
        lambda _: stf.dataset(ds, batch_size=B, image_size=S, seed=1))
    assert sum(1 for _ in d) == 6

    @tf.function
    def total():
        s = tf.constant(0, tf.int64)
        for _, y in stf.dataset(ds, batch_size=B, image_size=S, seed=1):
            s += tf.reduce_sum(y)
        return s
    assert int(total()) == 48 // 3 * (0 + 1 + 2)


def test_batches_each_iteration_is_the_next_epoch(ds):
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    ref = labels_of(sluice.Loader(ds, B, S, layout="hwc", seed=5, epochs=3))
    b = stf.batches(ds, batch_size=B, image_size=S, seed=5)
    assert labels_of(b) + labels_of(b) == ref[:12]  # epochs 0, 1
    assert b.stats()["epoch"] == 2 and b.skipped() == [] and not b.loader.closed
    b.close()
    # epochs= still streams that many epochs per iteration
    two = stf.batches(ds, batch_size=B, image_size=S, seed=5, epochs=2)
    assert labels_of(two) == ref[:12] and labels_of(two)[:6] == ref[12:]
    with pytest.raises(RuntimeError, match="one iteration at a time"):
        it = iter(two)
        next(it)
        iter(two)
    assert isinstance(next(it)[0], tf.Tensor)
    # next() on the object itself, as when batches() was a generator
    one = stf.batches(ds, batch_size=B, image_size=S, seed=5)
    x, y = next(one)
    assert x.dtype == tf.uint8 and y.dtype == tf.int64
    assert y.numpy().tolist() == ref[0] and next(one)[1].numpy().tolist() == ref[1]


def test_jax_batches_each_iteration_is_the_next_epoch(ds):
    pytest.importorskip("jax", reason="jax not installed")
    import sluice.tf as stf
    ref = labels_of(sluice.Loader(ds, B, S, layout="hwc", seed=5, epochs=2))
    j = stf.jax_batches(ds, batch_size=B, image_size=S, seed=5)
    got = [labels_of(j) for _ in range(2)]
    assert got[0] + got[1] == ref
    assert j.class_names == ["class_000", "class_001", "class_002"]


def test_skips_are_listed_and_warned(bad):
    pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    d = stf.dataset(bad, batch_size=2, image_size=S, on_error="skip",
                    shuffle=False, threads=1)
    with pytest.warns(UserWarning, match=r"1 sample\(s\) skipped by epoch "
                      r"0's end.*broken\.jpg"):
        n = sum(len(y) for _, y in d)
    assert n == 5
    assert len(d.skipped()) == 1 and "broken.jpg" in d.skipped()[0]
    assert d.stats()["errors_skipped"] == 1
    d.close()  # the list stays readable
    assert len(d.skipped()) == 1
    j = stf.batches(bad, batch_size=2, image_size=S, on_error="skip", threads=1)
    for epoch in range(2):  # each epoch's new skip warns
        with pytest.warns(UserWarning, match=f"by epoch {epoch}'s end"):
            assert sum(len(y) for _, y in j) == 5
    assert len(j.skipped()) == 2


def test_two_iterations_at_once_say_so(ds):
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    d = stf.dataset(ds, batch_size=B, image_size=S, seed=5)
    ref = labels_of(sluice.Loader(ds, B, S, layout="hwc", seed=5, epochs=4))
    first = iter(d)
    got = [next(first)[1].numpy().tolist()]
    with pytest.raises(tf.errors.OpError, match="one iteration at a time"):
        next(iter(d))
    got += labels_of(first)  # the first is untouched
    assert got == ref[:6]
    with pytest.raises(tf.errors.OpError, match="one iteration at a time"):
        next(iter(tf.data.Dataset.zip((d, d))))
    # the zip's first part started epoch 1 (a break, as it were): the next
    # iteration streams epoch 2 whole
    assert labels_of(d) == ref[12:18]
    # interleave traces its function once: one dataset for both cycles
    # (before, the message named only two iterators and zip)
    il = tf.data.Dataset.range(2).interleave(
        lambda _: stf.dataset(ds, batch_size=B, image_size=S), cycle_length=2)
    with pytest.raises(tf.errors.OpError, match="interleave"):
        sum(1 for _ in il)


def test_dataset_batches_are_tfs_own_memory(ds):
    pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    d = stf.dataset(ds, batch_size=B, image_size=S, seed=5)
    held = list(d)  # TF holding batches (cache(), shuffle()) as a list does
    assert d.stats()["batches_held"] == 0
    ref = reference(ds)
    for (x, y), (rx, ry) in zip(held, ref):
        assert np.array_equal(x.numpy(), rx) and np.array_equal(y.numpy(), ry)
    z = stf.dataset(ds, batch_size=B, image_size=S, copy=False)
    held = list(z)  # no copy: the tensors are the engine's buffers
    assert z.stats()["batches_held"] == 6


def test_resume_from_start_epoch_and_batch(ds):
    pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    run = [(x.copy(), y.copy()) for x, y in
           sluice.Loader(ds, B, S, layout="hwc", seed=5, epochs=3)]

    def same(got, want):
        got = [(np.asarray(x), np.asarray(y)) for x, y in got]
        assert len(got) == len(want)
        for (x, y), (rx, ry) in zip(got, want):
            assert np.array_equal(x, rx) and np.array_equal(y, ry)

    d = stf.dataset(ds, batch_size=B, image_size=S, seed=5, start_epoch=1)
    same(d, run[6:12])
    same(d, run[12:18])  # then on from there
    same(stf.dataset(ds, batch_size=B, image_size=S, seed=5, epochs=2,
                     start_epoch=1, start_batch=2), run[8:18])
    same(stf.batches(ds, batch_size=B, image_size=S, seed=5, start_epoch=2,
                     start_batch=5), run[17:18])
    with pytest.raises(ValueError, match="start"):
        stf.dataset(ds, batch_size=B, image_size=S, start_batch=6)


def test_jax_resume(ds):
    pytest.importorskip("jax", reason="jax not installed")
    import sluice.tf as stf
    ref = labels_of(sluice.Loader(ds, B, S, layout="hwc", seed=5, epochs=3))
    j = stf.jax_batches(ds, batch_size=B, image_size=S, seed=5, start_epoch=2)
    assert labels_of(j) == ref[12:]


def test_cardinality_class_names_and_dtypes(ds):
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    kw = dict(batch_size=B, image_size=S)
    assert int(stf.dataset(ds, **kw).cardinality()) == 6
    assert int(stf.dataset(ds, epochs=2, **kw).cardinality()) == 12
    assert (int(stf.dataset(ds, repeat=True, **kw).cardinality())
            == int(tf.data.INFINITE_CARDINALITY))
    # skips can drop a whole batch: the count is not promised then
    assert (int(stf.dataset(ds, on_error="skip", **kw).cardinality())
            == int(tf.data.UNKNOWN_CARDINALITY))
    d = stf.dataset(ds, **kw)
    assert d.class_names == ["class_000", "class_001", "class_002"]
    for dt in ("float32", np.float32, np.dtype("float32"), tf.float32):
        assert stf.dataset(ds, dtype=dt, **kw).element_spec[0].dtype == tf.float32
    for dt in ("uint8", np.uint8, tf.uint8):
        x, _ = next(iter(stf.batches(ds, dtype=dt, **kw)))
        assert x.dtype == tf.uint8
    with pytest.raises(ValueError, match="dtype"):
        stf.dataset(ds, dtype=tf.int16, **kw)


def test_epochs_and_start_checked(ds):
    """A float or a count below its least is refused at construction,
    naming it: before, epochs=-1 made a cardinality of -7 (TF then failed
    mid-iteration), 2.5 yielded three epochs, 0 none."""
    import sluice.tf as stf
    makers = [stf.jax_batches, stf.batches]
    if importlib.util.find_spec("tensorflow") is not None:
        makers.append(stf.dataset)
    for make in makers:
        for kw, err, what in (({"epochs": -1}, ValueError, "epochs must be >= 1"),
                              ({"epochs": 0}, ValueError, "epochs must be >= 1"),
                              ({"epochs": 2.5}, TypeError, "epochs must be an int"),
                              ({"epochs": True}, TypeError, "epochs must be an int"),
                              ({"start_epoch": -1}, ValueError, "start_epoch must be >= 0"),
                              ({"start_batch": 1.0}, TypeError, "start_batch must be an int")):
            with pytest.raises(err, match=what):
                make(ds, batch_size=B, image_size=S, **kw)
    # a numpy integer is an int
    n = sum(1 for _ in stf.batches(ds, batch_size=B, image_size=S, epochs=np.int64(2)))
    assert n == 2 * 48 // B


def test_rank_sharded_dataset_is_not_auto_sharded_again(ds):
    """rank= / world_size= shard in the engine; tf.distribute's auto-shard
    (AUTO: DATA for a from_generator dataset) would keep 1 / world_size of
    each rank's part again under MultiWorkerMirroredStrategy. Before, the
    policy was AUTO."""
    tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu not installed")
    import sluice.tf as stf
    policy = tf.data.experimental.AutoShardPolicy
    d = stf.dataset(ds, batch_size=B, image_size=S, rank=1, world_size=2, seed=5)
    assert d.options().experimental_distribute.auto_shard_policy == policy.OFF
    ref = labels_of(sluice.Loader(ds, B, S, layout="hwc", seed=5, rank=1,
                                  world_size=2))
    assert int(d.cardinality()) == len(ref) == 3 and labels_of(d) == ref
    assert d.loader.options["rank"] == 1 and d.class_names
    # unsharded: auto-shard stays TF's to choose (DATA splits the stream)
    one = stf.dataset(ds, batch_size=B, image_size=S)
    assert one.options().experimental_distribute.auto_shard_policy == policy.AUTO


def test_sizes_named_and_keras_style_image_size(ds):
    """A size of the wrong type names its argument (before: "'float' object
    cannot be interpreted as an integer", naming neither), and image_size
    may be (side, side) as Keras's image_dataset_from_directory takes it
    (before: the same nameless TypeError); an unknown option names the
    function it was given to (before: "... for Loader()" only)."""
    import sluice.tf as stf
    makers = [stf.jax_batches, stf.batches]
    if importlib.util.find_spec("tensorflow") is not None:
        makers.append(stf.dataset)
    for make in makers:
        for kw, what in (({"batch_size": 8.0}, "batch_size must be an int"),
                         ({"batch_size": None}, "batch_size must be an int"),
                         ({"image_size": "32"}, "image_size must be an int")):
            args = {"batch_size": B, "image_size": S, **kw}
            with pytest.raises(TypeError, match=what):
                make(ds, **args)
        with pytest.raises(TypeError, match=f"{make.__name__}: "
                           "'shuffle_buffer_size' is an invalid keyword"):
            make(ds, batch_size=B, image_size=S, shuffle_buffer_size=10)
        with pytest.raises(ValueError, match=r"image_size .*\(32, 48\)"):
            make(ds, batch_size=B, image_size=(32, 48))
        x, _ = next(iter(make(ds, batch_size=B, image_size=(S, S))))
        assert tuple(x.shape) == (B, S, S, 3)
    if importlib.util.find_spec("tensorflow") is not None:
        d = stf.dataset(ds, batch_size=B, image_size=[S, S], layout="chw")
        assert d.element_spec[0].shape.as_list() == [None, 3, S, S]


def test_batches_repeat_streams_on(ds):
    """repeat=True, as dataset()'s, for a JAX loop counted in steps (before:
    batches() and jax_batches() refused repeat=, a TypeError from Loader)."""
    import itertools
    import sluice.tf as stf
    ref = labels_of(sluice.Loader(ds, B, S, layout="hwc", seed=5, epochs=3))
    makers = [stf.batches] if importlib.util.find_spec("tensorflow") else []
    if importlib.util.find_spec("jax") is not None:
        makers.append(stf.jax_batches)
    for make in makers:
        it = make(ds, batch_size=B, image_size=S, seed=5, repeat=True)
        assert labels_of(itertools.islice(it, 15)) == ref[:15]
        it.close()
    # a count, as tf.data's repeat(3) takes, is refused (before, dataset()
    # took repeat=3 as True: an endless stream)
    if importlib.util.find_spec("tensorflow") is not None:
        makers.append(stf.dataset)
    for make in makers:
        with pytest.raises(TypeError,
                           match="repeat must be True or False, got 3; epochs="):
            make(ds, batch_size=B, image_size=S, repeat=3)


def test_flags_refuse_what_is_not_a_bool(ds):
    """Each public function's boolean flags take True or False only, the
    TypeError naming the function, the flag and the value (before,
    dataset(copy="no") copied: any truthy value was True)."""
    import sluice.tf as stf
    calls = []
    if importlib.util.find_spec("tensorflow") is not None:
        calls += [(stf.dataset, "copy"), (stf.dataset, "repeat"),
                  (stf.batches, "repeat")]
    if importlib.util.find_spec("jax") is not None:
        calls.append((stf.jax_batches, "repeat"))
    if not calls:
        pytest.skip("neither tensorflow nor jax is installed")
    for make, flag in calls:
        for bad in ("no", 1, None):
            with pytest.raises(TypeError, match=(
                    f"^sluice.tf.{make.__name__}: {flag} must be True or "
                    f"False, got {bad!r}")):
                make(ds, batch_size=B, image_size=S, **{flag: bad})
    # np.bool_ is a bool (a flag read from an array)
    if importlib.util.find_spec("tensorflow") is not None:
        z = stf.dataset(ds, batch_size=B, image_size=S, copy=np.False_)
        z.close()


def test_batches_state_dict_resumes_mid_epoch(ds):
    """state_dict() of a batches object is the position after the batches
    handed out (before: none; a JAX loop had to count batches itself, and
    a count is wrong where skips drop a batch)."""
    import sluice.tf as stf
    ref = labels_of(sluice.Loader(ds, B, S, layout="hwc", seed=5, epochs=3))
    makers = [stf.batches] if importlib.util.find_spec("tensorflow") else []
    if importlib.util.find_spec("jax") is not None:
        makers.append(stf.jax_batches)
    for make in makers:
        b = make(ds, batch_size=B, image_size=S, seed=5, epochs=2)
        assert b.state_dict() == {"epoch": 0, "batch": 0}
        it = iter(b)
        got = [next(it)[1] for _ in range(8)]  # epoch 0 whole, 2 of epoch 1
        assert b.state_dict() == {"epoch": 1, "batch": 2}
        st = b.state_dict()
        b.close()
        rest = make(ds, batch_size=B, image_size=S, seed=5,
                    start_epoch=st["epoch"], start_batch=st["batch"])
        assert [np.asarray(y).tolist() for y in got] + labels_of(rest) == ref[:12]
        assert rest.state_dict() == {"epoch": 2, "batch": 0}
        # a break: the next iteration begins at the next epoch
        for _ in rest:
            break
        assert rest.state_dict() == {"epoch": 3, "batch": 0}


def test_zero_copy_batches_held_past_the_next_step_stay_valid(ds):
    """The README's contract: a batch kept after the stream moves on keeps
    its buffer out of the pool (no later batch is written over it) until
    the last tensor over it goes."""
    import gc
    import sluice.tf as stf
    ref = reference(ds)
    makers = [stf.batches] if importlib.util.find_spec("tensorflow") else []
    if importlib.util.find_spec("jax") is not None:
        makers.append(stf.jax_batches)
    for make in makers:
        b = make(ds, batch_size=B, image_size=S, seed=5)
        held = list(b)
        gc.collect()
        assert b.stats()["batches_held"] == len(ref)
        for (x, y), (rx, ry) in zip(held, ref):
            assert np.array_equal(np.asarray(x), rx)
            assert np.array_equal(np.asarray(y), ry)
        del held, x, y
        gc.collect()
        assert b.stats()["batches_held"] == 0
        b.close()


def test_jax_batches_shard_by_jax_process(ds, monkeypatch):
    """A multi-host JAX job (jax.distributed) streams each host's own part
    by default, as sluice.torch does under torch.distributed (before:
    every host streamed the whole dataset, the same batches)."""
    jax = pytest.importorskip("jax", reason="jax not installed")
    import subprocess
    import sys
    import sluice.tf as stf
    # made before jax.distributed.initialize(): it must start no backend
    # (initialize() refuses to run after one)
    code = ("import sys; import jax._src.xla_bridge as xb\n"
            "import sluice.tf as stf\n"
            f"j = stf.jax_batches({ds!r}, batch_size={B}, image_size={S})\n"
            "sys.exit(xb.backends_are_initialized()\n"
            "         or j.loader.options['world_size'] != 1)")
    # the child imports this build's sluice, as this process does (conftest
    # puts it on sys.path, not on PYTHONPATH)
    built = os.path.dirname(os.path.dirname(os.path.abspath(stf.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (built, os.environ.get("PYTHONPATH")) if p))
    run = subprocess.run([sys.executable, "-c", code], timeout=120, env=env)
    assert run.returncode == 0
    jax.devices()  # backends up (as after jax.distributed.initialize())
    monkeypatch.setattr(jax, "process_index", lambda *a: 1)
    monkeypatch.setattr(jax, "process_count", lambda *a: 2)
    j = stf.jax_batches(ds, batch_size=B, image_size=S, seed=5)
    assert (j.loader.options["rank"], j.loader.options["world_size"]) == (1, 2)
    assert labels_of(j) == labels_of(sluice.Loader(
        ds, B, S, layout="hwc", seed=5, rank=1, world_size=2))
    # given ones win
    j = stf.jax_batches(ds, batch_size=B, image_size=S, rank=0, world_size=1)
    assert j.loader.options["world_size"] == 1
