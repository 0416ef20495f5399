#!/usr/bin/env bash
# End-to-end test of the sample cache (issue 15 items 4-5): `sluice run
# --cache` gives the stream it gives without (MinIO and LRU, folder and
# pack, emulated storage), a cache holding the set reads storage once over
# 3 epochs and reports its hits, `--cache-decoded` gives the `--no-dct`
# stream, each --cache-codec keeps the stream, the telemetry carries
# cache.*, and bad values are refused (exit 2) or named (a cache larger
# than --max-memory allows).
set -uo pipefail
. "$(dirname "$0")/lib.sh" cache

mkdir -p "$T"
"$S" make-dataset --synthetic "$T/ds" --images 90 --classes 3 --seed 2 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
"$S" pack "$T/ds" "$T/pack" --codec zstd >/dev/null 2>&1 || { echo "pack failed"; exit 1; }
common=(--batch 8 --size 32 --seed 7 --threads 2 --epochs 3 --read-latency-ms 1
        --json --quiet --digest)
size=$(du -sb "$T/ds" | cut -f1)

for src in ds pack; do
  ref=$("$S" run "$T/$src" "${common[@]}" 2>/dev/null)
  d0=$(jget digest <<<"$ref")
  read0=$(jget bytes_read <<<"$ref")
  for pol in minio lru; do
    half=$("$S" run "$T/$src" "${common[@]}" --cache $((size / 2)) --cache-policy $pol 2>/dev/null)
    check "$src: --cache half, $pol: same stream" test -n "$d0" -a "$(jget digest <<<"$half")" = "$d0"
  done
  whole=$("$S" run "$T/$src" "${common[@]}" --cache 64M 2>/dev/null)
  check "$src: --cache 64M: same stream" test "$(jget digest <<<"$whole")" = "$d0"
  hits=$(jget hits <<<"$whole")
  check "$src: --cache 64M: epochs 2-3 hit ($hits of their 180 lookups, >= 150)" test "${hits:-0}" -ge 150
  r1=$(jget bytes_read <<<"$whole")
  check "$src: --cache 64M: storage read about once ($r1 of $read0 B)" \
    awk -v a="$r1" -v b="$read0" 'BEGIN { exit !(a > 0 && a <= b / 3 * 1.3) }'
done

nodct=$("$S" run "$T/ds" "${common[@]}" --no-dct 2>/dev/null)
dn=$(jget digest <<<"$nodct")
for codec in auto none lz4 zstd-1; do
  dec=$("$S" run "$T/ds" "${common[@]}" --cache 64M --cache-decoded --cache-codec $codec 2>/dev/null)
  check "--cache-decoded, codec $codec: the --no-dct stream" test -n "$dn" -a "$(jget digest <<<"$dec")" = "$dn"
done
check "--cache-decoded: codec reported" grep -q '"codec": "' <<<"$dec"

"$S" run "$T/ds" --batch 8 --size 32 --epochs 2 --cache 64M --telemetry "$T/t.jsonl" --quiet >/dev/null 2>&1
check "telemetry: cache.hits_total, cache.codec" grep -q '"cache": {"hits_total": ' "$T/t.jsonl"

"$S" run "$T/ds" --cache-policy fifo --quiet >/dev/null 2>&1; check "--cache-policy fifo: exit 2" test $? -eq 2
"$S" run "$T/ds" --cache-codec brotli --quiet >/dev/null 2>&1; check "--cache-codec brotli: exit 2" test $? -eq 2
err=$("$S" run "$T/ds" --batch 8 --size 32 --max-memory 64M --cache 63M --quiet 2>&1 >/dev/null)
check "--cache 63M of --max-memory 64M: refused, naming the cache" grep -q "cache" <<<"$err"

echo "cache: $passes passed, $fails failed"
[ $fails -eq 0 ]
