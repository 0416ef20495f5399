#!/usr/bin/env bash
# Pack sizes and load throughput of `sluice pack --codec` none / lz4 /
# zstd / zstd-dict / auto (issue 15 item 5), on a text pack (the three
# shared texts, one document per line, 4 copies: ~14 MB of short records)
# and on the ImageNet sample (1,000 JPEGs, 110 MB). Packs each codec once
# (size, pack seconds), then ROUNDS rounds that alternate the codecs
# (cycling which goes first), each timing:
#   load   `sluice verify PACK`: every record read, decompressed and
#          checksummed (the record path a loader takes, without decoding):
#          raw MB/s = raw bytes / wall seconds, and the CPU seconds
#          (user + sys) it took, steadier than wall time on a shared machine;
#   imgs   images only: `sluice bench PACK --threads 2` img/s (JPEG decode
#          dominates; the codec's share shows as a difference).
# Medians over the rounds. Warm page cache (the packs were just written).
#
#   bench/pack_codecs.sh [SLUICE] [ROUNDS]
set -uo pipefail
S=${1:-build/sluice}
ROUNDS=${2:-3}
DATA=${SL_SHARED_DATA:-$(dirname "$0")/../../shared/data}
W=$(mktemp -d "${TMPDIR:-/tmp}/bench-pack-codecs.XXXXXX")
trap 'rm -rf "$W"' EXIT
codecs=(none lz4 zstd zstd-dict auto)
med() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }

# pack_all KIND PACKCMD...: packs every codec into $W/KIND-CODEC, prints
# size and pack time, remembers the choices line.
pack_all() {
  local kind=$1; shift
  for c in "${codecs[@]}"; do
    local t0 t1
    t0=$(now)
    if ! "$@" "$W/$kind-$c" --codec "$c" >"$W/$kind-$c.log" 2>&1; then
      echo "pack $kind $c failed: $(tail -2 "$W/$kind-$c.log")"; return 1
    fi
    t1=$(now)
    local bytes
    bytes=$(cat "$W/$kind-$c"/*.sls | wc -c)
    local choice
    choice=$(grep -o 'shard-[0-9]*\.sls: [a-z0-9-]*' "$W/$kind-$c.log" | awk '{print $2}' | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')
    printf '%s %s pack_bytes %s pack_s %.2f %s\n' "$kind" "$c" "$bytes" "$(echo "$t1 - $t0" | bc)" "${choice:+choices: $choice}"
  done
}

# load KIND RAWBYTES: ROUNDS alternating rounds of verify (and bench for images).
load() {
  local kind=$1 raw=$2
  declare -A L B C
  for r in $(seq 1 "$ROUNDS"); do
    for k in $(seq 0 $((${#codecs[@]} - 1))); do
      local c=${codecs[$(((k + r) % ${#codecs[@]}))]}
      /usr/bin/time -f '%e %U %S' -o "$W/time" "$S" verify "$W/$kind-$c" --quiet >/dev/null 2>&1 ||
        echo "verify $kind-$c failed"
      read -r wall usr sys <"$W/time"
      L[$c]+="$(echo "$raw / $wall / 1000000" | bc -l) "
      C[$c]+="$(echo "$usr + $sys" | bc -l) "
      if [ "$kind" = images ]; then
        B[$c]+="$("$S" bench "$W/$kind-$c" --threads 2 --batch 64 --size 224 --json --quiet 2>/dev/null |
                 sed -n 's/.*"samples_per_s": \([0-9.]*\).*/\1/p' | tail -1) "
      fi
    done
  done
  for c in "${codecs[@]}"; do
    printf '%s %s load_raw_MBps %.1f load_cpu_s %.2f' "$kind" "$c" "$(tr ' ' '\n' <<<"${L[$c]}" | grep . | med)" \
      "$(tr ' ' '\n' <<<"${C[$c]}" | grep . | med)"
    [ "$kind" = images ] && printf ' bench_img_s %.1f' "$(tr ' ' '\n' <<<"${B[$c]}" | grep . | med)"
    printf '\n'
  done
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; uptime:$(uptime | sed 's/.*load average/ load average/')"
T=$DATA/text
if [ -f "$T/tinyshakespeare.txt" ] && [ -f "$T/wikitext-2-raw-test.txt" ]; then
  for i in 1 2 3 4; do cat "$T"/tinyshakespeare.txt "$T"/wikitext-2-raw-test.txt "$T"/pride-and-prejudice.txt; done >"$W/corpus.txt"
  pack_all text "$S" pack --text "$W/corpus.txt" --shard-size 4M -o
  rawt=$(cat "$W/corpus.txt" | tr -d '\n' | wc -c) # the documents: lines without their ends
  load text "$rawt"
else
  echo "skip text: $T not found"
fi
I=$DATA/imagenet-sample
if [ -d "$I" ]; then
  pack_all images "$S" pack "$I"
  rawi=$(du -sb --apparent-size "$I" | awk '{print $1}')
  load images "$rawi"
else
  echo "skip images: $I not found"
fi
echo "# after; uptime:$(uptime | sed 's/.*load average/ load average/')"
