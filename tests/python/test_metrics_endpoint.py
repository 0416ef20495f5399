"""The Prometheus endpoint (metrics_port, src/telemetry/prom.c) under a
hostile local client, and across a restart (issue 14 item 12).

* 1,100 idle connections held by another process: the loader holds at most
  a few of them (a connection limit), drops idle ones after seconds (a
  timeout), so it keeps opening image files (no EMFILE under a 512-file
  limit) and a scrape succeeds within seconds.
* Loader.start() elsewhere while a batch is held makes a fresh engine while
  the old one lives on with the batch: the new engine takes the port over
  instead of failing to bind it."""
import gc
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from conftest import synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")

IDLE = 1100
FD_LIMIT = 512  # this process's soft RLIMIT_NOFILE during the attack


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ds", 64, 2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_loader(ds, port, **kw):
    try:
        return sluice.Loader(ds, 8, 32, metrics_port=port, telemetry_ms=50,
                             threads=1, epochs=1000, **kw)
    except sluice.Error as e:
        if "built without the Prometheus endpoint" in str(e):
            pytest.skip(str(e))
        raise


def scrape(port, timeout=2.0):
    """The /metrics text, or None when the server refused or timed out."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=timeout) as r:
            return r.read().decode()
    except (urllib.error.URLError, OSError):
        return None


def scrape_within(port, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        text = scrape(port)
        if text is not None:
            return text
        time.sleep(0.2)
    return None


HOG = r"""
import resource, select, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
port, n = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(n):  # all at once, non-blocking
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    held.append(s)
end = time.monotonic() + 3
pending = {s.fileno(): s for s in held}
poll = select.poll()
for fd in pending:
    poll.register(fd, select.POLLOUT)
while pending and time.monotonic() < end:
    for fd, _ in poll.poll(200):
        poll.unregister(fd)
        del pending[fd]
print(len(held) - len(pending), flush=True)
time.sleep(60)  # idle: never sends a byte
"""


def test_idle_connections_neither_block_scrapes_nor_take_the_fds(ds):
    port = free_port()
    ld = open_loader(ds, port)
    it = iter(ld)
    next(it)
    assert scrape_within(port, 5) is not None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(port), str(IDLE)],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert int(hog.stdout.readline()) > IDLE - 50  # connected
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(FD_LIMIT, hard), hard))
        # The loader keeps opening files: a batch of 8 is 8 opens.
        t0, n = time.monotonic(), 0
        while time.monotonic() - t0 < 1.0:
            next(it)
            n += 1
        assert n > 0
        text = scrape_within(port, 15)
        assert text is not None, "no scrape within 15 s of 1,100 idle connections"
        assert "sluice_samples_total" in text
        for _ in range(20):  # still reading, no EMFILE
            next(it)
        open_fds = len(os.listdir("/proc/self/fd"))
        assert open_fds < 200, f"{open_fds} descriptors open"
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        hog.kill()
        hog.wait()
        ld.close()


def test_restart_with_a_batch_held_keeps_the_port(ds):
    port = free_port()
    ld = open_loader(ds, port)
    held = next(iter(ld))
    ld.start(0, 3)  # elsewhere, a batch held: the same engine and port
    for _ in range(3):
        next(ld)
    time.sleep(0.2)
    text = scrape_within(port, 5)
    assert text is not None and "sluice_samples_total" in text
    del held  # the loader is open: the port stays
    gc.collect()
    assert scrape_within(port, 5) is not None
    ld.close()
    gc.collect()
    time.sleep(0.1)
    assert scrape(port, 0.5) is None  # the last engine gone: port closed
