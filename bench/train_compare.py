#!/usr/bin/env python3
"""End-to-end training comparison: torch DataLoader vs sluice.

Runs examples/train.py as subprocesses (PYTHONPATH=build/python, the
project venv's python) for the same number of steps with these loaders:

    torch  w=1    DataLoader(num_workers=1, persistent_workers=True)
    torch  w=2    DataLoader(num_workers=2, persistent_workers=True)
    sluice        sluice.torch.DataLoader, default decode threads (one per core)
    sluice t=1    sluice.torch.DataLoader(num_workers=1)
    sluice-gen w=2  sluice.torch.DataLoader(dataset=<torch's ImageFolder and
                  transforms>, num_workers=2): the one-line swap (generic mode)

Each repeat runs all five, in alternating order (reversed on odd repeats)
so drift in machine load hits every configuration alike.  The model side
is identical (ResNet-18, SGD, torch.set_num_threads = cores, see
examples/train.py).  A run's rate is train.py's end-to-end samples/s over
the steps after its --warmup steps (default 5).  Per configuration the
median over repeats is reported; torch's figure is the better of w=1 and
w=2 (its best num_workers), sluice's is the default-threads run.
ratio = sluice_samples_per_s / torch_samples_per_s.

    PYTHONPATH=build/python .venv/bin/python bench/train_compare.py --steps 60 --repeats 3 --json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "examples", "train.py")

CONFIGS = [
    ("torch w=1", "torch", ["--workers", "1"]),
    ("torch w=2", "torch", ["--workers", "2"]),
    ("sluice", "sluice", []),
    ("sluice t=1", "sluice", ["--workers", "1"]),
    ("sluice-gen w=2", "sluice-generic", ["--workers", "2"]),
]


def python_exe():
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def run_one(args, loader, extra):
    cmd = [python_exe(), TRAIN, "--loader", loader, "--steps", str(args.steps),
           "--batch", str(args.batch), "--size", str(args.size),
           "--warmup", str(args.warmup), "--data", args.data, "--json"] + extra
    env = dict(os.environ)
    pp = os.path.join(ROOT, "build", "python")
    env["PYTHONPATH"] = pp + (os.pathsep + env["PYTHONPATH"]
                              if env.get("PYTHONPATH") else "")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"train_compare: {' '.join(cmd)} failed "
                         f"(rc {p.returncode})")
    lines = [l for l in p.stdout.strip().splitlines() if l.startswith("{")]
    if not lines:
        sys.stderr.write(p.stderr)
        raise SystemExit("train_compare: no JSON from train.py "
                         "(dataset missing?)")
    r = json.loads(lines[-1])
    r["wall_s"] = wall
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--data", default="/work/shared/data/imagenet-sample")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not os.path.isdir(args.data):
        print(f"train_compare: dataset {args.data!r} not found; skipping. "
              "Make one with: build/sluice make-dataset --synthetic DIR",
              file=sys.stderr)
        return 0
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print

    # Warm the page cache so the first run does not pay for cold reads.
    for dp, _, fs in os.walk(args.data):
        for f in fs:
            with open(os.path.join(dp, f), "rb") as fh:
                while fh.read(1 << 20):
                    pass

    try:
        load = os.getloadavg()
    except OSError:
        load = None
    log(f"train_compare: steps={args.steps} (warm-up {args.warmup} excluded) "
        f"repeats={args.repeats} batch={args.batch} size={args.size} "
        f"cores={os.cpu_count()} loadavg={load}")
    results = {name: [] for name, _, _ in CONFIGS}
    for rep in range(args.repeats):
        order = CONFIGS if rep % 2 == 0 else CONFIGS[::-1]
        for name, loader, extra in order:
            r = run_one(args, loader, extra)
            results[name].append(r)
            log(f"  repeat {rep + 1} {name:14s} {r['samples_per_s']:7.1f} "
                f"samples/s  step {r['step_ms']:6.1f} ms  wait "
                f"{r['mean_wait_ms']:6.1f} ms ({100 * r['wait_share']:.1f}%)"
                f"  [{r['wall_s']:.0f}s]")

    def med(name, key):
        return statistics.median(r[key] for r in results[name])

    log("")
    log(f"{'loader':14s} {'samples/s':>10s} {'min':>7s} {'max':>7s} "
        f"{'step ms':>8s} {'wait ms':>8s} {'wait %':>7s}")
    for name, _, _ in CONFIGS:
        rates = [r["samples_per_s"] for r in results[name]]
        log(f"{name:14s} {med(name, 'samples_per_s'):10.1f} {min(rates):7.1f} "
            f"{max(rates):7.1f} {med(name, 'step_ms'):8.1f} "
            f"{med(name, 'mean_wait_ms'):8.2f} "
            f"{100 * med(name, 'wait_share'):6.1f}%")
    t1, t2 = med("torch w=1", "samples_per_s"), med("torch w=2", "samples_per_s")
    best_w = 1 if t1 > t2 else 2
    torch_rate = max(t1, t2)
    sl = med("sluice", "samples_per_s")
    sl1 = med("sluice t=1", "samples_per_s")
    ratio = sl / torch_rate if torch_rate else float("nan")
    log(f"\nsluice {sl:.1f} vs torch (best, num_workers={best_w}) "
        f"{torch_rate:.1f} samples/s: ratio {ratio:.3f}x "
        f"(sluice t=1: {sl1 / torch_rate:.3f}x)")
    gen = med("sluice-gen w=2", "samples_per_s")
    log(f"generic mode (torch's dataset, one-line swap) {gen:.1f} samples/s: "
        f"ratio {gen / torch_rate:.3f}x")
    if args.json:
        print(json.dumps({
            "steps": args.steps, "warmup": args.warmup,
            "repeats": args.repeats, "batch": args.batch, "size": args.size,
            "cores": os.cpu_count(), "loadavg_start": load,
            "torch_samples_per_s": round(torch_rate, 2),
            "torch_num_workers": best_w,
            "torch_w1_samples_per_s": round(t1, 2),
            "torch_w2_samples_per_s": round(t2, 2),
            "sluice_samples_per_s": round(sl, 2),
            "sluice_t1_samples_per_s": round(sl1, 2),
            "ratio": round(ratio, 4),
            "ratio_sluice_t1": round(sl1 / torch_rate, 4),
            "generic_samples_per_s": round(gen, 2),
            "ratio_generic": round(gen / torch_rate, 4),
            "torch_wait_share": med(f"torch w={best_w}", "wait_share"),
            "sluice_wait_share": med("sluice", "wait_share"),
            "torch_step_ms": med(f"torch w={best_w}", "step_ms"),
            "sluice_step_ms": med("sluice", "step_ms"),
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
