#!/usr/bin/env bash
# End-to-end test of a process that may not use io_uring (issue 20): a
# seccomp filter, as container runtimes install, refuses io_uring_setup
# (no ring at all) or only io_uring_enter (a ring is made, nothing can be
# submitted: before the probe's round trip this hung the first epoch).
# Either way `sluice run` reads with one blocking read per read thread,
# says why, and gives the same stream as the unfiltered run. The filter
# comes from libseccomp's Python binding (Debian python3-seccomp) in the
# system Python and stays across exec; skipped, with the reason, where
# it is missing or io_uring is not used here anyway.
set -uo pipefail
. "$(dirname "$0")/lib.sh" uring_refused
PY=/usr/bin/python3
if ! "$PY" -c 'import seccomp' 2>/dev/null; then
  echo "skip: no libseccomp Python binding ($PY -c 'import seccomp' fails; Debian python3-seccomp)"; exit 77
fi
cat >"$T/deny.py" <<'PYEOF'
import errno, os, sys, seccomp
f = seccomp.SyscallFilter(seccomp.ALLOW)
for name in sys.argv[1].split(","):
    f.add_rule(seccomp.ERRNO(errno.EPERM), name)
f.load()
os.execv(sys.argv[2], sys.argv[2:])
PYEOF
"$S" make-dataset --synthetic "$T/ds" --images 200 --classes 2 --seed 3 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
args=(run "$T/ds" --batch 16 --size 64 --seed 2 --epochs 2 --read-threads 1 --io-depth 8 --json --digest)
free=$("$S" "${args[@]}" 2>"$T/free.err")
check "unfiltered run completes" test -n "$(jget digest <<<"$free")"
if [ "$(jget read_path <<<"$free")" != io_uring ]; then
  echo "skip: io_uring is not used here even without a filter ($(grep -o 'reads: .*' "$T/free.err"))"; exit 77
fi
for deny in io_uring_setup io_uring_enter io_uring_setup,io_uring_enter,io_uring_register; do
  out=$(timeout 60 "$PY" "$T/deny.py" "$deny" "$S" "${args[@]}" 2>"$T/err"); rc=$?
  check "$deny refused: exit 0 within 60 s (rc $rc)" test $rc -eq 0
  check "$deny refused: read_path threads" test "$(jget read_path <<<"$out")" = threads
  check "$deny refused: the same stream" test "$(jget digest <<<"$out")" = "$(jget digest <<<"$free")"
  timeout 60 "$PY" "$T/deny.py" "$deny" "$S" run "$T/ds" --batch 16 --size 64 --epochs 1 \
    >/dev/null 2>"$T/err"
  check "$deny refused: says why ($(grep -o 'reads: .*' "$T/err"))" \
    grep -q 'reads: one blocking read per read thread: io_uring.*Operation not permitted' "$T/err"
done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
