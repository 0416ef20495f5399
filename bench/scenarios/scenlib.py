"""What the scenario harnesses share (bench/scenarios/run, the five
scenarios of issue 4, and bench/scenarios/regimes, the randomized regimes
of issue 20): one `sluice run` with a consumer step, emulated storage and
mid-run changes; a CPU hog on a schedule; the loader's capacity; the
ImageFolder's mean file size; per-second timelines from the telemetry; the
JSON cache of grid searches.

A plan (one run's world) may hold:
  duration        seconds
  step_ms         the consumer's hold per batch (`--step-ms`)
  change_at, change_step_ms   after change_at batches the step becomes
                  change_step_ms
  throttle        {latency_ms, bytes_per_s}: slow storage from 1/3 to 2/3
                  of the run (the io-slowdown scenario)
  storage         {latency_ms, bytes_per_s}: emulated storage from the start
                  (0: that part off)
  sets            more `--set K:KNOB=V` strings, as given
  hog             true: one busy core from 1/3 to 2/3 of the run
  hogs            [[t_s, cores], ...]: from t_s on, that many busy cores
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def in_venv(*modules):
    """Run this harness under the project venv's Python (.venv) when the
    current one lacks one of modules and the venv is there."""
    try:
        for m in modules:
            __import__(m)
        return
    except ImportError:
        venv = os.path.join(ROOT, ".venv")
        py = os.path.join(venv, "bin", "python3")
        if os.path.exists(py) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
            os.execv(py, [py] + sys.argv)


def prog():
    """The running harness as the error lines name it (bench/scenarios/X)."""
    return os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)


def log(msg, what="scenario"):
    print(f"[{what} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def fail(msg):
    print(f"{prog()}: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def seeds_of(s):
    """"5": seeds 1..5; "4,5" or "4,": exactly those."""
    return list(range(1, int(s) + 1)) if "," not in s and s.isdigit() else [
        int(x) for x in s.split(",") if x.strip()]


def check_run(cmd, env=None):
    """Run cmd; its last stdout line parsed as JSON (fails clearly)."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        fail(f"command failed (exit {p.returncode}): {' '.join(cmd)}\n"
             f"{p.stderr.strip()[-2000:]}")
    lines = p.stdout.strip().splitlines()
    if not lines:
        fail(f"no output from: {' '.join(cmd)}\n{p.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])


def timelines(path, duration):
    """Per-second mean stall fraction and the knobs at each second's end,
    from a sluice telemetry file."""
    stall, knobs = {}, {}
    try:
        with open(path) as f:
            for line in f:
                o = json.loads(line)
                k = int(o["t"])
                stall.setdefault(k, []).append(o["stall_fraction"])
                kn = o.get("knobs") or {}
                knobs[k] = [kn.get("read_threads"), kn.get("decode_threads"),
                            kn.get("prefetch")]
    except (OSError, ValueError, KeyError):
        return None, None
    n = int(duration) + 1
    st = [round(sum(stall[k]) / len(stall[k]), 4) if k in stall else None for k in range(n)]
    kb = [knobs.get(k) for k in range(n)]
    return st, kb


def storage_sets(plan):
    """The plan's emulated storage as CLI options."""
    out = []
    st = plan.get("storage")
    if st:
        if st.get("latency_ms"):
            out += ["--read-latency-ms", f"{st['latency_ms']:g}"]
        if st.get("bytes_per_s"):
            out += ["--read-bw", str(int(st["bytes_per_s"]))]
    th = plan.get("throttle")
    if th:
        a, b = plan["duration"] / 3, 2 * plan["duration"] / 3
        out += ["--set", f"{a:.2f}s:read-latency-ms={th['latency_ms']:.3f}",
                "--set", f"{a:.2f}s:read-bw={th['bytes_per_s']}",
                "--set", f"{b:.2f}s:read-latency-ms=0", "--set", f"{b:.2f}s:read-bw=0"]
    for s in plan.get("sets") or ():
        out += ["--set", s]
    return out


def sluice_cli(args, plan, cfg, keep_telemetry=None):
    """`sluice run` with the consumer's --step-ms and the plan's storage and
    --set changes. args: sluice, data, batch, seed, policy_file,
    telemetry (where to keep the telemetry; keep_telemetry overrides)."""
    cmd = [args.sluice, "run", args.data, "--batch", str(args.batch), "--size", "224",
           "--seed", str(args.seed), "--json", "--quiet",
           "--duration", str(plan["duration"]), "--step-ms", f"{plan['step_ms']:.2f}"]
    if plan.get("change_at"):
        cmd += ["--set", f"{plan['change_at']}:step-ms={int(plan['change_step_ms'])}"]
    cmd += storage_sets(plan)
    cmd += ["--policy", cfg["policy"]]
    if cfg["policy"] == "rl" and getattr(args, "policy_file", None):
        cmd += ["--policy-file", args.policy_file]
    for k in ("threads", "read_threads", "prefetch", "io_depth"):
        if cfg.get(k):
            cmd += ["--" + k.replace("_", "-"), str(cfg[k])]
    keep = keep_telemetry or getattr(args, "telemetry", None)
    with tempfile.TemporaryDirectory(prefix="scen-") as tmp:
        tel = os.path.join(tmp, "tel.jsonl")
        r = check_run(cmd + ["--telemetry", tel])
        st, kb = timelines(tel, plan["duration"])
        if keep:
            os.replace(tel, keep)
    return {"mean_wait_ms": r["wait_ms_mean"], "p99_wait_ms": r["wait_ms_p99"],
            "stall_fraction": r["stall_fraction"], "samples_per_s": r["samples_per_s"],
            "cpu_seconds": r["cpu_seconds"], "stall_timeline": st, "knob_timeline": kb}


class Hogs:
    """Busy processes, one core's worth each, that others run beside the
    loader (CPU taken by other work)."""

    def __init__(self):
        self.procs = []
        self.mu = threading.Lock()

    def set(self, n):
        with self.mu:
            while len(self.procs) < n:
                self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
            while len(self.procs) > n:
                p = self.procs.pop()
                p.kill()
                p.wait()


def hog_schedule(plan):
    """[(t_s, cores)]: the plan's hog as a schedule."""
    if plan.get("hog"):
        return [(plan["duration"] / 3, 1), (2 * plan["duration"] / 3, 0)]
    return [(float(t), int(n)) for t, n in plan.get("hogs") or ()]


def with_hogs(plan, fn):
    """fn() while the plan's hog schedule runs beside it."""
    hogs, timers = Hogs(), []
    for t, n in hog_schedule(plan):
        if t <= 0:
            hogs.set(n)
        else:
            timers.append(threading.Timer(t, hogs.set, (n,)))
    for t in timers:
        t.start()
    try:
        return fn()
    finally:
        for t in timers:
            t.cancel()
        hogs.set(0)


def capacity(args, threads=None, read_threads=1, prefetch=2):
    """Loader capacity of a static config (default: the static default,
    threads = cores) with no consumer delay and no emulated storage:
    (samples/s, bytes read per sample)."""
    r = check_run([args.sluice, "run", args.data, "--batch", str(args.batch), "--size", "224",
                   "--seed", str(args.seed), "--json", "--quiet", "--policy", "static",
                   "--threads", str(threads or os.cpu_count()), "--read-threads",
                   str(read_threads), "--prefetch", str(prefetch), "--epochs", "3"])
    return r["samples_per_s"], r["bytes_read"] / max(1, r["samples"])


def mean_file_bytes(data):
    n = tot = 0
    for d, _, files in os.walk(data):
        for f in files:
            n += 1
            tot += os.path.getsize(os.path.join(d, f))
    return tot / max(1, n)


def load_cache(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_cache(path, key, entry):
    """Add one entry to the JSON cache at path (read again first, so
    entries others wrote meanwhile stay)."""
    c = load_cache(path)
    c[key] = entry
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(c, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
