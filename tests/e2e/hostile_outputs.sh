#!/usr/bin/env bash
# What `sluice run` and `sluice pack` write, into a hostile place: a FIFO,
# a device, a full disk, a file-size limit (ulimit -f). Each gives a clear
# error (or, for telemetry, a listed warning) within seconds, leaves the
# place as it was and no temp file behind. On the old code: --resume FIFO
# hung; --state FIFO or /dev/full replaced the FIFO / device with a file;
# --telemetry FIFO hung; --telemetry /dev/full lost every line silently;
# ulimit -f killed run and pack (SIGXFSZ), leaving PATH.tmp / .OUT.tmp-PID;
# a --metrics-port in use was "(in use?)", a guess.
set -uo pipefail
. "$(dirname "$0")/lib.sh" hostile_outputs

"$S" make-dataset --synthetic "$T/ds" --images 16 --classes 2 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
common=(--batch 8 --size 32 --threads 2 --quiet)
mkfifo "$T/fifo"

# --resume from a FIFO nobody writes: refused at once, not waited on.
timeout 10 "$S" run "$T/ds" "${common[@]}" --resume "$T/fifo" >/dev/null 2>"$T/err"
rc=$?
check "--resume FIFO: exit 2 (got $rc; 124: hung)" test "$rc" -eq 2
check "--resume FIFO: says why" grep -q "not a regular file (FIFO)" "$T/err"

# --state onto a FIFO: an error, the FIFO left a FIFO.
timeout 10 "$S" run "$T/ds" "${common[@]}" --state "$T/fifo" >/dev/null 2>"$T/err"
rc=$?
check "--state FIFO: exit 1 (got $rc)" test "$rc" -eq 1
check "--state FIFO: says why" grep -q "cannot write the state file .*not a regular file (FIFO)" "$T/err"
check "--state FIFO: still a FIFO" test -p "$T/fifo"

# --state under a file-size limit of 0 (a full disk fails the same way):
# the run says so, the old state file is kept, no temp file.
echo old >"$T/st"
(ulimit -f 0; exec timeout 10 "$S" run "$T/ds" "${common[@]}" --state "$T/st") 2>&1 >/dev/null | cat >"$T/err"
rc=${PIPESTATUS[0]}
check "--state, ulimit -f 0: exit 1 (got $rc; 153: killed by SIGXFSZ)" test "$rc" -eq 1
check "--state, ulimit -f 0: says why" grep -q "cannot write the state file .*/st: write failed: File too large" "$T/err"
check "--state, ulimit -f 0: the old state kept" test "$(cat "$T/st")" = old
left=$(cd "$T" && ls -d st.* 2>/dev/null | tr '\n' ' ')
check "--state, ulimit -f 0: no temp file (${left:-none})" test -z "$left"

# --telemetry into a FIFO nobody reads: refused at once, not waited on.
timeout 10 "$S" run "$T/ds" "${common[@]}" --telemetry "$T/fifo" >/dev/null 2>"$T/err"
rc=$?
check "--telemetry FIFO without a reader: exit 1 (got $rc; 124: hung)" test "$rc" -eq 1
check "--telemetry FIFO without a reader: says why" grep -q "a FIFO with no reader" "$T/err"
# ... and one that is read works (a pipe, as --telemetry >(jq ...) gives).
cat "$T/fifo" >"$T/fifo.out" &
reader=$!
timeout 10 "$S" run "$T/ds" "${common[@]}" --telemetry "$T/fifo" --telemetry-ms 20 >/dev/null 2>&1
rc=$?
wait "$reader"
check "--telemetry FIFO with a reader: exit 0 (got $rc)" test "$rc" -eq 0
check "--telemetry FIFO with a reader: lines came" grep -q '"t":' "$T/fifo.out"

# --telemetry whose writes fail (a full disk): the run goes on, the loss is
# said once as a warning naming the file and the cause.
if [ -c /dev/full ]; then
  # (--step-ms: a run of several periods; a failure only at the last
  # snapshot, taken as the loader closes, comes after the list is printed)
  timeout 10 "$S" run "$T/ds" "${common[@]}" --epochs 4 --step-ms 20 \
    --telemetry /dev/full --telemetry-ms 20 >/dev/null 2>"$T/err"
  rc=$?
  check "--telemetry /dev/full: the run goes on (exit $rc)" test "$rc" -eq 0
  check "--telemetry /dev/full: a warning says so" grep -q "^warning: telemetry /dev/full: write failed: No space left on device" "$T/err"
  check "--telemetry /dev/full: said once" test "$(grep -c "telemetry /dev/full" "$T/err")" -eq 1
  check "--telemetry /dev/full: still a device" test -c /dev/full
  # The figures (--json) to a full disk: said, exit 1 (was: lost, exit 0).
  timeout 10 "$S" run "$T/ds" "${common[@]}" --json >/dev/full 2>"$T/err"
  rc=$?
  check "--json > /dev/full: exit 1 (got $rc)" test "$rc" -eq 1
  check "--json > /dev/full: says so" grep -q "sluice run: cannot write its output: No space left on device" "$T/err"
else
  echo "skip /dev/full: not a character device here"
fi

# --metrics-port taken by another process: the cause said (was: "(in
# use?)", a guess, also said for a port refused for lack of privilege).
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$T/port" &
holder=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
port=$(cat "$T/port")
timeout 10 "$S" run "$T/ds" "${common[@]}" --metrics-port "$port" >/dev/null 2>"$T/err"
rc=$?
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
if grep -q "built without" "$T/err"; then
  echo "skip --metrics-port: $(head -1 "$T/err")"
else
  check "--metrics-port in use: exit 1 (got $rc)" test "$rc" -eq 1
  check "--metrics-port in use: the cause" grep -q "cannot serve metrics on 127.0.0.1:$port: Address already in use" "$T/err"
fi

# pack under a file-size limit: fails naming the file and EFBIG, OUT as it
# was, nothing left beside it (was: killed by SIGXFSZ mid-shard).
for fmt in sluice webdataset tfrecord; do
  mkdir -p "$T/p-$fmt"
  (ulimit -f 64; exec "$S" pack "$T/ds" "$T/p-$fmt/out" --format "$fmt") 2>&1 >/dev/null | cat >"$T/err"
  rc=${PIPESTATUS[0]}
  check "pack $fmt, ulimit -f: exit 1 (got $rc; 153: killed by SIGXFSZ)" test "$rc" -eq 1
  check "pack $fmt, ulimit -f: says why" grep -q "write failed: File too large" "$T/err"
  left=$(cd "$T/p-$fmt" && find . -mindepth 1 | head -3 | tr '\n' ' ')
  check "pack $fmt, ulimit -f: nothing left (${left:-empty})" test -z "$left"
done

# make-dataset under a file-size limit: no cut image left, nor a part of
# the set (was: a truncated img_00000.jpg in class folders).
mkdir -p "$T/md"
(ulimit -f 16; exec "$S" make-dataset --synthetic "$T/md/out" --images 20) 2>&1 >/dev/null | cat >"$T/err"
rc=${PIPESTATUS[0]}
check "make-dataset, ulimit -f: exit 1 (got $rc)" test "$rc" -eq 1
check "make-dataset, ulimit -f: says why" grep -q "cannot write .*img_00000.jpg: File too large" "$T/err"
left=$(cd "$T/md" && find . -mindepth 1 | head -3 | tr '\n' ' ')
check "make-dataset, ulimit -f: nothing left (${left:-empty})" test -z "$left"

echo "hostile_outputs: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
