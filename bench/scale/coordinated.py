"""Coordinated prep: J jobs (separate processes) consuming the same stream.

Configurations, alternating in each round, one Ray cluster on this machine
(ray.init(address="local")), --epochs E (1) epochs of `--data` per job per
round, timed together:

    lone       1 job,  sluice.ray.DataLoader(share=...), A actors x 1 thread
    shared     J jobs, the same group (each batch prepared once)
    indep      J jobs, each its own sluice.torch.DataLoader (1 decode thread)

Per configuration: each job's img/s over its epoch (jobs start together
after all attached), and CPU seconds per delivered batch: the jobs' own CPU
during their epoch (getrusage) plus every other process of the Ray session
(raylet, GCS, the group, its preparers: /proc, from the start until the
session is idle after the epochs), over the batches all jobs took
("prorated": the preparers' CPU times these epochs' batches / all they
were handed, which include up to a window of the next epoch's, all
prepared by then: exact); the jobs' digest
hashing (their main thread's CPU time around it) is left out. Every job's
digest (every 97th byte of the images and the labels; --full-digest: all)
is checked against the other configurations' for the same epoch. Targets (issue 16): shared
CPU per batch >= 3x lower than indep; each shared job's rate >= 90 % of
lone's.

    PYTHONPATH=build/python .venv/bin/python bench/scale/coordinated.py \\
        --data ../shared/data/imagenet-sample --rounds 3 --jobs 4
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from stats import median  # noqa: E402
from session_cpu import by_name as cpu_by_name, cpu_self, session_cpu, settle  # noqa: E402


def job(spec):
    """One job process: attach / build, wait for go, one epoch, report."""
    import sluice.torch
    if spec["kind"] == "indep":
        dl = sluice.torch.DataLoader(source=spec["data"], batch_size=spec["batch"],
                                     image_size=spec["size"], seed=0, num_workers=1)
    else:
        import ray
        import sluice.ray
        ray.init(address=spec["address"], log_to_driver=False)
        dl = sluice.ray.DataLoader(spec["data"], spec["batch"], spec["size"], seed=0,
                                   num_actors=spec["actors"],
                                   actor_options={"num_cpus": 0.01},
                                   share=spec["share"],
                                   **({"chunk": spec["chunk"]} if spec["chunk"] else {}))
    epochs = range(spec["epoch"], spec["epoch"] + spec["epochs"])
    dl.set_epoch(epochs[0])
    open(spec["ready"], "w").close()
    while not os.path.exists(spec["go"]):
        time.sleep(0.01)
    h, n, b, hs = hashlib.sha1(), 0, 0, 0.0
    c0, t0 = cpu_self(), time.perf_counter()
    for e in epochs:
        dl.set_epoch(e)
        for x, y in dl:
            t = time.thread_time()
            # Every 97th byte (the full batch when --full-digest): the
            # stream check must not be the consumer's main work.
            h.update(x.numpy().reshape(-1)[::spec["stride"]].tobytes())
            h.update(y.numpy().tobytes())
            hs += time.thread_time() - t
            n += len(y)
            b += 1
    dt, cpu = time.perf_counter() - t0, cpu_self() - c0 - hs
    out = {"img_s": n / dt, "batches": b, "cpu_s": cpu, "digest": h.hexdigest(),
           "pid": os.getpid()}
    if spec["kind"] == "shared":
        g = dl.group_stats()
        out["prepared"] = sum(g["prepared_per_epoch"].get(e) or 0 for e in epochs)
    with open(spec["out"], "w") as f:
        json.dump(out, f)
    while not os.path.exists(spec["finish"]):  # the group lives until measured
        time.sleep(0.01)
    if spec["kind"] == "shared":  # handed, all prepared now (idle)
        with open(spec["out"] + ".end", "w") as f:
            json.dump({"handed": dl.group_stats()["prepared"]}, f)
    if hasattr(dl, "close"):
        dl.close()


def run(kind, njobs, a, address, epoch, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    share = f"bench-{kind}-{epoch}-{time.time_ns()}"
    specs = [dict(kind=kind, data=a.data, batch=a.batch_size, size=a.image_size,
                  actors=a.actors, chunk=a.chunk, share=share, address=address,
                  epoch=epoch * a.epochs, epochs=a.epochs,
                  stride=1 if a.full_digest else 97, ready=f"{d}/{i}.ready", go=f"{d}/go", out=f"{d}/{i}.json",
                  finish=f"{d}/finish") for i in range(njobs)]
    procs = [subprocess.Popen([sys.executable, __file__, "--job", json.dumps(s)])
             for s in specs]
    try:
        while not all(os.path.exists(s["ready"]) for s in specs):
            if any(p.poll() is not None for p in procs):
                sys.exit(f"{kind}: a job ended early")
            time.sleep(0.05)
        jobs = {p.pid for p in procs}
        c0 = session_cpu(jobs)
        open(specs[0]["go"], "w").close()
        while not all(os.path.exists(s["out"]) for s in specs):
            if any(p.poll() not in (None, 0) for p in procs):
                sys.exit(f"{kind}: a job failed")
            time.sleep(0.05)
        # The group prepares ahead up to a window of the next epoch's
        # batches: measured once it is done (idle), prorated below.
        settle()
        c1 = session_cpu(jobs)
        outs = [json.load(open(s["out"])) for s in specs]
    finally:
        open(specs[0]["finish"], "w").close()
        for p in procs:
            p.wait(timeout=120)
    if kind == "shared":
        outs[0]["handed"] = json.load(open(specs[0]["out"] + ".end"))["handed"]
    by_name = cpu_by_name(c0, c1)
    other = sum(by_name.values())
    batches = sum(o["batches"] for o in outs)
    cpu = sum(o["cpu_s"] for o in outs) + other
    # The group also prepared up to a window of the next epoch's batches
    # (work a longer run would use): preparer CPU prorated to these
    # epochs' (every batch handed was prepared by c1: settled).
    handed = outs[0].get("handed") or 0
    prep = sum(v for k, v in by_name.items() if "Prep" in k)
    cpu_pro = cpu - prep * (1 - outs[0]["prepared"] / handed) if handed else cpu
    return {"rates": [o["img_s"] for o in outs], "digests": [o["digest"] for o in outs],
            "cpu_per_batch": cpu / batches, "cpu_per_batch_prorated": cpu_pro / batches,
            "handed": handed, "cpu_jobs": sum(o["cpu_s"] for o in outs),
            "cpu_other": other, "batches": batches,
            "cpu_other_by_process": {k: round(v, 2) for k, v in by_name.items() if v >= 0.05},
            "prepared": outs[0].get("prepared")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=None,
                    help="batches per preparer task (default: sluice.ray's)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs per job per round, timed together (the next epoch's "
                         "batches a group prepares ahead weigh 1/E as much)")
    ap.add_argument("--configs", default="lone,shared,indep")
    ap.add_argument("--full-digest", action="store_true")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--job", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.job:
        return job(json.loads(a.job))

    import ray
    import sluice
    pkg = os.path.dirname(os.path.dirname(sluice.__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (pkg, os.environ.get("PYTHONPATH")) if p)
    ctx = ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False,
                   log_to_driver=False)
    address = ctx.address_info["gcs_address"]
    # the jobs' specs, flags and results: removed at the end, also on an
    # error (mkdtemp left one in /tmp per run)
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-coord-") as tmp:
            rounds(a, address, tmp)
    finally:
        ray.shutdown()


def rounds(a, address, tmp):
    """a.rounds of each config, checked (same digests) and summarized."""
    res = {c: [] for c in a.configs.split(",")}
    refs = {}
    for r in range(a.rounds):
        for c in res:
            out = run("shared" if c == "lone" else c, 1 if c == "lone" else a.jobs,
                      a, address, r, tmp)
            ref = refs.setdefault(r, out["digests"][0])
            if any(d != ref for d in out["digests"]):
                sys.exit(f"{c}: round {r} digests differ")
            res[c].append(out)
            print(f"round {r} {c}: img/s per job {[round(x, 1) for x in out['rates']]}, "
                  f"CPU {out['cpu_per_batch']:.3f} s/batch, prorated "
                  f"{out['cpu_per_batch_prorated']:.3f} (jobs {out['cpu_jobs']:.1f} s, "
                  f"other {out['cpu_other']:.1f} s, {out['batches']} batches"
                  f"{', prepared ' + str(out['prepared']) if out['prepared'] else ''}"
                  f"{' of ' + str(out['handed']) + ' handed' if out['handed'] else ''}; "
                  f"other by process {out['cpu_other_by_process']}), "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    summ = {c: {"median_job_img_s": median([median(o["rates"]) for o in v]),
                "median_cpu_per_batch": median([o["cpu_per_batch"] for o in v]),
                "median_cpu_per_batch_prorated": median(
                    [o["cpu_per_batch_prorated"] for o in v]),
                "runs": v} for c, v in res.items()}
    for c, v in summ.items():
        print(f"{c:7s} median job img/s {v['median_job_img_s']:.1f}  "
              f"CPU s/batch {v['median_cpu_per_batch']:.3f} "
              f"(prorated {v['median_cpu_per_batch_prorated']:.3f})")
    if "lone" in summ and "shared" in summ:
        print(f"shared job rate / lone: "
              f"{summ['shared']['median_job_img_s'] / summ['lone']['median_job_img_s']:.2f}")
    if "indep" in summ and "shared" in summ:
        i, s_ = summ["indep"], summ["shared"]
        print(f"CPU per batch indep / shared: "
              f"{i['median_cpu_per_batch'] / s_['median_cpu_per_batch']:.2f} "
              f"(prorated {i['median_cpu_per_batch_prorated'] / s_['median_cpu_per_batch_prorated']:.2f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summ, f, indent=1)


if __name__ == "__main__":
    main()
