#!/usr/bin/env bash
# End-to-end test of --placement / --gpu-share without a GPU stage (issue
# 19; this build compiles none, so whatever the machine has): gpu fails
# at once naming why, auto and cpu run on the CPU and say so (the stderr
# line, telemetry's placement object), the stream is the same for both,
# and a GPU share is refused naming why.
set -uo pipefail
. "$(dirname "$0")/lib.sh" placement

mkdir -p "$T"
"$S" make-dataset --synthetic "$T/ds" --images 40 --classes 2 --seed 3 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
common=(--batch 8 --size 32 --seed 5 --threads 2 --epochs 2 --json --digest)

"$S" run "$T/ds" "${common[@]}" --placement gpu >"$T/gpu.out" 2>"$T/gpu.err"
rc=$?
check "--placement gpu: fails" test $rc -ne 0
check "--placement gpu: names why" \
  grep -q "placement gpu: no GPU stage: the GPU stage is not in this build" "$T/gpu.err"

auto=$("$S" run "$T/ds" "${common[@]}" --telemetry "$T/auto.jsonl" --telemetry-ms 5 2>/dev/null)
check "auto: runs" test -n "$auto"
check "auto: telemetry's placement says why" \
  grep -q '"placement": {"asked": "auto", "gpu": 0, "gpu_share": 0, "why": "the GPU stage is not in this build' "$T/auto.jsonl"
"$S" run "$T/ds" --batch 8 --size 32 >/dev/null 2>"$T/auto.err"
check "auto: says it runs on the CPU and why" \
  grep -q "placement: CPU (the GPU stage is not in this build" "$T/auto.err"
cpu=$("$S" run "$T/ds" "${common[@]}" --placement cpu 2>/dev/null)
"$S" run "$T/ds" --batch 8 --size 32 --placement cpu >/dev/null 2>"$T/cpu.err"
check "cpu: no reason given" grep -q "placement: CPU$" "$T/cpu.err"
d=$(jget digest <<<"$auto")
check "same stream: auto, cpu" test -n "$d" -a "$(jget digest <<<"$cpu")" = "$d"

"$S" run "$T/ds" "${common[@]}" --gpu-share 500 >/dev/null 2>"$T/share.err"
check "--gpu-share 500: fails" test $? -ne 0
check "--gpu-share 500: names why" grep -q "gpu_share 500: 0..0 per mille" "$T/share.err"
"$S" run "$T/ds" --placement tpu --quiet >/dev/null 2>&1; check "--placement tpu: exit 2" test $? -eq 2

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
