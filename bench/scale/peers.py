"""sluice's scale-out against tf.data service and Ray Data (issue 16 item 7),
and the issue's model on paper against the measurement.

The same work on the same ImageFolder (--data): decode, RandomResizedCrop
(scale 0.08-1, ratio 3/4-4/3) to --size², random flip, uint8 CHW, batches of
--batch, shuffled, --epochs epochs; N preparer processes (--preparers, each
N one run of bench/peers/run, which alternates the systems within each
round and checks every batch's dtype and shape and every epoch's label
histogram: each image exactly once):

    sluice          sluice.torch.DataLoader, N decode threads, in-process
    sluice-ray      sluice.ray.DataLoader, N actors x 1 decode thread
    raydata         Ray Data: read_images -> map_batches(torchvision) ->
                    iter_batches, ray.init(num_cpus=N)
    tfdata-service  tf.data service: a dispatcher + N WorkerServer processes,
                    the tf.data pipeline (decode_and_crop_jpeg, resize,
                    flip), distribute(distributed_epoch)

(bench/peers/loaders/{sluice,sluice_ray,raydata,tfservice}_worker.py). The
consumer only takes the batches (--step-ms T: holds each T ms). Per system:
img/s after the first batch (median over rounds), the last epoch's img/s,
CPU s per image of the whole process tree (the consumer, Ray's or TF's
processes), peak PSS of the tree.

The model (issue 16 item 7: from measured per-batch costs, prepare,
serialize, transfer, how many preparers a trainer needs and where the
transfer becomes the bound): p = CPU s per image of sluice in-process with
one thread (the measured run); s and t = CPU s per batch of putting a
batch into Ray's object store at a preparer (copy + serialize, as
sluice.ray's actors do) and of taking it at the trainer (ray.get + torch
tensor), r = Ray's own processes per batch (raylet, GCS), measured here by
a microbenchmark of --transfer-reps batches; on C cores (--cores)

    in-process, N threads:  R = min(N, C) / p
    N remote preparers:     R = min(N / (p + s/B),  C / (p + (s + t + r)/B),  B / t)
                            CPU per image p + (s + t + r)/B

(the preparers' own bound, the cores', the trainer's receive bound), and
across nodes of c cores a trainer consuming R needs R (p + s/B) / c
preparer nodes, until R reaches the link's B_link / (bytes per image) (the
transfer bound) or B / t.

    PYTHONPATH=build/python nice -n 19 .venv/bin/python bench/scale/peers.py \\
        --data ../shared/data/imagenet-sample --preparers 1,2 --rounds 3
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
sys.path.insert(0, os.path.join(HERE, "..", "peers", "loaders"))
from stats import median  # noqa: E402
from scale_model import knee, model, per_image  # noqa: E402

SYSTEMS = ["sluice", "sluice-ray", "raydata", "tfdata-service"]
NEEDS = {"sluice-ray": ("ray", "torch"), "raydata": ("ray", "ray.data", "torchvision"),
         "tfdata-service": ("tensorflow",)}


def missing(mod):
    """None when `mod` imports, else why not."""
    try:
        __import__(mod)
        return None
    except Exception as e:  # noqa: BLE001 - the reason is printed
        return f"{type(e).__name__}: {e}"


def tree_cpu():
    """{pid: CPU s} of this process and its descendants (Ray's processes)."""
    import _common as C
    out = {}
    for p in C.tree_pids(os.getpid()):
        try:
            own, reaped = C._stat_cpu(p)
            out[p] = own + reaped
        except (OSError, ValueError, IndexError):
            pass
    return out


def transfer_cost(batch, size, reps, per_task=8):
    """CPU s per batch of sluice.ray's delivery path without the decode: a
    Ray actor returns a chunk of `per_task` (images, labels) as one value
    (sluice.ray's _Preparer hands Ray the engine's own arrays, which Ray
    serializes into the object store: one copy); the trainer takes it
    through the ref's future and wraps each batch as torch tensors. s: the
    actor process, t: this process, r: Ray's other processes (raylet,
    GCS), per batch; wall: s per batch, one chunk at a time."""
    import _common as C
    import numpy as np
    import torch
    ray = C.start_ray(1)
    try:
        @ray.remote(num_cpus=1)
        class Source:
            def __init__(self):
                rng = np.random.default_rng(0)
                x = rng.integers(0, 255, (batch, 3, size, size), dtype=np.uint8)
                y = np.arange(batch, dtype=np.int64)
                # distinct arrays: the same one twice would be stored once
                self.batches = [(x.copy(), y.copy()) for _ in range(per_task)]

            def pid(self):
                return os.getpid()

            def chunk(self):
                return self.batches

        src = Source.remote()
        apid = ray.get(src.pid.remote())

        def take(n):
            for _ in range(n):
                for x, y in src.chunk.remote().future().result():
                    torch.from_numpy(x), torch.from_numpy(y)
                del x, y

        take(3)
        c0, t0 = tree_cpu(), time.perf_counter()
        take(reps)
        wall = time.perf_counter() - t0
        c1 = tree_cpu()
        n = per_task * reps
        d = {p: v - c0.get(p, 0.0) for p, v in c1.items()}
        s = d.pop(apid, 0.0) / n
        t = d.pop(os.getpid(), 0.0) / n
        r = sum(d.values()) / n
        return {"s": s, "t": t, "r": r, "wall": wall / n, "batches": n,
                "bytes": batch * (3 * size * size + 8)}
    finally:
        ray.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data", "imagenet-sample"))
    ap.add_argument("--preparers", default="1,2", help="N values, comma list")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--cores", type=int, default=os.cpu_count(), help="C of the model")
    ap.add_argument("--transfer-reps", type=int, default=10,
                    help="chunks of 8 batches (sluice.ray's default chunk)")
    ap.add_argument("--sluice-build", default=os.path.join(REPO, "build"))
    ap.add_argument("--timeout", type=float, default=600, help="per system run, s")
    ap.add_argument("--json-out", help="write every run and the summary here")
    a = ap.parse_args()
    if not os.path.isdir(a.data):
        print(f"SKIP: no ImageFolder at {a.data} (the ImageNet sample: /work/shared/data)")
        return 0
    systems = []
    for name in a.systems.split(","):
        why = next((m for m in (missing(x) for x in NEEDS.get(name, ())) if m), None)
        if why:
            print(f"SKIP {name}: {why}")
        else:
            systems.append(name)
    import run as peers_run  # bench/peers/run.py
    # the runs' JSON and work folders: read here, then removed (each run
    # left one in /tmp)
    tmpdir = tempfile.TemporaryDirectory(prefix="sluice-scale-peers-")
    tmp = tmpdir.name
    load0 = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"load {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    results = {}
    for n in [int(x) for x in a.preparers.split(",")]:
        out = os.path.join(tmp, f"n{n}.json")
        peers_run.main(["--loaders", ",".join(systems), "--data", a.data, "--python", sys.executable,
                        "--sluice-build", a.sluice_build, "--batch", str(a.batch), "--size", str(a.size),
                        "--threads", str(n), "--epochs", str(a.epochs), "--repeats", str(a.rounds),
                        "--step-ms", str(a.step_ms), "--timeout", str(a.timeout),
                        "--workdir", os.path.join(tmp, "w"), "--json-out", out])
        with open(out) as f:
            results[n] = json.load(f)
    tmpdir.cleanup()
    load1 = os.getloadavg()
    tc = None
    if "sluice-ray" in systems:
        tc = transfer_cost(a.batch, a.size, a.transfer_reps)
    summary = {}
    print(f"\nscale-out, batch {a.batch}, {a.size}², {a.epochs} epochs, {a.rounds} rounds "
          f"(medians); load {load0[0]:.2f} at the start, {load1[0]:.2f} at the end")
    print(f"{'N':>2} {'system':15s} {'img/s':>7} {'last ep':>7} {'/sluice':>7} {'/s-ray':>7} "
          f"{'CPU ms/img':>10} {'peak PSS MB':>11}  correct  {'whole run: img/s':>16} "
          f"{'CPU ms/img':>10}")
    for n, res in results.items():
        lo = res["loaders"]
        summary[n] = {}
        for name in systems:
            e = lo.get(name, {"error": "no result"})
            if "error" in e:
                print(f"{n:>2} {name:15s} FAILED: {e['error'][:200]}")
                summary[n][name] = {"error": e["error"]}
                continue
            runs = [r for r in res["runs"][name][e["variant"]] if "error" not in r]
            cpu = [r["cpu_s_per_img"] for r in runs if r.get("cpu_s_per_img")]
            # Whole runs, start-up included: a loader that prepares far
            # ahead (sluice.ray's window) does much of a short run's work
            # before its first batch, which the after-first-batch figures
            # leave out.
            whole = [r["img_s_total"] for r in runs if r.get("img_s_total")]
            cpu_whole = [r["cpu_s_per_img_total"] for r in runs
                         if r.get("cpu_s_per_img_total")]
            summary[n][name] = {
                "img_s": e["img_s_median"], "img_s_runs": e["img_s_runs"],
                "img_s_whole": median(whole) if whole else None,
                "cpu_s_per_img_whole": median(cpu_whole) if cpu_whole else None,
                "last_epoch_img_s": e["epoch_img_s"][-1] if e.get("epoch_img_s") else None,
                "cpu_s_per_img": median(cpu) if cpu else None,
                "peak_pss_mb": e["peak_pss_mb"], "correct": e["correct"],
                "batches": [r["batches"] for r in runs], "config": e["config"]}
        for name, v in summary[n].items():
            if "error" in v:
                continue
            ratio = {k: (v["img_s"] / summary[n][k]["img_s"]
                         if "img_s" in summary[n].get(k, {}) else None)
                     for k in ("sluice", "sluice-ray")}
            v["over"] = ratio
            fr = ["n/a" if x is None else f"{x:.2f}" for x in ratio.values()]
            cpu = "n/a" if v["cpu_s_per_img"] is None else f"{v['cpu_s_per_img'] * 1e3:.2f}"
            w = "n/a" if v["img_s_whole"] is None else f"{v['img_s_whole']:.0f}"
            cw = ("n/a" if v["cpu_s_per_img_whole"] is None
                  else f"{v['cpu_s_per_img_whole'] * 1e3:.2f}")
            print(f"{n:>2} {name:15s} {v['img_s']:7.0f} {v['last_epoch_img_s'] or 0:7.0f} "
                  f"{fr[0]:>7} {fr[1]:>7} {cpu:>10} {v['peak_pss_mb']:11.0f}  "
                  f"{str(v['correct']):7s}  {w:>16} {cw:>10}")
    pred = {}
    base = summary.get(1, {}).get("sluice", {})
    if tc and base.get("cpu_s_per_img"):
        p = base["cpu_s_per_img"]
        print(f"\nmodel: p = {p * 1e3:.2f} ms CPU per image (sluice in-process, 1 thread); "
              f"per batch of {a.batch} ({tc['bytes'] / 1e6:.1f} MB): s = {tc['s'] * 1e3:.1f} ms "
              f"(preparer: copy + put), t = {tc['t'] * 1e3:.1f} ms (trainer: get + tensor), "
              f"r = {tc['r'] * 1e3:.1f} ms (Ray's processes); C = {a.cores} cores")
        for n in results:
            m = model(p, tc, a.batch, n, a.cores)
            meas = summary[n].get("sluice-ray", {}).get("img_s")
            loc = summary[n].get("sluice", {}).get("img_s")
            m["measured_remote"], m["measured_in_process"] = meas, loc
            pred[n] = m
            print(f"N={n}: in-process predicted {m['in_process']:.0f} img/s, measured "
                  f"{loc or float('nan'):.0f}; remote predicted {m['remote']:.0f} "
                  f"({m['bound']}-bound; " + ", ".join(f"{k} {v:.0f}" for k, v in m["bounds"].items())
                  + f"), measured {meas or float('nan'):.0f}; remote/in-process predicted "
                  f"{m['remote_over_in_process']:.2f}, measured "
                  + (f"{meas / loc:.2f}" if meas and loc else "n/a"))
            mc = summary[n].get("sluice-ray", {}).get("cpu_s_per_img")
            print(f"     CPU per image remote predicted {m['remote_cpu_s_per_img'] * 1e3:.2f} ms "
                  f"(p + (s + t + r)/B), measured "
                  + (f"{mc * 1e3:.2f}" if mc else "n/a"))
        for gbit in (10, 25, 100):
            link = gbit * 1e9 / 8 / (tc["bytes"] / a.batch)
            cores = knee(p, tc, a.batch, tc["bytes"], gbit * 1e9 / 8)
            print(f"  across nodes, {gbit} Gb/s link: transfer-bound at {link:,.0f} img/s "
                  f"(trainer receive bound "
                  + (f"{a.batch / tc['t']:,.0f}" if tc["t"] > 0 else
                     "not measured: no CPU tick in the window")
                  + "); reaching it takes "
                  f"{cores:.1f} preparer cores ({cores / 16:.1f} nodes of 16; "
                  f"{per_image(p, tc['s'], a.batch) * 1e3:.2f} ms per image each)")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"args": vars(a), "load": [load0, load1], "summary": summary,
                       "transfer": tc, "model": pred, "runs": results}, f, indent=1, default=str)
    bad = [f"N={n} {k}" for n, v in summary.items() for k, e in v.items()
           if "error" in e or not e["correct"]]
    if bad:
        sys.exit(f"failed or wrong batches: {', '.join(bad)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
