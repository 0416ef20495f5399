#!/usr/bin/env python3
"""Benchmark: sluice against torchvision ImageFolder + torch DataLoader.

What
    For each variant, the same images go through the same ops on both sides:

      uint8   torch: RandomResizedCrop(224) + RandomHorizontalFlip()
                     + PILToTensor(); the default collate stacks the batch
                     into a uint8 N x 3 x 224 x 224 tensor.
              sluice: sluice bench DATA --out uint8
      float   torch: RandomResizedCrop(224) + RandomHorizontalFlip()
                     + ToTensor() + Normalize(ImageNet mean/std), float32.
              sluice: sluice bench DATA --out float

    Both sides use --batch images per batch, shuffle, and --workers workers
    (DataLoader num_workers / sluice --threads) for --epochs epochs.  The
    script prints the median rate (images/s) of each side, the ratio
    sluice/torch (median of the per-round ratios, and the ratio of the
    medians), min/max, and the machine.  Optionally it also runs
    build/bench/decode_ceiling (if it is built and speaks --json) and reports
    sluice's rate as a multiple of the 2-core decode ceiling, and with
    --scaling it runs sluice with --threads 1 and --threads 2 and reports the
    speed-up (target >= 1.8x).

How
    * A warm page cache is assumed: every file under DATA is read once,
      untimed, before anything is measured.
    * Runs alternate within one invocation: for each variant and each round
      r, torch then sluice (even r) or sluice then torch (odd r), so that
      drift in machine load hits both sides alike.  Medians are reported.
    * Torch side (in this process): ImageFolder is built once per run (its
      directory scan is timed separately), then for each epoch a fresh
      DataLoader iterator is created (persistent_workers=False,
      pin_memory=False), so worker start-up is part of the cost, as it is in
      a real training loop.  Every batch is touched (labels summed, one pixel
      read) so nothing is lazily skipped.  The timed interval runs from the
      first iterator's creation to the last batch of the last epoch
      ("iter" rate); the "steady" rate excludes, in each epoch, the first
      batch and the time until it arrived.  torch.set_num_threads(1) is set
      in the main process: with num_workers > 0 the main process only
      receives ready batches, and on a 2-core machine an intra-op thread pool
      in the main process would only compete with the workers (the workers
      themselves already run with one thread each, DataLoader's default).
    * Sluice side: `sluice bench DATA --json --quiet ...` runs as a
      subprocess; its last stdout line is JSON (samples_per_s, seconds,
      stall_fraction, cpu_util, peak_rss_mb, ...).  Sluice's own figure times
      from its start (scan included) to the end of streaming, process start
      excluded; the subprocess wall time (process start and exit included)
      gives a second, more conservative "wall" rate.  Both are reported.
      The comparable torch figure for "wall" is scan + iter.  The sluice
      processes are started (and wall-timed) by a small helper process that
      is spawned before torch is imported: sluice's peak_rss_mb comes from
      getrusage's ru_maxrss, which Linux carries over from the parent across
      fork + exec, so started from this (torch-sized) process it would
      report this process's peak rather than its own.
    * CPU utilisation for torch is (CPU seconds of this process and its
      reaped DataLoader workers) / (seconds x nproc), the same definition as
      sluice's cpu_util (fraction of all cores).

Usage
    .venv/bin/python bench/compare_torch.py                  # 5 rounds, 2 epochs
    .venv/bin/python bench/compare_torch.py --repeats 1 --epochs 1
    .venv/bin/python bench/compare_torch.py --scaling --json-out /tmp/cmp.json

Progress goes to stderr, the result table to stdout.  If DATA is missing the
script says so, suggests `build/sluice make-dataset --synthetic DIR`, and
exits 0.  This is a benchmark, not a test: it asserts nothing about speed.
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = (REPO_ROOT / ".." / "shared" / "data" / "imagenet-sample").resolve()
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SCALING_TARGET = 1.8


def log(msg):
    """A progress line on stderr."""
    print(f"[compare_torch {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def loadavg():
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


# --------------------------------------------------------------------------
# machine, data, cache
# --------------------------------------------------------------------------

def machine_info():
    """nproc, CPU model, kernel, Python/torch/torchvision/Pillow versions."""
    info = {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "cpu_model": "unknown",
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import torch
        import torchvision
        import PIL
        info["torch"] = torch.__version__
        info["torchvision"] = torchvision.__version__
        info["pillow"] = PIL.__version__
    except ImportError as e:  # reported by main() before we get here
        info["import_error"] = str(e)
    return info


def list_files(data):
    files = []
    for root, _dirs, names in os.walk(data):
        for n in names:
            files.append(os.path.join(root, n))
    files.sort()
    return files


def warm_page_cache(data):
    """Read every file under DATA once (untimed) so both sides see a warm cache."""
    files = list_files(data)
    total = 0
    t0 = time.perf_counter()
    for path in files:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                total += len(chunk)
    return len(files), total, time.perf_counter() - t0


# --------------------------------------------------------------------------
# torch side
# --------------------------------------------------------------------------

def torch_transform(variant, size):
    from torchvision import transforms as T
    if variant == "uint8":
        return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.PILToTensor()])
    if variant == "float":
        return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    raise ValueError(f"unknown variant {variant!r}")


def _cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def run_torch(data, variant, epochs, workers, batch, size, seed, nproc):
    """One torch run: ImageFolder + DataLoader over `epochs` epochs."""
    import torch
    from torchvision.datasets import ImageFolder

    torch.manual_seed(seed)
    cpu0 = _cpu_seconds()
    t_scan0 = time.perf_counter()
    dataset = ImageFolder(str(data), transform=torch_transform(variant, size))
    scan_s = time.perf_counter() - t_scan0
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch, shuffle=True, num_workers=workers,
        persistent_workers=False, pin_memory=False)
    want_dtype = torch.uint8 if variant == "uint8" else torch.float32

    samples = batches = label_sum = 0
    pixel_sum = 0.0
    first_batch_s = []
    steady_samples = 0
    steady_s = 0.0
    t0 = time.perf_counter()
    for _ in range(epochs):
        te = time.perf_counter()
        t_first = None
        for imgs, labels in loader:  # a fresh iterator (and workers) per epoch
            if t_first is None:
                t_first = time.perf_counter()
                first_batch_s.append(t_first - te)
                if imgs.dtype != want_dtype or tuple(imgs.shape[1:]) != (3, size, size):
                    raise RuntimeError(f"torch batch is {imgs.dtype} {tuple(imgs.shape)}")
            else:
                steady_samples += labels.numel()
            n = labels.numel()
            samples += n
            batches += 1
            label_sum += int(labels.sum())
            pixel_sum += float(imgs[n - 1, 0, size // 2, size // 2])
        if t_first is not None:
            steady_s += time.perf_counter() - t_first
    seconds = time.perf_counter() - t0
    cpu_s = _cpu_seconds() - cpu0
    return {
        "side": "torch", "variant": variant, "seed": seed,
        "samples": samples, "batches": batches, "epochs": epochs,
        "seconds": seconds, "scan_s": scan_s,
        "samples_per_s": samples / seconds,
        "wall_samples_per_s": samples / (seconds + scan_s),
        "steady_samples_per_s": steady_samples / steady_s if steady_s > 0 else float("nan"),
        "first_batch_s": first_batch_s,
        "cpu_s": cpu_s, "cpu_util": cpu_s / ((seconds + scan_s) * nproc),
        "label_sum": label_sum, "pixel_probe": pixel_sum,
        "loadavg_after": loadavg(),
    }


# --------------------------------------------------------------------------
# sluice side
# --------------------------------------------------------------------------

def last_json_line(text):
    """The last line of `text` that parses as a JSON object, or None."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


# sluice reports peak_rss_mb from getrusage's ru_maxrss, which Linux carries
# over from the parent across fork/vfork + exec: started straight from this
# process (hundreds of MB once torch is imported and has run) it would report
# this process's peak, not its own.  So sluice runs are started by a small
# launcher process, spawned before torch is imported, which also times them.
_LAUNCHER_CODE = r"""
import json, subprocess, sys, time
for line in sys.stdin:
    req = json.loads(line)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(req["cmd"], capture_output=True, text=True, timeout=req["timeout"])
        res = {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    except Exception as e:
        res = {"rc": None, "stdout": "", "stderr": repr(e)}
    res["wall_s"] = time.perf_counter() - t0
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
"""


class Launcher:
    """Runs commands from a small helper process (see the note above)."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER_CODE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def run(self, cmd, timeout):
        self.proc.stdin.write(json.dumps({"cmd": cmd, "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("launcher process died")
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)


def run_sluice(launcher, sluice, data, out, epochs, threads, batch, size, seed, timeout=600):
    """One `sluice bench` run; returns its JSON figures plus wall-clock ones."""
    cmd = [str(sluice), "bench", str(data), "--batch", str(batch), "--size", str(size),
           "--threads", str(threads), "--out", out, "--epochs", str(epochs),
           "--seed", str(seed), "--json", "--quiet"]
    p = launcher.run(cmd, timeout)
    wall = p["wall_s"]
    fig = last_json_line(p["stdout"])
    if p["rc"] != 0 or fig is None:
        raise RuntimeError(f"{' '.join(cmd)} failed: rc={p['rc']}\n"
                           f"stdout: {p['stdout'][-2000:]}\nstderr: {p['stderr'][-2000:]}")
    samples = fig.get("samples", 0)
    rec = {"side": "sluice", "variant": out, "threads": threads, "seed": seed,
           "cmd": cmd, "wall_s": wall,
           "wall_samples_per_s": samples / wall if wall > 0 else float("nan"),
           "stderr_tail": p["stderr"][-500:] if p["stderr"].strip() else "",
           "loadavg_after": loadavg()}
    rec.update(fig)
    return rec


def sluice_anomalies(rec, expect_samples):
    """Odd figures worth flagging in a sluice run."""
    notes = []
    if rec.get("samples") != expect_samples:
        notes.append(f"samples={rec.get('samples')} (expected {expect_samples})")
    if rec.get("errors_skipped", 0):
        notes.append(f"errors_skipped={rec['errors_skipped']}")
    if rec.get("seconds", 0) <= 0 or rec.get("seconds", 0) > rec["wall_s"] + 0.05:
        notes.append(f"seconds={rec.get('seconds')} vs wall {rec['wall_s']:.3f}")
    sps = rec.get("samples_per_s")
    if sps and rec.get("seconds"):
        if abs(sps * rec["seconds"] - rec.get("samples", 0)) > 0.02 * max(1, rec.get("samples", 0)):
            notes.append(f"samples_per_s*seconds={sps * rec['seconds']:.0f} != samples")
    cu = rec.get("cpu_util")
    if cu is not None and not (0.0 <= cu <= 1.05):
        notes.append(f"cpu_util={cu}")
    if rec.get("stderr_tail"):
        notes.append("stderr: " + rec["stderr_tail"].strip().replace("\n", " | ")[:200])
    return notes


# --------------------------------------------------------------------------
# decode ceiling
# --------------------------------------------------------------------------

def decode_ceiling(binary, data, field, timeout=600):
    """Run `decode_ceiling DATA --json`; returns (value, field, raw) or (None, why, raw)."""
    if not binary.exists():
        return None, f"{binary} not built", None
    cmd = [str(binary), str(data), "--json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{' '.join(cmd)}: {e}", None
    fig = last_json_line(p.stdout)
    if p.returncode != 0 or fig is None:
        why = (f"{' '.join(cmd)} gave rc={p.returncode} and "
               f"{'no JSON line' if fig is None else 'JSON'}"
               f"{' (' + p.stderr.strip().splitlines()[-1][:120] + ')' if p.stderr.strip() else ''}")
        return None, why, {"rc": p.returncode, "stdout": p.stdout[-1000:], "stderr": p.stderr[-1000:]}
    numeric = {k: v for k, v in fig.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if field:
        if field in numeric:
            return float(numeric[field]), field, fig
        return None, f"field {field!r} not in {sorted(fig)}", fig
    cands = [k for k in numeric if "ceil" in k.lower()]
    two = [k for k in cands if "2" in k or "two" in k.lower()]
    if len(two) == 1:
        return float(numeric[two[0]]), two[0], fig
    if len(cands) == 1:
        return float(numeric[cands[0]]), cands[0], fig
    return None, (f"cannot tell which field is the 2-core ceiling among {sorted(fig)}; "
                  f"pass --ceiling-field"), fig


# --------------------------------------------------------------------------
# statistics and printing
# --------------------------------------------------------------------------

def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def summarise_variant(rounds):
    """Medians, min/max and ratios over the rounds of one variant."""
    t_iter = [r["torch"]["samples_per_s"] for r in rounds]
    t_steady = [r["torch"]["steady_samples_per_s"] for r in rounds]
    t_wall = [r["torch"]["wall_samples_per_s"] for r in rounds]
    s_rep = [r["sluice"]["samples_per_s"] for r in rounds]
    s_wall = [r["sluice"]["wall_samples_per_s"] for r in rounds]
    return {
        "torch_iter": t_iter, "torch_steady": t_steady, "torch_wall": t_wall,
        "sluice": s_rep, "sluice_wall": s_wall,
        "ratio_rounds": [s / t for s, t in zip(s_rep, t_iter)],
        "ratio_wall_rounds": [s / t for s, t in zip(s_wall, t_wall)],
        "torch_cpu_util": [r["torch"]["cpu_util"] for r in rounds],
        "sluice_cpu_util": [r["sluice"].get("cpu_util", float("nan")) for r in rounds],
        "sluice_stall": [r["sluice"].get("stall_fraction", float("nan")) for r in rounds],
        "sluice_rss": [r["sluice"].get("peak_rss_mb", float("nan")) for r in rounds],
        "torch_first_batch": [max(r["torch"]["first_batch_s"]) for r in rounds],
        "torch_scan": [r["torch"]["scan_s"] for r in rounds],
    }


def fmt_rate(xs):
    return f"{med(xs):8.1f}  [{min(xs):7.1f} .. {max(xs):7.1f}]"


def print_report(args, machine, ncache, cache_bytes, results, ceiling, scaling, load_start, load_end):
    print()
    print("sluice vs torchvision ImageFolder + DataLoader")
    print(f"machine : nproc={machine['nproc']}  cpu={machine['cpu_model']}  kernel={machine['kernel']}")
    print(f"software: python {machine['python']}, torch {machine.get('torch')}, "
          f"torchvision {machine.get('torchvision')}, Pillow {machine.get('pillow')}")
    print(f"data    : {args.data} ({ncache} files, {cache_bytes / 1e6:.1f} MB, page cache warmed)")
    print(f"setup   : batch {args.batch}, size {args.size}, workers/threads {args.workers}, "
          f"epochs {args.epochs}, repeats {args.repeats}, torch main-process threads 1")
    print(f"load avg: start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}; "
          f"end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    print()
    print("rates in images/s: median [min .. max] over rounds")
    for variant, s in results.items():
        print(f"-- variant {variant}")
        print(f"  torch  iter   (iterator creation -> last batch) {fmt_rate(s['torch_iter'])}")
        print(f"  torch  steady (first batch of each epoch excl.) {fmt_rate(s['torch_steady'])}")
        print(f"  torch  wall   (ImageFolder scan + iter)         {fmt_rate(s['torch_wall'])}")
        print(f"  sluice        (its own samples_per_s)           {fmt_rate(s['sluice'])}")
        print(f"  sluice wall   (subprocess wall clock)           {fmt_rate(s['sluice_wall'])}")
        rr, rw = s["ratio_rounds"], s["ratio_wall_rounds"]
        print(f"  ratio sluice/torch   median of rounds {med(rr):5.2f}x  [{min(rr):.2f} .. {max(rr):.2f}]"
              f"   ratio of medians {med(s['sluice']) / med(s['torch_iter']):5.2f}x")
        print(f"  ratio (wall/wall)    median of rounds {med(rw):5.2f}x  [{min(rw):.2f} .. {max(rw):.2f}]"
              f"   ratio of medians {med(s['sluice_wall']) / med(s['torch_wall']):5.2f}x")
        print(f"  cpu_util (of all cores): torch {med(s['torch_cpu_util']):.2f}, "
              f"sluice {med(s['sluice_cpu_util']):.2f};  sluice stall_fraction "
              f"{med(s['sluice_stall']):.3f}, peak_rss {med(s['sluice_rss']):.1f} MB;  "
              f"torch worst first batch {med(s['torch_first_batch']):.2f} s, scan {med(s['torch_scan']):.3f} s")
    print()
    if ceiling is not None:
        value, what, _raw = ceiling
        if value is None:
            print(f"decode ceiling: skipped ({what})")
        else:
            print(f"decode ceiling ({what}): {value:.1f} images/s")
            for variant, s in results.items():
                print(f"  sluice {variant:5s} {args.workers}-thread rate = {med(s['sluice']) / value:.2f}x the ceiling")
    if scaling is not None:
        r = scaling["ratio_rounds"]
        t1 = [x["samples_per_s"] for x in scaling["t1"]]
        t2 = [x["samples_per_s"] for x in scaling["t2"]]
        verdict = "meets" if med(r) >= SCALING_TARGET else "BELOW"
        print(f"scaling (sluice --out {scaling['variant']}): --threads 1 {fmt_rate(t1)};  "
              f"--threads 2 {fmt_rate(t2)}")
        print(f"  speed-up 2/1: median of rounds {med(r):.2f}x [{min(r):.2f} .. {max(r):.2f}], "
              f"ratio of medians {med(t2) / med(t1):.2f}x  ({verdict} the {SCALING_TARGET}x target)")


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA,
                    help="ImageFolder directory (default: %(default)s)")
    ap.add_argument("--sluice", type=Path, default=REPO_ROOT / "build" / "sluice",
                    help="sluice binary (default: build/sluice)")
    ap.add_argument("--ceiling-bin", type=Path, default=None,
                    help="decode_ceiling binary (default: bench/decode_ceiling next to --sluice)")
    ap.add_argument("--ceiling-field", default=None,
                    help="JSON field of decode_ceiling holding the 2-core ceiling (default: guessed)")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the decode ceiling")
    ap.add_argument("--repeats", type=int, default=5, help="rounds per variant (5)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per run (2)")
    ap.add_argument("--variants", default="uint8,float",
                    help="comma list of uint8,float; empty for none (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader num_workers = sluice --threads (2)")
    ap.add_argument("--batch", type=int, default=64, help="batch size (64)")
    ap.add_argument("--size", type=int, default=224, help="crop size (224)")
    ap.add_argument("--scaling", action="store_true",
                    help="also run sluice --threads 1 vs --threads 2, alternating, and report the speed-up")
    ap.add_argument("--scaling-variant", default="uint8", choices=["uint8", "float"])
    ap.add_argument("--json-out", type=Path, default=None, help="write every raw figure here")
    args = ap.parse_args(argv)
    args.variants = [v for v in (x.strip() for x in args.variants.split(",")) if v]
    for v in args.variants:
        if v not in ("uint8", "float"):
            ap.error(f"unknown variant {v!r} (uint8, float)")
    if args.repeats < 1 or args.epochs < 1 or args.workers < 1 or args.batch < 1:
        ap.error("--repeats, --epochs, --workers and --batch must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if not args.data.is_dir():
        print(f"compare_torch: no data at {args.data}.\n"
              f"  Point --data at any ImageFolder tree, or make one with\n"
              f"  {REPO_ROOT / 'build' / 'sluice'} make-dataset --synthetic DIR", file=sys.stderr)
        return 0
    if not os.access(args.sluice, os.X_OK):
        print(f"compare_torch: {args.sluice} is not an executable; build it with `make` in {REPO_ROOT}",
              file=sys.stderr)
        return 1
    launcher = Launcher()  # before torch is imported: see the note above Launcher
    try:
        return _main(args, launcher)
    finally:
        launcher.close()


def _main(args, launcher):
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as e:
        print(f"compare_torch: needs torch and torchvision ({e}); try {REPO_ROOT}/.venv/bin/python",
              file=sys.stderr)
        return 1
    # The main process only receives finished batches from the workers; an
    # intra-op pool here would just compete with them for the 2 cores.
    torch.set_num_threads(1)

    machine = machine_info()
    nproc = machine["nproc"]
    load_start = loadavg()
    log(f"machine: nproc={nproc}, {machine['cpu_model']}, torch {machine.get('torch')}; "
        f"load {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}")
    nfiles, nbytes, warm_s = warm_page_cache(args.data)
    log(f"warmed page cache: {nfiles} files, {nbytes / 1e6:.1f} MB in {warm_s:.2f} s")

    # ImageFolder's sample count is what both sides should stream per epoch.
    from torchvision.datasets import ImageFolder
    n_images = len(ImageFolder(str(args.data)))
    expect = n_images * args.epochs

    raw = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
           "machine": machine, "load_start": load_start, "n_images": n_images,
           "variants": {}, "scaling": None, "ceiling": None, "anomalies": []}
    results = {}
    for variant in args.variants:
        rounds = []
        for r in range(args.repeats):
            order = ("torch", "sluice") if r % 2 == 0 else ("sluice", "torch")
            rec = {}
            for side in order:
                if side == "torch":
                    rec["torch"] = run_torch(args.data, variant, args.epochs, args.workers,
                                             args.batch, args.size, seed=r, nproc=nproc)
                    log(f"{variant} round {r + 1}/{args.repeats} torch : "
                        f"{rec['torch']['samples_per_s']:7.1f} img/s iter, "
                        f"{rec['torch']['steady_samples_per_s']:7.1f} steady "
                        f"({rec['torch']['samples']} in {rec['torch']['seconds']:.2f} s)")
                else:
                    rec["sluice"] = run_sluice(launcher, args.sluice, args.data, variant, args.epochs,
                                               args.workers, args.batch, args.size, seed=r)
                    s = rec["sluice"]
                    log(f"{variant} round {r + 1}/{args.repeats} sluice: "
                        f"{s['samples_per_s']:7.1f} img/s, {s['wall_samples_per_s']:7.1f} wall "
                        f"({s.get('samples')} in {s.get('seconds')} s, wall {s['wall_s']:.2f} s)")
                    for note in sluice_anomalies(s, expect):
                        raw["anomalies"].append(f"{variant} round {r + 1}: {note}")
                        log(f"  note: {note}")
            if rec["torch"]["samples"] != expect:
                raw["anomalies"].append(f"{variant} round {r + 1}: torch samples {rec['torch']['samples']}")
            rec["order"] = order
            rounds.append(rec)
        results[variant] = summarise_variant(rounds)
        raw["variants"][variant] = {"rounds": rounds, "summary": results[variant]}

    ceiling = None
    if not args.no_ceiling:
        binary = args.ceiling_bin or (args.sluice.parent / "bench" / "decode_ceiling")
        log(f"decode ceiling: {binary} {args.data} --json")
        ceiling = decode_ceiling(binary, args.data, args.ceiling_field)
        if ceiling[0] is None:
            log(f"decode ceiling skipped: {ceiling[1]}")
        raw["ceiling"] = {"value": ceiling[0], "field_or_reason": ceiling[1], "raw": ceiling[2]}

    scaling = None
    if args.scaling:
        t1, t2, ratios = [], [], []
        for r in range(args.repeats):
            order = (1, 2) if r % 2 == 0 else (2, 1)
            got = {}
            for th in order:
                got[th] = run_sluice(launcher, args.sluice, args.data, args.scaling_variant, args.epochs,
                                     th, args.batch, args.size, seed=r)
                for note in sluice_anomalies(got[th], expect):
                    raw["anomalies"].append(f"scaling threads {th} round {r + 1}: {note}")
            t1.append(got[1])
            t2.append(got[2])
            ratios.append(got[2]["samples_per_s"] / got[1]["samples_per_s"])
            log(f"scaling round {r + 1}/{args.repeats}: threads 1 {got[1]['samples_per_s']:.1f}, "
                f"threads 2 {got[2]['samples_per_s']:.1f} img/s -> {ratios[-1]:.2f}x")
        scaling = {"variant": args.scaling_variant, "t1": t1, "t2": t2, "ratio_rounds": ratios}
        raw["scaling"] = scaling

    load_end = loadavg()
    raw["load_end"] = load_end
    print_report(args, machine, nfiles, nbytes, results, ceiling, scaling, load_start, load_end)
    if raw["anomalies"]:
        print("\nnotes on odd figures:")
        for a in raw["anomalies"]:
            print(f"  {a}")
    if args.json_out:
        args.json_out.write_text(json.dumps(raw, indent=1, default=str))
        log(f"raw figures written to {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
