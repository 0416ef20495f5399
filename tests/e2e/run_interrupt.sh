#!/usr/bin/env bash
# Ctrl-C (SIGINT) or SIGTERM during `sluice run` stops it cleanly: the
# summary (marked interrupted), the --state file with the position reached,
# exit 130 / 143; a --resume from that file continues exactly there (its
# digest is an uninterrupted run's).
set -uo pipefail
. "$(dirname "$0")/lib.sh" run_interrupt
set -m # background jobs with SIGINT as it is, not ignored (as in a terminal)

"$S" make-dataset --synthetic "$T/ds" --images 64 --classes 4 --seed 2 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
# 8 batches an epoch, 320 in all; --step-ms makes it last ~10 s.
common=(--batch 8 --size 32 --epochs 40 --seed 7 --digest --threads 2 --quiet)
full=$("$S" run "$T/ds" "${common[@]}" --json 2>/dev/null | jget digest)
check "uninterrupted digest ($full)" test -n "$full"

# run_signal SIG OUT ERR ARGS...: starts `sluice run ARGS...` (an image or
# a text run), sends SIG after 1 s; sets rc (its exit status) and late
# (seconds from the signal to the exit).
run_signal() {
  local sig=$1 out=$2 err=$3; shift 3
  "$S" run "$@" >"$out" 2>"$err" &
  local pid=$!
  sleep 1
  local t0=$(date +%s%N)
  kill -"$sig" "$pid"
  wait "$pid"; rc=$?
  late=$(( ($(date +%s%N) - t0) / 1000000000 ))
}

run_signal INT "$T/out1" "$T/err1" "$T/ds" "${common[@]}" --step-ms 30 --json --state "$T/st"
check "SIGINT: exit 130 (got $rc)" test "$rc" -eq 130
check "SIGINT: out within 5 s (${late} s)" test "$late" -le 5
check "SIGINT: JSON summary marked interrupted" grep -q '"interrupted": "SIGINT"' "$T/out1"
check "SIGINT: says where it stopped" grep -q "interrupted (SIGINT) at epoch" "$T/err1"
check "SIGINT: --state written" test -s "$T/st"
b1=$(jget batches <"$T/out1")
check "SIGINT: stopped part-way (${b1:-?} of 320 batches)" test -n "$b1" -a "${b1:-0}" -gt 0 -a "${b1:-320}" -lt 320
pos=$(awk '/^epoch/ {e=$2} /^batch/ {b=$2} END {print e * 8 + b}' "$T/st")
check "SIGINT: the state's position is the batches taken ($pos)" test -n "$pos" -a "$pos" = "$b1"
"$S" run "$T/ds" "${common[@]}" --json --resume "$T/st" >"$T/out2" 2>"$T/err2"
check "resumed: exit 0" test $? -eq 0
b2=$(jget batches <"$T/out2")
check "resumed: the rest ($b1 + ${b2:-?} = 320)" test $(( b1 + ${b2:-0} )) -eq 320
check "resumed: digest == uninterrupted" test "$(jget digest <"$T/out2")" = "$full"

# SIGTERM, the human summary, and the same --state file resumed again.
run_signal TERM "$T/out3" "$T/err3" "$T/ds" "${common[@]}" --step-ms 30 --state "$T/st3"
check "SIGTERM: exit 143 (got $rc)" test "$rc" -eq 143
check "SIGTERM: the summary line" grep -q "samples in .* batches" "$T/out3"
check "SIGTERM: says where it stopped" grep -q "interrupted (SIGTERM) at epoch" "$T/err3"
run_signal INT "$T/out4" "$T/err4" "$T/ds" "${common[@]}" --step-ms 30 --json --resume "$T/st3" --state "$T/st3"
check "resumed and interrupted again: exit 130" test "$rc" -eq 130
dr=$("$S" run "$T/ds" "${common[@]}" --json --resume "$T/st3" 2>/dev/null | jget digest)
check "twice interrupted, resumed: digest == uninterrupted" test "$dr" = "$full"

# A second signal ends it at once (here inside a 20 s step, which the first
# waits out).
"$S" run "$T/ds" "${common[@]}" --step-ms 20000 --state "$T/st5" >/dev/null 2>&1 &
pid=$!
sleep 1; kill -INT "$pid"; sleep 0.3; kill -INT "$pid"
t0=$(date +%s); wait "$pid"; rc=$?
check "second SIGINT: killed at once (rc $rc, $(( $(date +%s) - t0 )) s)" \
  test "$rc" -eq 130 -a $(( $(date +%s) - t0 )) -le 5

# The text run (run --task lm) stops the same way: the summary, --state,
# exit 130 / 143, and --resume gives the rest of the uninterrupted stream.
# A tiny generated WordPiece vocabulary and corpus (~700 batches of 4).
{ printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'
  for c in {a..z}; do echo "$c"; echo "##$c"; done; } >"$T/vocab.txt"
python3 -c '
import random, sys
r = random.Random(3)
w = lambda: "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(1, 7)))
with open(sys.argv[1], "w") as f:
    for _ in range(3000):
        f.write(" ".join(w() for _ in range(r.randint(1, 25))) + "\n")
' "$T/corpus.txt"
text=(--task lm "$T/corpus.txt" --tokenizer wordpiece --vocab "$T/vocab.txt"
      --seq-len 64 --batch 4 --chunk-bytes 16K --group 3 --seed 5 --digest
      --threads 2 --quiet)
tfull=$("$S" run "${text[@]}" --json 2>"$T/terr0" | tail -1)
if grep -q "built without" "$T/terr0"; then
  echo "skip text: $(head -1 "$T/terr0")"
else
  tdigest=$(jget digest <<<"$tfull"); tb=$(jget batches <<<"$tfull")
  check "text: uninterrupted digest ($tdigest, $tb batches)" test -n "$tdigest" -a "${tb:-0}" -gt 100
  run_signal INT "$T/tout1" "$T/terr1" "${text[@]}" --step-ms 30 --json --state "$T/tst"
  check "text SIGINT: exit 130 (got $rc)" test "$rc" -eq 130
  check "text SIGINT: out within 5 s (${late} s)" test "$late" -le 5
  check "text SIGINT: JSON summary marked interrupted" grep -q '"interrupted": "SIGINT"' "$T/tout1"
  check "text SIGINT: says where it stopped" grep -q "interrupted (SIGINT) at epoch 0 batch" "$T/terr1"
  check "text SIGINT: --state written" test -s "$T/tst"
  t1=$(jget batches <"$T/tout1")
  check "text SIGINT: stopped part-way (${t1:-?} of $tb batches)" test -n "$t1" -a "${t1:-0}" -gt 0 -a "${t1:-0}" -lt "${tb:-0}"
  tpos=$(awk '/^epoch/ {e=$2} /^batch/ {b=$2} END {print e ":" b}' "$T/tst")
  check "text SIGINT: the state's position is the batches taken ($tpos)" test "$tpos" = "0:$t1"
  "$S" run "${text[@]}" --json --resume "$T/tst" >"$T/tout2" 2>"$T/terr2"
  check "text resumed: exit 0" test $? -eq 0
  t2=$(jget batches <"$T/tout2")
  check "text resumed: the rest ($t1 + ${t2:-?} = $tb)" test $(( ${t1:-0} + ${t2:-0} )) -eq "${tb:-0}"
  check "text resumed: digest == uninterrupted" test "$(jget digest <"$T/tout2")" = "$tdigest"
  run_signal TERM "$T/tout3" "$T/terr3" "${text[@]}" --step-ms 30 --state "$T/tst3"
  check "text SIGTERM: exit 143 (got $rc)" test "$rc" -eq 143
  check "text SIGTERM: the summary line" grep -q "sequences in .* batches" "$T/tout3"
  check "text SIGTERM: --state written" test -s "$T/tst3"
fi

echo "run_interrupt: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
