#!/usr/bin/env bash
# The README's picture: the telemetry of a real run, drawn by `sluice plot`.
#   scripts/readme-plot.sh [BUILD] [OUT.png]      (defaults: build, docs/img/readme-run.png)
# Streams the ImageNet sample ($SL_SHARED_DATA/imagenet-sample, default
# ../shared/data) when present, else a generated folder of photo-like JPEGs. First one epoch with no
# consumer work measures the loader's capacity here; then the pictured run:
# a consumer whose training-like step per batch of 64 asks for half that
# capacity (as `make demo` does), its telemetry (100 ms snapshots) and the
# plot. Needs build/sluice and gnuplot (scripts/install-deps installs it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build} out=${2:-$root/docs/img/readme-run.png}
sluice=$build/sluice
[ -x "$sluice" ] || { echo "readme-plot: no $sluice (run make first)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "readme-plot: gnuplot not installed (scripts/install-deps)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=${SL_SHARED_DATA:-$root/../shared/data}/imagenet-sample name=imagenet-sample
if [ -d "$data" ]; then
  echo "readme-plot: data: $data (1,000 real ImageNet photos)"
else
  missing=$data data=$tmp/ds name="1,000 synthetic JPEGs"
  "$sluice" make-dataset --synthetic "$data" --images 1000 --classes 10 >/dev/null
  echo "readme-plot: data: generated ($sluice make-dataset --synthetic, 1,000 JPEGs; no $missing)"
fi

cap=$("$sluice" run "$data" --epochs 1 --quiet --json 2>/dev/null |
  sed -n 's/.*"samples_per_s": *\([0-9.]*\).*/\1/p' | tail -1)
# A step of 2 batch times at capacity: demand is half the capacity.
step=$(awk -v c="${cap:-0}" 'BEGIN { printf "%.0f", (c > 0 ? 2 * 64 * 1000 / c : 100) }')
echo "readme-plot: capacity ${cap:-?} img/s with no consumer work; step ${step} ms per batch of 64"
epochs=5
echo "readme-plot: $sluice run $data --epochs $epochs --step-ms $step --telemetry run.jsonl"
"$sluice" run "$data" --epochs $epochs --step-ms $step --quiet --telemetry "$tmp/run.jsonl"
mkdir -p "$(dirname "$out")"
"$sluice" plot "$tmp/run.jsonl" -o "$out" \
  --title "sluice run: $name, batch 64, ${step} ms training step, $epochs epochs, $(nproc) cores"
echo "readme-plot: wrote $out ($(wc -c <"$out") bytes)"
