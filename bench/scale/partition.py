"""The partitioned cache (sluice.ray partition=True) against each actor
caching what it reads (partition="local") and no cache, on emulated slow
storage (each actor's reads: --latency-us per read, --bandwidth bytes/s:
sluice/testing.h), with a dataset bigger than one actor's cache budget
but smaller than the actors' sum (--cache-frac of the dataset's bytes per
actor).

Configurations, alternating in each round, one Ray cluster on this machine
(ray.init(address="local")), A actors x 1 decode thread, --epochs epochs:

    partitioned  each actor caches its part (sample index mod A) and
                 serves it; a preparer asks the owner before storage
    local        each actor caches the samples it reads (cache_bytes
                 each, MinIO), nothing shared
    nocache      no cache: every sample read from storage every epoch

Per configuration and epoch: the fraction of the epoch's samples read from
storage (cache_stats()["by_epoch"], by the epoch of the batch that needed
the sample), and the epoch's img/s at the trainer (medians over rounds);
the stream's digest (every 97th byte of the images and the labels) is
checked to be the same in every configuration.

    PYTHONPATH=build/python .venv/bin/python bench/scale/partition.py \\
        --data ../shared/data/imagenet-sample --rounds 2
"""
import argparse
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from stats import median  # noqa: E402


def dataset_bytes(path):
    return sum(os.path.getsize(os.path.join(r, f))
               for r, _, fs in os.walk(path) for f in fs)


def run(cfg, a, budget):
    import sluice.ray
    kw = {}
    if cfg != "nocache":
        kw = dict(cache_bytes=budget, cache_codec="none")
    if cfg in ("partitioned", "local"):
        kw["partition"] = True if cfg == "partitioned" else "local"
    dl = sluice.ray.DataLoader(a.data, a.batch_size, a.image_size, seed=0,
                               num_actors=a.actors, actor_options={"num_cpus": 0.5},
                               chunk=a.chunk, tensors=False,
                               storage=(a.latency_us, int(a.bandwidth)), **kw)
    rates, digs = [], []
    try:
        n = dl.num_samples
        for e in range(a.epochs):
            h = hashlib.sha1()
            t0 = time.perf_counter()
            k = 0
            for x, y in dl:
                h.update(x.reshape(-1)[::97].tobytes())
                h.update(y.tobytes())
                k += len(y)
            rates.append(k / (time.perf_counter() - t0))
            digs.append(h.hexdigest())
        st = dl.cache_stats()
        by = st["by_epoch"]
        reads = [by.get(e, {}).get("storage_reads", 0) / n for e in range(a.epochs)]
        remote = [by.get(e, {}).get("remote_hits", 0) / n for e in range(a.epochs)]
        return {"rates": rates, "reads": reads, "remote_hits": remote,
                "digests": digs, "entries": st["entries"]}
    finally:
        dl.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=112)
    ap.add_argument("--chunk", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache-frac", type=float, default=0.6,
                    help="each actor's cache, a fraction of the dataset's bytes")
    ap.add_argument("--latency-us", type=int, default=2000)
    ap.add_argument("--bandwidth", type=float, default=20e6,
                    help="bytes/s of each actor's storage reads")
    ap.add_argument("--configs", default="partitioned,local,nocache")
    ap.add_argument("--json")
    a = ap.parse_args()
    import ray
    ray.init(address="local", num_cpus=2, include_dashboard=False,
             log_to_driver=False, _node_ip_address="127.0.0.1")
    size = dataset_bytes(a.data)
    budget = int(a.cache_frac * size)
    print(f"dataset {size / 1e6:.1f} MB, cache {budget / 1e6:.1f} MB per actor x "
          f"{a.actors} actors; storage {a.latency_us} us + {a.bandwidth / 1e6:.0f} MB/s "
          f"per actor", flush=True)
    configs = a.configs.split(",")
    res = {c: [] for c in configs}
    for r in range(a.rounds):
        for c in configs:
            out = run(c, a, budget)
            res[c].append(out)
            print(f"round {r} {c:12s} reads/epoch "
                  + " ".join(f"{x:.2f}" for x in out["reads"])
                  + "  img/s " + " ".join(f"{x:.0f}" for x in out["rates"]), flush=True)
    ref = res[configs[0]][0]["digests"]
    same = all(o["digests"] == ref for c in configs for o in res[c])
    print(f"digests equal in every configuration and round: {same}")
    summary = {}
    print(f"{'config':12s} " + " ".join(f"reads e{e}  img/s e{e}" for e in range(a.epochs)))
    for c in configs:
        reads = [median([o["reads"][e] for o in res[c]]) for e in range(a.epochs)]
        rates = [median([o["rates"][e] for o in res[c]]) for e in range(a.epochs)]
        remote = [median([o["remote_hits"][e] for o in res[c]]) for e in range(a.epochs)]
        summary[c] = {"reads": reads, "rates": rates, "remote_hits": remote}
        print(f"{c:12s} " + " ".join(f"{x:8.2f} {y:9.0f}" for x, y in zip(reads, rates)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "summary": summary, "runs": res,
                       "digests_equal": same}, f, indent=1)
    ray.shutdown()
    if not same:
        sys.exit("digests differ between configurations")


if __name__ == "__main__":
    main()
