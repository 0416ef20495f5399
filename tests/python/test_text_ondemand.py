"""Plain text and JSON Lines are read a document at a time: opening a
corpus indexes its lines (16 bytes a document) in one streaming pass, and a
worker reads a document's bytes (pread) when it tokenizes it, so a corpus
costs its index, not its size. The batches are those of the code that held
each file whole (the digests below are what that code printed for the same
generated inputs), and a file truncated or rewritten after the loader
opened it is a bad document named FILE:LINE with the cause. Needs no shared
data: the inputs and the tokenizer's rank file are generated (see
test_text_memory.py)."""
import json
import os
import resource
import subprocess

import pytest

from test_text_memory import MB, SLUICE, digest, prose, run, write_ranks, xs

pytestmark = pytest.mark.skipif(
    not SLUICE or not os.access(SLUICE, os.X_OK),
    reason="SLUICE (the built CLI) not set")


def lines_of(total, seed):
    """Lines of 40..640 bytes of prose (slices of one 1 MB text) until
    `total` bytes: many documents, quickly made."""
    base = prose(MB, seed).decode()
    x, out, size = seed, [], 0
    while size < total:
        x = xs(x)
        o, n = x % (len(base) - 4000), 40 + (x >> 20) % 600
        out.append(base[o:o + n].strip())
        size += n
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ondemand")
    write_ranks(d / "ranks.tiktoken")
    (d / "one.txt").write_text("\n".join(lines_of(MB, 2)) + "\n")
    big = lines_of(30 * MB, 11)  # ~66 MB on disk in the two files
    (d / "big.txt").write_text("\n".join(big) + "\n")
    (d / "big.jsonl").write_text(
        "\n".join(json.dumps({"text": t, "id": k})
                  for k, t in enumerate(big)) + "\n")
    # the line rules at block and line ends: CRLF, blank and whitespace
    # lines, a last line without '\n', a file ending in '\r', a bad line
    small = lines_of(600000, 3)
    js = []
    for i, t in enumerate(small[:1500]):
        if i % 50 == 7:
            js.append("  \t\r")
        elif i % 97 == 3:
            js.append("")
        js.append(json.dumps({"text": t}) + ("\r" if i % 3 == 0 else ""))
    (d / "mixed").mkdir()
    (d / "mixed" / "a.jsonl").write_text("\n".join(js))
    (d / "mixed" / "b.txt").write_bytes(
        "\r\n".join(small[1500:]).encode() + b"\r\n\r\n\r")
    (d / "mixed" / "c.txt").write_bytes(b"")
    (d / "bad.jsonl").write_text(
        "\n".join(js[:200] + ["{not json"] + js[200:400]) + "\n")
    many = d / "many"  # more files than the open-files limit below
    many.mkdir()
    for k in range(300):
        (many / f"f{k:03d}.txt").write_text("\n".join(small[k::300]) + "\n")
    return d


def lm(d, *more):
    return ["run", "--task", "lm", "--tokenizer", "cl100k_base", "--vocab",
            str(d / "ranks.tiktoken"), "--seq-len", "128", "--json",
            "--quiet", "--digest"] + list(more)


def test_corpus_is_not_held(data, tmp_path):
    """66 MB of JSON Lines and text: the batches of old (digest), at a peak
    a few MB over a 1 MB file's (the index, the plan, a ring of 4
    chunks); holding the files took 66 MB more (100 MB against 18 MB)."""
    ring = ["--group", "2", "--prefetch", "4", "--stop-after", "20"]
    rc, base, _, err = run(lm(data, str(data / "one.txt"), *ring),
                           tmp_path / "one.json")
    assert rc == 0, err
    rc, peak, secs, err = run(
        lm(data, str(data / "big.jsonl"), str(data / "big.txt"), *ring),
        tmp_path / "big.json")
    assert rc == 0, err
    assert digest(tmp_path / "big.json")["digest"] == "e81b1ed52d30540b"
    corpus = (os.path.getsize(data / "big.jsonl") +
              os.path.getsize(data / "big.txt")) / MB
    print(f"lm, {corpus:.0f} MB corpus: peak {peak:.1f} MB (1 MB file "
          f"{base:.1f}), {secs:.1f} s")
    assert peak <= base + 16, f"peak {peak:.1f} MB, 1 MB file {base:.1f} MB"


@pytest.mark.parametrize("more,want", [
    ([], "22825adeac056d10"),
    (["--doc-per-file"], "4e935ffc5c1a1db7"),
    (["--no-shuffle", "--chunk-bytes", "4096"], "4f72852045717c01"),
    (["--world", "2", "--rank", "1", "--seed", "7"], "b066986e8394620e"),
])
def test_same_batches(data, tmp_path, more, want):
    """Every line rule (CRLF, blank lines, no final newline, a '\\r' at the
    end of a file, an empty file) gives the documents and batches of old."""
    rc, _, _, err = run(lm(data, str(data / "mixed"), *more),
                        tmp_path / "m.json")
    assert rc == 0, err
    assert digest(tmp_path / "m.json")["digest"] == want


def test_bad_line_named(data, tmp_path):
    rc, _, _, err = run(lm(data, str(data / "bad.jsonl")), tmp_path / "f.json")
    assert rc == 1 and "bad.jsonl:201: invalid JSON" in err, err
    rc, _, _, err = run(lm(data, str(data / "bad.jsonl"), "--on-error",
                           "skip"), tmp_path / "s.json")
    assert rc == 0, err
    j = digest(tmp_path / "s.json")
    assert (j["errors_skipped"], j["digest"]) == (1, "93c91fae99c4fafa")


def test_open_files_bounded(data, tmp_path):
    """300 files under an open-files limit of 64: the same batches as
    old, a bounded set of descriptors kept open (base/fdcache)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    out = tmp_path / "many.json"
    with open(out, "wb") as f:
        p = subprocess.run([SLUICE] + lm(data, str(data / "many")),
                           stdout=f, stderr=subprocess.PIPE,
                           preexec_fn=limit)
    assert p.returncode == 0, p.stderr.decode()
    assert digest(out)["digest"] == "c85e880e6cc497cf"


def loader(path, **kw):
    sluice = pytest.importorskip("sluice", reason="sluice module not built")
    if not hasattr(sluice, "TextLoader"):
        pytest.skip("sluice built without TextLoader")
    return sluice.TextLoader(
        [str(path)], tokenizer="cl100k_base", seq_len=32, batch_size=4,
        vocab=str(path.parent / "ranks.tiktoken"), shuffle=False,
        chunk_bytes=4096, group_chunks=1, prefetch_chunks=1, **kw)


def test_truncated_after_open(data, tmp_path):
    """A file cut short after create: the documents past its end fail,
    named FILE:LINE with the sizes; under skip each is counted and listed
    and the rest is batched (old read the file at create: no error)."""
    src = tmp_path / "cut.txt"
    text = "\n".join(lines_of(200000, 5)) + "\n"
    src.write_text(text)
    (tmp_path / "ranks.tiktoken").write_bytes(
        (data / "ranks.tiktoken").read_bytes())
    keep = text.encode().index(b"\n", len(text) // 2) + 1
    l = loader(src)
    os.truncate(src, keep)
    with pytest.raises(Exception, match=(
            r"cut\.txt:\d+: the file was truncated after the loader opened "
            rf"it: {keep} bytes now, {len(text.encode())} then")):
        for _ in l:
            pass
    src.write_text(text)
    l = loader(src, on_error="skip")
    os.truncate(src, keep)
    assert sum(1 for _ in l) > 0
    lost = sum(1 for t in text[keep:].split("\n") if t)
    assert l.stats()["errors_skipped"] == lost
    assert "the file was truncated after the loader opened it" in \
        l.skipped()[0]


def test_changed_after_open(data, tmp_path):
    """A file rewritten after create (its lines moved): the first line
    that no longer ends where it did is named (old: no error)."""
    src = tmp_path / "moved.jsonl"
    rows = [json.dumps({"text": t}) for t in lines_of(50000, 6)]
    src.write_text("\n".join(rows) + "\n")
    (tmp_path / "ranks.tiktoken").write_bytes(
        (data / "ranks.tiktoken").read_bytes())
    l = loader(src)
    src.write_text("\n".join([" " + rows[0]] + rows[1:]) + "\n")
    with pytest.raises(Exception, match=(
            r"moved\.jsonl:1: the file changed after the loader opened it: "
            r"the line no longer ends at byte \d+")):
        for _ in l:
            pass
