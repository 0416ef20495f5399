#!/usr/bin/env bash
# e2e: the cache's disk tier (issue 15 item 4; `sluice run --cache-dir DIR
# --cache-disk SIZE`) over URLs: WebDataset tars served on 127.0.0.1 by
# tests/e2e/faulty_http.py (the remote tests' range-capable server).
#   - 2 epochs with a disk tier holding the set (no memory tier, and a
#     small one beside it) fetch about one epoch's bytes and requests
#     (epoch 2 from the local file), without it about two; a tier of half
#     the set fetches about 1.5 epochs (MinIO); the digest is the same in
#     every case, and the same as the local files';
#   - the JSON report and the telemetry carry the tier's hits, misses,
#     bytes, entries; its subdirectory of DIR is gone after the run;
#   - a DIR that does not exist, --cache-dir without --cache-disk, and
#     with --cache-decoded or --cache-policy lru: refused, naming it;
#   - a disk that fills mid-run (a 128 KiB tmpfs, where root may mount
#     one in a private mount namespace; skipped with a message otherwise):
#     the run completes with the same digest, nothing skipped, the tier
#     stops admitting and says so once, its error counted.
# Skips (77) without libcurl or python3.
set -uo pipefail
. "$(dirname "$0")/lib.sh" cache_disk

if "$S" run http://127.0.0.1:1/x.tar --batch 1 2>&1 | grep -q "built without libcurl"; then
  echo "skip: sluice was built without libcurl (SL_CURL=OFF)"; exit 77
fi
PY=$(command -v python3) || { echo "skip: no python3"; exit 77; }

srv=""
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

"$S" make-dataset --synthetic "$T/www/ds" --images 80 --classes 4 >/dev/null 2>&1 ||
  { echo "FAIL make-dataset"; exit 1; }
"$S" pack "$T/www/ds" "$T/www/wds" --format webdataset --shard-size 600K >/dev/null 2>&1
nw=$(ls "$T/www/wds" | grep -c '\.tar$')
check "packed $nw tars" test "$nw" -ge 2
WDS="wds/shard-{000000..$(printf '%06d' $((nw - 1)))}.tar"
"$PY" "$(dirname "$0")/faulty_http.py" "$T/www" "$T/port" 2>/dev/null &
srv=$!
for i in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
[ -s "$T/port" ] || { echo "FAIL the server did not start"; exit 1; }
URL="http://127.0.0.1:$(cat "$T/port")/$WDS"
mkdir -p "$T/cache"

# A JSON member of the report: jq-like dotted path, "" when absent.
jpath() { "$PY" -c 'import json, sys
v = json.loads(sys.stdin.read().strip().splitlines()[-1])
for k in sys.argv[1].split("."):
    v = v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)' "$1"; }
run() { "$S" run "$@" --batch 8 --size 32 --seed 5 --io-depth 8 --digest --json --quiet 2>"$T/err"; }
ratio_in() { awk -v a="$1" -v b="$2" -v lo="$3" -v hi="$4" 'BEGIN { r = a / b; exit !(b > 0 && r >= lo && r <= hi) }'; }

local1=$(run "$T/www/$WDS" --epochs 2)
dl=$(jpath digest <<<"$local1")
one=$(run "$URL" --epochs 1)
e1=$(jpath bytes_read <<<"$one"); r1=$(jpath requests.count <<<"$one")
plain=$(run "$URL" --epochs 2)
d0=$(jpath digest <<<"$plain"); b0=$(jpath bytes_read <<<"$plain"); q0=$(jpath requests.count <<<"$plain")
check "no tier: the local files' digest" test -n "$d0" -a "$d0" = "$dl"
check "no tier: 2 epochs fetch about twice one epoch ($b0 B of $e1)" ratio_in "$b0" "$e1" 1.9 2.1

for mem in 0 200K; do
  memopt=(); [ "$mem" != 0 ] && memopt=(--cache "$mem")
  out=$(run "$URL" --epochs 2 --cache-dir "$T/cache" --cache-disk 1G "${memopt[@]}" --telemetry "$T/t-$mem.jsonl")
  d=$(jpath digest <<<"$out"); b=$(jpath bytes_read <<<"$out"); q=$(jpath requests.count <<<"$out")
  hits=$(jpath cache.disk.hits <<<"$out"); ent=$(jpath cache.disk.entries <<<"$out")
  check "disk tier (memory $mem): same digest" test "$d" = "$d0"
  check "disk tier (memory $mem): 2 epochs fetch about one ($b B of $e1; $q requests of $r1)" \
    ratio_in "$b" "$e1" 0.95 1.2
  check "disk tier (memory $mem): fewer requests than without ($q < $q0)" test "${q:-0}" -lt "$q0"
  check "disk tier (memory $mem): epoch 2 served from disk ($hits hits, $ent held)" \
    test "${hits:-0}" -ge $((ent - 16)) -a "${ent:-0}" -ge 40
  check "disk tier (memory $mem): no errors" test "$(jpath cache.disk.errors <<<"$out")" = 0
  check "disk tier (memory $mem): its directory removed" test -z "$(ls -A "$T/cache")"
  check "disk tier (memory $mem): telemetry cache.disk" \
    grep -q '"disk": {"hits_total": [1-9]' "$T/t-$mem.jsonl"
done
grep -q "cache disk tier" "$T/err" || true

half=$(run "$URL" --epochs 2 --cache-dir "$T/cache" --cache-disk $(( $(du -sb "$T/www/wds" | cut -f1) / 2 )))
b=$(jpath bytes_read <<<"$half")
check "half the set on disk: same digest" test "$(jpath digest <<<"$half")" = "$d0"
check "half the set on disk: 2 epochs fetch about 1.5 ($b B of $e1)" ratio_in "$b" "$e1" 1.3 1.7

refused() { # NAME PATTERN ARGS...
  local name=$1 pat=$2; shift 2
  "$S" run "$T/www/$WDS" --batch 8 --size 32 --quiet "$@" >/dev/null 2>"$T/err"
  local rc=$?
  check "$name: refused (exit $rc)" test $rc -ne 0
  check "$name: says '$pat'" grep -q -- "$pat" "$T/err"
}
refused "a missing directory" "cache_dir $T/nope: No such file" --cache-dir "$T/nope" --cache-disk 1M
refused "--cache-dir without --cache-disk" "needs both" --cache-dir "$T/cache"
refused "--cache-decoded" "not with cache_decoded" --cache-dir "$T/cache" --cache-disk 1M --cache 1M --cache-decoded
refused "--cache-policy lru" "not with cache_policy lru" --cache-dir "$T/cache" --cache-disk 1M --cache 1M --cache-policy lru
check "nothing left in the cache directory" test -z "$(ls -A "$T/cache")"

# The disk full mid-run: a tmpfs of 128 KiB (the set is ~1 MB) in a
# private mount namespace.
mkdir -p "$T/small"
if [ "$(id -u)" = 0 ] && unshare -m --propagation private true 2>/dev/null; then
  out=$(unshare -m --propagation private bash -c \
    'mount -t tmpfs -o size=128k tmpfs "$1" && shift && exec "$@"' _ "$T/small" \
    "$S" run "$URL" --epochs 2 --batch 8 --size 32 --seed 5 --io-depth 8 --digest --json \
    --cache-dir "$T/small" --cache-disk 10M 2>"$T/full.err")
  rc=$?
  check "disk full: the run completes (exit $rc)" test $rc -eq 0
  check "disk full: same digest" test "$(jpath digest <<<"$out")" = "$d0"
  check "disk full: nothing skipped" test "$(jpath errors_skipped <<<"$out")" = 0
  check "disk full: one error counted" test "$(jpath cache.disk.errors <<<"$out")" = 1
  check "disk full: said once" test "$(grep -c 'warning: cache .*No space left on device.*stops admitting' "$T/full.err")" = 1
  check "disk full: what it held still served" test "$(jpath cache.disk.hits <<<"$out")" -gt 0
else
  echo "skip: a full disk (needs root and mount namespaces for a small tmpfs)"
fi

echo "cache_disk: $passes passed, $fails failed"
[ $fails -eq 0 ]
