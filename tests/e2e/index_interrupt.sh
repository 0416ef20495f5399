#!/usr/bin/env bash
# Ctrl-C (SIGINT) or SIGTERM during `sluice index` stops it between files:
# exit 130 / 143, "interrupted (SIG...)" said, the sidecar being written
# finished or never begun: no NAME.slidx.tmp left (the old code, killed in
# the write's fsync, left one). The signal is made to land in that fsync
# every time: strace sends it as the first fsync begins (fault injection;
# no guessed sleep: a signal sent after one was once too late on a loaded
# machine). Skipped without strace, or where ptrace is refused (a container
# without CAP_SYS_PTRACE).
set -uo pipefail
. "$(dirname "$0")/lib.sh" index_interrupt
if ! command -v strace >/dev/null ||
  ! strace -o /dev/null -e trace=fsync -e inject=fsync:signal=USR2:when=2 true 2>/dev/null; then
  echo "skip: no strace here with signal injection (4.16 or later), or ptrace refused"; exit 77
fi
"$S" make-dataset --synthetic "$T/ds" --images 20 --classes 2 >/dev/null 2>&1 &&
  "$S" pack "$T/ds" "$T/wds" --format webdataset >/dev/null 2>&1 \
  || { echo "FAIL make-dataset / pack"; exit 1; }
# two shards: the signal in the first one's fsync, the second never begun
ln "$T/wds/shard-000000.tar" "$T/wds/shard-000001.tar"
for sig in INT TERM; do
  rm -f "$T"/wds/*.slidx*
  strace -f -o /dev/null -e trace=fsync -e "inject=fsync:signal=$sig:when=1" \
    "$S" index "$T/wds/shard-{000000..000001}.tar" >"$T/out" 2>"$T/err"
  rc=$?
  want=$([ "$sig" = INT ] && echo 130 || echo 143)
  cat "$T/err"
  check "SIG$sig: exit $want (got $rc)" [ "$rc" = "$want" ]
  check "SIG$sig: says interrupted" grep -q "interrupted (SIG$sig): 1 of 2 files indexed" "$T/err"
  left=$(cd "$T/wds" && ls | grep '\.tmp' | tr '\n' ' ')
  check "SIG$sig: no temp file left (${left:-none})" [ -z "$left" ]
  check "SIG$sig: the first sidecar whole, the second never begun" \
    eval '[ -s "$T/wds/shard-000000.tar.slidx" ] && [ ! -e "$T/wds/shard-000001.tar.slidx" ]'
done
# The sidecar written as it stopped is the whole one: as a fresh index's.
"$S" index "$T/wds/shard-000000.tar" --out "$T/fresh" >/dev/null 2>&1
check "the sidecar written as it stopped is whole (as a fresh one)" \
  cmp -s "$T/fresh/shard-000000.tar.slidx" "$T/wds/shard-000000.tar.slidx"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
