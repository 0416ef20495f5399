"""CPU seconds of a Ray session's processes on this machine, for the
benchmarks that count CPU per delivered batch (coordinated.py,
ray_actors.py)."""
import os
import resource
import time


def cpu_self():
    """This process's CPU seconds so far (all its threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def session_cpu(exclude=()):
    """{pid: (CPU seconds so far, name)} of this process's descendants
    (the Ray session it started: raylet, GCS, workers), those in exclude
    left out; from /proc/PID/stat (utime, stime)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                name, f_ = f.read().split("(", 1)[1].rsplit(")", 1)
                f_ = f_.split()
        except OSError:
            continue
        procs[int(d)] = (int(f_[1]), (int(f_[11]) + int(f_[12])) / tick, name)
    mine, todo = set(), [os.getpid()]
    while todo:
        p = todo.pop()
        kids = [c for c, (pp, _, _) in procs.items() if pp == p]
        mine.update(kids)
        todo.extend(kids)
    return {p: procs[p][1:] for p in mine if p not in exclude}


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
