"""Remote sources from Python (issue 15 item 1): sluice.Loader(URL) over
WebDataset tars and sluice shards served on 127.0.0.1 by the test's own
range-capable server (tests/e2e/faulty_http.py, without faults) gives the
batches of the same files read locally; a missing URL raises naming it.
Skips when sluice was built without libcurl."""
import os

import numpy as np
import pytest
from conftest import remote_tars

sluice = pytest.importorskip("sluice", reason="sluice module not built")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    for root, url, _ in remote_tars(tmp_path_factory, "www", 24, 3):
        yield root, url  # the server stops when the loop ends


def batches(src):
    out = []
    with sluice.Loader(src, batch_size=4, seed=7) as L:
        for b in L:
            out.append((np.array(b[0]).copy(), np.array(b[1]).copy()))
    return out


def test_loader_url_equals_local(served):
    root, url = served
    n = len([f for f in os.listdir(root / "wds") if f.endswith(".tar")])
    pat = "wds/shard-{000000..%06d}.tar" % (n - 1)
    local, remote = batches(str(root / pat)), batches(f"{url}/{pat}")
    assert len(local) == len(remote) == 6
    for (a, la), (b, lb) in zip(local, remote):
        assert np.array_equal(a, b) and np.array_equal(la, lb)


def test_missing_url_names_it(served):
    _, url = served
    with pytest.raises(Exception, match="nothere.tar.*404"):
        sluice.Loader(f"{url}/wds/nothere.tar", batch_size=4)


def test_missing_shards_first_named_rest_kept(served):
    """Shards at URLs are opened by several threads at once (recset.c):
    which error is reported, and what a skip keeps, stay those of the
    file order. Two of the shards are missing: the loader names the first
    every time; under skip both are listed in order and the other shards'
    batches are those of the same files read locally."""
    root, url = served
    tars = sorted(f for f in os.listdir(root / "wds") if f.endswith(".tar"))
    assert len(tars) >= 4
    names = [t[:-4] for t in tars]
    names[1], names[3] = "gone-a", "gone-b"
    remote = f"{url}/wds/{{{','.join(names)}}}.tar"  # a brace list
    for _ in range(5):
        with pytest.raises(Exception, match=r"gone-a\.tar.*404") as e:
            sluice.Loader(remote, batch_size=4)
        assert "gone-b" not in str(e.value)
    kept = [t for t in names if not t.startswith("gone")]
    local = str(root / "wds" / f"{{{','.join(kept)}}}.tar")
    with sluice.Loader(remote, batch_size=4, seed=7, on_error="skip") as L:
        got = [(np.array(b[0]).copy(), np.array(b[1]).copy()) for b in L]
        skipped = L.skipped()
    assert [m for m in skipped if "gone" in m] and \
        "gone-a" in skipped[0] and "gone-b" in skipped[1], skipped
    want = batches(local)
    assert len(got) == len(want)
    for (a, la), (b, lb) in zip(want, got):
        assert np.array_equal(a, b) and np.array_equal(la, lb)


def test_oversized_sidecar_walked_with_a_warning(served):
    """A sidecar at a URL is fetched with one GET capped at what an index
    of its file could need (48 bytes a possible sample + 16 MiB): a larger
    one is not read whole, the tar is walked instead, and the warning
    names the sidecar and why; the batches are those of the tar."""
    import shutil
    root, url = served
    big = root / "big"
    big.mkdir(exist_ok=True)
    shutil.copy(root / "wds" / "shard-000000.tar", big / "shard-000000.tar")
    with open(big / "shard-000000.tar.slidx", "wb") as f:
        f.write(b"\0" * (17 << 20))
    with sluice.Loader(f"{url}/big/shard-000000.tar", batch_size=4, seed=7) as L:
        got = [(np.array(b[0]).copy(), np.array(b[1]).copy()) for b in L]
        warns = [m for m in L.skipped() if "slidx" in m]
    assert len(warns) == 1 and "more than an index of this file needs" in warns[0], warns
    want = batches(str(root / "wds" / "shard-000000.tar"))
    assert len(got) == len(want) > 0
    for (a, la), (b, lb) in zip(want, got):
        assert np.array_equal(a, b) and np.array_equal(la, lb)


def test_secrets_in_a_url_are_not_in_the_exception(served):
    """A password and a presigned signature in a URL reach the server but
    are never printed: the exception names the URL with them as ***."""
    _, url = served
    host = url[len("http://"):]
    with pytest.raises(Exception) as e:
        sluice.Loader(f"http://alice:S3CRETpw@{host}/wds/nothere.tar"
                      "?X-Amz-Signature=SIGSECRET&v=1", batch_size=4)
    msg = str(e.value)
    assert "S3CRETpw" not in msg and "SIGSECRET" not in msg
    assert f"http://***@{host}/wds/nothere.tar?X-Amz-Signature=***&v=1" in msg
