#!/usr/bin/env bash
# The regime of issue 20 on the ImageNet sample: emulated storage with 10 ms
# per read and 100 MB/s, a consumer holding each batch of 64 for 80 ms
# (wanting 800 img/s), 5 epochs. Runs each policy alternating, ROUNDS
# rounds, and prints the median img/s, stall, mean wait and CPU seconds of
# each, and each policy's rate against static with 12 read threads (the
# fixed config that meets the demand). Where reads are asynchronous
# (io_uring), heuristic tunes the I/O depth on one read thread and
# static-12 keeps 12 reads in flight on 12 threads; the *-threads rows run
# the same with --io-depth off (one blocking read per read thread), the
# path without io_uring.
#
#   bench/storage_regime.sh [SLUICE] [ROUNDS] [BEFORE]
#
# SLUICE defaults to build/sluice; BEFORE, when given, is another build's
# binary whose heuristic runs in the same rounds ("before").
set -euo pipefail
S=${1:-build/sluice}
ROUNDS=${2:-3}
BEFORE=${3:-}
D=${SL_SHARED_DATA:-$(dirname "$0")/../../shared/data}/imagenet-sample
if [ ! -d "$D" ]; then
  echo "skip: $D not found (the ImageNet sample, ../shared/data)"; exit 0
fi
common=(--epochs 5 --batch 64 --read-latency-ms 10 --read-bw 100M --step-ms 80 --json --quiet)
declare -A ARGS=([heuristic]="--policy heuristic" [rl]="--policy rl"
                 [static-12]="--policy static --read-threads 12"
                 [heuristic-threads]="--policy heuristic --io-depth off"
                 [static-12-threads]="--policy static --read-threads 12 --io-depth off")
names=(heuristic rl static-12 heuristic-threads static-12-threads)
[ -n "$BEFORE" ] && names+=(before-heuristic)
out=$(mktemp)
for r in $(seq "$ROUNDS"); do
  for n in "${names[@]}"; do
    if [ "$n" = before-heuristic ]; then b=$BEFORE; a="--policy heuristic"; else b=$S; a=${ARGS[$n]}; fi
    # shellcheck disable=SC2086
    line=$("$b" run "$D" "${common[@]}" $a | tail -1)
    echo "$n $line" >>"$out"
    echo "round $r $n: $(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%.0f img/s, stall %.1f %%, wait %.1f ms" % (d["samples_per_s"], 100*d["stall_fraction"], d["wait_ms_mean"]))' "$line")" >&2
  done
done
python3 - "$out" <<'EOF'
import json, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    n, js = l.split(" ", 1)
    rows.setdefault(n, []).append(json.loads(js))
med = lambda n, k: statistics.median(r[k] for r in rows[n])
ref = med("static-12", "samples_per_s")
print("| policy | img/s | vs static-12 | stall | mean wait ms | CPU s | reads | read threads, io_depth at the end |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for n in rows:
    last = rows[n][-1]
    print("| %s | %.0f | %.2f | %.1f %% | %.1f | %.1f | %s | %s, %s |" % (
        n, med(n, "samples_per_s"), med(n, "samples_per_s") / ref,
        100 * med(n, "stall_fraction"), med(n, "wait_ms_mean"),
        med(n, "cpu_seconds"), last.get("read_path", "-"),
        last.get("read_threads", "-"), last.get("io_depth", "-")))
EOF
rm -f "$out"
