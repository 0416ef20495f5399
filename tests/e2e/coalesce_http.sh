#!/usr/bin/env bash
# e2e: coalesced reads (issue 15 item 3) against nginx on 127.0.0.1 and
# tests/e2e/faulty_http.py, servers this script starts and stops.
#   - sluice shards, WebDataset tars and TFRecord files at URLs, read in
#     stored order, WebDataset order and a global permutation at
#     --io-depth 8: the digest with coalescing on (the default) and off
#     equals the local one; in stored order nginx's access log counts at
#     most half the record requests with it on (at least 2 records a
#     request), and never more in the other orders; what sluice reports
#     (requests, records) matches the log; a tar epoch still fetches
#     <= 1.05x the files' bytes (the gaps are headers and .cls members);
#   - at --io-depth 1 too (a reader claims past its share while the next
#     sample continues its run): stored order at most half the requests;
#   - records that always fail (faulty_http.py's "badrec": every range in
#     the middle of the file answers 500): each coalesced request falls
#     back to its records one by one, so the error names one record's
#     range after the usual retries, and under skip the skip list and the
#     digest are those of coalescing off.
# Skips (77) without libcurl or nginx.
set -uo pipefail
. "$(dirname "$0")/lib.sh" coalesce_http

. "$(dirname "$0")/lib_http.sh"

"$S" make-dataset --synthetic "$T/www/ds" --images 96 --classes 4 >/dev/null 2>&1 ||
  { echo "FAIL make-dataset"; exit 1; }
"$S" pack "$T/www/ds" "$T/www/sls" --shard-size 2M >/dev/null 2>&1
"$S" pack "$T/www/ds" "$T/www/wds" --format webdataset --shard-size 2M >/dev/null 2>&1
"$S" pack "$T/www/ds" "$T/www/tfr" --format tfrecord --shard-size 2M >/dev/null 2>&1
ns=$(ls "$T/www/sls" | grep -c '\.sls$'); nw=$(ls "$T/www/wds" | grep -c '\.tar$'); nt=$(ls "$T/www/tfr" | grep -c '\.tfrecord$')
check "packed ($ns sls, $nw tar, $nt tfrecord)" test "$ns" -ge 2 -a "$nw" -ge 2 -a "$nt" -ge 2
SLS="sls/shard-{00000..$(printf '%05d' $((ns - 1)))}.sls"
WDS="wds/shard-{000000..$(printf '%06d' $((nw - 1)))}.tar"
TFR="tfr/data-{00000..$(printf '%05d' $((nt - 1)))}.tfrecord"

nginx_start '$request_method $uri $status $bytes_sent'

run() { "$S" run "$@" --batch 8 --size 32 --seed 5 --epochs 1 --io-depth 8 --digest --json --quiet 2>&1; }
local_of() { if [ "$1" = SLS ]; then echo "$T/www/sls"; else echo "$T/www/${!1}"; fi; }
# The range requests (206 GETs of the data files: not HEADs, not sidecars)
# and the bytes nginx sent in a run; $1: the log's lines before it.
lines() { wc -l <"$T/access.log"; }
log_since() { tail -n +$(($1 + 1)) "$T/access.log"; }
for f in SLS WDS TFR; do
  d=${!f%%/*}
  total=$(cat "$T/www/$d"/*.tar "$T/www/$d"/*.tfrecord 2>/dev/null | wc -c)
  for order in "--no-shuffle" "--shuffle-buffer 16" ""; do
    want=$(run "$(local_of $f)" $order | jget digest)
    declare -A reqs=()
    for c in off 1M; do
      l0=$(lines)
      out=$(run "$N/${!f}" $order --coalesce $c)
      sleep 0.2 # nginx writes its log line after the answer
      gets=$(log_since "$l0" | awk '$1 == "GET" && $3 == 206 && $2 !~ /slidx$/' | wc -l)
      sent=$(log_since "$l0" | awk '$1 == "GET" && $2 !~ /slidx$/ {s += $4} END {print s + 0}')
      n=$(sed -n 's/.*"requests": {"count": \([0-9]*\), "records": \([0-9]*\).*/\1 \2/p' <<<"$out")
      reqs[$c]=${n% *}
      echo "$f [${order:-permutation}] --coalesce $c: ${n% *} requests for ${n#* } records; nginx: $gets range GETs, $sent bytes"
      check "$f [${order:-permutation}] --coalesce $c: digest = local ($want)" test -n "$want" -a "$(jget digest <<<"$out")" = "$want"
      check "$f [${order:-permutation}] --coalesce $c: every record fetched once (${n#* })" test "${n#* }" = 96
      # sluice's count = the log's, but for what the open asks (a shard's
      # header and index), the same on and off
      [ $c = off ] && extra=$((gets - ${n% *}))
      check "$f [${order:-permutation}] --coalesce $c: sluice's ${n% *} requests + $extra at open = nginx's $gets" \
        test $((${n% *} + extra)) = "$gets" -a \( $f = SLS -o "$extra" = 0 \)
      [ $f = WDS ] && check "$f [${order:-permutation}] --coalesce $c: $sent bytes <= 1.05 x $total" test $((sent * 100)) -le $((total * 105))
    done
    if [ "$order" = --no-shuffle ]; then
      check "$f stored order: coalescing halves the requests at least (${reqs[1M]} of ${reqs[off]})" test $((reqs[1M] * 2)) -le "${reqs[off]}"
    else
      check "$f [${order:-permutation}]: never more requests (${reqs[1M]} of ${reqs[off]})" test "${reqs[1M]}" -le "${reqs[off]}"
    fi
    unset reqs
  done
done

# At io_depth 1 a reader claims on past its share while the next sample
# continues its run: stored order is still coalesced.
for f in SLS WDS; do
  out=$("$S" run "$N/${!f}" --no-shuffle --batch 8 --size 32 --seed 5 --epochs 1 --io-depth 1 --json --quiet --digest 2>&1)
  n=$(sed -n 's/.*"requests": {"count": \([0-9]*\).*/\1/p' <<<"$out")
  check "$f stored order at --io-depth 1: $n requests for 96 records (<= 48)" test "${n:-99}" -le 48
  check "$f stored order at --io-depth 1: digest = local" test "$(jget digest <<<"$out")" = "$(run "$(local_of $f)" --no-shuffle | jget digest)"
done

# Records that always fail: coalesced requests fall back to single ones,
# which name the record's range; the skip list of coalescing off.
export SL_HTTP_BACKOFF_MS=10 SL_HTTP_RETRIES=2
faulty_start "$T/port" /dev/null
G=$furl
mkdir -p "$T/www/badrec"
cp "$T/www/sls/shard-00000.sls" "$T/www/badrec/shard.sls"
cp "$T/www/wds/shard-000000.tar" "$T/www/badrec/shard.tar"
for x in "sls sls/shard-00001.sls" "tar wds/shard-000001.tar"; do
  set -- $x; e=$1 good=$2
  nbad=$("$S" run "$T/www/badrec/shard.$e" --batch 1 --size 32 --json --quiet 2>&1 | jget samples)
  for c in off 1M; do
    out=$("$S" run "$G/{$good,badrec/shard.$e}" --batch 4 --size 32 --io-depth 8 --no-shuffle --coalesce $c 2>&1)
    check "bad records ($e, --coalesce $c): the error names one record's range after the retries" \
      grep -qE "$G/badrec/shard.$e: bytes [0-9]+-[0-9]+: HTTP 500 \(after 2 retries\)" <<<"$out"
    out=$("$S" run "$G/{$good,badrec/shard.$e}" --batch 4 --size 32 --io-depth 8 --no-shuffle --coalesce $c \
      --on-error skip --seed 3 --epochs 2 --digest --json 2>&1)
    grep "^skipped: " <<<"$out" | sort >"$T/skipped.$c"
    jget digest <<<"$out" >"$T/digest.$c"
    fb=$(sed -n 's/.*"fallbacks": \([0-9]*\).*/\1/p' <<<"$out")
    echo "bad records ($e, --coalesce $c): $fb coalesced requests fell back"
    check "bad records ($e, --coalesce $c): $nbad x 2 skipped" test "$(jget errors_skipped <<<"$out")" = $((nbad * 2))
    [ $c = 1M ] && check "bad records ($e): coalesced requests fell back ($fb)" test "${fb:-0}" -gt 0
  done
  check "bad records ($e): the same skip list with coalescing on and off" cmp -s "$T/skipped.off" "$T/skipped.1M"
  check "bad records ($e): the same digest with coalescing on and off" cmp -s "$T/digest.off" "$T/digest.1M"
done

echo "coalesce_http: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
