#!/usr/bin/env python3
"""A/B of two sluice builds on the same data, same run: for a change that
must not move the stream or the speed (a refactor, an ABI change).

Each round runs build A then B (B then A on odd rounds, so drift in the
machine's load hits both alike) on the image loader (uint8 and float) and
the text pipeline (lm GPT-2 BPE, mlm WordPiece), with --digest: the digests
of A and B must be equal (the script fails otherwise). Prints the median
rate of each side and B/A (median of the per-round ratios).

  python bench/ab_builds.py --a OLD/sluice --b build/sluice [--rounds 5]
      [--threads 2] [--epochs 2] [--text-epochs 5] [--cases ...] [--json-out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("SL_SHARED_DATA",
                        os.path.join(HERE, "..", "..", "shared", "data"))


def cases(a):
    img = os.path.join(SHARED, "imagenet-sample")
    v = os.path.join(SHARED, "vocab")
    txt = sorted(os.path.join(SHARED, "text", f)
                 for f in os.listdir(os.path.join(SHARED, "text")))
    common = ["--threads", str(a.threads), "--digest", "--json", "--quiet",
              "--policy", "static"]
    yield "image uint8", ["bench", img, "--epochs", str(a.epochs),
                          "--out", "uint8"] + common
    yield "image float", ["bench", img, "--epochs", str(a.epochs),
                          "--out", "float"] + common
    yield "text lm", ["bench", "--task", "lm"] + txt + [
        "--tokenizer", "gpt2", "--vocab", os.path.join(v, "gpt2-encoder.json"),
        "--merges", os.path.join(v, "gpt2-vocab.bpe"), "--seq-len", "1024",
        "--batch", "8", "--epochs", str(a.text_epochs),
        "--threads", str(a.threads),
        "--digest", "--json", "--quiet"]
    yield "text mlm", ["bench", "--task", "mlm"] + txt + [
        "--tokenizer", "wordpiece",
        "--vocab", os.path.join(v, "bert-base-uncased-vocab.txt"),
        "--seq-len", "512", "--batch", "8", "--epochs", str(a.text_epochs),
        "--threads", str(a.threads), "--digest", "--json", "--quiet"]


def run(binary, args):
    out = subprocess.run([binary] + args, check=True, capture_output=True,
                         text=True).stdout
    d = json.loads(out.strip().splitlines()[-1])
    rate = d.get("tokens_per_s") or d.get("samples_per_s")
    return rate, d.get("digest")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="the reference build's sluice")
    ap.add_argument("--b", required=True, help="the build under test")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--text-epochs", type=int, default=5,
                    help="epochs of the text corpora a run (5: a few s)")
    ap.add_argument("--cases", default="image uint8,image float,text lm,text mlm",
                    help="which of the four, comma-separated")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(SHARED, "imagenet-sample")):
        print(f"no data under {SHARED} (set SL_SHARED_DATA)", file=sys.stderr)
        return 77
    print(f"load before: {os.getloadavg()[0]:.2f}")
    results = {}
    for name, args in cases(a):
        if name not in a.cases.split(","):
            continue
        ra, rb, ratios = [], [], []
        for r in range(a.rounds):
            order = [("a", a.a), ("b", a.b)] if r % 2 == 0 else \
                    [("b", a.b), ("a", a.a)]
            got = {}
            for side, binary in order:
                got[side] = run(binary, args)
            if got["a"][1] != got["b"][1]:
                print(f"{name}: digests differ: {got}", file=sys.stderr)
                return 1
            ra.append(got["a"][0])
            rb.append(got["b"][0])
            ratios.append(got["b"][0] / got["a"][0])
            print(f"  {name} round {r}: A {got['a'][0]:.0f}  "
                  f"B {got['b'][0]:.0f}  B/A {ratios[-1]:.3f}", flush=True)
        unit = "tokens/s" if name.startswith("text") else "img/s"
        results[name] = {"a": statistics.median(ra), "b": statistics.median(rb),
                         "ratio": statistics.median(ratios),
                         "min": min(ratios), "max": max(ratios),
                         "digest": got["a"][1], "unit": unit}
        x = results[name]
        print(f"{name}: A {x['a']:.0f} {unit}, B {x['b']:.0f} {unit}, "
              f"B/A {x['ratio']:.3f} (min {x['min']:.3f}, max {x['max']:.3f}),"
              f" digest {x['digest']} on both")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
