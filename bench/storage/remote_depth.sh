#!/usr/bin/env bash
# Remote reads: one blocking request per read thread (--io-depth off)
# against many requests in flight from one thread through libcurl's multi
# interface (--io-depth N), on the ImageNet sample packed as sluice shards
# and served over HTTP with a fixed latency per request
# (tests/e2e/faulty_http.py --delay-ms; a Python server, so itself a
# bound at high request rates). Alternates the configurations for ROUNDS
# rounds and prints the median img/s of each (1 epoch, 64x64 uint8).
#
#   bench/storage/remote_depth.sh [SLUICE] [ROUNDS] [DELAY_MS]
set -euo pipefail
S=${1:-build/sluice}
ROUNDS=${2:-3}
DELAY=${3:-10}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=${SL_SHARED_DATA:-$ROOT/../shared/data}/imagenet-sample
[ -d "$D" ] || { echo "skip: $D not found (the ImageNet sample)"; exit 0; }
T=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
mkdir -p "$T/www"
"$S" pack "$D" "$T/www/sls" --shard-size 8M >/dev/null 2>&1
ns=$(ls "$T/www/sls" | grep -c '\.sls$')
python3 "$ROOT/tests/e2e/faulty_http.py" "$T/www" "$T/port" --delay-ms "$DELAY" 2>/dev/null &
pid=$!
for i in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
U="http://127.0.0.1:$(cat "$T/port")/sls/shard-{00000..$(printf '%05d' $((ns - 1)))}.sls"
declare -A ARGS=([threads-4]="--policy static --read-threads 4 --io-depth off"
                 [threads-16]="--policy static --read-threads 16 --io-depth off"
                 [multi-1x4]="--policy static --read-threads 1 --io-depth 4"
                 [multi-1x16]="--policy static --read-threads 1 --io-depth 16"
                 [multi-1x64]="--policy static --read-threads 1 --io-depth 64"
                 [heuristic]="--policy heuristic")
names=(threads-4 multi-1x4 threads-16 multi-1x16 multi-1x64 heuristic)
out=$T/out
for r in $(seq "$ROUNDS"); do
  for n in "${names[@]}"; do
    # shellcheck disable=SC2086
    line=$("$S" run "$U" --epochs 1 --batch 64 --size 64 --json --quiet --digest ${ARGS[$n]} | tail -1)
    echo "$n $line" >>"$out"
    echo "round $r $n: $(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%.0f img/s, %s, depth %s, threads %s, %s" % (d["samples_per_s"], d["read_path"], d["io_depth"], d["read_threads"], d["digest"]))' "$line")" >&2
  done
done
python3 - "$out" "$DELAY" <<'PY'
import json, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    n, j = l.split(" ", 1)
    rows.setdefault(n, []).append(json.loads(j))
print(f"| config ({sys.argv[2]} ms a request) | img/s (median) | runs | read path | cpu s (median) |")
print("| --- | --- | --- | --- | --- |")
for n, rs in rows.items():
    v = [r["samples_per_s"] for r in rs]
    print(f"| {n} | {statistics.median(v):.0f} | {', '.join('%.0f' % x for x in v)} | {rs[0]['read_path']} | {statistics.median(r['cpu_seconds'] for r in rs):.2f} |")
print("digests equal:", len({r["digest"] for rs in rows.values() for r in rs}) == 1)
PY
