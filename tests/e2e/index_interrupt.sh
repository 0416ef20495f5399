#!/usr/bin/env bash
# Ctrl-C (SIGINT) or SIGTERM during `sluice index` stops it between files:
# exit 130 / 143, "interrupted (SIG...)" said, the sidecar being written
# finished or never begun: no NAME.slidx.tmp left (the old code, killed in
# the write's fsync, left one). The signal is made to land in that fsync
# every time: strace holds the fsync 2 s (fault injection), and the
# signal is sent meanwhile. Skipped without strace, or where ptrace is
# refused (a container without CAP_SYS_PTRACE).
set -uo pipefail
. "$(dirname "$0")/lib.sh" index_interrupt
set -m # background jobs with SIGINT as it is, not ignored (as in a terminal)
if ! command -v strace >/dev/null ||
  ! strace -o /dev/null -e trace=fsync -e inject=fsync:delay_enter=1 true 2>/dev/null; then
  echo "skip: no strace here with delay injection (5.0 or later), or ptrace refused"; exit 77
fi
# fsync's number, as /proc/PID/syscall shows it
case "$(uname -m)" in
  x86_64) FSYNC_NR=74 ;;
  aarch64) FSYNC_NR=82 ;;
  *) echo "skip: fsync's syscall number not known on $(uname -m)"; exit 77 ;;
esac
"$S" make-dataset --synthetic "$T/ds" --images 20 --classes 2 >/dev/null 2>&1 &&
  "$S" pack "$T/ds" "$T/wds" --format webdataset >/dev/null 2>&1 \
  || { echo "FAIL make-dataset / pack"; exit 1; }
# two shards: the first one's fsync held, the second never begun
ln "$T/wds/shard-000000.tar" "$T/wds/shard-000001.tar"
for sig in INT TERM; do
  rm -f "$T"/wds/*.slidx*
  strace -f -o /dev/null -e trace=fsync -e inject=fsync:delay_enter=2000000 \
    "$S" index "$T/wds/shard-{000000..000001}.tar" >"$T/out" 2>"$T/err" &
  sp=$!
  pid=
  for _ in $(seq 50); do pid=$(pgrep -P "$sp"); [ -n "$pid" ] && break; sleep 0.1; done
  # the signal once the fsync is held (its number in /proc/PID/syscall),
  # not after a guessed sleep: on a loaded machine 0.7 s was once too
  # early or too late (the index then ran to its end, exit 0)
  for _ in $(seq 100); do
    read -r nr _ <"/proc/$pid/syscall" 2>/dev/null && [ "$nr" = "$FSYNC_NR" ] && break
    sleep 0.05
  done
  kill -"$sig" "$pid"
  wait "$sp"; rc=$?
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
