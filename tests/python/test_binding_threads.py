"""sluice.Loader / sluice.TextLoader called from several threads at once
(issue 14 item 1): close() from another thread while set() or start() runs
with the GIL released must not free the engine under the call, and two
threads starting at once must not both restart the engine.

Each call that releases the GIL holds a reference to the engine's Core (or
the loader's one-thread-at-a-time flag), so a close() meanwhile only drops
the loader's own reference: the engine dies after the call, on its thread.
Before the fix these crashed or hung (use after free); the ASan ctest entry
(python.asan_threads, an address-sanitizer build) reports the use at once.
Iterations: SL_THREAD_TRIALS (default 60)."""
import os
import random
import threading

import pytest
from conftest import synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")

TRIALS = int(os.environ.get("SL_THREAD_TRIALS", "60"))
JOIN_S = 30  # a thread still running then is a hang


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ds", 24, 2)


@pytest.fixture(scope="module")
def wide(ds, tmp_path_factory):
    """4,000 hard links to one JPEG in 2 classes: a folder whose scan (in
    sl_loader_create, GIL released) takes some milliseconds."""
    src = next(os.path.join(r, f) for r, _, fs in os.walk(ds) for f in fs
               if f.endswith(".jpg"))
    d = tmp_path_factory.mktemp("wide")
    for c in ("a", "b"):
        os.makedirs(d / c)
        for i in range(2000):
            os.link(src, d / c / f"{i:05d}.jpg")
    return str(d)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("text")
    letters = [chr(ord("a") + i) for i in range(26)]
    vocab = d / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + letters + ["##" + c for c in letters]) + "\n")
    rng = random.Random(3)
    lines = [" ".join("".join(rng.choice(letters) for _ in range(rng.randint(1, 6)))
                      for _ in range(rng.randint(1, 20))) for _ in range(400)]
    (d / "corpus.txt").write_text("\n".join(lines) + "\n")
    return dict(vocab=str(vocab), corpus=str(d / "corpus.txt"))


def hammer(calls, close, seed):
    """Runs calls() in a loop on a thread until the loader is closed (its
    calls then raise ValueError), closing it from another thread after a
    random short delay. Returns the unexpected exceptions."""
    errors = []
    started = threading.Event()

    def loop():
        k = 0
        try:
            while True:
                calls(k)
                k += 1
                started.set()
        except ValueError as e:  # closed: the expected end
            if "closed" not in str(e):
                errors.append(e)
        except BaseException as e:  # noqa: B036 - reported below
            errors.append(e)
        finally:
            started.set()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    started.wait(JOIN_S)
    # Somewhere inside the next call or two (each takes ~0.1-3 ms).
    threading.Event().wait(random.Random(seed).uniform(0, 0.003))
    close_joined(close)
    t.join(JOIN_S)
    assert not t.is_alive(), "a set()/start() thread hung after close()"
    return errors


def close_joined(close):
    """close() on a thread of its own, so that a hang fails the test."""
    c = threading.Thread(target=close, daemon=True)
    c.start()
    c.join(JOIN_S)
    assert not c.is_alive(), "close() hung (the engine freed under a call?)"


def test_loader_close_during_set_and_start(ds):
    for trial in range(TRIALS):
        ld = sluice.Loader(ds, 4, 16, threads=1, read_threads=1)

        def calls(k):
            ld.set("threads", 1 + k % 2)
            ld.start(0, k % 2)  # a new position: a real restart

        assert hammer(calls, ld.close, trial) == []
        assert ld.closed


def test_loader_close_during_restart_with_a_batch_held(wide):
    # start() elsewhere with a batch held restarts the engine (GIL
    # released); a close() 30 ms into it must leave the loader closed
    # (when a restart made a fresh engine, the new Core replaced the NULL
    # one close() left: a crash).
    for trial in range(3):
        ld = sluice.Loader(wide, 4, 16, threads=1, read_threads=1)
        held = next(iter(ld))
        go = threading.Event()
        out = []

        def restart():
            go.set()
            try:
                ld.start(0, 2)  # elsewhere, a batch held
                out.append("started")
            except ValueError as e:
                out.append(str(e))
            except BaseException as e:  # noqa: B036 - reported below
                out.append(e)

        t = threading.Thread(target=restart, daemon=True)
        t.start()
        go.wait(JOIN_S)
        threading.Event().wait(0.03)
        close_joined(ld.close)
        t.join(JOIN_S)
        assert not t.is_alive(), "start() hung after close()"
        assert out and (out[0] == "started" or "closed" in out[0]), out
        assert ld.closed
        assert held[1].shape == (4,)  # the engine lives on with its batch
        del held


def test_two_threads_start_one_at_a_time(ds):
    """Two threads calling start(): one may be refused ("used by two
    threads at once"); the loader then streams the right batches."""
    want = [lab.copy() for _, lab in sluice.Loader(ds, 4, 16, seed=5)]
    ld = sluice.Loader(ds, 4, 16, seed=5, threads=1)
    errors = []

    def starter():
        for k in range(100):
            try:
                ld.start(0, k % 4)
            except RuntimeError as e:
                if "two threads" not in str(e):
                    errors.append(e)

    ts = [threading.Thread(target=starter) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in ts), "start() hung"
    assert errors == []
    ld.start(0, 0)
    got = [lab.copy() for _, lab in ld]
    assert len(got) == len(want)
    assert all((a == b).all() for a, b in zip(got, want))
    ld.close()


def text_loader(c):
    return sluice.TextLoader(c["corpus"], tokenizer="wordpiece", vocab=c["vocab"],
                             seq_len=16, batch_size=4, chunk_bytes=1500,
                             group_chunks=2, threads=2)


def test_text_loader_close_during_start(corpus):
    for trial in range(TRIALS):
        tl = text_loader(corpus)

        def calls(k):
            tl.start(0, k % 3)
            if k % 2:
                next(iter(tl))

        assert hammer(calls, tl.close, trial) == []
        assert tl.closed


def test_text_loader_start_refused_during_next(corpus):
    """start() from a second thread while next() waits is refused (or waits
    its turn), never run beside it."""
    tl = text_loader(corpus)
    errors = []
    stop = threading.Event()

    def starter():
        while not stop.is_set():
            try:
                tl.start(0, 0)
            except RuntimeError as e:
                if "two threads" not in str(e):
                    errors.append(e)

    t = threading.Thread(target=starter)
    t.start()
    try:
        for _ in range(200):
            try:
                next(iter(tl), None)
            except RuntimeError as e:
                if "two threads" not in str(e):
                    errors.append(e)
    finally:
        stop.set()
        t.join(JOIN_S)
    assert not t.is_alive()
    assert errors == []
    tl.close()
