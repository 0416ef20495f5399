#!/usr/bin/env bash
# e2e: how remote reads fail, against servers this script starts on
# 127.0.0.1 and stops (nginx; tests/e2e/faulty_http.py):
#   - every shard failing under --on-error skip: the error counts the files
#     left out and gives the first's cause (WebDataset and sluice shards);
#   - a password or a presigned signature in a URL is never printed;
#   - a URL with a query string finds its sidecar (NAME.slidx?QUERY);
#   - a Content-Length that disagrees with Content-Range fails at once;
#   - a trickling server meets the request's deadline (SL_HTTP_MIN_RATE);
#   - a stop ends a blocking read and a retry's backoff at once.
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
check "HEAD failed: its cause, not a GET's after it" \
  grep -q "the first: $G/always500/wds/shard-000000.tar: HEAD: HTTP 500 (after 1 retry)" <<<"$out"
out=$(timeout 60 "$S" run "$G/always500/sls/shard-{00000..00001}.sls" --batch 2 --on-error skip 2>&1)
check "all skipped (sls): the count and the first cause" \
  grep -q "no readable records: 2 of 2 shards left out; the first: $G/always500/sls/shard-00000.sls: .*HTTP 500" <<<"$out"

# A raw space in an http URL: said plainly.
out=$(timeout 60 "$S" run "$G/wds/a b.tar" --batch 2 2>&1)
check "space: encode spaces as %20" grep -q "$G/wds/a b.tar: a space in a URL: encode spaces as %20" <<<"$out"

# A folder URL over http: refused at once as not listable (the server's
# 403 or HTML index said nothing useful), the URL redacted.
out=$(timeout 60 "$S" run "http://alice:S3CRETpw@${G#http://}/wds/?token=TOKSECRET" --batch 2 2>&1)
check "folder URL: only s3:// prefixes list" grep -qF "http://***@${G#http://}/wds/?token=***: only s3:// prefixes can be listed" <<<"$out"
check "folder URL: ... no secret printed" bash -c '! grep -qE "S3CRETpw|TOKSECRET" <<<"$1"' _ "$out"

# 2. Secrets in a URL: userinfo and presigned query values are not printed.
H=${G#http://}
out=$(timeout 60 "$S" run "http://alice:S3CRETpw@$H/always500/wds/shard-000000.tar?X-Amz-Credential=AKIDSECRET&X-Amz-Signature=SIGSECRET&v=1" \
  --batch 2 2>&1)
check "secrets: the error names the URL redacted" grep -qF "http://***@$H/always500/wds/shard-000000.tar?X-Amz-Credential=***&X-Amz-Signature=***&v=1" <<<"$out"
check "secrets: no password, credential or signature printed" \
  bash -c '! grep -qE "S3CRETpw|AKIDSECRET|SIGSECRET" <<<"$1"' _ "$out"
out=$(timeout 60 "$S" run "http://alice:S3CRETpw@$H/{always500/wds/shard-000000.tar,wds/shard-000000.tar}?token=TOKSECRET" \
  --batch 2 --on-error skip 2>&1)
check "secrets: the skip list names the URL redacted" grep -qF "skipped: http://***@$H/always500/wds/shard-000000.tar?token=***" <<<"$out"
check "secrets: ... and prints no secret" bash -c '! grep -qE "S3CRETpw|TOKSECRET" <<<"$1"' _ "$out"
out=$(timeout 60 "$S" inspect "http://alice:S3CRETpw@$H/wds/shard-000000.tar?token=TOKSECRET" 2>&1)
check "secrets: inspect's path line redacted" grep -qF "path:     http://***@$H/wds/shard-000000.tar?token=***" <<<"$out"
check "secrets: ... and inspect prints no secret" bash -c '! grep -qE "S3CRETpw|TOKSECRET" <<<"$1"' _ "$out"

# 3. A query string: the sidecar is NAME.slidx?QUERY, found and used.
nginx_start '$request $status'
out=$(timeout 60 "$S" run "$N/$WDS?v=1" --batch 2 2>&1)
check "query: the run reads" grep -q "samples" <<<"$out"
check "query: the sidecar asked for before the query" grep -q "GET /wds/shard-000000.tar.slidx?v=1 HTTP/1.1 200" "$T/access.log"
check "query: no warning of an unused sidecar" bash -c '! grep -q "sidecar" <<<"$1"' _ "$out"

# 4. A Content-Length 10 bytes over its Content-Range: at once, not retried.
out=$(SL_HTTP_RETRIES=3 timeout 60 "$S" run "$G/longcl/sls/shard-00000.sls" --batch 2 2>&1)
check "Content-Length: the disagreement named" grep -qE "longcl/sls/shard-00000.sls: bytes [0-9]+-[0-9]+: Content-Length [0-9]+ disagrees with Content-Range [0-9]+-[0-9]+( |$)" <<<"$out"
check "Content-Length: ... not retried" bash -c '! grep -q "after [0-9] retr" <<<"$1"' _ "$out"

# 5. A trickle (512 bytes every 0.3 s: above the stall limit): the
# request's deadline (base + bytes / SL_HTTP_MIN_RATE) ends it; and on the
# blocking path a stop (SIGTERM, as Ctrl-C) does not wait for the read.
out=$(SL_HTTP_RETRIES=0 SL_HTTP_MIN_RATE=1000000 timeout 60 "$S" run "$G/trickle/sls/shard-00000.sls" --batch 2 --io-depth off 2>&1)
check "deadline: the trickle fails naming the deadline" grep -q "trickle/sls/shard-00000.sls: bytes .*past the request's deadline" <<<"$out"
# stop_late CMD...: runs CMD, sends it SIGTERM after 3 s; sets late to
# the seconds it took to exit after (10: still running, then killed).
stop_late() {
  "$@" >/dev/null 2>&1 &
  local pid=$! i t0
  sleep 3
  kill -TERM "$pid"
  t0=$(date +%s)
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  late=$(( $(date +%s) - t0 ))
  kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
}
# A record is ~36 KB: ~20 s a read. The signal comes in the first read.
stop_late env SL_HTTP_RETRIES=0 SL_HTTP_MIN_RATE=1 "$S" run "$G/trickle/sls/shard-00000.sls" --batch 2 --io-depth off
check "stop: a blocking read ends with the stop ($late s after SIGTERM)" test "$late" -le 6

# 6. A stop during a retry's backoff (records answering 500, a backoff of
# 20 s) ends it, on the blocking path too: it waited the backoff out.
mkdir -p "$T/www/badrec" && cp -r "$T/www/sls" "$T/www/badrec/"
stop_late env SL_HTTP_RETRIES=5 SL_HTTP_BACKOFF_MS=20000 "$S" run "$G/badrec/sls/shard-00000.sls" --batch 2 --io-depth off
check "stop: a retry's backoff ends with the stop ($late s after SIGTERM)" test "$late" -le 6
echo "http_faults: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
