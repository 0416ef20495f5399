#!/usr/bin/env bash
# End-to-end tests of `sluice analyze` on a generated dataset: the JSON
# figures exist and make sense, a trickle of demand is consumer-bound with
# no stall, a flood of demand is prep- or fetch-bound and nearly all stall,
# and --sweep gives its three levels.
set -uo pipefail
. "$(dirname "$0")/lib.sh" analyze optional
pos()  { awk -v x="$1" 'BEGIN { exit !(x + 0 > 0) }'; }
gt()   { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x + 0 > y + 0) }'; }
is0()  { awk -v x="$1" 'BEGIN { exit !(x + 0 == 0) }'; }

"$S" make-dataset --synthetic "$T/ds" --images 100 --classes 4 --seed 3 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }

common=(--batch 8 --size 64 --threads 2 --seconds 1 --json)

# A trickle: 1 sample/s. The loader keeps up: consumer-bound, no stall.
"$S" analyze "$T/ds" "${common[@]}" --rate 1 >"$T/low.out" 2>"$T/low.err"
check "low rate: exit 0" test $? -eq 0
last=$(tail -1 "$T/low.out")
for k in bound predicted_stall measured_stall prep_rate fetch_rate_cold \
         fetch_rate_warm demand_rate prep_rate_by_threads threads_needed \
         cache_bytes_needed bandwidth_needed_bytes_per_s dataset_bytes; do
  check "json has $k" grep -q "\"$k\":" <<<"$last"
done
b=$(jget bound <<<"$last")
check "bound is one of the three ($b)" grep -qxE 'fetch|prep|consumer' <<<"$b"
for k in prep_rate fetch_rate_cold fetch_rate_warm demand_rate dataset_bytes; do
  v=$(jget $k <<<"$last")
  check "$k positive ($v)" pos "$v"
done
check "low rate: bound consumer" test "$b" = consumer
check "low rate: predicted stall 0" is0 "$(jget predicted_stall <<<"$last")"
check "low rate: measured stall small" gt 0.05 "$(jget measured_stall <<<"$last")"
check "two prep rates for two threads" \
  grep -qE '"prep_rate_by_threads": \[[0-9.]+, [0-9.]+\]' <<<"$last"
check "progress on stderr" grep -q "fetch (cold)" "$T/low.err"
check "table on stdout" grep -q "^bound: consumer" "$T/low.out"

# A flood: 1e7 samples/s. Nothing keeps up: prep or fetch, ~all stall.
"$S" analyze "$T/ds" "${common[@]}" --rate 1e7 >"$T/high.out" 2>"$T/high.err"
check "high rate: exit 0" test $? -eq 0
last=$(tail -1 "$T/high.out")
b=$(jget bound <<<"$last")
check "high rate: bound prep or fetch ($b)" grep -qxE 'fetch|prep' <<<"$b"
check "high rate: predicted stall > 0.9" gt "$(jget predicted_stall <<<"$last")" 0.9
check "high rate: measured stall > 0.5" gt "$(jget measured_stall <<<"$last")" 0.5
check "high rate: bandwidth needed positive" pos "$(jget bandwidth_needed_bytes_per_s <<<"$last")"

# --step-ms gives the same kind of answer; packed shards are read too.
"$S" pack "$T/ds" "$T/shards" --shard-size 1M >/dev/null 2>&1
"$S" analyze "$T/shards" "${common[@]}" --step-ms 1000 >"$T/sh.out" 2>/dev/null
check "shards, --step-ms: exit 0" test $? -eq 0
check "shards: consumer-bound at 8 samples/s" test "$(tail -1 "$T/sh.out" | jget bound)" = consumer
check "shards: dataset bytes positive" pos "$(tail -1 "$T/sh.out" | jget dataset_bytes)"

# --sweep: three levels, predictions 0, 0 and 1/3.
"$S" analyze "$T/ds" --batch 8 --size 64 --threads 1 --seconds 1 --sweep --json \
  >"$T/sw.out" 2>/dev/null
check "sweep: exit 0" test $? -eq 0
check "sweep: three levels" test "$(tail -1 "$T/sw.out" | grep -o '"demand_rate"' | wc -l)" -eq 4
check "sweep: 150% predicts 1/3" grep -q '"predicted_stall": 0.333' <<<"$(tail -1 "$T/sw.out")"

# Bad usage.
"$S" analyze "$T/ds" >/dev/null 2>&1
check "no demand given: exit 2" test $? -eq 2
"$S" analyze "$T/nope" --rate 5 --seconds 1 >/dev/null 2>&1
check "missing source: exit 1" test $? -eq 1

# A damaged photo: named with its cause (it said "loader: image decode
# failed", naming neither).
cp -r "$T/ds" "$T/bad"
head -c 300 "$(ls "$T"/ds/*/*.jpg | head -1)" >"$T/bad/class_000/trunc.jpg"
"$S" analyze "$T/bad" --batch 4 --size 32 --threads 1 --seconds 1 --step-ms 5 >/dev/null 2>"$T/bad.err"
check "damaged photo: exit 1" test $? -eq 1
check "damaged photo named with its cause" grep -q "trunc.jpg: Premature end of JPEG file" "$T/bad.err"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
