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

SLUICE = os.environ.get("SLUICE")
PYDIR = os.path.join(os.path.dirname(SLUICE), "python") if SLUICE else None
if PYDIR and os.path.isdir(os.path.join(PYDIR, "sluice")):
    sys.path.insert(0, PYDIR)
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


def test_ctrl_c_interrupts_a_waiting_next(ds):
    env = dict(os.environ)  # the child imports the same package
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(sluice.__file__))] +
        [p for p in [env.get("PYTHONPATH")] if p])
    p = subprocess.Popen([sys.executable, "-c", CHILD, ds], text=True,
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
    assert "after 600" in out, (out, err)
