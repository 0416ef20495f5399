#!/usr/bin/env python3
"""Cost of going through Python: sluice.Loader against `sluice bench`.

1. Throughput: the same configuration streamed by the CLI (`sluice bench
   --json`) and by sluice.Loader from Python (arrays made per batch, nothing
   else done with them), alternating, ROUNDS rounds; medians and the ratio
   (target >= 95 %).
2. Per-batch overhead: the time of next() when the batch is already
   complete (a deep prefetch filled while the consumer slept), i.e. what
   the binding adds: the C call, two numpy views, the tuple, and releasing
   the previous batch (target <= 50 us).

    PYTHONPATH=build/python .venv/bin/python bench/python_overhead.py \
        [--data DIR] [--batch 64] [--size 224] [--threads 2] [--epochs 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
import sluice  # noqa: E402


def cli_rate(cli, a):
    out = subprocess.run(
        [cli, "bench", a.data, "--batch", str(a.batch), "--size",
         str(a.size), "--threads", str(a.threads), "--epochs",
         str(a.epochs), "--seed", "1", "--json", "--quiet"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_s"]


def py_rate(a):
    ld = sluice.Loader(a.data, a.batch, a.size, threads=a.threads,
                       epochs=a.epochs, seed=1)
    n = 0
    t0 = time.perf_counter()  # as the CLI: from start to the last batch
    ld.start()
    for _, y in ld:
        n += len(y)
    secs = time.perf_counter() - t0
    ld.close()
    return n / secs


def next_overhead(a):
    """Seconds per next() on batches that are ready."""
    depth = 16
    ld = sluice.Loader(a.data, a.batch, a.size, threads=a.threads,
                       prefetch=depth, epochs=1000, seed=1,
                       telemetry_ms=0)
    it = iter(ld)
    times = []
    for _ in range(a.overhead_rounds):
        time.sleep(depth * a.batch / 500 + 0.5)  # let the pool fill
        batch = next(it)
        for _ in range(depth - 3):  # stay clear of the pool's end
            t0 = time.perf_counter_ns()
            batch = next(it)  # includes releasing the previous batch
            times.append(time.perf_counter_ns() - t0)
            assert 0 < batch[0].shape[0] <= a.batch
        del batch
    ld.close()
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = os.path.join(ROOT, "..", "shared", "data", "imagenet-sample")
    p.add_argument("--data", default=default)
    p.add_argument("--cli", default=os.path.join(ROOT, "build", "sluice"))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--overhead-rounds", type=int, default=5)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    cli, py = [], []
    for r in range(a.rounds):  # alternate, so drift hits both alike
        cli.append(cli_rate(a.cli, a))
        py.append(py_rate(a))
        print(f"round {r}: cli {cli[-1]:.0f} img/s, python {py[-1]:.0f} "
              "img/s", file=sys.stderr)
    t = next_overhead(a)
    res = {
        "cli_samples_per_s": statistics.median(cli),
        "python_samples_per_s": statistics.median(py),
        "ratio": statistics.median(py) / statistics.median(cli),
        "next_us_p50": statistics.median(t) / 1e3,
        "next_us_p90": sorted(t)[int(len(t) * 0.9)] / 1e3,
        "next_calls": len(t),
        "batch": a.batch, "size": a.size, "threads": a.threads,
        "epochs": a.epochs, "rounds": a.rounds,
    }
    if not a.json:
        print(f"throughput: cli {res['cli_samples_per_s']:.0f} img/s, "
              f"python {res['python_samples_per_s']:.0f} img/s, "
              f"ratio {100 * res['ratio']:.1f} % (target >= 95 %)")
        print(f"next() on a ready batch: p50 {res['next_us_p50']:.1f} us, "
              f"p90 {res['next_us_p90']:.1f} us over {len(t)} calls "
              "(target <= 50 us)")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
