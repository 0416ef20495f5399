#!/usr/bin/env bash
# End-to-end: calibrate a simulator profile from a short real run on a
# generated dataset, then simulate: the profile has the run's shape (batch,
# cores, positive stage costs), the simulated throughput of the same
# configuration is within a loose factor of the measured one (this test
# checks the plumbing; bench/sim_validate.sh measures the accuracy), the
# heuristic runs in the simulator, simulated telemetry is the real JSON
# Lines (sluice analyze reads none, plot draws it), and bad input fails
# with a message naming the problem.
set -uo pipefail
. "$(dirname "$0")/lib.sh" calibrate optional
pos()  { awk -v x="$1" 'BEGIN { exit !(x + 0 > 0) }'; }
within() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { exit !(a > 0 && b > 0 && a / b < f && b / a < f) }'; }

"$S" make-dataset --synthetic "$T/ds" --images 200 --classes 4 --seed 3 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }

# A real run long enough for ~15 telemetry periods.
"$S" run "$T/ds" --policy static --threads 1 --prefetch 2 --batch 16 --size 96 \
  --epochs 20 --telemetry "$T/t.jsonl" --json >"$T/run.out" 2>"$T/run.err"
check "run: exit 0" test $? -eq 0
n=$(wc -l <"$T/t.jsonl")
if [ "$n" -lt 12 ]; then
  echo "skip: the run made only $n telemetry periods (machine too fast?)"; exit 77
fi
measured=$(tail -1 "$T/run.out" | jget samples_per_s)
samples=$(tail -1 "$T/run.out" | jget samples)

"$S" calibrate "$T/t.jsonl" -o "$T/p.json" --skip 0.3 --json >"$T/cal.out" 2>"$T/cal.err"
check "calibrate: exit 0" test $? -eq 0
check "profile written" test -s "$T/p.json"
check "profile batch_size 16" grep -q '"batch_size": 16,' "$T/p.json"
check "profile ncpu = nproc" grep -q "\"ncpu\": $(nproc)," "$T/p.json"
d=$(jget decode_ms <"$T/cal.out")
check "decode_ms positive ($d)" pos "$d"
b=$(jget item_bytes <"$T/cal.out")
check "item_bytes positive ($b)" pos "$b"

# The machine may be shared: the run's foreign load goes in as interference.
fd=$(jget foreign_demand <"$T/cal.out")
"$S" simulate --profile "$T/p.json" --policy static --threads 1 --prefetch 2 \
  --samples "$samples" --step-ms 0 --interfere "${fd:-0}" --json >"$T/sim.out" 2>"$T/sim.err"
check "simulate: exit 0" test $? -eq 0
simulated=$(tail -1 "$T/sim.out" | jget samples_per_s)
check "simulated ($simulated/s) within 1.5x of measured ($measured/s)" \
  within "$simulated" "$measured" 1.5
check "simulate json: simulated true" grep -q '"simulated": true' "$T/sim.out"

# The heuristic drives the simulator; telemetry is the real JSON Lines.
"$S" simulate --profile "$T/p.json" --duration 10 --events "5:interfere=1" \
  --telemetry "$T/sim.jsonl" --json >"$T/h.out" 2>"$T/h.err"
check "simulate heuristic: exit 0" test $? -eq 0
check "heuristic policy" grep -q '"policy": "heuristic"' "$T/h.out"
check "100 simulated periods" test "$(wc -l <"$T/sim.jsonl")" -eq 100
check "telemetry keys" grep -q '"stages": {"read"' "$T/sim.jsonl"
"$S" plot "$T/sim.jsonl" -o "$T/sim.svg" >/dev/null 2>&1
check "plot draws simulated telemetry" test -s "$T/sim.svg"

# Calibrating simulated telemetry gives back the profile it came from:
# stage cost despite 1 core of interference, CV, batch, bytes, the step,
# and the foreign demand.
cat >"$T/known.json" <<'JSON'
{"ncpu": 2, "batch_size": 32, "read_ms": 0.2, "read_cv": 0.5,
 "decode_ms": 2.5, "decode_cv": 0.4, "item_bytes": 50000, "interfere": 1.0}
JSON
"$S" simulate --profile "$T/known.json" --policy static --threads 2 --prefetch 4 \
  --duration 20 --step-ms 30 --telemetry "$T/known.jsonl" >/dev/null 2>&1
"$S" calibrate "$T/known.jsonl" -o "$T/back.json" --json >"$T/back.out" 2>&1
check "calibrate simulated telemetry: exit 0" test $? -eq 0
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }
v=$(jget decode_ms <"$T/back.out");      check "decode_ms back ($v vs 2.5)" near "$v" 2.5 0.25
v=$(jget decode_cv <"$T/back.out");      check "decode_cv back ($v vs 0.4)" near "$v" 0.4 0.15
v=$(jget step_ms <"$T/back.out");        check "step_ms back ($v vs 30)" near "$v" 30 1.5
v=$(jget batch_size <"$T/back.out");     check "batch_size back ($v)" test "$v" = 32
v=$(jget item_bytes <"$T/back.out");     check "item_bytes back ($v)" near "$v" 50000 1
v=$(jget foreign_demand <"$T/back.out"); check "foreign_demand back ($v vs 1)" near "$v" 1 0.2

# A profile with a GPU stage (gpu_ms): a fixed share sends part of each
# batch there (twice the CPU's rate at half), the heuristic places by itself
# (a gpu_share decision in telemetry), and a share without a stage is
# refused naming why.
cat >"$T/gpu.json" <<'JSON'
{"ncpu": 2, "batch_size": 64, "read_ms": 0.1, "decode_ms": 4.0, "decode_cv": 0.3,
 "gpu_ms": 0.1}
JSON
r0=$("$S" simulate --profile "$T/gpu.json" --policy static --threads 2 --duration 10 \
       --gpu-share 0 --json 2>/dev/null | tail -1 | jget samples_per_s)
r5=$("$S" simulate --profile "$T/gpu.json" --policy static --threads 2 --duration 10 \
       --gpu-share 500 --json 2>/dev/null | tail -1 | jget samples_per_s)
check "gpu share 500 ($r5/s) about twice share 0 ($r0/s)" within "$r5" "$(awk -v r="$r0" 'BEGIN{print 2*r}')" 1.15
"$S" simulate --profile "$T/gpu.json" --duration 10 --telemetry "$T/gpu.jsonl" >/dev/null 2>&1
check "the heuristic places samples on the simulated GPU" \
  grep -q '"knob": "gpu_share", "from": 0' "$T/gpu.jsonl"
"$S" simulate --profile "$T/known.json" --gpu-share 10 >"$T/nogpu.out" 2>&1
check "a share without a stage: exit 2" test $? -eq 2
check "a share without a stage: says why" grep -q "no GPU stage (gpu_ms 0)" "$T/nogpu.out"

# Errors name the problem.
echo '{"ncpu": 2, "decode_msec": 3}' >"$T/bad.json"
"$S" simulate --profile "$T/bad.json" >"$T/bad.out" 2>&1
check "unknown key: exit 1" test $? -eq 1
check "unknown key named" grep -q "decode_msec" "$T/bad.out"
"$S" simulate --profile "$T/p.json" --events "3:flood=1" >"$T/ev.out" 2>&1
check "bad event: exit 2" test $? -eq 2
"$S" simulate --profile "$T/known.json" --interfere 1e9 >"$T/if.out" 2>&1
check "--interfere past the profile key's range: exit 2" test $? -eq 2
check "--interfere past the range: named" grep -q "interfere = 1e+09 is out of \[0, 4096\]" "$T/if.out"
# A run shorter than one period (0.1 s) is one period: figures within
# their bounds, and with no batch made (1 s a decode), no crash (UBSan).
for d in 0.05 0.001; do
  out=$("$S" simulate --profile "$T/known.json" --policy static --duration "$d" --json 2>&1 | tail -1)
  check "--duration $d: stall and cpu within [0, 1]" python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert 0 <= r["stall_fraction"] <= 1 and 0 <= r["cpu_util"] <= 1, r' "$out"
done
echo '{"ncpu": 2, "batch_size": 32, "decode_ms": 1000}' >"$T/slow.json"
"$S" simulate --profile "$T/slow.json" --policy static --duration 0.05 --json >"$T/nb.out" 2>&1
check "no batch made: exit 0" test $? -eq 0
check "no batch made: 0 batches" grep -q '"batches": 0' "$T/nb.out"
echo 'not json' >"$T/junk.jsonl"
"$S" calibrate "$T/junk.jsonl" -o "$T/x.json" >"$T/junk.out" 2>&1
check "calibrate on junk: exit 1" test $? -eq 1
check "calibrate on junk: no profile" test ! -e "$T/x.json"
# A file whose first line is empty (the line reader wrote its terminator
# through a NULL buffer: SIGSEGV in calibrate and plot, found by fuzzing)
printf '\n{"t": 1}\n' >"$T/blank.jsonl"
"$S" calibrate "$T/blank.jsonl" -o "$T/b.json" >/dev/null 2>&1
check "calibrate, first line empty: exit 1, not a crash" test $? -eq 1
printf '\n' >"$T/blank_only.jsonl"
"$S" plot "$T/blank_only.jsonl" -o "$T/b.svg" >/dev/null 2>&1
check "plot, an empty line only: exit 1, not a crash" test $? -eq 1

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
