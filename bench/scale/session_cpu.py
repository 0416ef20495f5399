"""CPU seconds of a Ray session's processes on this machine, for the
benchmarks that count CPU per delivered batch (coordinated.py,
ray_actors.py)."""
import os
import resource
import sys
import time

# The process tree walk of bench/peers (its workers' CPU and memory).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers",
                                "loaders"))
from _common import _TICK, tree_pids  # noqa: E402


def cpu_self():
    """This process's CPU seconds so far (all its threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def session_cpu(exclude=()):
    """{pid: (CPU seconds so far, name)} of this process's descendants
    (the Ray session it started: raylet, GCS, workers), those in exclude
    left out; from /proc/PID/stat (utime, stime)."""
    out = {}
    for p in tree_pids(os.getpid())[1:]:
        if p in exclude:
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                name, rest = f.read().split("(", 1)[1].rsplit(")", 1)
            f_ = rest.split()
        except (OSError, ValueError):
            continue  # gone meanwhile
        out[p] = ((int(f_[11]) + int(f_[12])) / _TICK, name)
    return out


def by_name(c0, c1):
    """CPU seconds between two session_cpu() calls, summed by process
    name (a process started in between counts from 0)."""
    out = {}
    for pid, (v, name) in c1.items():
        out[name] = out.get(name, 0.0) + v - c0.get(pid, (0.0,))[0]
    return out


def settle(period=0.3, idle=0.03, limit=10.0):
    """Waits until this process and its Ray session use under `idle` CPU
    seconds in `period` (at most `limit` seconds): loaders prepare ahead
    (the next epoch's first batches), and that work, done for one
    configuration, must not land in another's measurement."""
    t_end = time.monotonic() + limit
    last = cpu_self() + sum(v for v, _ in session_cpu().values())
    while time.monotonic() < t_end:
        time.sleep(period)
        now = cpu_self() + sum(v for v, _ in session_cpu().values())
        if now - last < idle:
            return
        last = now
