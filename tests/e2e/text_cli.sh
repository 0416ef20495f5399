#!/usr/bin/env bash
# e2e: the text pipeline through the CLI. `sluice pack --text` (zstd) gives
# shards whose lm batches equal the text file's; thread counts do not change
# the digest; --stop-after/--state/--resume equals one run; mlm reports the
# bench keys; bad JSON Lines are skipped, counted and named FILE:LINE; a
# missing source fails with its name; pack --text refuses old shards
# without --force and replaces them with it; `sluice tokenize` picks
# tokenizers as the loader does (WordPiece uncased unless --cased). GPT-2 on the shared corpus when
# $SL_SHARED_DATA has it, else a tiny generated WordPiece vocabulary.
set -euo pipefail

SLUICE=${SLUICE:?SLUICE must name the sluice binary}
mkdir -p "${SL_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${SL_TEST_TMP:-/tmp}/e2e-text-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
field() { # field NAME JSON-LINE
    python3 -c 'import json,sys; print(json.loads(sys.argv[2])[sys.argv[1]])' "$1" "$2"
}

# A tiny WordPiece vocabulary and corpus (always); GPT-2 when shared.
{
    printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'
    for c in a b c d e f g h i j k l m n o p q r s t u v w x y z; do echo "$c"; done
    for c in a b c d e f g h i j k l m n o p q r s t u v w x y z; do echo "##$c"; done
} >"$WORK/vocab.txt"
python3 - "$WORK/corpus.txt" <<'EOF'
import random, sys
r = random.Random(3)
w = lambda: "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(1, 7)))
with open(sys.argv[1], "w") as f:
    for _ in range(3000):
        f.write(" ".join(w() for _ in range(r.randint(1, 25))) + "\n")
EOF
# The image job's help points at the text job, whose help is its own.
# (the help captured first: grep -q closing the pipe early is a SIGPIPE
# failure under pipefail)
help=$("$SLUICE" run --help 2>&1) || true
grep -q -- "--task lm|mlm" <<<"$help" || fail "run --help does not mention --task"
help=$("$SLUICE" bench --task mlm --help 2>&1) || true
grep -q -- "--tokenizer" <<<"$help" || fail "bench --task --help: no --tokenizer"

LM=(--tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 64)
CORPUS=$WORK/corpus.txt
V=${SL_SHARED_DATA:-}/vocab
if [ -n "${SL_SHARED_DATA:-}" ] && [ -f "$V/gpt2-encoder.json" ] &&
    [ -f "$SL_SHARED_DATA/text/tinyshakespeare.txt" ]; then
    LM=(--tokenizer gpt2 --vocab "$V/gpt2-encoder.json" --merges "$V/gpt2-vocab.bpe" --seq-len 256)
    CORPUS=$SL_SHARED_DATA/text/tinyshakespeare.txt
else
    echo "note: no shared GPT-2 vocabulary/corpus; using a generated WordPiece one"
fi
COMMON=(--batch 4 --chunk-bytes 16K --group 3 --seed 5 --epochs 2 --json --quiet --digest)

# pack --text: zstd shards, same documents, same batches
"$SLUICE" pack --text "$CORPUS" -o "$WORK/shards" 2>"$WORK/pack.err" || fail "pack --text: $(cat "$WORK/pack.err")"
grep -q "(zstd)" "$WORK/pack.err" || fail "pack --text is not zstd by default: $(cat "$WORK/pack.err")"
ls "$WORK"/shards/shard-00000.sls >/dev/null || fail "no shard written"
# zstd works per record: a whole file as one document compresses
"$SLUICE" pack --text --doc-per-file "$CORPUS" -o "$WORK/whole" 2>/dev/null || fail "pack --text --doc-per-file"
[ "$(stat -c %s "$WORK/whole/shard-00000.sls")" -lt "$(( $(stat -c %s "$CORPUS") * 2 / 3 ))" ] || fail "zstd shard is not smaller than the text"
D1=$("$SLUICE" bench --task lm "$CORPUS" --doc-per-file "${LM[@]}" --batch 4 --json --quiet --digest | tail -1)
D2=$("$SLUICE" bench --task lm "$WORK/whole" "${LM[@]}" --batch 4 --json --quiet --digest | tail -1)
[ "$(field digest "$D1")" = "$(field digest "$D2")" ] || fail "doc-per-file text vs shard: $D1 / $D2"
A=$("$SLUICE" bench --task lm "$CORPUS" "${LM[@]}" "${COMMON[@]}" --threads 1 | tail -1)
B=$("$SLUICE" bench --task lm "$WORK/shards" "${LM[@]}" "${COMMON[@]}" --threads 2 | tail -1)
[ "$(field digest "$A")" = "$(field digest "$B")" ] || fail "text vs shards / 1 vs 2 threads: $A / $B"
[ "$(field samples "$A")" -gt 0 ] || fail "no sequences: $A"
for k in samples samples_per_s tokens_per_s wait_ms_p50 wait_ms_p99 cpu_seconds peak_rss_mb digest position; do
    field "$k" "$A" >/dev/null || fail "missing key $k in $A"
done

# stop + resume == one run
"$SLUICE" bench --task lm "$CORPUS" "${LM[@]}" "${COMMON[@]}" --stop-after 7 --state "$WORK/st" >/dev/null
C=$("$SLUICE" bench --task lm "$CORPUS" "${LM[@]}" "${COMMON[@]}" --resume "$WORK/st" --threads 2 | tail -1)
[ "$(field digest "$C")" = "$(field digest "$A")" ] || fail "resume digest $(field digest "$C") != $(field digest "$A")"
set +e
"$SLUICE" bench --task lm "$CORPUS" "${LM[@]}" "${COMMON[@]}" --seed 6 --resume "$WORK/st" >"$WORK/out" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "other options" "$WORK/out" || fail "resume with another seed was not refused: $(cat "$WORK/out")"

# mlm
M=$("$SLUICE" bench --task mlm "$WORK/corpus.txt" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 64 --batch 8 --json --quiet | tail -1)
[ "$(field task "$M")" = mlm ] && [ "$(field samples "$M")" -gt 100 ] || fail "mlm: $M"

# bad JSON Lines: skipped, counted, named
python3 - "$WORK/corpus.txt" "$WORK/bad.jsonl" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().split("\n")[:400]
with open(sys.argv[2], "wb") as f:
    f.write((json.dumps({"text": " ".join(lines[:200])}) + "\n").encode())
    f.write(b'{"text": "no end\n{"id": 3}\n{"text": ["x"]}\n{"text": "\xff"}\n')
    f.write((json.dumps({"text": " ".join(lines[200:])}) + "\n").encode())
EOF
set +e
"$SLUICE" bench --task lm "$WORK/bad.jsonl" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 16 --on-error skip --json --quiet >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 0 ] || fail "bad.jsonl run failed: $(cat "$WORK/err")"
[ "$(field errors_skipped "$(tail -1 "$WORK/out")")" = 4 ] || fail "errors_skipped: $(cat "$WORK/out")"
for want in 'bad.jsonl:2: invalid JSON' 'bad.jsonl:3: no "text" field' 'bad.jsonl:4: "text" is not a string' 'bad.jsonl:5: invalid JSON'; do
    grep -qF "skipped: $WORK/$want" "$WORK/err" || fail "no message '$want' in: $(cat "$WORK/err")"
done
set +e
"$SLUICE" bench --task lm "$WORK/bad.jsonl" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 16 --on-error fail --quiet >/dev/null 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "error: .*bad.jsonl:[2-5]: " "$WORK/err" || fail "--on-error fail: rc $rc, $(cat "$WORK/err")"
# --json carries the message too, not only the error's class
set +e
J=$("$SLUICE" bench --task lm "$WORK/bad.jsonl" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 16 --json --quiet 2>/dev/null | tail -1)
set -e
field message "$J" | grep -q "bad.jsonl:[2-5]: " || fail "--json failure without the message: $J"
# cpu_util is a fraction of the usable CPUs, also for a run that fails
# before its first batch (CPU and wall time over the same interval; it was
# 23.05 where the CPU was counted from before the loader's start). Several
# runs: the old error showed in some of them only.
printf '{"text": "hi"}\n{bad\n' >"$WORK/b.jsonl"
for i in $(seq 20); do
    set +e
    J=$("$SLUICE" bench --task lm "$WORK/b.jsonl" "${LM[@]}" --seq-len 4 --batch 1 --json --quiet 2>/dev/null | tail -1)
    set -e
    python3 -c 'import json,sys; u = json.loads(sys.argv[1])["cpu_util"]; sys.exit(not 0 <= u <= 1)' "$J" ||
        fail "cpu_util of a run failed before its first batch: $J"
done
# ... and the document that failed the run is not also counted or listed
# as skipped (it was not skipped)
[ "$(field errors_skipped "$J")" = 0 ] || fail "--on-error fail counts the fatal document as skipped: $J"
! grep -q "skipped:" "$WORK/err" || fail "--on-error fail lists a skip: $(cat "$WORK/err")"
# the dropped tails are counted: tokens made = windows x (seq_len + 1) + dropped
D=$("$SLUICE" bench --task lm "$WORK/corpus.txt" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 64 --batch 4 --json --quiet | tail -1)
[ "$(field tokens_dropped "$D")" -gt 0 ] || fail "no tokens_dropped: $D"
# a bad value names its range; --mask-prob 0 is no masking (HF's 0.0)
set +e
"$SLUICE" bench --task mlm "$WORK/corpus.txt" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --mask-prob 2 >/dev/null 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -qF -- "--mask-prob (a number in [0, 1])" "$WORK/err" || fail "--mask-prob 2: rc $rc, $(cat "$WORK/err")"
M0=$("$SLUICE" bench --task mlm "$WORK/corpus.txt" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 64 --mask-prob 0 --digest --json --quiet | tail -1)
M15=$("$SLUICE" bench --task mlm "$WORK/corpus.txt" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 64 --mask-prob 0.15 --digest --json --quiet | tail -1)
MD=$("$SLUICE" bench --task mlm "$WORK/corpus.txt" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 64 --digest --json --quiet | tail -1)
[ "$(field digest "$MD")" = "$(field digest "$M15")" ] && [ "$(field digest "$M0")" != "$(field digest "$MD")" ] || fail "--mask-prob 0 is the default: $M0 / $MD"
set +e
"$SLUICE" bench --task lm "$WORK/none.txt" --tokenizer wordpiece --vocab "$WORK/vocab.txt" >/dev/null 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "none.txt" "$WORK/err" || fail "missing source: rc $rc, $(cat "$WORK/err")"

# pack --text over old shards: refused, then replaced (leftovers removed)
set +e
"$SLUICE" pack --text "$CORPUS" -o "$WORK/shards" >/dev/null 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "use --force" "$WORK/err" || fail "pack --text over shards: rc $rc, $(cat "$WORK/err")"
"$SLUICE" pack --text "$WORK/corpus.txt" -o "$WORK/small" --shard-size 20K 2>/dev/null || fail "pack --text --shard-size"
n_small=$(ls "$WORK/small" | grep -c '\.sls$')
[ "$n_small" -gt 2 ] || fail "expected several 20K shards, got $n_small"
# a truncated shard: strict, the run fails naming it; under skip it is
# left out, counted and listed, as an image pack's is, and the rest streams
cp -r "$WORK/small" "$WORK/trunc"
truncate -s 100 "$WORK/trunc/shard-00001.sls"
set +e
"$SLUICE" bench --task lm "$WORK/trunc" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 16 --quiet >/dev/null 2>"$WORK/err"
rc=$?
J=$("$SLUICE" bench --task lm "$WORK/trunc" --tokenizer wordpiece --vocab "$WORK/vocab.txt" --seq-len 16 --on-error skip --json --quiet 2>"$WORK/err2" | tail -1)
rc2=$?
set -e
[ $rc -eq 1 ] && grep -q "shard-00001.sls: truncated" "$WORK/err" || fail "truncated shard, fail: rc $rc, $(cat "$WORK/err")"
[ $rc2 -eq 0 ] && [ "$(field errors_skipped "$J")" = 1 ] && [ "$(field samples "$J")" -gt 0 ] || fail "truncated shard, skip: rc $rc2, $J $(cat "$WORK/err2")"
grep -q "skipped: .*shard-00001.sls: truncated.*(whole shard left out)" "$WORK/err2" || fail "truncated shard, skip: not listed: $(cat "$WORK/err2")"
"$SLUICE" pack --text "$WORK/corpus.txt" -o "$WORK/small" --force 2>/dev/null || fail "pack --text --force"
[ "$(ls "$WORK/small" | tr '\n' ' ')" = "shard-00000.sls sluice-manifest.txt " ] || fail "--force left old shards: $(ls "$WORK/small")"

# tokenize: WordPiece is uncased by default, as the text loader; --uncased
# is still taken; --cased keeps case (capitals are not in the vocabulary)
printf 'Abc DEF ghi\n' >"$WORK/case.txt"
TOK=(tokenize --tokenizer wordpiece --vocab "$WORK/vocab.txt")
t_def=$("$SLUICE" "${TOK[@]}" "$WORK/case.txt")
t_unc=$("$SLUICE" "${TOK[@]}" --uncased "$WORK/case.txt")
t_cas=$("$SLUICE" "${TOK[@]}" --cased "$WORK/case.txt")
[ "$t_def" = "$t_unc" ] || fail "tokenize default '$t_def' != --uncased '$t_unc'"
[ "$t_def" != "$t_cas" ] && [ "$(echo "$t_cas" | cut -d' ' -f1)" = 1 ] || fail "--cased: '$t_cas' (default '$t_def')"
set +e
"$SLUICE" tokenize --tokenizer nope --vocab "$WORK/vocab.txt" "$WORK/case.txt" >/dev/null 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "unknown tokenizer 'nope'" "$WORK/err" || fail "unknown tokenizer: rc $rc, $(cat "$WORK/err")"
set +e
"$SLUICE" "${TOK[@]}" "$WORK/nosuch.txt" >/dev/null 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 1 ] && [ "$(grep -o "nosuch.txt" "$WORK/err" | wc -l)" = 1 ] || fail "tokenize of a missing file: rc $rc, $(cat "$WORK/err")"
# a vocabulary that is a device is refused at once (it was read until the
# address space ran out)
set +e
(ulimit -v 600000; "$SLUICE" tokenize --tokenizer wordpiece --vocab /dev/zero "$WORK/case.txt") >/dev/null 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "/dev/zero: not a regular file" "$WORK/err" || fail "tokenize --vocab /dev/zero: rc $rc, $(cat "$WORK/err")"
echo "text_cli: ok"
