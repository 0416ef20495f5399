#!/usr/bin/env bash
# End-to-end test of a small stack (`ulimit -s 32`: an embedded system, a
# runner that sets it low). The limit is the main thread's whole stack and
# glibc's default for every thread it starts, so a run reads its cgroup's
# limits, scans, decodes and reports within 32 KB a thread. It crashed in
# the main thread while reading the cgroup's CPU quota: three PATH_MAX
# buffers in a row on the stack (now on the heap).
#
# 32 KB, not less: at 24 KB a run passes or fails by where ASLR puts the
# stack's top (the environment and argv sit there too) and by the dynamic
# linker's own frames on a first call; 32 KB is what sluice's own code is
# held to. The build is the default optimised one (a -O0 build's frames are
# larger).
set -uo pipefail
. "$(dirname "$0")/lib.sh" small_stack
"$S" make-dataset --synthetic "$T/ds" --images 20 --classes 2 >/dev/null 2>&1 \
  || { echo "FAIL make-dataset"; exit 1; }
run() { (ulimit -s 32 && exec "$S" run "$T/ds" --batch 4 --size 32 --json "$@"); }
# A few runs: where the stack's top lies changes with each.
for i in 1 2 3; do
  out=$(run 2>"$T/err.$i"); rc=$?
  check "run $i under ulimit -s 32 exits 0 (rc $rc)" [ "$rc" = 0 ]
  check "run $i delivered the 20 samples" [ "$(jget samples <<<"$out")" = 20 ]
done
# Not with --telemetry: its collector thread crashed (SIGSEGV) once in
# four clean-clone CI runs under 32 KB (threads take their stack size from
# ulimit -s); left for the next stop, not hidden.
[ "$fails" -eq 0 ] || tail -n 5 "$T"/err.*
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
