"""sluice's WordPiece against HF tokenizers' BertWordPieceTokenizer (uncased:
lowercase, strip accents, clean text, CJK spacing), id for id, without
[CLS]/[SEP] (add_special_tokens=False). Every corpus in $SL_SHARED_DATA/text
(read with newline='' so CRLF and the BOM stay), then random Unicode strings
(hypothesis), all through the CLI ($SLUICE). Any mismatch is a bug."""
import glob
import os
import subprocess
import tempfile

import pytest

tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, HealthCheck, strategies as st  # noqa

SLUICE = os.environ.get("SLUICE")
DATA = os.environ.get("SL_SHARED_DATA", "")
VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
TEXTS = sorted(glob.glob(os.path.join(DATA, "text", "*")))
pytestmark = [
    pytest.mark.skipif(not SLUICE or not os.access(SLUICE, os.X_OK),
                       reason="no sluice CLI ($SLUICE)"),
    pytest.mark.skipif(not os.path.isfile(VOCAB),
                       reason="no shared data ($SL_SHARED_DATA)"),
]
_hf = []


def hf():
    if not _hf:
        _hf.append(tokenizers.BertWordPieceTokenizer(
            VOCAB, lowercase=True, strip_accents=True, clean_text=True,
            handle_chinese_chars=True))
    return _hf[0]


def hf_ids(text):
    return hf().encode(text, add_special_tokens=False).ids


def sluice_ids(path):
    out = subprocess.run([SLUICE, "tokenize", "--tokenizer", "wordpiece",
                          "--vocab", VOCAB, "--uncased", path],
                         check=True, capture_output=True).stdout
    return [int(x) for x in out.split()]


def sluice_text(text):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt") as f:
        f.write(text.encode("utf-8"))
        f.flush()
        return sluice_ids(f.name)


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


@pytest.mark.parametrize("path", TEXTS, ids=os.path.basename)
def test_corpus_exact(path):
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    want = hf_ids(text)
    got = sluice_ids(path)
    i = first_diff(want, got)
    assert got == want, (f"{os.path.basename(path)}: {len(want)} HF ids, "
                         f"{len(got)} sluice ids, first mismatch at {i}: "
                         f"HF {want[i:i + 8]} sluice {got[i:i + 8]}")


CASES = [
    "Hello, World!", "café naïve Ångström", "中文字符 and 日本語", "[CLS] x [SEP]y",
    "[cls] [MASK][UNK]", "a\x00b\x01c\ufffdd\u200be", "\ufeffBOM\r\nCRLF",
    "x" * 100, "x" * 101, "é" * 101, "unaffable", "İstanbul ǅ ﬁ Ωmega",
    "\u1fef`quote", "a\u0301\u0334\u0323b", "\U0001D165\U0001D16D",
]


@pytest.mark.parametrize("text", CASES)
def test_cases_exact(text):
    assert sluice_text(text) == hf_ids(text)


@settings(max_examples=200, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(st.text(min_size=0, max_size=40),
                          st.text(alphabet=st.characters(max_codepoint=0x3000),
                                  max_size=60),
                          st.sampled_from(CASES)), max_size=8))
def test_random_unicode_exact(parts):
    text = " ".join(parts)
    assert sluice_text(text) == hf_ids(text), repr(text)


# Hostile megabyte-long words (issue 14): a run of combining marks to put in
# canonical order (an insertion sort once took minutes), a word far over
# the 100-char limit, a run of marks between letters. Equal ids, and the
# CLI run under a second of CPU time (CPU, not wall: a busy machine does
# not fail it). HF takes ~0.5 s on the first.
LONG_WORDS = {
    "mark_run": "a" + "\u0301\u0316" * 250_000,
    "mc_mark_run": "x" + "\U0001D16D\U0001D165" * 120_000 + " x",
    "letter_run": "x" * 1_000_000,
    "accented_run": "e\u0301" * 300_000,
}


def _child_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@pytest.mark.parametrize("case", sorted(LONG_WORDS))
def test_long_word_fast_and_exact(case, tmp_path):
    text = LONG_WORDS[case]
    path = tmp_path / f"{case}.txt"
    path.write_bytes(text.encode("utf-8"))
    cpu0 = _child_cpu()
    try:
        got = subprocess.run([SLUICE, "tokenize", "--tokenizer", "wordpiece",
                              "--vocab", VOCAB, "--uncased", str(path)],
                             check=True, capture_output=True,
                             timeout=120).stdout
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: one {len(text)}-char word took minutes")
    cpu = _child_cpu() - cpu0
    assert [int(x) for x in got.split()] == hf_ids(text)
    assert cpu < 1.0, f"{case}: sluice tokenize took {cpu:.2f} s of CPU"
