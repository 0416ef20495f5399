#!/usr/bin/env bash
# End-to-end test of an open-files limit below the reads asked for, at
# URLs: each read thread keeps its connection (libcurl's, a descriptor
# like a file's), so `--read-threads 64` under `ulimit -n 32` ran out of
# descriptors and failed ("Failed to connect ... Couldn't connect"): the
# reads at URLs were left alone as if they held none. Now lowered as a
# folder's are, with the warning, and every sample delivered; blocking
# reads and reads in flight (curl multi) alike. Skips (77) without
# libcurl or nginx.
set -uo pipefail
. "$(dirname "$0")/lib.sh" fd_limit_http
. "$(dirname "$0")/lib_http.sh"
"$S" make-dataset --synthetic "$T/ds" --images 200 --classes 2 >/dev/null 2>&1 &&
  "$S" pack "$T/ds" "$T/www/pack" >/dev/null 2>&1 ||
  { echo "FAIL make-dataset / pack"; exit 1; }
nginx_start '$request'
for mode in blocking multi; do
  extra=(); [ "$mode" = blocking ] && extra=(--io-depth off)
  out=$( (ulimit -n 32 && exec "$S" run "$N/pack/shard-00000.sls" --batch 8 \
    --size 32 --json --read-threads 64 "${extra[@]}") 2>"$T/$mode.err"); rc=$?
  echo "$mode: rc $rc"; grep -E "warning|error" "$T/$mode.err" | cut -c1-300
  check "$mode: --read-threads 64 at a URL under ulimit -n 32 exits 0 (rc $rc)" \
    [ "$rc" = 0 ]
  check "$mode: every sample delivered" [ "$(jget samples <<<"$out")" = 200 ]
  check "$mode: lowered with the warning naming the limit" \
    grep -q "warning: read_threads 64 lowered to [0-9]*: the open-files limit (ulimit -n) is 32" "$T/$mode.err"
done
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
