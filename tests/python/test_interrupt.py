"""Ctrl-C while next() waits for a batch raises KeyboardInterrupt at once,
not after the batch (next() waits in the engine in slices of 100 ms,
checking for a signal between them), and the loader goes on afterwards
from where it was."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "interrupt", 600, 2)


# One batch of every image, whole-size decodes on one thread: more than a
# second (1.35 s on a quiet 2-core VM), so a signal 0.3 s in lands in it.
CHILD = textwrap.dedent("""
    import sys, time
    import sluice
    L = sluice.Loader(sys.argv[1], 600, 224, threads=1, policy="static",
                      shuffle=False, dct_scale=False, dtype="float32")
    it = iter(L)
    print("ready", flush=True)
    try:
        next(it)
        print("batch", time.monotonic(), flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
        x, y = next(iter(L))  # usable after it: the batch comes whole
        print("after", len(y), flush=True)
""")


def interrupt_child(script, *args):
    """Runs script (which prints "ready" before its waiting next(), then
    "interrupted T ..." or "batch T" and the rest), sends SIGINT 0.3 s
    after "ready", checks the exception came within 0.6 s. @return the
    child's stdout."""
    env = dict(os.environ)  # the child imports the same package
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(sluice.__file__))] +
        [p for p in [env.get("PYTHONPATH")] if p])
    p = subprocess.Popen([sys.executable, "-c", script, *args], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env)
    line = p.stdout.readline().strip()
    if line != "ready":
        p.kill()
        pytest.fail(f"child: {line!r} {p.communicate()[1][-2000:]}")
    time.sleep(0.3)
    sent = time.monotonic()  # CLOCK_MONOTONIC: the same clock in both
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    first = out.split("\n")[0].split()
    assert first and first[0] == "interrupted", (out, err)
    late = float(first[1]) - sent
    assert late < 0.6, f"KeyboardInterrupt {late:.2f} s after the signal"
    return out


def test_ctrl_c_interrupts_a_waiting_next(ds):
    out = interrupt_child(CHILD, ds)
    assert "after 600" in out, out


# The same for sluice.TextLoader: one batch of 8M WordPiece tokens from
# accented words (each letter stripped of its accent: a slow
# normalisation) on one thread takes over a second (1.6 s on a quiet
# 2-core VM; without the slices Ctrl-C came 1.3 s after the signal).
TEXT_CHILD = textwrap.dedent("""
    import sys, time
    import sluice
    L = sluice.TextLoader(sys.argv[1], tokenizer="wordpiece",
                          vocab=sys.argv[2], seq_len=8192, batch_size=1024,
                          threads=1, shuffle=False)
    it = iter(L)
    print("ready", flush=True)
    try:
        next(it)
        print("batch", time.monotonic(), flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), L.position, flush=True)
        d = next(it)  # usable after it: the first batch comes whole
        print("after", d["input_ids"].shape[0], L.position, flush=True)
""")


@pytest.fixture(scope="module")
def accented(tmp_path_factory):
    np = pytest.importorskip("numpy")
    d = tmp_path_factory.mktemp("interrupt_text")
    letters = [chr(ord("a") + i) for i in range(26)]
    (d / "vocab.txt").write_text("\n".join(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + letters +
        ["##" + c for c in letters]) + "\n")
    alpha = np.array([c.encode() for c in "àéîõüçñ "] + [b"\n"], dtype=object)
    p = np.full(len(alpha), 0.98 / 8)
    p[-1] = 0.02  # a line (a document) about every 50 characters
    rng = np.random.default_rng(1)
    (d / "corpus.txt").write_bytes(
        b"".join(alpha[rng.choice(len(alpha), 12_000_000, p=p)]))
    return str(d / "corpus.txt"), str(d / "vocab.txt")


def test_ctrl_c_interrupts_a_waiting_text_next(accented):
    out = interrupt_child(TEXT_CHILD, *accented)
    assert "(0, 0)" in out.split("\n")[0], out  # nothing handed out
    assert "after 1024 (0, 1)" in out, out
