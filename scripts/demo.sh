#!/usr/bin/env bash
# `make demo`: what sluice is for, on a generated dataset.
#   scripts/demo.sh BUILD DATA
# 1. The loader alone (no consumer work): every wait is a stall, and the
#    rate is the loader's capacity on this machine.
# 2. A consumer that takes a training-like step per batch, sized so that it
#    asks for half that capacity: the stall should be near zero (what is
#    left is mostly the first batch, waited for while the pipeline fills).
# 3. The capacity against the machine's decode ceiling (bench/decode_ceiling:
#    libjpeg-turbo's plain full-size decode on one core, times the cores;
#    sluice decodes at reduced scale where the crop allows, so it can pass it).
set -euo pipefail
build=$1 data=$2
batch=64 size=224
run() { "$build/sluice" run "$data" --epochs 2 --batch $batch --size $size --quiet "$@"; }

echo "== 1. loader-bound: no consumer work, img/s is the capacity"
line=$(run)
echo "$line"
cap=$(sed -n 's/.*s: \([0-9.]*\) img\/s.*/\1/p' <<<"$line")

# A step of 2 batch times at capacity: demand is half the capacity.
step=$(awk -v c="$cap" -v b=$batch 'BEGIN { printf "%.0f", (c > 0 ? 2 * b * 1000 / c : 100) }')
echo
echo "== 2. a consumer with a ${step} ms step per batch (demand $(awk -v s="$step" -v b=$batch 'BEGIN { printf "%.0f", b * 1000 / s }') img/s, half the capacity)"
run --step-ms "$step" --epochs 3

echo
one=$("$build/bench/decode_ceiling" "$data" --passes 3 --json 2>/dev/null |
  sed -n 's/.*"median_img_s": *\([0-9.]*\).*/\1/p' | tail -1)
awk -v o="${one:-0}" -v u="$cap" -v n="$(nproc)" 'BEGIN {
  c = o * n
  if (c > 0) printf "== 3. capacity %.0f img/s = %.2fx this machine'"'"'s decode ceiling, %.0f img/s (libjpeg-turbo full-size decode on one core x %d cores)\n", u, u / c, c, n
  else print "== 3. decode ceiling not measured (bench/decode_ceiling failed)" }'
