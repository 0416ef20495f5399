#!/usr/bin/env python3
"""Coalesced reads over an emulated link (issue 15 item 3): requests per
epoch and img/s with coalescing on (--coalesce 1M, the default) and off,
the same WebDataset tars at the same URLs.

    bench/storage/coalesce.py [--data ../shared/data/imagenet-sample]
        [--sluice-build build] [--bw-mbs 100] [--rtt-ms 10] [--repeats 3]
        [--orders stored,wds1000,perm] [--depths auto,8] [--size 224]
        [--shard-size 16M] [--json-out F]

The ImageFolder is packed into WebDataset tars with their sidecar
indexes; nginx serves them in a network namespace whose loopback is the
link (bench/storage/remote.py's link_up: tc tbf at --bw-mbs MB/s, nginx's
echo module holding each request --rtt-ms). Each run is `sluice run URL
--epochs 1` in the namespace; within a repeat, for each order (stored:
--no-shuffle; wdsN: --shuffle-buffer N; perm: the global permutation) and
each io_depth (auto: the heuristic's; N fixed), coalescing off and on run
back to back, which first alternating between repeats. Per cell: the
median img/s, sluice's requests for the epoch's samples, and the range
GETs nginx logged (sidecars and HEADs not counted). The load average
before and after is printed: on a shared machine the img/s are only
comparable within a repeat.
Needs root, nginx and its echo module (exits 2 naming what is missing).
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
sys.path.insert(0, HERE)
import remote  # noqa: E402  (link_up / link_down, need, sh, tar_pattern)


def gets(log, since):
    with open(log) as f:
        lines = f.readlines()[since:]
    n = sum(1 for ln in lines if ln.startswith("GET ") and " 206 " in ln and ".slidx" not in ln)
    return n, since + len(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "imagenet-sample"))
    ap.add_argument("--sluice-build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--bw-mbs", type=float, default=100)
    ap.add_argument("--rtt-ms", type=float, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--orders", default="stored,wds1000,perm")
    ap.add_argument("--depths", default="auto,8")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--shard-size", default="16M")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    remote.need(os.geteuid() == 0, "needs root (a network namespace and tc)")
    remote.need(os.path.exists(remote.ECHO), f"{remote.ECHO} missing")
    remote.need(os.path.isdir(a.data), f"no ImageFolder at {a.data}")
    S = os.path.join(a.sluice_build, "sluice")
    tmp = tempfile.mkdtemp(prefix="sl-coalesce-")
    ns = f"slcoal{os.getpid()}"
    www = os.path.join(tmp, "www")
    res = {}
    # tmp (the tars, nginx's files) is removed by remote.link_down at the
    # end, also on an error (SL_KEEP=1 keeps it)
    try:
        os.makedirs(os.path.join(www, "wds"))
        remote.sh(S, "pack", a.data, os.path.join(www, "wds"), "--format", "webdataset",
                  "--shard-size", a.shard_size, stdout=subprocess.DEVNULL)
        tars, pat = remote.tar_pattern(os.path.join(www, "wds"))
        size = sum(os.path.getsize(os.path.join(www, "wds", t)) for t in tars)
        remote.link_up(ns, tmp, www, a)
        url = "http://127.0.0.1:8080/wds/" + pat
        log = os.path.join(tmp, "access.log")
        load0 = os.getloadavg()
        print(f"[coalesce] {len(tars)} tars, {size / 1e6:.1f} MB; link {a.bw_mbs:g} MB/s, "
              f"{a.rtt_ms:g} ms a request; load {load0[0]:.2f}", file=sys.stderr, flush=True)
        at = 0
        for r in range(a.repeats):
            for order in a.orders.split(","):
                oarg = (["--no-shuffle"] if order == "stored" else
                        ["--shuffle-buffer", order[3:]] if order.startswith("wds") else [])
                for depth in a.depths.split(","):
                    darg = [] if depth == "auto" else ["--io-depth", depth]
                    cs = ["off", "1M"] if r % 2 == 0 else ["1M", "off"]
                    for c in cs:
                        _, at = gets(log, at)
                        out = subprocess.run(
                            ["ip", "netns", "exec", ns, S, "run", url,
                             "--epochs", "1", "--batch", "64", "--size", str(a.size), "--seed", "1",
                             "--json", "--quiet", "--coalesce", c] + oarg + darg,
                            capture_output=True, text=True, timeout=600)
                        j = json.loads(out.stdout.strip().splitlines()[-1])
                        n, at = gets(log, at)
                        cell = res.setdefault(f"{order} depth={depth} coalesce={c}", [])
                        cell.append({"img_s": j["samples_per_s"], "requests": j["requests"]["count"],
                                     "records": j["requests"]["records"], "nginx_gets": n,
                                     "io_depth_end": j.get("io_depth"),
                                     "load": os.getloadavg()[0]})
                        print(f"[coalesce] repeat {r + 1} {order} depth={depth} coalesce={c}: "
                              f"{j['samples_per_s']:.0f} img/s, {j['requests']['count']} requests "
                              f"for {j['requests']['records']} samples, nginx {n} range GETs",
                              file=sys.stderr, flush=True)
        load1 = os.getloadavg()
    finally:
        remote.link_down(ns, tmp)
    print(f"\nWebDataset tars ({len(tars)}, {size / 1e6:.1f} MB) over a {a.bw_mbs:g} MB/s link, "
          f"{a.rtt_ms:g} ms a request; sluice run --epochs 1 --batch 64 --size {a.size}; "
          f"medians of {a.repeats}; load {load0[0]:.2f} -> {load1[0]:.2f}")
    print("| order | io_depth | coalescing | img/s (median) | requests / epoch | nginx range GETs "
          "| records / request |")
    print("|---|---|---|---|---|---|---|")
    for k, v in res.items():
        order, depth, c = (x.split("=")[-1] for x in k.split(" "))
        med = statistics.median
        print(f"| {order} | {depth} | {c} | {med(x['img_s'] for x in v):.0f} | "
              f"{med(x['requests'] for x in v):.0f} | {med(x['nginx_gets'] for x in v):.0f} | "
              f"{med(x['records'] / x['requests'] for x in v):.2f} |")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"cells": res, "load": [load0, load1], "bytes": size}, f, indent=1)


if __name__ == "__main__":
    main()
