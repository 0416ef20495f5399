"""sluice.Loader(coalesce=...): coalesced ranged reads from Python (issue 15
item 3; docs/DESIGN.md "Coalesced reads"). The keyword takes bytes (1..1 GiB)
or 'off'; anything else is refused naming it. The batches are the same with
coalescing on, off and at any size, and the same as the local files'; over
URLs in stored order it makes fewer requests (stats()['requests']) than
records, off exactly one per record; a local source makes none. The tars are
served by tests/e2e/faulty_http.py (conftest.remote_tars)."""
import hashlib

import pytest
from conftest import remote_tars, synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")

N = 48


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from remote_tars(tmp_path_factory, "coal", N, 3)


def epoch(src, **kw):
    """(digest of every batch, stats()['requests']) of one epoch (the
    engine reads ahead into the next: the counts cover more than N)."""
    h = hashlib.sha256()
    with sluice.Loader(src, batch_size=8, image_size=32, seed=11,
                       io_depth=8, **kw) as L:
        n = 0
        for images, labels in L:
            h.update(images.tobytes())
            h.update(labels.tobytes())
            n += len(labels)
        reqs = L.stats()["requests"]
    assert n == N
    return h.hexdigest(), reqs


def test_bad_values_name_the_keyword(tmp_path_factory):
    ds = synthetic_folder(tmp_path_factory, "coalbad", 8, 2)
    for bad in (0, -1, (1 << 30) + 1, 1 << 70, "on", "1M", ""):
        with pytest.raises(ValueError, match="coalesce"):
            sluice.Loader(ds, batch_size=4, coalesce=bad)
    for bad in (1.5, [1]):
        with pytest.raises(TypeError, match="coalesce"):
            sluice.Loader(ds, batch_size=4, coalesce=bad)
    for good in (None, "off", 1, 4096, 1 << 30):
        sluice.Loader(ds, batch_size=4, coalesce=good).close()


def test_stream_equal_fewer_requests(served):
    root, url, pat = served
    src = f"{url}/{pat}"
    for shuffle in (False, True):
        local, lreq = epoch(str(root / pat), shuffle=shuffle)
        assert lreq["count"] == 0  # local files: no requests
        off, roff = epoch(src, shuffle=shuffle, coalesce="off")
        assert off == local
        assert roff["count"] == roff["records"] >= N  # one per record
        for size in (None, 64 << 10, 1 << 30):
            on, ron = epoch(src, shuffle=shuffle, coalesce=size)
            assert on == local, (shuffle, size)
            assert ron["fallbacks"] == 0
            assert ron["records"] >= N
            if not shuffle and size != 64 << 10:
                # Stored order: neighbours share requests (at least 2
                # records a request where off makes one).
                assert ron["count"] * 2 <= ron["records"], (size, ron)
