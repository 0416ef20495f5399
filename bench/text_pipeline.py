#!/usr/bin/env python3
"""Text pipeline throughput: lm and mlm tokens/s through
`sluice bench --task`, on 1 and 2 tokenizer threads (alternating runs,
median of --runs), and the scaling 2 threads / 1 thread.

lm: GPT-2 BPE, seq_len 1024, batch 8; mlm: BERT WordPiece (uncased),
max_len 512, batch 8; both over every corpus in $SL_SHARED_DATA/text (one
document per line), epochs repeating for --duration seconds a run. The
load average before and after is printed: the figures are only as quiet as
the machine.

  python bench/text_pipeline.py [--sluice build/sluice] [--runs 5]
                                [--duration 4] [--json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

SHARED = os.environ.get("SL_SHARED_DATA",
                        os.path.join(os.path.dirname(__file__), "..", "..",
                                     "shared", "data"))
VOCAB = os.path.join(SHARED, "vocab")
TEXT = os.path.join(SHARED, "text")


def task_args(task):
    if task == "lm":
        return ["--task", "lm", "--tokenizer", "gpt2",
                "--vocab", os.path.join(VOCAB, "gpt2-encoder.json"),
                "--merges", os.path.join(VOCAB, "gpt2-vocab.bpe"),
                "--seq-len", "1024", "--batch", "8"]
    return ["--task", "mlm", "--tokenizer", "wordpiece",
            "--vocab", os.path.join(VOCAB, "bert-base-uncased-vocab.txt"),
            "--seq-len", "512", "--batch", "8"]


def run(a, files, task, threads):
    cmd = ([a.sluice, "bench"] + files + task_args(task) +
           ["--threads", str(threads), "--duration", str(a.duration),
            "--json", "--quiet"])
    out = subprocess.run(cmd, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=os.environ.get(
        "SLUICE", os.path.join(os.path.dirname(__file__), "..", "build",
                               "sluice")))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=4)
    ap.add_argument("--tasks", default="lm,mlm")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(TEXT) or not os.path.isdir(VOCAB):
        print(f"no corpora/vocabularies under {SHARED} (set SL_SHARED_DATA)",
              file=sys.stderr)
        return 77
    files = sorted(os.path.join(TEXT, f) for f in os.listdir(TEXT))
    load0 = os.getloadavg()
    res = {}
    for task in a.tasks.split(","):
        tps = {1: [], 2: []}
        cpu = {1: [], 2: []}
        for _ in range(a.runs):
            for t in (1, 2):
                d = run(a, files, task, t)
                tps[t].append(d["tokens_per_s"])
                cpu[t].append(d["cpu_seconds"] / d["seconds"])
        m1, m2 = statistics.median(tps[1]), statistics.median(tps[2])
        res[task] = {"tokens_per_s_1": round(m1), "tokens_per_s_2": round(m2),
                     "scaling": round(m2 / m1, 3),
                     "cores_used_1": round(statistics.median(cpu[1]), 2),
                     "cores_used_2": round(statistics.median(cpu[2]), 2),
                     "runs_1": [round(x) for x in tps[1]],
                     "runs_2": [round(x) for x in tps[2]]}
        print(f"{task:4s} 1 thread {m1 / 1e6:6.2f} M tok/s "
              f"({res[task]['cores_used_1']:.2f} cores)  2 threads "
              f"{m2 / 1e6:6.2f} M tok/s ({res[task]['cores_used_2']:.2f} "
              f"cores)  scaling x{m2 / m1:.2f}")
    load1 = os.getloadavg()
    print(f"load average {load0[0]:.2f} before, {load1[0]:.2f} after; "
          f"{os.cpu_count()} CPUs; {len(files)} corpora, "
          f"{sum(os.path.getsize(f) for f in files)} bytes")
    if a.json:
        print(json.dumps({"results": res, "load_before": load0[0],
                          "load_after": load1[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
