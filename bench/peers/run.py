#!/usr/bin/env python3
"""bench/peers/run: sluice side by side with the peer data loaders.

    bench/peers/run --loaders sluice,torch,torchdata,dali,tfdata,spdl,ffcv \
        --data DIR [--out uint8|float] [--batch 64] [--size 224] [--threads 2] \
        [--epochs E] [--repeats R] [--step-ms T] [--json] [--json-out F]

Every loader does the same work on the same ImageFolder tree: decode,
RandomResizedCrop(size) with torchvision's scale (0.08, 1) and ratio
(3/4, 4/3), random horizontal flip, uint8 CHW (or float32 CHW normalised by
the ImageNet mean/std), batches of --batch with labels, shuffled, --epochs
epochs.  Each loader runs in its OWN subprocess (bench/peers/loaders/
NAME_worker.py, one JSON line out), so imports and memory never mix, and the
loaders alternate across repeats (A B C ... A B C ...) so that drift in the
machine's load hits all of them alike.  The page cache is warmed first.

Per loader and run: images/s (loader built -> last batch), time to first
batch, CPU s per image (user+sys of the worker and its reaped children in
that window), peak PSS summed over the worker's process tree (this parent
reads /proc/PID/smaps_rollup of every process of the tree every ~100 ms;
import_pss_mb is the tree's PSS once the imports are done), and with
--step-ms T the stall fraction against a consumer that holds each batch
T ms.  Correctness per run: dtype, shape, and the per-epoch label
histogram equal to the dataset's; a failure is flagged loudly.

Variants: `torch` is run with num_workers 1..4 (all alternated like the
other loaders) and the best mean images/s is reported as `torch`, the sweep
kept in the JSON; `dali` runs two documented pipelines (decode then
random_resized_crop, and the fused decoders.image_random_crop) and reports
the better.  Extra loader names: `sluice-cli` (the `sluice bench` CLI, no
Python) and `sluice-numpy` (sluice.Loader, numpy batches, torch never
imported: the engine's own memory next to `sluice`, which imports torch) and
`sluice-tf` (sluice.tf.dataset inside tf.data, TensorFlow imported: sluice's
memory under the same framework import as `tfdata`);
and the scale-out ones, where --threads counts preparer processes:
`sluice-ray` (sluice.ray actors), `raydata` (Ray Data's read_images +
map_batches), `tfdata-service` (tf.data service workers); see
bench/scale/peers.py.

Statistics (mean, std, 95% CI, paired t-test vs sluice) come from
bench/stats.py.  The table goes to stdout; with --json the last stdout line
is {"loaders": {NAME: {...} | {"error": ...}}, "meta": {...}}.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))  # bench/ for stats.py
import stats  # noqa: E402

sys.path.insert(0, str(HERE / "loaders"))
from _common import tree_pids  # noqa: E402  (the one process-tree walk)

ALL = ["sluice", "torch", "torchdata", "dali", "tfdata", "spdl", "ffcv"]
EXTRA = ["sluice-cli", "sluice-numpy", "sluice-tf", "sluice-tf-alias", "webdataset",
         "sluice-ray", "raydata", "tfdata-service"]
# loader name -> [(run id, worker script, --opt list)]
VARIANTS = {
    "sluice": [("sluice", "sluice_worker.py", [])],
    "sluice-cli": [("sluice-cli", "sluice_cli_worker.py", [])],
    "sluice-numpy": [("sluice-numpy", "sluice_worker.py", ["api=numpy"])],
    "sluice-tf": [("sluice-tf", "sluice_tf_worker.py", [])],
    # the same with copy=False: TF's tensors alias the engine's buffers
    "sluice-tf-alias": [("sluice-tf-alias", "sluice_tf_worker.py", ["copy=0"])],
    "torch": [(f"torch[w={w}]", "torch_worker.py", [f"workers={w}"]) for w in (1, 2, 3, 4)],
    "torchdata": [("torchdata", "torchdata_worker.py", [])],
    "dali": [("dali[rrc]", "dali_worker.py", ["fused=0"]), ("dali[fused]", "dali_worker.py", ["fused=1"])],
    "tfdata": [("tfdata", "tfdata_worker.py", [])],
    "spdl": [("spdl", "spdl_worker.py", [])],
    "ffcv": [("ffcv", "ffcv_worker.py", [])],
    # scale-out (bench/scale/peers.py): --threads preparer processes
    "sluice-ray": [("sluice-ray", "sluice_ray_worker.py", [])],
    "raydata": [("raydata", "raydata_worker.py", [])],
    "tfdata-service": [("tfdata-service", "tfservice_worker.py", [])],
    # needs --loader-opt webdataset:url=PATTERN (bench/storage/remote.py)
    "webdataset": [(f"webdataset[w={w}]", "wds_worker.py", [f"workers={w}"]) for w in (1, 2, 3, 4)],
}


def log(msg):
    print(f"[peers {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- memory

def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_mb(root):
    pids = tree_pids(root)
    return sum(pss_kb(p) for p in pids) / 1024.0, len(pids)


# ---------------------------------------------------------------- one run

def run_worker(script, opts, args, env, timeout):
    cmd = [args.python, str(HERE / "loaders" / script), "--data", str(args.data), "--out", args.out,
           "--batch", str(args.batch), "--size", str(args.size), "--threads", str(args.threads),
           "--epochs", str(args.epochs), "--step-ms", str(args.step_ms), "--seed", str(args.seed),
           "--workdir", str(args.workdir)]
    for o in opts:
        cmd += ["--opt", o]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines, err = [], []
    state = {"ready_pss": None}

    def read_out():
        for line in p.stdout:
            lines.append(line)
            if line.startswith("#ready") and state["ready_pss"] is None:
                state["ready_pss"] = tree_pss_mb(p.pid)[0]

    def read_err():
        for line in p.stderr:
            err.append(line)
            if len(err) > 400:
                del err[:200]

    th = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for t in th:
        t.start()
    peak, peak_procs = 0.0, 0
    timed_out = False
    while p.poll() is None:
        mb, n = tree_pss_mb(p.pid)
        if mb > peak:
            peak, peak_procs = mb, n
        if time.perf_counter() - t0 > timeout:
            timed_out = True
            p.kill()
            break
        time.sleep(0.1)
    p.wait()
    for t in th:
        t.join(timeout=5)
    wall = time.perf_counter() - t0
    res = None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                res = json.loads(line)
                break
            except ValueError:
                continue
    tail = "".join(err)[-1500:]
    if res is None:
        why = "timed out" if timed_out else f"exit {p.returncode}, no result line"
        res = {"error": f"{why}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"[:600]}
    elif p.returncode != 0 and "error" not in res:
        res["error"] = f"exit {p.returncode}: {tail[-300:]}"
    res["peak_pss_mb"] = peak
    res["peak_procs"] = peak_procs
    res["import_pss_mb"] = state["ready_pss"]
    res["process_wall_s"] = wall
    res["stderr_tail"] = tail[-600:]
    return res


# ---------------------------------------------------------------- summary

def summarise(name, runs_by_id, sluice_runs):
    """One loader's entry: best variant (by mean img/s) with stats."""
    cands = []
    for rid, runs in runs_by_id.items():
        good = [r for r in runs if "error" not in r]
        bad = [r for r in runs if "error" in r]
        if good:
            cands.append((stats.mean([r["img_s"] for r in good]), rid, good, bad))
    if not cands:
        errs = [r["error"] for runs in runs_by_id.values() for r in runs if "error" in r]
        return {"error": errs[0] if errs else "no runs"}
    cands.sort(key=lambda c: -c[0])
    _m, rid, good, bad = cands[0]
    img = [r["img_s"] for r in good]
    s = stats.summary(img)
    first = [r["first_batch_s"] for r in good if r.get("first_batch_s") is not None]
    stall = [r["stall_fraction"] for r in good if r.get("stall_fraction") is not None]
    cpu = [r["cpu_s_per_img"] for r in good if r.get("cpu_s_per_img") is not None]
    tot = [r["img_s_total"] for r in good if r.get("img_s_total") is not None]
    cpu_tot = [r["cpu_s_per_img_total"] for r in good if r.get("cpu_s_per_img_total") is not None]
    pss = [r["peak_pss_mb"] for r in good]
    imp = [r["import_pss_mb"] for r in good if r.get("import_pss_mb")]
    errors = sorted({e for r in good for e in r.get("errors", [])})
    entry = {
        "img_s": s["mean"], "img_s_std": s["std"], "img_s_median": s["median"],
        "img_s_ci95": [s["ci95_lo"], s["ci95_hi"]], "img_s_runs": img,
        "img_s_total": stats.mean(tot) if tot else None,
        "img_s_total_std": stats.std(tot) if tot else None,
        "cpu_s_per_img": stats.mean(cpu) if cpu else None,
        "cpu_s_per_img_total": stats.mean(cpu_tot) if cpu_tot else None,
        "cpu_s_per_img_std": stats.std(cpu) if cpu else None,
        "peak_pss_mb": stats.mean(pss), "peak_pss_mb_std": stats.std(pss),
        "peak_pss_mb_max": max(pss),
        "import_pss_mb": stats.mean(imp) if imp else None,
        "first_batch_s": stats.mean(first) if first else None,
        "stall_fraction": stats.mean(stall) if stall else None,
        "version": good[0].get("version", ""), "config": good[0].get("config", ""),
        "variant": rid, "runs": len(good), "failed_runs": len(bad),
        "correct": not errors, "correctness_errors": errors[:10],
    }
    eps = [r["epoch_img_s"] for r in good if r.get("epoch_img_s")]
    if eps:  # per epoch: the median over the runs, and every run's figure
        entry["epoch_img_s"] = [stats.median([e[i] for e in eps if i < len(e) and e[i]])
                                for i in range(max(len(e) for e in eps))]
        entry["epoch_img_s_runs"] = eps
    for k in ("setup_s", "setup_note"):
        vals = [r[k] for r in good if r.get(k) is not None]
        if vals:
            entry[k] = stats.mean(vals) if isinstance(vals[0], (int, float)) else vals[0]
    if bad:
        entry["run_errors"] = sorted({r["error"] for r in bad})[:5]
    if len(runs_by_id) > 1:
        entry["sweep"] = {k: ({"img_s": stats.mean([r["img_s"] for r in v if "error" not in r]),
                               "img_s_std": stats.std([r["img_s"] for r in v if "error" not in r]),
                               "peak_pss_mb": stats.mean([r["peak_pss_mb"] for r in v if "error" not in r]),
                               "config": next((r.get("config") for r in v if "error" not in r), None)}
                              if any("error" not in r for r in v) else
                              {"error": next(r["error"] for r in v)})
                          for k, v in runs_by_id.items()}
    if sluice_runs and name != "sluice":
        # paired by repeat index (the runs alternate, so repeat i of both
        # saw the same stretch of machine load)
        pairs = [(r, s_) for r, s_ in zip(runs_by_id[rid], sluice_runs)
                 if "error" not in r and "error" not in s_]
        if len(pairs) >= 2:
            t = stats.paired_t([a["img_s"] for a, _ in pairs], [b["img_s"] for _, b in pairs])
            entry["paired_t_vs_sluice"] = t
    return entry


def fmt_pm(m, s, d=0):
    if m is None:
        return "n/a"
    return f"{m:,.{d}f} ± {s:,.{d}f}" if s is not None else f"{m:,.{d}f}"


def table(result, names):
    lo = result["loaders"]
    base = lo.get("sluice", {})
    base_img = base.get("img_s") if "error" not in base else None
    rows = []
    hdr = ["loader", "img/s (mean ± std)", "median", "peer/sluice", "img/s whole run", "first batch s",
           "CPU ms/img", "peak PSS MB", "PSS after imports MB", "stall", "correct"]
    for n in names:
        e = lo.get(n)
        if e is None:
            continue
        if "error" in e:
            rows.append([n, "**FAILED**", "", "", "", "", "", "", "", "", e["error"][:160].replace("|", "/")])
            continue
        ratio = f"{e['img_s'] / base_img:.2f}×" if base_img else "n/a"
        ok = "yes" if e["correct"] else "**NO: " + "; ".join(e["correctness_errors"][:2]) + "**"
        cpu = e.get("cpu_s_per_img")
        rows.append([
            n + (f" ({e['variant']})" if e.get("variant") != n else ""),
            fmt_pm(e["img_s"], e["img_s_std"]), f"{e['img_s_median']:,.0f}", ratio,
            fmt_pm(e.get("img_s_total"), e.get("img_s_total_std")),
            f"{e['first_batch_s']:.2f}" if e.get("first_batch_s") is not None else "n/a",
            f"{cpu * 1e3:.2f}" if cpu is not None else "n/a",
            fmt_pm(e["peak_pss_mb"], e["peak_pss_mb_std"]),
            f"{e['import_pss_mb']:,.0f}" if e.get("import_pss_mb") else "n/a",
            f"{e['stall_fraction']:.3f}" if e.get("stall_fraction") is not None else "—",
            ok])
    out = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    out += ["", "| loader | version | configuration |", "|---|---|---|"]
    for n in names:
        e = lo.get(n)
        if e is None or "error" in e:
            continue
        cfg = e.get("config", "")
        if e.get("setup_s") is not None:
            cfg += f"; setup (untimed): {e.get('setup_note', '')} {e['setup_s']:.1f} s"
        if e.get("sweep"):
            cfg += "; sweep: " + ", ".join(
                f"{k} {v['img_s']:,.0f} ± {v['img_s_std']:,.0f}" if "error" not in v else f"{k} FAILED"
                for k, v in e["sweep"].items())
        out.append(f"| {n} | {e.get('version', '')} | {cfg.replace('|', '/')} |")
    return "\n".join(out)


# ---------------------------------------------------------------- main

def warm_cache(data):
    n = b = 0
    for root, _d, names in os.walk(data):
        for nm in names:
            with open(os.path.join(root, nm), "rb") as f:
                while True:
                    c = f.read(1 << 20)
                    if not c:
                        break
                    b += len(c)
            n += 1
    return n, b


def machine():
    info = {"nproc": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--loaders", default=",".join(ALL),
                    help=f"comma list of {','.join(ALL + EXTRA)} (default: all but sluice-cli)")
    ap.add_argument("--data", type=Path, default=(REPO / ".." / "shared" / "data" / "imagenet-sample").resolve())
    ap.add_argument("--out", choices=["uint8", "float"], default="uint8")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="last stdout line: the result as one JSON object")
    ap.add_argument("--json-out", type=Path, help="also write the full result (every run) here")
    ap.add_argument("--timeout", type=float, default=600, help="per worker run, seconds (600)")
    ap.add_argument("--python", default=str(REPO / ".venv-peers" / "bin" / "python"),
                    help="interpreter of the workers (default: .venv-peers)")
    ap.add_argument("--sluice-build", type=Path, default=REPO / "build-peers",
                    help="sluice build dir: its python/ goes on PYTHONPATH, its sluice is the CLI")
    ap.add_argument("--torch-workers", default="1,2,3,4",
                    help="num_workers values the torch and webdataset loaders sweep (default 1,2,3,4)")
    ap.add_argument("--loader-opt", action="append", default=[], metavar="NAME:KEY=VALUE",
                    help="extra option for one loader's worker, e.g. sluice:prefetch=2 (recorded in its config)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/sluice-peers"),
                    help="scratch (ffcv .beton files)")
    args = ap.parse_args(argv)
    args.names = [n.strip() for n in args.loaders.split(",") if n.strip()]
    for name, script in (("torch", "torch_worker.py"), ("webdataset", "wds_worker.py")):
        VARIANTS[name] = [(f"{name}[w={w}]", script, [f"workers={w}"])
                          for w in (int(x) for x in args.torch_workers.split(",") if x.strip())]
    for lo in args.loader_opt:
        name, _, kv = lo.partition(":")
        if name not in VARIANTS or "=" not in kv:
            ap.error(f"--loader-opt {lo!r}: want NAME:KEY=VALUE with a known loader NAME")
        VARIANTS[name] = [(rid, script, opts + [kv]) for rid, script, opts in VARIANTS[name]]
    for n in args.names:
        if n not in VARIANTS:
            ap.error(f"unknown loader {n!r} (known: {', '.join(ALL + EXTRA)})")
    if not Path(args.python).exists():
        ap.error(f"{args.python} missing: run bench/peers/setup first")
    if not args.data.is_dir():
        ap.error(f"no ImageFolder at {args.data}")
    return args


def main(argv=None):
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(args.sluice_build / "python") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["SLUICE_BIN"] = str(args.sluice_build / "sluice")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["CUDA_VISIBLE_DEVICES"] = ""  # CPU only, for every framework alike
    env["PYTHONUNBUFFERED"] = "1"

    load0 = os.getloadavg()
    n, b = warm_cache(args.data)
    log(f"data {args.data}: {n} files, {b / 1e6:.1f} MB (page cache warmed); load {load0[0]:.2f}")
    runs = {name: {rid: [] for rid, _s, _o in VARIANTS[name]} for name in args.names}
    order = [(name, rid, script, opts) for name in args.names for rid, script, opts in VARIANTS[name]]
    # untimed once per loader: ffcv writes its .beton (reported as setup_s)
    for r in range(args.repeats):
        for name, rid, script, opts in order:
            res = run_worker(script, opts, args, env, args.timeout)
            res["repeat"] = r
            res["load1"] = os.getloadavg()[0]
            runs[name][rid].append(res)
            if "error" in res:
                log(f"repeat {r + 1}/{args.repeats} {rid:12s} ERROR {res['error'][:300]}")
            else:
                bad = "" if res.get("ok") else f"  CORRECTNESS: {res.get('errors', [])[:2]}"
                fb = res.get("first_batch_s")
                log(f"repeat {r + 1}/{args.repeats} {rid:12s} {res['img_s']:8.1f} img/s  "
                    f"first {fb if fb is None else round(fb, 2)} s  "
                    f"cpu {res['cpu_s_per_img'] * 1e3 if res.get('cpu_s_per_img') else float('nan'):.2f} ms/img  "
                    f"pss {res['peak_pss_mb']:.0f} MB{bad}")
    load1 = os.getloadavg()
    sluice_runs = runs.get("sluice", {}).get("sluice")
    loaders = {name: summarise(name, runs[name], sluice_runs) for name in args.names}
    meta = {"data": str(args.data), "images": n, "out": args.out, "batch": args.batch, "size": args.size,
            "threads": args.threads, "epochs": args.epochs, "repeats": args.repeats, "step_ms": args.step_ms,
            "machine": machine(), "loadavg_start": load0, "loadavg_end": load1,
            "command": " ".join(["bench/peers/run"] + (argv if argv is not None else sys.argv[1:])),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    result = {"loaders": loaders, "meta": meta}
    print(f"\nsluice vs peer loaders — out {args.out}, batch {args.batch}, size {args.size}, "
          f"threads {args.threads}, epochs {args.epochs}, repeats {args.repeats}"
          f"{', step ' + str(args.step_ms) + ' ms' if args.step_ms else ''}")
    print(f"machine: {meta['machine'].get('cpu_model')} ×{meta['machine']['nproc']}, "
          f"load avg start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print(table(result, args.names))
    failed = [k for k, v in loaders.items() if "error" in v]
    wrong = [k for k, v in loaders.items() if "error" not in v and not v["correct"]]
    for k in failed:
        print(f"!! {k} FAILED: {loaders[k]['error']}")
    for k in wrong:
        print(f"!! {k} DELIVERED WRONG BATCHES: {loaders[k]['correctness_errors'][:3]}")
    for k, v in loaders.items():
        if "error" not in v and v.get("paired_t_vs_sluice", {}).get("p") is not None:
            t = v["paired_t_vs_sluice"]
            print(f"   {k}: paired t-test vs sluice over {t['n']} repeats: "
                  f"mean diff {t['mean_diff']:+.1f} img/s, p = {t['p']:.3g}")
    if args.json_out:
        full = dict(result)
        full["runs"] = runs
        args.json_out.write_text(json.dumps(full, indent=1, default=str))
        log(f"full result written to {args.json_out}")
    if args.json:
        print(json.dumps(result, default=str))
    return 1 if (wrong or failed) and not loaders else 0


if __name__ == "__main__":
    sys.exit(main())
