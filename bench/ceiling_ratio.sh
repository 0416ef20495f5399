#!/usr/bin/env bash
# sluice with 2 threads (RandomResizedCrop 224 + flip, batches of 64) against
# the machine's decode ceiling (2 x libjpeg-turbo's plain full-size decode
# rate on one core, files in memory), alternating in one invocation.
#   bench/ceiling_ratio.sh [DATA] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data/imagenet-sample}
rounds=${2:-5}
[ -d "$data" ] || { echo "no data at $data (try: build/sluice make-dataset --synthetic DIR)"; exit 0; }
[ -x build/sluice ] && [ -x build/bench/decode_ceiling ] || make -s all
num() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" | tail -1; }
c=(); u=(); f=(); s1=()
for r in $(seq "$rounds"); do
  c+=("$(build/bench/decode_ceiling "$data" --passes 3 --json 2>/dev/null | num ceiling_2cores_img_s)")
  u+=("$(build/sluice bench "$data" --threads 2 --epochs 4 --json --quiet 2>/dev/null | num samples_per_s)")
  f+=("$(build/sluice bench "$data" --threads 2 --epochs 4 --out float --json --quiet 2>/dev/null | num samples_per_s)")
  s1+=("$(build/sluice bench "$data" --threads 1 --epochs 2 --json --quiet 2>/dev/null | num samples_per_s)")
  echo "round $r: ceiling ${c[-1]}  sluice uint8 ${u[-1]}  float ${f[-1]}  1 thread ${s1[-1]}" >&2
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mc=$(med "${c[@]}"); mu=$(med "${u[@]}"); mf=$(med "${f[@]}"); m1=$(med "${s1[@]}")
echo "medians over $rounds rounds (img/s): decode ceiling $mc, sluice 2 threads uint8 $mu, float $mf; 1 thread uint8 $m1"
awk -v c="$mc" -v u="$mu" -v f="$mf" -v o="$m1" 'BEGIN {
  printf "sluice / ceiling: uint8 %.2fx, float %.2fx;  2 threads / 1 thread: %.2fx\n", u/c, f/c, u/o }'
