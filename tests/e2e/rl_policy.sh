#!/usr/bin/env bash
# End-to-end tests of the rl policy: `train-policy` writes a weights file
# that `run --policy rl --policy-file` uses (every decision's reason carries
# the action probabilities; knobs stay within --max-threads), the built-in
# default works without a file, a damaged file fails naming the file and
# the cause, and --learn runs. `simulate --policy rl` runs the same policy
# through the same scheduler tick in the simulator.
set -uo pipefail
. "$(dirname "$0")/lib.sh" rl optional

"$S" make-dataset --synthetic "$T/ds" --images 200 --classes 4 --seed 3 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }

# A short training run: two PPO updates, a small evaluation.
"$S" train-policy --seed 3 --steps 1024 --rollout 512 --episode-s 20 --eval 2 \
  -o "$T/p.bin" >"$T/train.out" 2>"$T/train.err"
check "train-policy: exit 0" test $? -eq 0
check "train-policy: progress per update" grep -q "update   2 .*mean reward" "$T/train.err"
check "train-policy: evaluation rows" bash -c "grep -q '^rl ' '$T/train.out' && grep -q '^heuristic ' '$T/train.out' && grep -q '^static ' '$T/train.out'"
size=$(stat -c %s "$T/p.bin" 2>/dev/null || echo 0)
check "weights file: 32 + 8x24 + 4x6410 + 8 bytes" test "$size" -eq $((32 + 192 + 25640 + 8))

# The simulator runs rl through the loader's tick: decisions carry rl
# reasons, knobs stay within --max-threads, the same seed gives the same
# figures.
printf '{"ncpu": 4, "decode_ms": 4.0, "step_ms": 20.0}\n' >"$T/prof.json"
sim=(simulate --profile "$T/prof.json" --duration 20 --seed 4 --max-threads 3 --json)
# The built-in default (a two-update policy may well hold every knob here):
# every decision is the policy's (rl: with its probabilities) or the stall
# model's jump it runs first (model: with its estimate).
"$S" "${sim[@]}" --policy rl --telemetry "$T/sim.jsonl" \
  >"$T/sim.out" 2>"$T/sim.err"
check "simulate --policy rl: exit 0" test $? -eq 0
check "simulate --policy rl: the JSON says rl" grep -q '"policy": "rl"' "$T/sim.out"
s_dec=$(grep -c '"decision": {' "$T/sim.jsonl" || true)
s_rl=$(grep -c '"reason": "rl: ' "$T/sim.jsonl" || true)
s_model=$(grep -c '"reason": "model: ' "$T/sim.jsonl" || true)
echo "     simulated decisions: $s_dec, with rl reasons: $s_rl, model jumps: $s_model"
check "simulate --policy rl: decisions carry rl or model reasons" test "$s_dec" -gt 0 -a "$s_dec" -eq $((s_rl + s_model))
"$S" "${sim[@]}" --policy rl --policy-file "$T/p.bin" --telemetry "$T/sim.jsonl" \
  >"$T/sim.out" 2>"$T/sim.err"
check "simulate --policy rl --policy-file: exit 0" test $? -eq 0
s_over=$(sed -n 's/.*"knobs": {"read_threads": \([0-9]*\), "decode_threads": \([0-9]*\).*/\1 \2/p' "$T/sim.jsonl" \
  | awk '$2 + 1 > 3 || $1 > 64' | wc -l)
check "simulate --policy rl: decode + 1 <= 3 throughout" test "$s_over" -eq 0
"$S" "${sim[@]}" --policy rl --policy-file "$T/p.bin" >"$T/sim2.out" 2>&1
check "simulate --policy rl: same seed, same figures" cmp -s "$T/sim.out" "$T/sim2.out"
"$S" "${sim[@]}" --policy rl --policy-file "$T/none.bin" >"$T/simnone.out" 2>"$T/simnone.err"
check "simulate --policy rl: a missing file fails naming it" \
  bash -c "test $? -ne 0 && grep -q 'none.bin: .*No such file' '$T/simnone.err'"

# The shipped default, judged in the simulator on 6 held-out profiles: it
# must beat static (prefetch 2) on reward and wait, and stay within 1.5x
# of the heuristic's wait (a broken or stale default fails here).
if [ -f "${SL_ROOT:-}/policies/default.bin" ]; then
  "$S" train-policy --init "$SL_ROOT/policies/default.bin" --steps 0 --eval 6 \
    -o "$T/d.bin" >"$T/deval.out" 2>"$T/deval.err"
  check "evaluate default: exit 0" test $? -eq 0
  row() { awk -v p="$1" -v c="$2" '$1 == p { print $c }' "$T/deval.out"; }
  echo "     default in sim: wait rl $(row rl 2) heuristic $(row heuristic 2) static $(row static 2)"
  check "default beats static on reward" awk -v a="$(row rl 8)" -v b="$(row static 8)" 'BEGIN { exit !(a > b) }'
  check "default beats static on wait" awk -v a="$(row rl 2)" -v b="$(row static 2)" 'BEGIN { exit !(a < b) }'
  check "default wait within 1.5x heuristic" awk -v a="$(row rl 2)" -v b="$(row heuristic 2)" 'BEGIN { exit !(a <= 1.5 * b + 0.5) }'
fi

run=(--batch 8 --size 64 --step-ms 5 --duration 3 --telemetry-ms 50 --max-threads 3 --quiet --json)
"$S" run "$T/ds" "${run[@]}" --policy rl --policy-file "$T/p.bin" \
  --telemetry "$T/t.jsonl" >"$T/run.out" 2>"$T/run.err"
check "run --policy rl: exit 0" test $? -eq 0
# Every decision the rl policy made says so, with probabilities.
n_dec=$(grep -c '"decision": {' "$T/t.jsonl" || true)
n_rl=$(grep -c '"reason": "rl: read' "$T/t.jsonl" || true)
echo "     decisions: $n_dec, with rl reasons: $n_rl"
check "decisions carry rl reasons" test "$n_dec" -eq "$n_rl"
# Knobs within the thread budget at every tick: decode + 1 (the read stage)
# CPU threads; read threads are I/O depth, within the engine's budget
# (sched/limits.h sl__io_depth_budget: 4 x cores, at least 64, at most 256).
io=$(( 4 * $(nproc) )); [ $io -lt 64 ] && io=64; [ $io -gt 256 ] && io=256
over=$(sed -n 's/.*"knobs": {"read_threads": \([0-9]*\), "decode_threads": \([0-9]*\).*/\1 \2/p' "$T/t.jsonl" \
  | awk -v io="$io" '$2 + 1 > 3 || $1 > io' | wc -l)
[ "$over" -eq 0 ] || grep -o '"knobs": {[^}]*}' "$T/t.jsonl" | sort | uniq -c | head -5
check "decode + 1 <= --max-threads 3 and read <= I/O depth throughout" test "$over" -eq 0

"$S" run "$T/ds" "${run[@]}" --policy rl >"$T/def.out" 2>"$T/def.err"
rc=$?
if grep -q "no default policy" "$T/def.err"; then
  echo "     (this build has no built-in default policy)"
  check "no default: clear error" test $rc -ne 0
else
  check "run --policy rl (built-in default): exit 0" test $rc -eq 0
fi

"$S" run "$T/ds" "${run[@]}" --policy rl --learn --policy-file "$T/p.bin" >"$T/learn.out" 2>"$T/learn.err"
check "run --policy rl --learn: exit 0" test $? -eq 0

# A damaged file: refused, naming the file and the cause.
cp "$T/p.bin" "$T/bad.bin"
printf '\x01' | dd of="$T/bad.bin" bs=1 seek=300 conv=notrunc 2>/dev/null
"$S" run "$T/ds" "${run[@]}" --policy rl --policy-file "$T/bad.bin" >"$T/bad.out" 2>"$T/bad.err"
check "damaged policy: non-zero exit" test $? -ne 0
check "damaged policy: names file and cause" grep -q "bad.bin: checksum mismatch" "$T/bad.err"
"$S" run "$T/ds" "${run[@]}" --policy rl --policy-file "$T/none.bin" >"$T/none.out" 2>"$T/none.err"
check "missing policy: names file" grep -q "none.bin: .*No such file" "$T/none.err"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
