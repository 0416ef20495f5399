"""Text has a memory bound: `sluice tokenize` streams its file, a giant
pre-token piece merges in a few bytes a byte, and `sluice run --task lm
--max-memory` (TextLoader(max_memory=)) charges each document before it is
tokenized, refusing one that can never fit as a bad document. Each peak
RSS is the child's (os.wait4); the ids and batch digests are pinned to
what the code before these changes printed for the same generated inputs
(a 16 MB line of prose, a 6 MB line of letters, a corpus with that line
among prose lines), so nothing the stream holds changed. Needs no shared
data: the vocabulary is a generated tiktoken rank file (the 256 bytes and
a few merges) under cl100k_base's pattern."""
import base64
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

SLUICE = os.environ.get("SLUICE")
pytestmark = pytest.mark.skipif(
    not SLUICE or not os.access(SLUICE, os.X_OK),
    reason="SLUICE (the built CLI) not set")

MB = 1 << 20
# SL_TEXT_MEM_PER_BYTE (include/sluice/text.h): what a document is charged
# per byte; also the bound tested on a giant piece.
PER_BYTE = 12

WORDS = ("the of and to in is was that for it with as his on be at by "
         "had not are but from or have an they which one you were her all "
         "she there would their we him been has when who will more no if "
         "out so said what up its about into than them can only other new "
         "some could time these two may then do first any my now such like "
         "our over man me even most made after also did many before must "
         "through back years where much your way well down should because "
         "Each EVERY Don't it's 1984 3.14 -- (yes) \"quoted\" naïve café"
         ).split()


def xs(x):
    x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 7
    x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
    return x


def prose(n, seed=1):
    """n bytes of words and spaces, no newline (the same on every Python)."""
    out, x, size = [], seed, 0
    while size < n:
        x = xs(x)
        w = WORDS[x % len(WORDS)]
        out.append(w)
        size += len(w) + 1
    return " ".join(out).encode()[:n]


def letters(n, seed=2):
    """n bytes of a..d, no whitespace: one pre-token piece (64 KiB of
    random letters, repeated)."""
    x, b = seed, bytearray(1 << 16)
    for i in range(len(b)):
        x = xs(x)
        b[i] = 97 + (x >> 11) % 4
    return (bytes(b) * (n // len(b) + 1))[:n]


def write_ranks(path):
    merges = [b"th", b"he", b"the", b" t", b" the", b"in", b"an", b" a",
              b"ab", b"cd", b"abcd", b"ca", b"bd", b"abab"]
    with open(path, "w") as f:
        for r in range(256):
            f.write(base64.b64encode(bytes([r])).decode() + f" {r}\n")
        for k, m in enumerate(merges):
            f.write(base64.b64encode(m).decode() + f" {256 + k}\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("textmem")
    write_ranks(d / "ranks.tiktoken")
    (d / "prose16.txt").write_bytes(prose(16 * MB))
    (d / "piece6.txt").write_bytes(letters(6 * MB))
    (d / "tiny.txt").write_bytes(b"a few words\n")
    p, q = prose(300000, 5), prose(300000, 7)
    (d / "lines.txt").write_bytes(p.replace(b" the ", b"\n", 2000) + b"\n" +
                                  q.replace(b" the ", b"\n", 2000) + b"\n")
    (d / "corpus.txt").write_bytes(p.replace(b" the ", b"\n", 2000) + b"\n" +
                                   letters(6 * MB) + b"\n" +
                                   q.replace(b" the ", b"\n", 2000) + b"\n")
    return d


# Runs argv[1:] and writes its peak RSS (KB) last on stderr. A small
# interpreter of its own forks it: a child's ru_maxrss counts what it
# shared with its parent before exec, and this test's process holds the
# generated inputs.
PEAK = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, st, ru = os.wait4(pid, 0)
sys.stderr.write("\\nPEAK %d\\n" % ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(st))
"""


def run(args, out_path):
    """Runs the CLI: (exit status, peak RSS in MB, seconds, stderr)."""
    t0 = time.monotonic()
    with open(out_path, "wb") as out:
        p = subprocess.run([sys.executable, "-c", PEAK, SLUICE] + args,
                           stdout=out, stderr=subprocess.PIPE)
    err = p.stderr.decode()
    head, _, peak = err.rpartition("\nPEAK ")
    return p.returncode, int(peak) / 1024, time.monotonic() - t0, head


def tok_args(d):
    return ["tokenize", "--tokenizer", "cl100k_base", "--vocab",
            str(d / "ranks.tiktoken")]


def lm_args(d, *more):
    return ["run", "--task", "lm", "--tokenizer", "cl100k_base", "--vocab",
            str(d / "ranks.tiktoken"), "--seq-len", "128", "--json",
            "--quiet", "--digest"] + list(more)


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def test_tokenize_streams_a_long_line(data, tmp_path):
    """A 16 MB line of prose: the ids of the whole (as before), in a few MB
    over the CLI's own (it held the file and two copies of its ids: 150 MB
    before)."""
    rc, base, _, err = run(tok_args(data) + [str(data / "tiny.txt")],
                           tmp_path / "tiny.ids")
    assert rc == 0, err
    rc, peak, _, err = run(tok_args(data) + [str(data / "prose16.txt")],
                           tmp_path / "prose.ids")
    assert rc == 0, err
    assert sha(tmp_path / "prose.ids") == "bb09c6e46487684e"
    print(f"tokenize 16 MB line: peak {peak:.1f} MB (tiny file {base:.1f})")
    assert peak <= base + 16, f"peak {peak:.1f} MB, tiny file {base:.1f} MB"


def test_tokenize_giant_piece(data, tmp_path):
    """6 MB of letters is one piece: at most SL_TEXT_MEM_PER_BYTE bytes a
    byte of it (the merge heap took 20 alone: 127 MB before), same ids."""
    rc, base, _, err = run(tok_args(data) + [str(data / "tiny.txt")],
                           tmp_path / "tiny.ids")
    assert rc == 0, err
    rc, peak, _, err = run(tok_args(data) + [str(data / "piece6.txt")],
                           tmp_path / "piece.ids")
    assert rc == 0, err
    assert sha(tmp_path / "piece.ids") == "9421cb24eb1acc88"
    print(f"tokenize 6 MB piece: peak {peak:.1f} MB (tiny file {base:.1f})")
    assert peak <= base + PER_BYTE * 6, \
        f"peak {peak:.1f} MB, tiny file {base:.1f} MB"


def digest(out_path):
    return json.loads(out_path.read_text().splitlines()[-1])


def test_lm_budget_refuses_a_document_that_never_fits(data, tmp_path):
    """--max-memory 64M keeps 32 MB for tokenizing; the 6 MB line needs 72:
    it fails at once, named (FILE:LINE, both sizes); under skip it is
    counted and listed and every other line is still batched."""
    corpus = str(data / "corpus.txt")
    rc, _, secs, err = run(lm_args(data, corpus, "--max-memory", "64M"),
                           tmp_path / "fail.json")
    assert rc == 1, err
    assert ("corpus.txt:633: tokenizing it needs 72.0 MB, the memory "
            "budget allows 32.0 MB") in err, err
    assert secs < 10
    rc, _, _, err = run(lm_args(data, corpus, "--max-memory", "64M",
                                "--on-error", "skip"), tmp_path / "skip.json")
    assert rc == 0, err
    assert "corpus.txt:633: tokenizing it needs 72.0 MB" in err, err
    j = digest(tmp_path / "skip.json")
    assert j["errors_skipped"] == 1
    rc, _, _, err = run(lm_args(data, str(data / "lines.txt")),
                        tmp_path / "lines.json")
    assert rc == 0, err
    # every other line's tokens, as many as from a corpus without the long
    # line: windows of seq_len + 1, and the chunks' tails
    others = digest(tmp_path / "lines.json")
    assert (j["samples"] * 129 + j["tokens_dropped"] ==
            others["samples"] * 129 + others["tokens_dropped"]), (j, others)
    # a budget whose rest (past the 32 MB least for the work) holds no
    # batch: create fails, as the image loader's does
    rc, _, _, err = run(lm_args(data, corpus, "--max-memory", "20M"),
                        tmp_path / "none.json")
    # the working share named for text: tokenizing, not the image
    # loader's reading and decoding
    assert rc == 1 and ("memory budget 20971520 B holds no batch of 8256 B "
                        "(plus 32 MB for tokenizing," in err), err


def test_lm_budget_bounds_the_peak(data, tmp_path):
    """With room for it (--max-memory 400M: 100 MB for tokenizing) the
    corpus streams the batches it streamed before (digest), with or
    without a budget, its peak within the charge of its longest document
    over a run of the other lines (130 MB before)."""
    rc, base, _, err = run(lm_args(data, str(data / "lines.txt")),
                           tmp_path / "lines.json")
    assert rc == 0, err
    corpus = str(data / "corpus.txt")
    rc, _, _, err = run(lm_args(data, corpus), tmp_path / "free.json")
    assert rc == 0, err
    rc, peak, _, err = run(lm_args(data, corpus, "--max-memory", "400M"),
                           tmp_path / "budget.json")
    assert rc == 0, err
    free, budget = digest(tmp_path / "free.json"), digest(
        tmp_path / "budget.json")
    assert free["digest"] == budget["digest"] == "0003d3edc5a279a3"
    assert budget["samples"] == 41904
    print(f"lm, 6 MB line, --max-memory 400M: peak {peak:.1f} MB "
          f"(without the line {base:.1f})")
    # the corpus file is read a line at a time (test_text_ondemand.py)
    assert peak <= base + PER_BYTE * 6, \
        f"peak {peak:.1f} MB, without the line {base:.1f} MB"


def test_text_loader_max_memory(data):
    sluice = pytest.importorskip("sluice", reason="sluice module not built")
    if not hasattr(sluice, "TextLoader"):
        pytest.skip("sluice built without TextLoader")
    kw = dict(tokenizer="cl100k_base", vocab=str(data / "ranks.tiktoken"),
              seq_len=128, batch_size=8, max_memory=64 * MB)
    with pytest.raises(Exception, match="tokenizing it needs 72.0 MB"):
        for _ in sluice.TextLoader([str(data / "corpus.txt")], **kw):
            pass
    l = sluice.TextLoader([str(data / "corpus.txt")], on_error="skip", **kw)
    n = sum(1 for _ in l)
    assert n > 0 and l.stats()["errors_skipped"] == 1
    assert "corpus.txt:633: tokenizing it needs" in l.skipped()[0]
    with pytest.raises(ValueError, match="max_memory must be >= 1"):
        sluice.TextLoader([str(data / "corpus.txt")],
                          **dict(kw, max_memory=0))


def test_lm_budget_refuses_an_exabyte_document(data, tmp_path):
    """A document's charge saturates: a sparse file of 1 EiB (a document
    per file, taken at its size) is charged 12 EiB, past INT64_MAX. The
    charge wrapped to a negative number, which took nothing; the read then
    failed as "huge.txt: out of memory". Now it is refused named, with both
    sizes, as any document that never fits. Needs a file system that holds
    such a sparse file (tmpfs does; ext4 stops at 16 TiB)."""
    d = None
    for base in (tmp_path, "/dev/shm"):
        p = os.path.join(str(base), f"sl-exa-{os.getpid()}", "huge.txt")
        os.makedirs(os.path.dirname(p), exist_ok=True)
        try:
            with open(p, "wb") as f:
                f.truncate(1 << 60)
            d = os.path.dirname(p)
            break
        except OSError:
            os.remove(p)
            os.rmdir(os.path.dirname(p))
    if d is None:
        pytest.skip("no file system here holds a 1 EiB sparse file")
    try:
        rc, _, secs, err = run(lm_args(data, str(data / "lines.txt"),
                                       os.path.join(d, "huge.txt"),
                                       "--doc-per-file", "--max-memory",
                                       "64M", "--on-error", "skip"),
                               tmp_path / "exa.json")
        assert rc == 0, err
        assert "huge.txt: tokenizing it needs" in err, err
        assert "the memory budget allows 32.0 MB" in err, err
        assert digest(tmp_path / "exa.json")["errors_skipped"] == 1
        assert secs < 10
    finally:
        os.remove(os.path.join(d, "huge.txt"))
        os.rmdir(d)
