#!/usr/bin/env bash
# e2e: how remote reads fail, against servers this script starts on
# 127.0.0.1 and stops (nginx; tests/e2e/faulty_http.py):
#   - every shard failing under --on-error skip: the error counts the files
#     left out and gives the first's cause (WebDataset and sluice shards);
# Skips (77) when sluice was built without libcurl or nginx is missing.
set -uo pipefail
. "$(dirname "$0")/lib.sh" http_faults

. "$(dirname "$0")/lib_http.sh"

"$S" make-dataset --synthetic "$T/www/ds" --images 12 --classes 3 >/dev/null 2>&1 ||
  { echo "FAIL make-dataset"; exit 1; }
"$S" pack "$T/www/ds" "$T/www/sls" --shard-size 100K >/dev/null 2>&1
"$S" pack "$T/www/ds" "$T/www/wds" --format webdataset --shard-size 100K >/dev/null 2>&1
nw=$(ls "$T/www/wds" | grep -c '\.tar$')
WDS="wds/shard-{000000..$(printf '%06d' $((nw - 1)))}.tar"
check "packed ($nw tars, with sidecars)" test "$nw" -ge 2 -a -s "$T/www/wds/shard-000000.tar.slidx"

export SL_HTTP_STALL_S=1 SL_HTTP_BACKOFF_MS=10 SL_HTTP_RETRIES=1 SL_HTTP_CONNECT_TIMEOUT_S=2
faulty_start "$T/port" "$T/faulty.log"
G=$furl

# 1. Every file left out: the count and the first cause, not just "no
# readable samples".
out=$(timeout 60 "$S" run "$G/always500/$WDS" --batch 2 --on-error skip 2>&1)
check "all skipped (tar): the count and the first cause" \
  grep -q "no readable samples: $nw of $nw files left out; the first: $G/always500/wds/shard-000000.tar: .*HTTP 500 (after 1 retry)" <<<"$out"
out=$(timeout 60 "$S" run "$G/always500/sls/shard-{00000..00001}.sls" --batch 2 --on-error skip 2>&1)
check "all skipped (sls): the count and the first cause" \
  grep -q "no readable records: 2 of 2 shards left out; the first: $G/always500/sls/shard-00000.sls: .*HTTP 500" <<<"$out"

echo "http_faults: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
