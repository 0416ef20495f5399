#!/usr/bin/env python3
"""WebDataset tars over an emulated link (issue 15 item 7): sluice against
the `webdataset` package with torch's DataLoader on the same URLs, and
against a local-disk baseline.

    bench/storage/remote.py [--data ../shared/data/imagenet-sample]
        [--sluice-build build] [--python .venv/bin/python] [--bw-mbs 100]
        [--rtt-ms 10] [--epochs 3] [--repeats 3] [--workers 1,2,3,4]
        [--cache 0.5,1] [--shard-size 16M] [--json-out F]

The ImageFolder is packed into WebDataset tars (`sluice pack --format
webdataset`, as the webdataset package writes them). nginx (Debian) serves
them inside a network namespace this script creates, whose loopback is
the link: a token bucket (`tc tbf`) caps it at --bw-mbs MB/s, and nginx's
echo module (Debian's libnginx-mod-http-echo) holds each request
--rtt-ms before it answers (this kernel has no sch_netem for a real
delay). Every loader runs inside the namespace, through bench/peers/run,
alternating within each repeat:

  sluice            sluice.torch.DataLoader(source=URL pattern); the tars'
                    sidecar indexes (NAME.slidx, written by pack) beside
                    them, so each tar crosses the link once
  sluice-walk       the same tars without sidecars (another folder): each
                    is walked whole at open, then read again by sample
  sluice-cache50    the same with the sample cache at 50 % of the tars
  sluice-cache100   ... and at 100 %
  sluice-local      the same tars from local disk (page cache warm): the
                    CPU's prep rate, the bound's other half
  webdataset        wds.WebDataset(URL) + DataLoader, num_workers swept

Per loader: img/s per epoch (median over repeats; epoch 1 includes
start-up), CPU per image, peak memory. The bound of epoch 1 is
min(link bytes/s / mean sample bytes, sluice-local's rate); the table
gives epoch 1 / bound, sluice / webdataset per epoch, and the bytes nginx
sent during each run over the tars' size (its access log, counted between
runs; medians).
Needs root (network namespace, tc), nginx and its echo module; without
them it says what is missing and exits 2.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
ECHO = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


def need(ok, what):
    if not ok:
        print(f"remote.py: {what}", file=sys.stderr)
        sys.exit(2)


def sh(*cmd, **kw):
    return subprocess.run(list(cmd), check=True, **kw)


def tar_pattern(folder):
    tars = sorted(f for f in os.listdir(folder) if f.endswith(".tar"))
    return tars, "shard-{%06d..%06d}.tar" % (0, len(tars) - 1)


def link_up(ns, tmp, www, a):
    """The emulated link: network namespace ns whose loopback a token bucket
    caps at a.bw_mbs MB/s, nginx in it serving www on 127.0.0.1:8080 with
    every request held a.rtt_ms (echo_sleep), logging
    '$request $status $http_range $bytes_sent' to tmp/access.log. Also
    used by bench/storage/coalesce.py."""
    sh("ip", "netns", "add", ns)
    sh("ip", "-n", ns, "link", "set", "lo", "up")
    # the link: lo's egress carries both directions inside the namespace
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "tbf",
       "rate", f"{int(a.bw_mbs * 8)}mbit", "burst", "1mb", "latency", "100ms")
    conf = os.path.join(tmp, "nginx.conf")
    user = "user root;" if os.geteuid() == 0 else ""
    with open(conf, "w") as f:
        f.write(f"""load_module {ECHO};
{user} worker_processes 2; daemon on; pid {tmp}/nginx.pid; error_log {tmp}/nginx.err;
events {{ worker_connections 256; }}
http {{ log_format f '$request $status $http_range $bytes_sent';
  access_log {tmp}/access.log f; sendfile on;
  server {{ listen 127.0.0.1:8080; root {www};
    location / {{ echo_sleep {a.rtt_ms / 1000:.3f}; echo_exec @file; }}
    location @file {{ }} }} }}
""")
    sh("chmod", "-R", "o+rX", tmp)
    sh("ip", "netns", "exec", ns, "nginx", "-c", conf, "-p", tmp)
    for _ in range(50):
        if os.path.exists(os.path.join(tmp, "nginx.pid")):
            break
        time.sleep(0.1)


def link_down(ns, tmp):
    pid = os.path.join(tmp, "nginx.pid")
    if os.path.exists(pid):
        subprocess.run(["kill", open(pid).read().strip()])
    subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
    shutil.rmtree(tmp, ignore_errors=True) if not os.environ.get("SL_KEEP") else print(tmp)


def outer(a):
    need(os.geteuid() == 0, "needs root (a network namespace and tc)")
    for t in ("ip", "tc", "nginx"):
        need(shutil.which(t), f"{t} not installed")
    need(os.path.exists(ECHO), f"{ECHO} missing (apt install libnginx-mod-http-echo)")
    need(os.path.isdir(a.data), f"no ImageFolder at {a.data} (the shared data is absent)")
    tmp = tempfile.mkdtemp(prefix="sl-remote-")
    ns = f"slremote{os.getpid()}"
    www = os.path.join(tmp, "www")
    # tmp (the tars, nginx's files, the loaders' scratch) is removed by
    # link_down at the end, also on an error (SL_KEEP=1 keeps it)
    try:
        os.makedirs(os.path.join(www, "wds"))
        sh(os.path.join(a.sluice_build, "sluice"), "pack", a.data, os.path.join(www, "wds"),
           "--format", "webdataset", "--shard-size", a.shard_size, stdout=subprocess.DEVNULL)
        tars, pat = tar_pattern(os.path.join(www, "wds"))
        size = sum(os.path.getsize(os.path.join(www, "wds", t)) for t in tars)
        os.makedirs(os.path.join(www, "bare"))  # the tars alone: no sidecars
        for t in tars:
            os.link(os.path.join(www, "wds", t), os.path.join(www, "bare", t))
        link_up(ns, tmp, www, a)
        url = "http://127.0.0.1:8080/wds/" + pat
        local = os.path.join(www, "wds", pat)
        out = a.json_out or os.path.join(tmp, "peers.json")
        print(f"[remote] {len(tars)} tars, {size / 1e6:.1f} MB; link {a.bw_mbs:g} MB/s, "
              f"{a.rtt_ms:g} ms per request; namespace {ns}", file=sys.stderr, flush=True)
        cmd = ["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__), "--inner",
               "--url", url, "--local", local, "--bytes", str(size), "--json-out", out,
               "--access-log", os.path.join(tmp, "access.log"),
               "--walk-url", url.replace("/wds/", "/bare/"),
               "--workdir", os.path.join(tmp, "w")]
        cmd += [x for k, v in vars(a).items() if k in ("data", "sluice_build", "python", "epochs",
                                                         "repeats", "workers", "cache", "threads")
                for x in ("--" + k.replace("_", "-"), str(v))]
        sh(*cmd)
        report(json.load(open(out)), size, a)
    finally:
        link_down(ns, tmp)


def inner(a):
    """Inside the namespace: bench/peers/run with the variants above."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
    import run as peers

    def served():  # bytes nginx sent so far ($bytes_sent, the last field)
        with open(a.access_log) as f:
            return sum(int(line.rsplit(" ", 1)[1]) for line in f if line.strip())

    def counted(script, opts, args, env, timeout, run=peers.run_worker):
        b0 = served()
        res = run(script, opts, args, env, timeout)
        res["fetched_bytes"] = served() - b0
        return res
    peers.run_worker = counted
    v = peers.VARIANTS
    v["sluice-local"] = [("sluice-local", "sluice_worker.py", [f"url={a.local}"])]
    v["sluice-walk"] = [("sluice-walk", "sluice_worker.py", [f"url={a.walk_url}"])]
    names = ["sluice", "sluice-walk", "sluice-local"]
    for frac in (float(x) for x in a.cache.split(",") if x.strip()):
        n = f"sluice-cache{round(frac * 100)}"
        v[n] = [(n, "sluice_worker.py", [f"url={a.url}", f"cache_bytes={int(frac * a.bytes)}"])]
        names.append(n)
    names.append("webdataset")
    argv = ["--loaders", ",".join(names), "--data", a.data, "--python", a.python,
            "--sluice-build", a.sluice_build, "--epochs", str(a.epochs), "--repeats", str(a.repeats),
            "--threads", str(a.threads), "--torch-workers", a.workers, "--json-out", a.json_out,
            "--loader-opt", f"sluice:url={a.url}", "--loader-opt", f"webdataset:url={a.url}"]
    if a.workdir:  # the loaders' scratch in outer's tmp, not /tmp/sluice-peers
        argv += ["--workdir", a.workdir]
    peers.main(argv)


def report(res, size, a):
    lo = res["loaders"]
    n = res["meta"]["images"]
    link = a.bw_mbs * 1e6 / (size / n)
    loc = lo.get("sluice-local", {}).get("epoch_img_s") or []
    prep = max(loc[1:] or loc or [0])
    bound = min(link, prep) if prep else link
    print(f"\nWebDataset tars over a {a.bw_mbs:g} MB/s link, {a.rtt_ms:g} ms per request: "
          f"{n} images, {size / 1e6:.1f} MB ({size / n / 1e3:.0f} kB each); link {link:.0f} img/s, "
          f"local prep {prep:.0f} img/s; epoch-1 bound {bound:.0f} img/s; "
          f"load {res['meta']['loadavg_start'][0]:.1f} -> {res['meta']['loadavg_end'][0]:.1f}")
    wds = lo.get("webdataset", {}).get("epoch_img_s") or []
    print("| loader | variant | img/s per epoch (median) | epoch 1 / bound | / webdataset per epoch "
          "| fetched over the run (× the tars) | CPU ms/img | peak MB |")
    print("|---|---|---|---|---|---|---|---|")
    for name, e in lo.items():
        if "error" in e:
            print(f"| {name} | FAILED: {e['error'][:80]} | | | | | | |")
            continue
        ep = e.get("epoch_img_s") or []
        vs = " / ".join(f"{x / w:.2f}" for x, w in zip(ep, wds)) if wds and name != "webdataset" else "—"
        runs = [r for r in res.get("runs", {}).get(name, {}).get(e.get("variant"), [])
                if "error" not in r and "fetched_bytes" in r]
        # all the bytes nginx sent during the run (index walks included)
        got = sorted(r["fetched_bytes"] / size for r in runs)
        fetched = f"{got[len(got) // 2]:.2f}" if got and name != "sluice-local" else "—"
        print(f"| {name} | {e.get('variant')} | {' / '.join(f'{x:.0f}' for x in ep)} | "
              f"{ep[0] / bound:.2f} | {vs} | {fetched} | {e['cpu_s_per_img'] * 1e3:.2f} | "
              f"{e['peak_pss_mb']:.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "imagenet-sample"))
    ap.add_argument("--sluice-build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--bw-mbs", type=float, default=100)
    ap.add_argument("--rtt-ms", type=float, default=10)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", default="1,2,3,4")
    ap.add_argument("--cache", default="0.5,1")
    ap.add_argument("--shard-size", default="16M")
    ap.add_argument("--json-out")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--local", help=argparse.SUPPRESS)
    ap.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--access-log", help=argparse.SUPPRESS)
    ap.add_argument("--walk-url", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.data = os.path.abspath(a.data)
    a.sluice_build = os.path.abspath(a.sluice_build)
    (inner if a.inner else outer)(a)


if __name__ == "__main__":
    main()
