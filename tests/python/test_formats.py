"""WebDataset tar shards and TFRecord files as sluice sources (issue 15
item 2): shards written as the `webdataset` package lays them out (Python's
tarfile with webdataset's TarWriter settings; webdataset.ShardWriter itself
when it is installed) and TFRecords written by TensorFlow
(tf.io.TFRecordWriter, tf.train.Example) give exactly the batches of the
ImageFolder holding the same photos in the same order (pixels and labels,
same seed), through the binding, sluice.torch and the CLI; `sluice pack
--format webdataset|tfrecord` is read back equal by webdataset / tarfile and
tf.data; bad shards fail naming file and sample, or are skipped and listed.
Photos: ../shared/data/imagenet-sample (generated JPEGs when absent)."""
import io
import json
import os
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest

SLUICE = os.environ.get("SLUICE")
sluice = pytest.importorskip("sluice", reason="sluice module not built")

PHOTOS = os.path.join(os.environ.get("SL_SHARED_DATA", os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "data")),
    "imagenet-sample")
NCLASS = 24
B, S = 8, 64


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """An ImageFolder: one real photo from each of NCLASS classes (two
    photos in the first classes: links to the same files), or generated
    JPEGs when the shared data is absent."""
    d = tmp_path_factory.mktemp("folder") / "ds"
    if os.path.isdir(PHOTOS):
        wnids = sorted(os.listdir(PHOTOS))[:NCLASS]
        for k, w in enumerate(wnids):
            os.makedirs(d / w)
            for f in sorted(os.listdir(os.path.join(PHOTOS, w))):
                os.symlink(os.path.join(PHOTOS, w, f), d / w / f)
                if k < 4:  # a second sample in a few classes
                    os.symlink(os.path.join(PHOTOS, w, f), d / w / ("b_" + f))
    else:
        if not SLUICE:
            pytest.skip("SLUICE not set")
        subprocess.run([SLUICE, "make-dataset", "--synthetic", str(d),
                        "--images", "40", "--classes", "5"], check=True,
                       capture_output=True)
    return str(d)


def samples(folder):
    """(path, label, file name) in sluice's (and torchvision's) ImageFolder
    order: sorted classes, each walked sorted."""
    out = []
    for label, c in enumerate(sorted(os.listdir(folder))):
        for root, dirs, files in sorted(os.walk(os.path.join(folder, c))):
            dirs.sort()
            for f in sorted(files):
                if f.lower().endswith((".jpg", ".jpeg", ".png")):
                    out.append((os.path.join(root, f), label, f))
    return out


def ext(name):
    return "png" if name.lower().endswith(".png") else "jpg"


def write_wds_tarfile(folder, out, per_shard):
    """Shards as webdataset's TarWriter writes them: members KEY.cls and
    KEY.jpg in sorted order, mode 0o444, user/group "bigdata", a float
    mtime (so tarfile writes pax headers), the default (pax) format."""
    os.makedirs(out)
    sm = samples(folder)
    shards = 0
    for s0 in range(0, len(sm), per_shard):
        with tarfile.open(os.path.join(out, "shard-%06d.tar" % shards), "w") as t:
            for i in range(s0, min(s0 + per_shard, len(sm))):
                path, label, name = sm[i]
                obj = {"cls": str(label).encode("ascii"),
                       ext(name): open(path, "rb").read()}
                for k in sorted(obj):
                    ti = tarfile.TarInfo("%s/%09d.%s" % ("train", i, k))
                    ti.size = len(obj[k])
                    ti.mtime = time.time()
                    ti.mode = 0o444
                    ti.uname = ti.gname = "bigdata"
                    t.addfile(ti, io.BytesIO(obj[k]))
        shards += 1
    return os.path.join(out, "shard-{000000..%06d}.tar" % (shards - 1))


def tf_child(code, *args):
    """Runs TensorFlow in a child process: imported here it starts threads
    that later fork()s in this pytest process (the generic loader's
    workers in test_generic.py) can deadlock on."""
    import importlib.util
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow not installed")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


TF_WRITE = r"""
import json, os, sys
import tensorflow as tf
sm, out, per_file = json.load(open(sys.argv[1]))
nfiles = (len(sm) + per_file - 1) // per_file
for k in range(nfiles):
    with tf.io.TFRecordWriter(os.path.join(out, "train-%05d-of-%05d" % (k, nfiles))) as w:
        for path, label, name in sm[k * per_file:(k + 1) * per_file]:
            f = tf.train.Feature
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": f(bytes_list=tf.train.BytesList(value=[open(path, "rb").read()])),
                "image/class/label": f(int64_list=tf.train.Int64List(value=[label])),
                "image/format": f(bytes_list=tf.train.BytesList(value=[b"JPEG"])),
                "image/filename": f(bytes_list=tf.train.BytesList(value=[name.encode()])),
                "image/height": f(int64_list=tf.train.Int64List(value=[1])),
                "image/object/bbox/xmin": f(float_list=tf.train.FloatList(value=[0.25, 0.5])),
            }))
            w.write(ex.SerializeToString())
print(nfiles)
"""

TF_READ = r"""
import pickle, sys
import tensorflow as tf
spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
got = [(e["image/encoded"].numpy(), int(e["image/class/label"]))
       for e in tf.data.TFRecordDataset(sys.argv[2:]).map(
           lambda r: tf.io.parse_single_example(r, spec))]
pickle.dump(got, open(sys.argv[1], "wb"))
"""


def write_tfrecords(folder, out, per_file):
    """ImageNet-style TFRecords by TensorFlow itself (in a child process),
    extension-less names as in the common ImageNet build (found by their
    first bytes)."""
    os.makedirs(out)
    spec = os.path.join(out, "..", os.path.basename(out) + "-samples.json")
    with open(spec, "w") as f:
        json.dump([[list(x) for x in samples(folder)], out, per_file], f)
    nfiles = int(tf_child(TF_WRITE, spec).split()[-1])
    return os.path.join(out, "train-{00000..%05d}-of-%05d" % (nfiles - 1, nfiles))


def batches(source, **kw):
    ld = sluice.Loader(source, B, S, seed=5, epochs=2, threads=2, **kw)
    return ld, [(x.copy(), y.copy()) for x, y in ld]


def assert_same(a, b):
    assert len(a) == len(b)
    for i, ((x1, y1), (x2, y2)) in enumerate(zip(a, b)):
        assert np.array_equal(y1, y2), f"batch {i}: labels differ"
        assert np.array_equal(x1, x2), f"batch {i}: pixels differ"


@pytest.fixture(scope="module")
def wds_tarfile(folder, tmp_path_factory):
    return write_wds_tarfile(folder, str(tmp_path_factory.mktemp("w") / "wds"), 7)


def need_tfrecord(path):
    """Skips when sluice was built without TFRecord support (SL_TFRECORD=OFF)."""
    r = subprocess.run([SLUICE, "inspect", path], capture_output=True, text=True)
    if "built without TFRecord support" in r.stderr:
        pytest.skip("sluice built without SL_TFRECORD: " + r.stderr.strip())


@pytest.fixture(scope="module")
def tfrec(folder, tmp_path_factory):
    spec = write_tfrecords(folder, str(tmp_path_factory.mktemp("t") / "tfr"), 11)
    need_tfrecord(spec)
    return spec


@pytest.fixture(scope="module")
def reference(folder):
    return batches(folder)[1]


def test_webdataset_equals_folder(folder, wds_tarfile, reference):
    ld, got = batches(wds_tarfile)
    assert ld.num_samples == len(samples(folder))
    assert_same(got, reference)


def test_webdataset_shardwriter(folder, tmp_path, reference):
    wds = pytest.importorskip("webdataset")
    out = tmp_path / "sw"
    os.makedirs(out)
    with wds.ShardWriter(str(out / "s-%03d.tar"), maxcount=10) as w:
        for i, (path, label, name) in enumerate(samples(folder)):
            w.write({"__key__": "k%05d" % i, ext(name): open(path, "rb").read(),
                     "cls": label})
    n = len(os.listdir(out))
    _, got = batches(str(out / ("s-{000..%03d}.tar" % (n - 1))))
    assert_same(got, reference)


def test_tfrecord_equals_folder(folder, tfrec, reference):
    ld, got = batches(tfrec)
    assert ld.num_samples == len(samples(folder))
    assert_same(got, reference)
    # The explicit prefix names the format as well.
    _, got = batches("tfrecord:" + tfrec)
    assert_same(got, reference)


def test_torch_dataloader(wds_tarfile, folder):
    torch = pytest.importorskip("torch")
    import sluice.torch as st
    a = st.DataLoader(wds_tarfile, batch_size=B, image_size=S, seed=3)  # a path: native
    b = st.DataLoader(source=folder, batch_size=B, image_size=S, seed=3)
    for (x1, y1), (x2, y2) in zip(a, b):
        assert torch.equal(x1, x2) and torch.equal(y1, y2)


def cli(*args):
    r = subprocess.run([SLUICE, *args], capture_output=True, text=True)
    return r


def run_digest(source, *extra):
    r = cli("run", source, "--batch", str(B), "--size", str(S), "--seed", "9",
            "--epochs", "2", "--digest", "--json", "--quiet", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["digest"]


def test_cli_run_and_inspect(folder, wds_tarfile, tfrec):
    want = run_digest(folder)
    assert run_digest(wds_tarfile) == want
    assert run_digest(tfrec) == want
    r = cli("inspect", wds_tarfile)
    assert r.returncode == 0, r.stderr
    assert "format:   webdataset" in r.stdout
    assert "samples:  %d (0 bad)" % len(samples(folder)) in r.stdout
    r = cli("inspect", tfrec)
    assert "format:   tfrecord" in r.stdout


def test_pack_read_back(folder, tmp_path):
    sm = samples(folder)
    want = run_digest(folder)
    # WebDataset: read back by webdataset (or webdataset's grouping with
    # tarfile) equal to the files, and by sluice equal to the folder.
    out = tmp_path / "wds"
    r = cli("pack", folder, str(out), "--format", "webdataset",
            "--shard-size", "1M")
    assert r.returncode == 0, r.stderr
    shards = sorted(f for f in os.listdir(out) if f.endswith(".tar"))  # and .slidx
    assert len(shards) > 1 and shards[0] == "shard-000000.tar"
    got = []
    try:
        import webdataset as wds
        for s in wds.WebDataset([str(out / f) for f in shards], shardshuffle=False):
            img = s.get("jpg", s.get("png"))
            got.append((img, int(s["cls"])))
    except ImportError:
        for f in shards:
            with tarfile.open(out / f) as t:
                cur = {}
                for m in t.getmembers():
                    key, _, sfx = m.name.partition(".")
                    if cur and cur["key"] != key:
                        got.append((cur.get("jpg", cur.get("png")), int(cur["cls"])))
                        cur = {}
                    cur["key"] = key
                    cur[sfx] = t.extractfile(m).read()
                got.append((cur.get("jpg", cur.get("png")), int(cur["cls"])))
    assert [(open(p, "rb").read(), lab) for p, lab, _ in sm] == got
    pattern = str(out / ("shard-{000000..%06d}.tar" % (len(shards) - 1)))
    assert run_digest(pattern) == want
    # TFRecord: read back by tf.data (in a child process: see tf_child).
    out = tmp_path / "tfr"
    r = cli("pack", folder, str(out), "--format", "tfrecord")
    if "built without TFRecord support" in r.stderr:
        pytest.skip("sluice built without SL_TFRECORD")
    assert r.returncode == 0, r.stderr
    files = sorted(str(out / f) for f in os.listdir(out) if f.endswith(".tfrecord"))
    import pickle
    tf_child(TF_READ, str(tmp_path / "got.pkl"), *files)
    got = pickle.load(open(tmp_path / "got.pkl", "rb"))
    assert [(open(p, "rb").read(), lab) for p, lab, _ in sm] == got
    assert len(files) == 1 and files[0].endswith("data-00000.tfrecord")
    assert run_digest(files[0]) == want


def test_bad_shards(folder, wds_tarfile, tmp_path):
    d = os.path.dirname(wds_tarfile)
    shards = sorted(os.listdir(d))
    bad = tmp_path / "bad"
    os.makedirs(bad)
    for f in shards:
        os.symlink(os.path.join(d, f), bad / f)
    # the second shard cut short, a sample whose .cls is not a number
    os.unlink(bad / shards[1])
    data = open(os.path.join(d, shards[1]), "rb").read()
    open(bad / shards[1], "wb").write(data[:len(data) // 2 + 100])
    os.unlink(bad / shards[0])
    with tarfile.open(os.path.join(d, shards[0])) as src, \
            tarfile.open(bad / shards[0], "w") as t:
        for m in src.getmembers():
            b = src.extractfile(m).read()
            if m.name.endswith("000000002.cls"):
                b = b"two"
            m.size = len(b)
            t.addfile(m, io.BytesIO(b))
    pattern = str(bad / ("shard-{000000..%06d}.tar" % (len(shards) - 1)))
    with pytest.raises(sluice.Error) as e:
        sluice.Loader(pattern, B, S)
    assert "shard-000000.tar: sample 2 (key train/000000002)" in str(e.value)
    assert "not an integer" in str(e.value)
    ld = sluice.Loader(pattern, B, S, on_error="skip", threads=1)
    n = sum(len(y) for _, y in ld)
    skipped = ld.skipped()
    assert any("000000002" in m and "not an integer" in m for m in skipped)
    assert any(shards[1] in m and "truncated" in m for m in skipped)
    assert 0 < n < len(samples(folder)) - 1


def test_shuffle_buffer(wds_tarfile, folder):
    """WebDataset's shuffle-buffer order: deterministic for a seed, the
    same samples as the permutation, resumable from a position, and with
    a buffer of 1 each shard's samples come in stored order."""
    def run(**kw):
        ld = sluice.Loader(wds_tarfile, B, S, seed=4, epochs=2, threads=2,
                           mode="eval", **kw)
        return ld, [(x.copy(), y.copy()) for x, y in ld]
    _, a = run(shuffle_buffer=10)
    _, b = run(shuffle_buffer=10, read_threads=3)
    assert_same(a, b)
    _, perm = run()
    assert sorted(np.concatenate([y for _, y in a]).tolist()) == \
        sorted(np.concatenate([y for _, y in perm]).tolist())
    assert not all(np.array_equal(y1, y2) for (_, y1), (_, y2) in zip(a, perm))
    ld = sluice.Loader(wds_tarfile, B, S, seed=4, epochs=2, mode="eval",
                       shuffle_buffer=10)
    ld.start(1, 1)
    rest = [(x.copy(), y.copy()) for x, y in ld]
    tail = a[len(a) // 2 + 1:]
    assert_same(rest[:len(tail)], tail)
    # Buffer 1: each shard (7 samples) in stored order, whose labels never
    # go down, so they go down only between shards (the permutation's
    # order goes down about every other sample).
    _, one = run(shuffle_buffer=1)
    n = len(samples(folder))
    labels = np.concatenate([y for _, y in one])[:n]
    descents = int(np.sum(labels[1:] < labels[:-1]))
    assert descents <= (n + 6) // 7 - 1
    with pytest.raises(ValueError):
        sluice.Loader(wds_tarfile, B, S, shuffle_buffer=-1)
