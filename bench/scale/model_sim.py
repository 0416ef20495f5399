#!/usr/bin/env python3
"""The model on paper of issue 16 item 7 (bench/scale/scale_model.py)
checked against the simulator extended with remote preparers
(src/sim/remote.c, `sluice simulate` with the remote_* profile keys).

    nice -n 19 .venv/bin/python bench/scale/model_sim.py [--sluice build/sluice]
        [--seeds 3] [--duration 14] [--peers-json R.json] [--json OUT]
        [--object-store-bytes B] [--sweeps 12345]

Per-batch costs: bench/RESULTS.md's measurement on this machine
(2026-11-27: p = 1.93 ms CPU per image, per batch of 64 x 224² x 3 uint8,
9.6 MB: s = 16.4 ms at the preparer, t = 2.2 at the trainer, r = 2.8 in
Ray's processes), or those of a bench/scale/peers.py --json-out file
(--peers-json). The simulator gets the same costs: decode_ms = p (one
draw per image, CV --cv), serialize_ms = s, receive_ms = t, store_ms = r,
batch_bytes = the batch's bytes, one decode thread per preparer, chunk 8
and depth 2 (sluice.ray's defaults; --chunk, --depth) unless a sweep says
otherwise, and the byte budget --object-store-bytes (sluice.ray's
object_store_bytes; 0, the default here: none, the batch-count window
alone) in sweeps 1-4.

Sweeps (ratios are simulator / model):
  1. one node, the measured set-up: N preparers on the trainer's node of
     C = 2 and 16 cores, no link;
  2. across nodes: nodes of 16 cores with 16 preparers each, the trainer
     (2 cores) behind a 10, 25 or 100 Gb/s link of 0.1 ms; N from 1 to 80.
     The knee: the model's N* = link rate x (p + s/B) against the
     simulator's (its plateau over its one-preparer rate);
  3. preparers needed: a trainer consuming D img/s (its step + receive =
     B / D per batch): the model's D (p + s/B) preparers (one core each;
     / 16: nodes) against the fewest with which the simulator delivers
     >= 98 % of D (the trainer waits < 2 %), found by bisection;
  4. what the model leaves out: link latency (0.1 to 200 ms) with
     sluice.ray's window (depth x chunk per preparer) and with a window of
     one batch per preparer; chunk 1 (no serialize/decode overlap);
  5. the byte budget: 16 preparers on 10 Gb/s under object_store_bytes
     from none to below one chunk per preparer (sluice.ray's rule,
     src/sim/remote.h): the window, how often the budget held it, the
     batches in flight and in the store, the rate.
The budget's figures (the simulator's --json "remote" object): at the end,
how often the budget held the window over all runs (hand-outs at which
it, not the batch count, left a preparer's free slot empty).

Each simulated run: --duration s, its rate from the samples between 2 s and
the end (the telemetry file), the median over --seeds seeds. The simulator
is deterministic and needs no quiet machine (one run is < 1 s of CPU).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from scale_model import cross_node, knee, model, nodes_needed  # noqa: E402

GBIT = 1e9 / 8
WARM = 2.0  # s of each simulated run left out of its rate


def costs(a):
    """p (s per image), tc ({"s", "t", "r"} s per batch), bytes per batch."""
    if a.peers_json:
        d = json.load(open(a.peers_json))
        tc = d["transfer"]
        p = d["summary"]["1"]["sluice"]["cpu_s_per_img"]
        return p, {k: tc[k] for k in ("s", "t", "r")}, tc["bytes"]
    return a.p_ms / 1e3, {"s": a.s_ms / 1e3, "t": a.t_ms / 1e3, "r": a.r_ms / 1e3}, \
        a.batch * 3 * a.size * a.size


class Sim:
    def __init__(self, a, p, tc, nbytes, tmp):
        self.a, self.tmp, self.runs = a, tmp, 0
        self.hand_outs = self.budget_held = 0  # over all runs
        self.base = {"ncpu": 2, "batch_size": a.batch, "batch_bytes": nbytes,
                     "read_ms": 0, "read_cv": 0, "decode_ms": p * 1e3,
                     "decode_cv": a.cv, "step_ms": 0, "consumer_cpu": 0,
                     "remote_threads": 1, "remote_per_node": 16,
                     "remote_node_cores": 16, "remote_chunk": a.chunk,
                     "remote_depth": a.depth, "serialize_ms": tc["s"] * 1e3,
                     "store_ms": tc["r"] * 1e3, "receive_ms": tc["t"] * 1e3,
                     "link_latency_ms": 0.1,
                     "object_store_bytes": a.object_store_bytes}

    def rate(self, **kw):
        """Median img/s over the seeds of the base profile with kw."""
        return self.run(**kw)["rate"]

    def run(self, **kw):
        """The base profile with kw over the seeds, medians: img/s (rate),
        in_flight (batches handed out, not taken: the telemetry's ready +
        filling, mean after WARM), and the simulator's remote figures:
        window (at the end), budget_held_share (of the hand-outs), chunk_held
        (the taken batches of the trainer's chunk, still in the store: store
        minus in flight, mean over the run)."""
        prof = dict(self.base, **kw)
        path = os.path.join(self.tmp, "p.json")
        with open(path, "w") as f:
            json.dump(prof, f)
        out = {"rate": [], "window": [], "budget_held_share": [], "in_flight": [],
               "chunk_held": []}
        for seed in range(1, self.a.seeds + 1):
            tel = os.path.join(self.tmp, "t.jsonl")
            res = subprocess.run([self.a.sluice, "simulate", "--profile", path,
                                  "--policy", "static", "--duration",
                                  str(self.a.duration), "--seed", str(seed),
                                  "--telemetry", tel, "--json"],
                                 check=True, stdout=subprocess.PIPE, text=True)
            rm = json.loads(res.stdout.strip().splitlines()[-1])["remote"]
            pts = [json.loads(line) for line in open(tel)]
            t0 = min(pts, key=lambda x: abs(x["t"] - WARM))
            t1 = pts[-1]
            late = [x for x in pts if x["t"] >= t0["t"]]
            out["rate"].append((t1["samples_total"] - t0["samples_total"])
                               / (t1["t"] - t0["t"]))
            out["in_flight"].append(statistics.mean(
                x["queue_depth"]["batches"] + x["batches_filling"] for x in late))
            for k in ("window", "budget_held_share"):
                out[k].append(rm[k])
            out["chunk_held"].append(rm["store_batches_mean"] - rm["in_flight_mean"])
            self.hand_outs += rm["hand_outs"]
            self.budget_held += rm["budget_held"]
            self.runs += 1
        return {k: statistics.median(v) for k, v in out.items()}


def ratio_line(cells):
    return "| " + " | ".join(cells) + " |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default=os.path.join(REPO, "build", "sluice"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=14.0, help="simulated s per run")
    ap.add_argument("--peers-json", help="costs from bench/scale/peers.py --json-out")
    ap.add_argument("--p-ms", type=float, default=1.93, help="prepare, ms per image")
    ap.add_argument("--s-ms", type=float, default=16.4, help="serialize, ms per batch")
    ap.add_argument("--t-ms", type=float, default=2.2, help="receive, ms per batch")
    ap.add_argument("--r-ms", type=float, default=2.8, help="object store, ms per batch")
    ap.add_argument("--cv", type=float, default=1.0, help="CV of an image's prepare time")
    ap.add_argument("--chunk", type=int, default=8, help="batches per task (sluice.ray's)")
    ap.add_argument("--depth", type=int, default=2, help="tasks queued per preparer")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--object-store-bytes", type=float, default=0,
                    help="sluice.ray's byte budget for the batches in flight in "
                         "sweeps 1-4 (0: none)")
    ap.add_argument("--sweeps", default="12345", help="which to run, e.g. 5")
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()
    if a.object_store_bytes < 0:
        ap.error("--object-store-bytes must be >= 0 (0: no byte budget)")
    if not os.access(a.sluice, os.X_OK):
        print(f"SKIP: no sluice binary at {a.sluice} (build first)")
        return 0
    p, tc, nbytes = costs(a)
    # the simulator's profile and telemetry files: removed at the end, also
    # on an error (mkdtemp left one in /tmp per run)
    with tempfile.TemporaryDirectory(prefix="sluice-model-sim-") as tmp:
        return sweeps(a, p, tc, nbytes, tmp)


def sweeps(a, p, tc, nbytes, tmp):
    """The sweeps a.sweeps names, printed (and written to a.json); tmp:
    the simulator's files."""
    B = a.batch
    sim = Sim(a, p, tc, nbytes, tmp)
    t_start = time.time()
    load = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load[0]:.2f}; "
          f"p = {p * 1e3:.2f} ms/img, per batch of {B} ({nbytes / 1e6:.2f} MB): "
          f"s = {tc['s'] * 1e3:.1f}, t = {tc['t'] * 1e3:.1f}, r = {tc['r'] * 1e3:.1f} ms; "
          f"{a.seeds} seeds x {a.duration:g} s simulated per point\n")
    rows, out = [], {"costs": {"p": p, **tc, "bytes": nbytes},
                     "object_store_bytes": a.object_store_bytes, "one_node": [],
                     "cross_node": [], "knee": [], "nodes": [], "latency": [],
                     "budget": []}
    if "1" in a.sweeps:
        one_node(a, p, tc, B, sim, rows, out)
    if "2" in a.sweeps:
        across_nodes(a, p, tc, B, nbytes, sim, rows, out)
    if "3" in a.sweeps:
        preparers_needed(a, p, tc, B, sim, out)
    if "4" in a.sweeps:
        latency(a, p, tc, B, nbytes, sim, out)
    # how often the byte budget held the window in sweeps 1-4 (sweep 5
    # says it per budget)
    held, hand_outs = sim.budget_held, sim.hand_outs
    if "5" in a.sweeps:
        budget(a, nbytes, sim, out)

    if rows:
        within = sum(1 for x in rows if abs(x - 1) <= 0.10)
        within15 = sum(1 for x in rows if abs(x - 1) <= 0.15)
        print(f"\nsweeps 1-2: {len(rows)} points, sim / model {min(rows):.3f} .. "
              f"{max(rows):.3f}, median {statistics.median(rows):.3f}; within 10 %: "
              f"{within}, within 15 %: {within15}")
    if hand_outs:
        out["budget_held"] = {"hand_outs": hand_outs, "held": held}
        print(f"\nsweeps 1-4, object_store_bytes {a.object_store_bytes:g}: the byte "
              f"budget held the window at {held:,} of {hand_outs:,} hand-outs "
              f"({100 * held / hand_outs:.1f} %)")
    print(f"\n{sim.runs} simulated runs in {time.time() - t_start:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


def one_node(a, p, tc, B, sim, rows, out):
    print("1. one node: N preparers on the trainer's node of C cores")
    print(ratio_line(["C", "N", "model img/s", "bound", "simulator img/s", "sim / model"]))
    print(ratio_line(["---"] * 6))
    for cores, ns in ((2, (1, 2, 3, 4)), (16, (1, 2, 4, 8, 12, 16, 20))):
        for n in ns:
            m = model(p, tc, B, n, cores)
            r = sim.rate(ncpu=cores, remote_preparers=n, remote_local=n, link_bw=0)
            out["one_node"].append({"cores": cores, "n": n, "model": m["remote"],
                                    "bound": m["bound"], "sim": r})
            rows.append(r / m["remote"])
            print(ratio_line([str(cores), str(n), f"{m['remote']:,.0f}", m["bound"],
                              f"{r:,.0f}", f"{r / m['remote']:.3f}"]), flush=True)


def across_nodes(a, p, tc, B, nbytes, sim, rows, out):
    print("\n2. across nodes: nodes of 16 cores x 16 preparers, the trainer behind a link")
    print(ratio_line(["link", "N", "model img/s", "bound", "simulator img/s", "sim / model"]))
    print(ratio_line(["---"] * 6))
    ns = (1, 2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 80)
    for gbit in (10, 25, 100):
        bw = gbit * GBIT
        one = None
        plateau = 0
        for n in ns:
            m = cross_node(p, tc, B, nbytes, n, 16, 16, bw)
            r = sim.rate(remote_preparers=n, remote_local=0, link_bw=bw)
            one = r if n == 1 else one
            plateau = max(plateau, r)
            out["cross_node"].append({"gbit": gbit, "n": n, "model": m["rate"],
                                      "bound": m["bound"], "sim": r})
            rows.append(r / m["rate"])
            print(ratio_line([f"{gbit} Gb/s", str(n), f"{m['rate']:,.0f}", m["bound"],
                              f"{r:,.0f}", f"{r / m['rate']:.3f}"]), flush=True)
        mt = min(bw * B / nbytes, B / tc["t"])  # what the plateau is
        # the knee: where N preparers reach the plateau, whichever binds it
        mk = knee(p, tc, B, nbytes, bw) * mt / (bw * B / nbytes)
        what = 'link' if bw * B / nbytes < B / tc['t'] else 'trainer'
        if mk > ns[-1]:  # the sweep never reaches the plateau: no knee to compare
            out["knee"].append({"gbit": gbit, "model_knee": mk, "model_plateau": mt,
                                "sim_knee": None, "sim_plateau": None})
            print(f"   knee at {gbit} Gb/s: model N* = {mk:.1f} (plateau {mt:,.0f} img/s, "
                  f"{what}), beyond the sweep's {ns[-1]} preparers: not compared",
                  flush=True)
            continue
        sk = plateau / one
        out["knee"].append({"gbit": gbit, "model_knee": mk, "model_plateau": mt,
                            "sim_knee": sk, "sim_plateau": plateau})
        print(f"   knee at {gbit} Gb/s: model N* = {mk:.1f} (plateau {mt:,.0f} img/s, "
              f"{what}); simulator {sk:.1f} (plateau {plateau:,.0f}, one preparer "
              f"{one:,.0f}): {sk / mk:.3f}, plateau {plateau / mt:.3f}", flush=True)


def preparers_needed(a, p, tc, B, sim, out):
    print("\n3. preparers (nodes of 16) a trainer consuming D img/s needs")
    print(ratio_line(["D img/s", "link", "model preparers (nodes)",
                      "simulator: fewest with >= 98 % of D (nodes)", "sim / model",
                      "img/s with them / one fewer"]))
    print(ratio_line(["---"] * 6))
    for demand, gbit in ((7000, 10), (10000, 25), (24000, 100)):
        bw = gbit * GBIT
        need = nodes_needed(p, tc, B, demand, 1)
        step = max(0.0, 1000.0 * B / demand - tc["t"] * 1e3)
        seen = {}

        def ok(n):
            if n not in seen:
                seen[n] = sim.rate(remote_preparers=n, remote_local=0, link_bw=bw,
                                   step_ms=step)
            return seen[n] >= 0.98 * demand
        lo, hi = 0, 128  # ok(hi) assumed; ok(0) false
        if not ok(hi):
            # not monotonic: past the link's knee more preparers share the
            # link with the batch the trainer waits for; the first that is
            # enough, then bisect below it
            hi = None
            for n in (8, 16, 32, 64):
                if ok(n):
                    hi = n
                    break
                lo = n
        while hi and hi - lo > 1:
            mid = (lo + hi) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid
        out["nodes"].append({"demand": demand, "gbit": gbit, "model": need, "sim": hi,
                             "rate": seen.get(hi), "fewer": seen.get(lo)})
        print(ratio_line([f"{demand:,}", f"{gbit} Gb/s",
                          f"{need:.1f} ({math.ceil(need / 16)})",
                          f"{hi} ({math.ceil(hi / 16)})" if hi else
                          "none up to 128 (best %s img/s with %d)" % (
                              f"{max(seen.values()):,.0f}",
                              max(seen, key=seen.get)),
                          f"{hi / need:.3f}" if hi else "-",
                          f"{seen.get(hi, 0):,.0f} / " +
                          (f"{seen[lo]:,.0f}" if lo in seen else "-")]), flush=True)


def latency(a, p, tc, B, nbytes, sim, out):
    print("\n4. what the model leaves out: 16 preparers on 10 Gb/s, link latency")
    print(ratio_line(["latency ms", "chunk x depth", "model img/s", "simulator img/s",
                      "sim / model"]))
    print(ratio_line(["---"] * 5))
    bw = 10 * GBIT
    m = cross_node(p, tc, B, nbytes, 16, 16, 16, bw)
    for lat in (0.1, 10, 50, 200):
        for chunk, depth in ((a.chunk, a.depth), (1, 1), (1, 2)):
            r = sim.rate(remote_preparers=16, remote_local=0, link_bw=bw,
                         link_latency_ms=lat, remote_chunk=chunk, remote_depth=depth)
            out["latency"].append({"latency_ms": lat, "chunk": chunk, "depth": depth,
                                   "model": m["rate"], "sim": r})
            print(ratio_line([f"{lat:g}", f"{chunk} x {depth}", f"{m['rate']:,.0f}",
                              f"{r:,.0f}", f"{r / m['rate']:.3f}"]), flush=True)


def budget(a, nbytes, sim, out):
    """Sweep 5: 16 preparers on 10 Gb/s under byte budgets from none to
    below one chunk per preparer (sluice.ray's rule: window = min(count,
    max(budget / batch bytes, preparers x chunk)))."""
    n = 16
    count = n * a.depth * a.chunk
    print(f"\n5. the byte budget: {n} preparers on 10 Gb/s, chunk {a.chunk} x depth "
          f"{a.depth} (count window {count} batches of {nbytes / 1e6:.2f} MB)")
    print(ratio_line(["object_store_bytes", "window", "budget held (hand-outs)",
                      "in flight (batches)", "+ in store (trainer's chunk)",
                      "simulator img/s", "/ none"]))
    print(ratio_line(["---"] * 7))
    none = None
    # none, the count's bytes (not narrowed), 3/4 of the count (between
    # it and the floor at depth 2), one chunk per preparer (the floor),
    # 1 byte (below the floor: the floor)
    for nb in (0, count, count * 3 // 4, n * a.chunk, None):
        b = 1 if nb is None else nb * nbytes
        r = sim.run(remote_preparers=n, remote_local=0, link_bw=10 * GBIT,
                    object_store_bytes=b)
        none = r["rate"] if nb == 0 else none
        out["budget"].append({"object_store_bytes": b, "preparers": n, **r})
        label = "none" if nb == 0 else "1 B" if nb is None else \
            f"{b / 1e9:.2f} GB ({nb:g} batches)"
        print(ratio_line([label, f"{r['window']:g}",
                          f"{100 * r['budget_held_share']:.1f} %",
                          f"{r['in_flight']:.1f}", f"{r['chunk_held']:.1f}",
                          f"{r['rate']:,.0f}",
                          f"{r['rate'] / none:.3f}" if none else "-"]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
