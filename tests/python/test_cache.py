"""sluice.Loader(cache_bytes=...): the sample cache from Python (issue 15
item 4). The batches are the same with and without a cache; a cache that
holds the set serves epochs 2.. from memory (stats()['cache']); the decoded
tier gives the dct_scale=False stream; the knob 'cache_bytes' is set live;
bad arguments are refused."""
import hashlib
import os
import re

import pytest
from conftest import synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "cache", 120, 3)


def digest(ld):
    h = hashlib.sha256()
    for images, labels in ld:
        h.update(images.tobytes())
        h.update(labels.tobytes())
    return h.hexdigest()


def loader(ds, **kw):
    return sluice.Loader(ds, 16, 32, seed=3, epochs=3, threads=2, **kw)


def test_same_batches_and_hits(ds):
    ref = digest(loader(ds))
    for policy in ("minio", "lru"):
        ld = loader(ds, cache_bytes=64 << 20, cache_policy=policy)
        assert digest(ld) == ref
        c = ld.stats()["cache"]
        assert c["entries"] == 120
        # The engine reads ahead into the epoch after the loop's last.
        assert c["hits"] + c["misses"] >= 360
        assert c["misses"] - 120 <= 48  # in flight across an epoch's end
    half = loader(ds, cache_bytes=1)  # holds nothing: all misses
    assert digest(half) == ref
    assert half.stats()["cache"]["hits"] == 0


def test_decoded_is_the_no_dct_stream(ds):
    ref = digest(loader(ds, dct_scale=False))
    ld = loader(ds, cache_bytes=256 << 20, cache_decoded=True)
    assert digest(ld) == ref
    assert ld.stats()["cache"]["hits"] >= 2 * 120 - 48


def test_knob_and_errors(ds):
    ld = loader(ds, cache_bytes=8 << 20)
    digest(ld)
    ld.set("cache_bytes", 0)
    assert ld.get("cache_bytes") == 0
    assert ld.stats()["cache"]["entries"] == 0
    with pytest.raises(ValueError):
        loader(ds, cache_bytes=-1)
    with pytest.raises(ValueError):
        loader(ds, cache_bytes=1 << 20, cache_policy="fifo")
    with pytest.raises(ValueError):
        loader(ds, cache_bytes=1 << 20, cache_codec="brotli")


def test_codec(ds):
    ref = digest(loader(ds, dct_scale=False))
    ld = loader(ds, cache_bytes=256 << 20, cache_decoded=True,
                cache_codec="zstd-1")
    assert digest(ld) == ref
    c = ld.stats()["cache"]
    assert c["codec"] == "zstd-1"
    assert c["bytes"] < c["raw_bytes"]  # smooth synthetic pixels shrink
    auto = loader(ds, cache_bytes=256 << 20, cache_decoded=True)
    assert digest(auto) == ref
    assert auto.stats()["cache"]["codec"] in ("none", "lz4", "zstd-1",
                                              "zstd-3", "zstd-19")


def test_disk_tier(ds, tmp_path):
    """cache_dir= / cache_disk_bytes=: the disk tier takes what the memory
    tier has no room for; the batches are unchanged; its subdirectory is
    removed when the loader closes; bad values are refused naming them."""
    ref = digest(loader(ds))
    for mem in (None, 1 << 16):
        ld = loader(ds, cache_bytes=mem, cache_dir=str(tmp_path),
                    cache_disk_bytes=64 << 20)
        assert digest(ld) == ref
        assert len(os.listdir(tmp_path)) == 1  # its own subdirectory
        c = ld.stats()["cache"]
        d = c["disk"]
        assert c["entries"] + d["entries"] == 120
        assert d["hits"] >= 2 * d["entries"] - 48
        assert d["errors"] == 0 and d["bytes"] > 0
        ld.close()
        assert os.listdir(tmp_path) == []
    assert "disk" not in loader(ds, cache_bytes=1 << 20).stats()["cache"]
    with pytest.raises(ValueError, match="cache_disk_bytes"):
        loader(ds, cache_dir=str(tmp_path), cache_disk_bytes=0)
    with pytest.raises(Exception, match="needs both"):
        loader(ds, cache_dir=str(tmp_path))
    with pytest.raises(Exception, match=re.escape(str(tmp_path / "nope"))):
        loader(ds, cache_dir=str(tmp_path / "nope"), cache_disk_bytes=1 << 20)
    with pytest.raises(Exception, match="cache_decoded"):
        loader(ds, cache_bytes=1 << 20, cache_decoded=True,
               cache_dir=str(tmp_path), cache_disk_bytes=1 << 20)
