#!/usr/bin/env python3
"""The sample cache (issue 15 item 4) on the ImageNet sample over emulated
remote storage (10 ms a read, 100 MB/s), 3 epochs, batches of 64:

  none          no cache
  minio-50      MinIO, 50 % of the encoded dataset's bytes
  lru-50        LRU, the same size
  minio-100     MinIO holding the whole encoded set
  decoded-100   the decoded tier holding the whole set (implies --no-dct)
  minio-25+disk-25  MinIO, 25 % in memory and 25 % in the disk tier
                (--cache-dir: a directory of the bench's own under
                --cache-dir, default the system's temp directory)
  disk-100      no memory tier, the disk tier holding the whole set

and, in the same rounds, the 2-core decode ceiling (bench/decode_ceiling:
2 x libjpeg-turbo's full-size decode rate on one core, files in memory).
Configurations alternate within each round; medians over the rounds.

Per configuration: the share of the dataset fetched from storage per epoch
in epochs 2-3 (epoch 1 reads every sample once: (bytes read - dataset) / 2
/ dataset), the hit rate, img/s over the whole run and over epochs 2-3
(from the telemetry file: samples and time after the snapshot where epoch
1's last sample was handed out), and for decoded-100 its epochs-2-3 rate
over the ceiling.

With --codecs instead: the decoded tier under a budget (--codec-budget,
400M) that holds the decoded set (~605 MB raw) only when compressed, each
cache codec fixed (none, lz4, zstd-1, zstd-19) against the run-time choice
(auto): img/s over 3 epochs and over epochs 2-3, the hit rate and the
codec auto ended with.

    bench/storage/cache.py [--sluice build/sluice] [--rounds 3] [--data DIR]
                           [--codecs [--codec-budget 400M]] [--only A,B]
                           [--cache-dir DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def dataset_bytes(d):
    n, total = 0, 0
    for dirpath, _, files in os.walk(d):
        for f in files:
            total += os.path.getsize(os.path.join(dirpath, f))
            n += 1
    return n, total


def run(sluice, data, extra, tele):
    cmd = [sluice, "run", data, "--epochs", "3", "--batch", "64",
           "--read-latency-ms", "10", "--read-bw", "100M", "--json",
           "--quiet", "--telemetry", tele] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), cmd


def later_epochs_rate(tele, n):
    """img/s after epoch 1's last sample was handed out."""
    snaps = [json.loads(line) for line in open(tele) if line.strip()]
    first = next((s for s in snaps if s.get("samples_total", 0) >= n), None)
    last = snaps[-1] if snaps else None
    if not first or not last or last["t"] <= first["t"]:
        return float("nan")
    return (last["samples_total"] - first["samples_total"]) / (
        last["t"] - first["t"])


def ceiling(data):
    exe = os.path.join(ROOT, "build", "bench", "decode_ceiling")
    out = subprocess.run([exe, data, "--passes", "3", "--json"], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])[
        "ceiling_2cores_img_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=os.path.join(ROOT, "build", "sluice"))
    ap.add_argument("--rounds", type=int, default=3)
    default_data = os.path.join(
        os.environ.get("SL_SHARED_DATA", os.path.join(ROOT, "..", "shared",
                                                      "data")),
        "imagenet-sample")
    ap.add_argument("--data", default=default_data)
    ap.add_argument("--codecs", action="store_true")
    ap.add_argument("--codec-budget", default="400M")
    ap.add_argument("--only", default="",
                    help="comma-separated configurations to run (all)")
    ap.add_argument("--cache-dir", default=tempfile.gettempdir(),
                    help="where the disk tier configurations keep it")
    a = ap.parse_args()
    if not os.path.isdir(a.data):
        print(f"skip: {a.data} not found (the ImageNet sample)")
        return 0
    n, size = dataset_bytes(a.data)
    # 100 %: every entry (plus its 64-byte header and the 8-byte index
    # slot) with room to spare; decoded: the full-size RGB images of the
    # sample are ~605 MB.
    configs = {
        "none": [],
        "minio-50": ["--cache", str(size // 2)],
        "lru-50": ["--cache", str(size // 2), "--cache-policy", "lru"],
        "minio-100": ["--cache", str(size + n * 80 + (1 << 20))],
        "decoded-100": ["--cache", "800M", "--cache-decoded"],
        "minio-25+disk-25": ["--cache", str(size // 4), "--cache-dir",
                             a.cache_dir, "--cache-disk", str(size // 4)],
        "disk-100": ["--cache-dir", a.cache_dir, "--cache-disk",
                     str(size + (1 << 20))],
    }
    if a.codecs:
        configs = {c: ["--cache", a.codec_budget, "--cache-decoded",
                       "--cache-codec", c]
                   for c in ("none", "lz4", "zstd-1", "zstd-19", "auto")}
    if a.only:
        configs = {k: v for k, v in configs.items()
                   if k in a.only.split(",")}
    rows = {k: [] for k in configs}
    ceil = []
    with tempfile.TemporaryDirectory() as tmp:
        tele = os.path.join(tmp, "t.jsonl")
        for r in range(a.rounds):
            ceil.append(ceiling(a.data))
            print(f"round {r + 1}: decode ceiling {ceil[-1]:.0f} img/s",
                  file=sys.stderr)
            for name, extra in configs.items():
                res, cmd = run(a.sluice, a.data, extra, tele)
                later = later_epochs_rate(tele, n)
                fetched = (res["bytes_read"] - size) / 2 / size
                c = res.get("cache", {})
                # Both tiers: memory hits and disk hits over the lookups.
                looked = c.get("hits", 0) + c.get("misses", 0)
                hits = c.get("hits", 0) + c.get("disk", {}).get("hits", 0)
                c["hit_rate"] = hits / looked if looked else 0.0
                rows[name].append({"img_s": res["samples_per_s"],
                                   "later_img_s": later,
                                   "fetched": fetched,
                                   "hit_rate": c.get("hit_rate", 0.0),
                                   "codec": c.get("codec", ""),
                                   "held_mb": c.get("bytes", 0) / 1e6,
                                   "raw_mb": c.get("raw_bytes", 0) / 1e6,
                                   "cmd": " ".join(cmd)})
                print(f"round {r + 1} {name}: {res['samples_per_s']:.0f} img/s"
                      f" (epochs 2-3 {later:.0f}), fetched/epoch "
                      f"{100 * fetched:.1f} %, hit rate "
                      f"{100 * c.get('hit_rate', 0):.1f} %, codec "
                      f"{c.get('codec', '-')}, held {c.get('bytes', 0) / 1e6:.0f}"
                      f" MB for {c.get('raw_bytes', 0) / 1e6:.0f} MB raw",
                      file=sys.stderr)
    med = statistics.median
    mc = med(ceil)
    print(f"dataset: {n} files, {size / 1e6:.1f} MB; decode ceiling "
          f"(2 cores) median {mc:.0f} img/s over {a.rounds} rounds; load "
          f"{open('/proc/loadavg').read().split()[0:3]}")
    print("| config | fetched / epoch (epochs 2-3) | hit rate (3 epochs) | "
          "img/s (3 epochs) | img/s (epochs 2-3) | epochs 2-3 / ceiling | "
          "codec at the end | held / raw MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, rs in rows.items():
        later = med(r["later_img_s"] for r in rs)
        print(f"| {name} | {100 * med(r['fetched'] for r in rs):.1f} % | "
              f"{100 * med(r['hit_rate'] for r in rs):.1f} % | "
              f"{med(r['img_s'] for r in rs):.0f} | {later:.0f} | "
              f"{later / mc:.2f}x | {rs[-1]['codec'] or '-'} | "
              f"{rs[-1]['held_mb']:.0f} / {rs[-1]['raw_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
