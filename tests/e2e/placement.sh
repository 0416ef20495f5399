#!/usr/bin/env bash
# End-to-end test of --placement / --gpu-share without a usable GPU stage
# (issue 19: a build without nvcc has no kernels; one with them finds no
# CUDA runtime or device on a CI machine): gpu fails at once naming why,
# auto and cpu run on the CPU and say so (the stderr line, telemetry's
# placement object), the stream is the same for both, and a GPU share is
# refused naming why. Skips where a GPU stage actually runs.
set -uo pipefail
. "$(dirname "$0")/lib.sh" placement

mkdir -p "$T"
"$S" make-dataset --synthetic "$T/ds" --images 40 --classes 2 --seed 3 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
common=(--batch 8 --size 32 --seed 5 --threads 2 --epochs 2 --json --digest)

"$S" run "$T/ds" "${common[@]}" --placement gpu >"$T/gpu.out" 2>"$T/gpu.err"
rc=$?
if [ $rc -eq 0 ]; then echo "SKIP: a GPU stage runs here (tests/gpu/ covers it)"; exit 77; fi
nostage="(the GPU stage is not in this build|no NVIDIA GPU driver on this machine \(/dev/nvidiactl is absent\); and no lib(cudart|nvjpeg)\.so\.1[23] found|no lib(cudart|nvjpeg)\.so\.1[23] found|no CUDA device)"
check "--placement gpu: names why" \
  grep -Eq "placement gpu: no GPU stage: $nostage" "$T/gpu.err"

auto=$("$S" run "$T/ds" "${common[@]}" --telemetry "$T/auto.jsonl" --telemetry-ms 5 2>/dev/null)
check "auto: runs" test -n "$auto"
check "auto: telemetry's placement says why" \
  grep -q '"placement": {"asked": "auto", "gpu": 0, "gpu_share": 0, "why": "auto: no GPU seen (NVML)' "$T/auto.jsonl"
"$S" run "$T/ds" --batch 8 --size 32 >/dev/null 2>"$T/auto.err"
check "auto: says it runs on the CPU and why" \
  grep -q "placement: CPU (auto: no GPU seen" "$T/auto.err"
cpu=$("$S" run "$T/ds" "${common[@]}" --placement cpu 2>/dev/null)
"$S" run "$T/ds" --batch 8 --size 32 --placement cpu >/dev/null 2>"$T/cpu.err"
check "cpu: no reason given" grep -q "placement: CPU$" "$T/cpu.err"
d=$(jget digest <<<"$auto")
check "same stream: auto, cpu" test -n "$d" -a "$(jget digest <<<"$cpu")" = "$d"

"$S" run "$T/ds" "${common[@]}" --gpu-share 500 >/dev/null 2>"$T/share.err"
check "--gpu-share 500: fails" test $? -ne 0
check "--gpu-share 500: names why" \
  grep -Eq "gpu_share 500: 0..0 per mille, the GPU stage is not in use: $nostage" "$T/share.err"
"$S" run "$T/ds" --placement tpu --quiet >/dev/null 2>&1; check "--placement tpu: exit 2" test $? -eq 2

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
