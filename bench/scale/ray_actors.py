"""sluice.ray against the in-process loader, same total decode threads.

Configurations, each 1 + E epochs of `--data` per round, rounds alternating
(median img/s over the rounds), one Ray cluster on this machine
(ray.init(address="local")), actors started before timing:

    local-T    sluice.torch.DataLoader, T decode threads (in-process)
    ray-AxT    sluice.ray.DataLoader, A actors of T decode threads each
               (ray-AxTcCdD: chunk C batches per task, depth D tasks queued)

Every epoch's digest is checked against the local loader's (the stream is
the same whatever the actors). The trainer does nothing but take batches
(a consumer-free ceiling; the trainer's own process is one more user of
the cores). CPU seconds per batch: the trainer process's (its decode
threads for local-T) less its digest hashing, plus every process of the
Ray session (actors, raylet, GCS: /proc) over the timed epochs, which
start once every loader is idle. Each round times E epochs after an untimed one: it
starts on the first batches its loader prepared ahead in the untimed
epoch and ends preparing as many of the next (up to a window, actors x
depth x chunk batches), as every epoch of a long run does; rounds are an
epoch apart, so none starts on work handed out in the last round. CPU is
less noisy than img/s on a shared machine.

    PYTHONPATH=build/python .venv/bin/python bench/scale/ray_actors.py \\
        --data ../shared/data/imagenet-sample --rounds 3
"""
import argparse
import hashlib
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from stats import median  # noqa: E402
from session_cpu import by_name, cpu_self, session_cpu, settle  # noqa: E402


def epoch(loader):
    """(img/s, digest, CPU s per batch, {process name: CPU s})."""
    h, n, b, hs = hashlib.sha1(), 0, 0, 0.0
    s0, c0, t0 = session_cpu(), cpu_self(), time.perf_counter()
    for x, y in loader:
        t = time.thread_time()
        h.update(x.numpy().tobytes())
        h.update(y.numpy().tobytes())
        hs += time.thread_time() - t
        n += len(y)
        b += 1
    dt = time.perf_counter() - t0
    mine, other = cpu_self() - c0 - hs, by_name(s0, session_cpu())
    return (n / dt, h.hexdigest(), (mine + sum(other.values())) / b,
            dict(trainer=mine, **other), (n, b, dt))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1,
                    help="timed epochs per configuration per round, after an "
                         "untimed one (the next epoch's window, prepared at the "
                         "end and not consumed, weighs 1/E as much)")
    ap.add_argument("--configs", default="local-1,ray-1x1,local-2,ray-2x1")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()

    import ray
    import sluice.ray
    import sluice.torch
    pkg = os.path.dirname(os.path.dirname(sluice.__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (pkg, os.environ.get("PYTHONPATH")) if p)
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False,
             log_to_driver=False)
    common = dict(batch_size=a.batch_size, image_size=a.image_size, seed=0)
    loaders = {}
    for c in a.configs.split(","):
        kind, spec = c.split("-")
        if kind == "local":
            loaders[c] = sluice.torch.DataLoader(source=a.data, num_workers=int(spec),
                                                 **common)
        else:  # ray-AxT, optionally cC (batches per task) and dD (tasks queued)
            m = re.fullmatch(r"(\d+)x(\d+)(?:c(\d+))?(?:d(\d+))?", spec)
            if not m:
                sys.exit(f"{c}: not ray-AxT[cC][dD]")
            n, t = int(m[1]), int(m[2])
            kw = {k: int(v) for k, v in (("chunk", m[3]), ("depth", m[4])) if v}
            loaders[c] = sluice.ray.DataLoader(
                a.data, actor_threads=t, num_actors=n,
                actor_options={"num_cpus": 0.01}, **kw, **common)
    refs = {}  # round -> the first configuration's digest
    rates = {c: [] for c in loaders}
    cpus = {c: [] for c in loaders}
    for r in range(a.rounds):
        for c, L in loaders.items():
            settle()
            n = b = dt = cpu_s = 0.0
            procs = {}
            # Steady state: one untimed epoch, then E timed ones. The
            # timed ones start on the work handed out ahead in the
            # untimed one (up to a window, actors x depth x chunk batches)
            # and end handing out as much for the next: what a long run
            # does at every epoch. An epoch gap between rounds: no round
            # starts on work handed out in the last one (done meanwhile,
            # while other configurations ran, or settled).
            for k in range(-1, a.epochs):
                e = r * (a.epochs + 2) + 1 + k
                L.set_epoch(e)
                rate_k, d, cpu_k, procs_k, (n_k, b_k, dt_k) = epoch(L)
                if refs.setdefault(e, d) != d:
                    sys.exit(f"{c}: epoch {e} digest {d} != {refs[e]}")
                if k < 0:
                    continue
                n, b, dt, cpu_s = n + n_k, b + b_k, dt + dt_k, cpu_s + cpu_k * b_k
                for p_, v in procs_k.items():
                    procs[p_] = procs.get(p_, 0.0) + v
            rate, cpu = n / dt, cpu_s / b
            rates[c].append(rate)
            cpus[c].append(cpu)
            procs = {k: round(v, 2) for k, v in procs.items() if v >= 0.05}
            print(f"round {r} {c}: {rate:.1f} img/s, CPU {cpu:.4f} s/batch "
                  f"(by process {procs}), load {os.getloadavg()[0]:.1f}", flush=True)
    out = {c: {"median_img_s": median(v), "runs": v,
               "median_cpu_per_batch": median(cpus[c]), "cpu_runs": cpus[c]}
           for c, v in rates.items()}
    for c, v in out.items():
        print(f"{c:10s} median {v['median_img_s']:.1f} img/s, "
              f"CPU {v['median_cpu_per_batch']:.4f} s/batch")
    for c in out:
        if c.startswith("ray-"):
            m = re.match(r"(\d+)x(\d+)", c[4:])
            base = f"local-{int(m[1]) * int(m[2])}"
            if base in out:
                # Rounds alternate the configurations: each round's ratio
                # pairs runs made under the same load.
                paired = [x / y for x, y in zip(rates[c], rates[base])]
                out[c]["paired_ratios"] = paired
                print(f"{c} / {base}: {out[c]['median_img_s'] / out[base]['median_img_s']:.2f} "
                      f"img/s (median of the rounds' ratios {median(paired):.2f}: "
                      f"{', '.join(f'{x:.2f}' for x in paired)}), CPU per batch "
                      f"{out[c]['median_cpu_per_batch'] / out[base]['median_cpu_per_batch']:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    for L in loaders.values():
        L.close()
    ray.shutdown()


if __name__ == "__main__":
    main()
