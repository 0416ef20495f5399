#!/usr/bin/env bash
# End-to-end test of `--placement gpu` through the real GPU stage over the
# CUDA runtime and nvJPEG simulated on the CPU (tests/unit/sim_cuda/, in
# the build tree; SL_SIM_CUDA names its folder): the stream equals
# `--placement cpu --no-dct` digest for digest (the simulated decoder is
# libjpeg-turbo's), every sample counted on the GPU in telemetry, a share
# changed mid-run keeps the stream (the CPU's part without DCT scaling
# too), the sample cache's hits take the same path, placement auto lets the
# scheduler raise the share where the CPU is short, and `sluice plot` draws
# the share.
# Skips where the build has no GPU stage (no nvcc) or no simulated runtime.
set -uo pipefail
. "$(dirname "$0")/lib.sh" gpu_sim
SIM=${SL_SIM_CUDA:-}
if [ -z "$SIM" ] || [ ! -e "$SIM/libcudart.so.13" ]; then
  echo "SKIP: no simulated CUDA runtime (SL_SIM_CUDA=$SIM)"; exit 77
fi
mkdir -p "$T"
"$S" make-dataset --synthetic "$T/ds" --images 60 --classes 3 --seed 2 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
common=(--batch 8 --size 40 --seed 9 --threads 2 --epochs 2 --json --digest)
cpu=$("$S" run "$T/ds" "${common[@]}" --placement cpu --no-dct 2>/dev/null)
gpu=$(SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" "${common[@]}" --placement gpu \
        --telemetry "$T/gpu.jsonl" --telemetry-ms 5 2>"$T/gpu.err")
rc=$?
if [ $rc -ne 0 ] && grep -q "not in this build" "$T/gpu.err"; then
  echo "SKIP: the GPU stage is not in this build"; exit 77
fi
check "placement gpu runs over the simulated CUDA" test $rc -eq 0
d=$(jget digest <<<"$cpu")
check "the stream is placement cpu's without DCT scaling" \
  test -n "$d" -a "$(jget digest <<<"$gpu")" = "$d"
n=$(grep -o '"gpu_samples_total": [0-9]*' "$T/gpu.jsonl" | tail -1 | grep -o '[0-9]*$')
check "telemetry counts the GPU's samples (120)" test "${n:-0}" -eq 120
# ROI decode over the simulated hardware backend: each image decoded only
# to its crop's region, so fewer pixels than the images have; with
# SL_GPU_ROI=0 whole images, the same stream.
check "telemetry says the stage decodes regions" grep -q '"gpu_roi": 1' "$T/gpu.jsonl"
f=$(grep -o '"gpu_decoded_frac": [0-9.e-]*' "$T/gpu.jsonl" | tail -1 | grep -o '[0-9.e-]*$')
check "regions are less than the images ($f)" \
  awk -v f="${f:-1}" 'BEGIN { exit !(f > 0.05 && f < 0.9) }'
whole=$(SL_GPU_ROI=0 SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" "${common[@]}" --placement gpu \
          --telemetry "$T/whole.jsonl" --telemetry-ms 5 2>/dev/null)
check "whole images (SL_GPU_ROI=0): the same stream" test "$(jget digest <<<"$whole")" = "$d"
check "... and telemetry says so" grep -q '"gpu_roi": 0' "$T/whole.jsonl"
check "... every pixel decoded" grep -q '"gpu_decoded_frac": 1[,}]' "$T/whole.jsonl"
# A GPU memory budget (--gpu-memory): the stage decodes within it, the
# same stream; one it cannot decode in fails placement gpu naming why.
small=$(SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" "${common[@]}" --placement gpu \
          --gpu-memory 100M --telemetry "$T/small.jsonl" --telemetry-ms 5 2>/dev/null)
check "--gpu-memory 100M: the same stream" test "$(jget digest <<<"$small")" = "$d"
gb=$(grep -o '"gpu_bytes": [0-9]*' "$T/small.jsonl" | tail -1 | grep -o '[0-9]*$')
check "... the GPU memory held within it ($gb B)" \
  test "${gb:-0}" -gt 0 -a "${gb:-0}" -le $((100 << 20))
check "... nvJPEG's own reported beside" grep -q '"gpu_nvjpeg_bytes": [0-9]' "$T/small.jsonl"
SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" --batch 8 --size 40 --placement gpu \
  --gpu-memory 16M >/dev/null 2>"$T/gmem.err"
check "--gpu-memory 16M: refused, saying why" grep -q "no room to decode" "$T/gmem.err"
SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" --batch 8 --size 40 --placement gpu \
  >/dev/null 2>"$T/say.err"
check "stderr says where" grep -q "placement: GPU stage and CPU" "$T/say.err"
half=$(SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" "${common[@]}" --placement gpu \
         --no-dct --set 4:gpu-share=500 --telemetry "$T/half.jsonl" --telemetry-ms 5 2>/dev/null)
check "a share changed mid-run keeps the stream" test "$(jget digest <<<"$half")" = "$d"
check "telemetry shows the new share" grep -q '"gpu_share": 500' "$T/half.jsonl"
# The sample cache's encoded tier: a hit goes to the GPU as a read does
# (its bytes in place, or copied out of a compressed entry), so whether a
# sample hit moves neither the stream nor the GPU's count (two epochs of
# 60: the second hits). The decoded tier holds the CPU's pixels: placement
# gpu is refused naming it, auto runs on the CPU saying why.
for codec in none zstd-3; do
  c=$(SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" "${common[@]}" --placement gpu \
        --cache 64M --cache-codec $codec --telemetry "$T/cache_$codec.jsonl" \
        --telemetry-ms 5 2>/dev/null)
  check "cache ($codec): the same stream" test "$(jget digest <<<"$c")" = "$d"
  n=$(grep -o '"gpu_samples_total": [0-9]*' "$T/cache_$codec.jsonl" | tail -1 | grep -o '[0-9]*$')
  check "cache ($codec): every sample on the GPU, hits too (${n:-0} of 120)" test "${n:-0}" -eq 120
  h=$(grep -o '"hits_total": [0-9]*' "$T/cache_$codec.jsonl" | tail -1 | grep -o '[0-9]*$')
  check "cache ($codec): the second epoch hit (${h:-0} hits)" test "${h:-0}" -ge 30
done
SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" --batch 8 --size 40 --placement gpu \
  --cache 64M --cache-decoded >/dev/null 2>"$T/decoded.err"
check "the decoded tier: placement gpu refused, naming it" \
  grep -q "placement gpu: no GPU stage: the decoded sample cache" "$T/decoded.err"
SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" --batch 8 --size 40 --placement gpu \
  --cache-decoded >/dev/null 2>"$T/decoded0.err"
check "... asked for with no bytes yet (they may grow while it runs): refused too" \
  grep -q "placement gpu: no GPU stage: the decoded sample cache" "$T/decoded0.err"
SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" --batch 8 --size 40 --cache 64M \
  --cache-decoded --telemetry "$T/decoded.jsonl" >/dev/null 2>&1
check "the decoded tier: auto on the CPU, saying why" \
  grep -q '"gpu": 0, "gpu_share": 0, "why": "auto: no GPU stage: the decoded sample cache' "$T/decoded.jsonl"
# placement auto (the default) where the driver (the simulated NVML in the
# same folder) sees a GPU: the stage is made, the share starts at 0 and the
# scheduler owns it; one decoder (--max-threads 2) and a consumer that takes
# all it gets: the CPU is short and the trainer waits, so it raises the
# share, and the stream stays the CPU's without DCT scaling whatever the
# share did (the simulated decoder is libjpeg-turbo's).
auto=$(SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" --batch 8 --size 40 --seed 9 \
         --max-threads 2 --epochs 40 --json --digest \
         --telemetry "$T/auto.jsonl" --telemetry-ms 10 2>"$T/auto.err")
check "placement auto runs over the simulated GPU" test $? -eq 0
long=$("$S" run "$T/ds" --batch 8 --size 40 --seed 9 --epochs 40 --json \
         --digest --placement cpu --no-dct 2>/dev/null)
check "auto's stream is the CPU's without DCT scaling" \
  test -n "$(jget digest <<<"$long")" -a "$(jget digest <<<"$auto")" = "$(jget digest <<<"$long")"
check "the scheduler raised the GPU share (a placement decision)" \
  grep -q '"knob": "gpu_share", "from": 0' "$T/auto.jsonl"
check "the decision says why (CPU short)" grep -q 'placement: CPU short' "$T/auto.jsonl"
check "the GPU stage did samples" \
  grep -Eq '"gpu_samples_total": [1-9]' "$T/auto.jsonl"
check "telemetry has the stage's busy share" grep -q '"gpu_stage_busy": 0\.[0-9]*[1-9]' "$T/auto.jsonl"
check "telemetry has the GPU path's CPU" grep -q '"gpu_cpu_busy": [0-9]*\.[0-9]*[1-9]' "$T/auto.jsonl"
# of it the decoders' hand-overs, a part: the simulated nvJPEG decodes on
# the stage's own threads
check "telemetry splits it: the hand-overs a part, the stage's threads the rest" \
  python3 -c '
import json, sys
s = [json.loads(x)["placement"] for x in open(sys.argv[1])][-1]
h, c = s["gpu_handoff_total_s"], s["gpu_cpu_total_s"]
sys.exit(not (0 < h < c))' "$T/auto.jsonl"
# sluice calibrate fits the stage from that run: its busy ms a sample and
# the CPU a sample cost it (the simulated nvJPEG decodes on the CPU: about
# a decode's).
"$S" calibrate "$T/auto.jsonl" -o "$T/auto_profile.json" --skip 0.05 --json \
  >"$T/cal.out" 2>&1
check "calibrate fits the GPU stage (gpu_ms, gpu_cpu_ms)" \
  grep -Eq '"gpu_ms": [0-9.]*[1-9].*"gpu_cpu_ms": [0-9.]*[1-9]' "$T/cal.out"
check "the fitted profile has the stage" \
  grep -Eq '"gpu_ms": [0-9.]*[1-9]' "$T/auto_profile.json"
check "telemetry has the JPEG decoders' use from NVML" grep -q '"jpg_util": 0.25' "$T/auto.jsonl"
# The same run with NVML saying the GPU never idles (kernels running 99 %
# of the time): the trainer's wait is not the GPU's idle time, so the
# share is not raised.
SIM_NVML_GPU_UTIL=99 SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" --batch 8 --size 40 \
  --seed 9 --max-threads 2 --epochs 40 --json --telemetry "$T/full.jsonl" \
  --telemetry-ms 10 >/dev/null 2>"$T/full.err"
check "a GPU that never idles: the run completes" test $? -eq 0
check "  and the trainer waited (stall >= 3 %: a raise was otherwise due)" \
  grep -Eq '"stall_fraction": (0\.(0[3-9]|[1-9])|1\.)' "$T/full.jsonl"
check "telemetry has NVML's GPU use (0.99)" \
  grep -q '"util": 0.99' "$T/full.jsonl"
check "  telemetry says why the share stays (placement.held)" \
  grep -q '"held": "NVML: the GPU ran kernels 99 % of the time"' "$T/full.jsonl"
check "a GPU that never idles gets no share (no placement decision)" \
  bash -c "! grep -q '\"knob\": \"gpu_share\"' '$T/full.jsonl'"
static=$(SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" --batch 8 --size 40 --policy static \
           --json --telemetry "$T/static.jsonl" 2>/dev/null)
check "under the static policy auto stays on the CPU" \
  grep -q 'auto without a gpu_share under the static policy' "$T/static.jsonl"
# Telemetry's GPU is the stage's: NVML finds it by its PCI bus id, as
# NVML's indices need not be CUDA's (the simulated NVML numbers two devices
# the other way round, and reports use 10 % + its index).
check "one GPU: telemetry reads NVML's GPU 0" grep -q '"index": 0, "util": 0.1[,}]' "$T/gpu.jsonl"
for dev in 0 1; do
  SIM_CUDA_DEVICES=2 SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" "${common[@]}" \
    --placement gpu --gpu-device $dev --telemetry "$T/dev$dev.jsonl" \
    --telemetry-ms 5 >/dev/null 2>&1
done
check "CUDA's GPU 0 is NVML's 1 (the stage's GPU read)" \
  grep -q '"count": 2, "index": 1, "util": 0.11' "$T/dev0.jsonl"
check "CUDA's GPU 1 is NVML's 0" \
  grep -q '"count": 2, "index": 0, "util": 0.1[,}]' "$T/dev1.jsonl"
SIM_CUDA_DEVICES=2 SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" "${common[@]}" \
  --placement cpu --telemetry "$T/devcpu.jsonl" --telemetry-ms 5 >/dev/null 2>&1
check "without a stage: GPU 0" grep -q '"count": 2, "index": 0,' "$T/devcpu.jsonl"
# CUDA's GPU 2 is one NVML does not list (it sees 2 of 3): among several,
# telemetry reads none rather than guess.
SIM_CUDA_DEVICES=3 SIM_NVML_DEVICES=2 SL_CUDA_LIB_PATH=$SIM "$S" run "$T/ds" \
  "${common[@]}" --placement gpu --gpu-device 2 --telemetry "$T/dev2.jsonl" \
  --telemetry-ms 5 >/dev/null 2>&1
check "a GPU NVML cannot find: gpu null, not another's" \
  bash -c "grep -q '\"gpu\": null' '$T/dev2.jsonl' && ! grep -q '\"gpu\": {\"count' '$T/dev2.jsonl'"
if command -v gnuplot >/dev/null; then
  "$S" plot "$T/half.jsonl" -o "$T/half.svg" >/dev/null 2>&1
  check "sluice plot draws the GPU share" grep -q "GPU share" "$T/half.svg"
  check "sluice plot draws the GPU stage's samples/s" \
    grep -q "GPU stage samples/s" "$T/half.svg"
fi
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
