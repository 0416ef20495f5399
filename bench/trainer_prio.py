"""Does a trainer's own CPU (its kernel launches) lose time to the loader's
threads at equal priority? A synthetic trainer takes each batch, spins S ms
of CPU (the launch thread, holding the GIL), then sleeps G ms (the GPU's
step). Modes, alternating each round: 'plain' (the loader's threads as they
are), 'batch' (every thread but the trainer's SCHED_BATCH), 'nice5' (nice
+5). Prints img/s against the bound 64 / (S + G), the spin's wall time a
batch and the share of time waiting, and medians (bench/RESULTS.md,
"Placement counts what a GPU sample costs the CPU").

    PYTHONPATH=build/python .venv/bin/python bench/trainer_prio.py \
        S G THREADS BATCHES ROUNDS        # e.g. 10 90 2 60 3
"""
import os
import statistics
import sys
import time

import sluice

DATA = os.path.join(os.environ.get("SL_SHARED_DATA", "../shared/data"),
                    "imagenet-sample")
if not os.path.isdir(DATA):
    sys.exit(f"skip: no {DATA} (the ImageNet sample; ../shared/data/README.md)")
S, G = float(sys.argv[1]), float(sys.argv[2])
threads, nb, rounds = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])

def spin(ms):
    t = time.perf_counter() + ms / 1000
    while time.perf_counter() < t:
        pass

def demote(mode):
    me = os.getpid()
    for t in os.listdir("/proc/self/task"):
        tid = int(t)
        if tid == me:
            continue
        try:
            if mode == "batch":
                os.sched_setscheduler(tid, os.SCHED_BATCH, os.sched_param(0))
            elif mode.startswith("nice"):
                os.setpriority(os.PRIO_PROCESS, tid, int(mode[4:]))
        except OSError as e:
            print("demote", tid, e)

def run(mode):
    L = sluice.Loader(DATA, batch_size=64, threads=threads, epochs=100, seed=1)
    it = iter(L)
    for _ in range(10):
        next(it)
    demote(mode)
    for _ in range(5):
        next(it)
        spin(S); time.sleep(G / 1000)
    t0 = time.perf_counter(); work = 0.0; wait = 0.0
    for _ in range(nb):
        a = time.perf_counter(); x = next(it); b = time.perf_counter()
        wait += b - a
        spin(S)
        c = time.perf_counter(); work += c - b
        time.sleep(G / 1000)
    dt = time.perf_counter() - t0
    del it, L
    return nb * 64 / dt, 1000 * work / nb, wait / dt

res = {}
modes = ["plain", "batch", "nice5"]
for r in range(rounds):
    for m in (modes if r % 2 == 0 else modes[::-1]):
        ips, wms, wf = run(m)
        res.setdefault(m, []).append((ips, wms, wf))
        print(f"round {r} {m:6} {ips:7.1f} img/s  spin wall {wms:6.2f} ms"
              f"  wait {wf:.3f}", flush=True)
bound = 64 / ((S + G) / 1000)
for m in modes:
    v = res[m]
    ips = statistics.median(x[0] for x in v)
    print(f"{m:6} median {ips:7.1f} img/s ({ips / bound:.3f} of bound "
          f"{bound:.0f}), spin wall {statistics.median(x[1] for x in v):.2f}"
          f" ms, wait {statistics.median(x[2] for x in v):.3f}")
