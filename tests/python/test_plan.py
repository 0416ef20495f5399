"""sluice.Loader.start_plan: given batches in a given order, each the one a
plain iteration yields at its (epoch, batch), digest for digest; a plan
leaves `position` alone; bad plans raise ValueError / TypeError."""
import hashlib

import pytest

from conftest import synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")

B, S = 8, 32


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "plan", 60, 3)  # 8 batches


def digest(images, labels):
    return hashlib.sha1(images.tobytes() + labels.tobytes()).hexdigest()


@pytest.fixture(scope="module")
def seq(ds):
    """Digests of three epochs, by global batch number."""
    with sluice.Loader(ds, B, S, epochs=3, seed=5, threads=2) as L:
        return [digest(x, y) for x, y in L]


def test_list_and_range_equal_sequential(ds, seq):
    with sluice.Loader(ds, B, S, seed=5, threads=2) as L:
        nb = L.batches_per_epoch
        assert nb == 8 and len(seq) == 3 * nb
        want = [(2, 7), (0, 0), (1, 3), (0, 0)]
        L.start_plan(want)
        assert [digest(x, y) for x, y in L] == [seq[e * nb + b] for e, b in want]
        L.start_plan(first=(1, 5), step=3, count=4)  # runs into epoch 2
        got = [digest(x, y) for x, y in L]
        assert got == [seq[nb + 5 + 3 * i] for i in range(4)]
        # A side trip: the plain iteration still starts at epoch 0.
        assert L.position == (0, 0)
        assert [digest(x, y) for x, y in L] == seq[:nb]
        assert L.position == (1, 0)


def test_plan_while_batches_held(ds, seq):
    """Held batches of a plain iteration stay intact across a plan."""
    with sluice.Loader(ds, B, S, seed=5, threads=1) as L:
        it = iter(L)
        held = [next(it) for _ in range(3)]
        L.start_plan([(2, 1)])
        (x, y), = list(L)
        assert digest(x, y) == seq[2 * 8 + 1]
        assert [digest(*h) for h in held] == seq[:3]
        assert L.position == (0, 3)
        assert [digest(x, y) for x, y in L] == seq[3:8]


@pytest.mark.parametrize("bad, exc, msg", [
    ([], ValueError, "at least one batch"),
    ([(0, 1), (0, 8)], ValueError, "entry 1"),
    ([(-1, 0)], ValueError, "outside"),
    ([(0,)], TypeError, "pair"),
    ("ab", TypeError, "pair"),
])
def test_bad_plans(ds, bad, exc, msg):
    with sluice.Loader(ds, B, S, seed=5, threads=1) as L:
        with pytest.raises(exc, match=msg):
            L.start_plan(bad)
        with pytest.raises(ValueError, match="step"):
            L.start_plan(first=(0, 0), step=0, count=2)
        with pytest.raises(TypeError, match="either"):
            L.start_plan()
        L.start_plan(first=(0, 2), count=1)  # still usable
        assert len(list(L)) == 1
