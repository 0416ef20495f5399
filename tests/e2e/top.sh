#!/usr/bin/env bash
# End-to-end tests of `sluice top` against a real job (`sluice run
# --metrics-port P` on a generated dataset, knobs fixed): --once and plain
# frames show throughput > 0 and the job's knobs; full screen under tmux (a
# private server, fixed size): the pane shows the same, a resize redraws
# within the new width and does not end it, q quits with exit 0 and the
# screen restored; --pid finds the port; the job ending ends top with exit
# 0 and a last line; nothing listening is exit 1; a bad command line exit
# 2. The job and the tmux server are killed on any exit; every wait is
# bounded.
set -uo pipefail
. "$(dirname "$0")/lib.sh" top
if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: tmux not installed (Debian: apt-get install tmux)"
  exit 77
fi

tm() { tmux -S "$T/tmux.sock" "$@"; }
job=
cleanup() {
  tm kill-server >/dev/null 2>&1
  if [ -n "$job" ]; then kill "$job" 2>/dev/null; wait "$job" 2>/dev/null; fi
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP # so that cleanup runs on a ctest time-out too

# until SECONDS CMD...: runs CMD every 0.2 s until it succeeds (0) or the
# time is up (1).
until_ok() {
  local end=$((SECONDS + $1)); shift
  while ! "$@"; do
    [ $SECONDS -ge $end ] && return 1
    sleep 0.2
  done
}
not_grep() { ! grep -q "$@"; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

"$S" make-dataset --synthetic "$T/ds" --images 64 --classes 2 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }

# The job: knobs given (static), long enough for the whole test; another
# port when this one is taken.
start_job() {
  local p
  for p in $(seq $((20000 + $$ % 20000)) 7 $((20000 + $$ % 20000 + 70))); do
    "$S" run "$T/ds" --batch 16 --size 64 --duration 120 --policy static \
      --read-threads 2 --threads 1 --prefetch 3 --metrics-port "$p" --quiet \
      >"$T/job.out" 2>&1 &
    job=$!
    if until_ok 10 listening "$p"; then port=$p; return 0; fi
    if grep -q "built without the Prometheus endpoint" "$T/job.out"; then
      echo "SKIP: sluice built without the Prometheus endpoint"; exit 77
    fi
    kill "$job" 2>/dev/null; wait "$job" 2>/dev/null; job=
  done
  return 1
}
start_job || { echo "FAIL: no job serves metrics"; cat "$T/job.out"; exit 1; }
echo "job $job serves metrics on port $port"

knobs="read_threads 2   decode_threads 1   prefetch 3"
# The rate on a frame's samples/s line, as an integer.
rate_of() { awk '/^samples\/s/ { printf "%d\n", $2; exit }' "$1"; }

# --once: one plain frame, rates over one interval.
timeout 20 "$S" top --port "$port" --once --interval 0.5 >"$T/once" 2>&1
check "--once: exit 0" test $? -eq 0
check "--once: one frame" test "$(grep -c '^sluice top' "$T/once")" -eq 1
check "--once: throughput > 0 ($(rate_of "$T/once"))" test "$(rate_of "$T/once")" -gt 0
check "--once: the job's knobs" grep -q "$knobs" "$T/once"
check "--once: rates over the interval" not_grep "rates: the job's last" "$T/once"
check "--once: stages" grep -q "^decode  *1 " "$T/once"
check "--once: no escapes" not_grep $'\x1b' "$T/once"

# Not a terminal, TERM=dumb: plain frames, one per interval.
TERM=dumb timeout 20 "$S" top --port "$port" --frames 3 --interval 0.3 >"$T/plain" 2>&1
check "plain: exit 0" test $? -eq 0
check "plain: 3 frames" test "$(grep -c '^sluice top' "$T/plain")" -eq 3

# Into a pipe that closes (| head): ends (SIGPIPE), does not spin on.
timeout 20 "$S" top --port "$port" --interval 0.2 | head -2 >"$T/head"
rc=("${PIPESTATUS[@]}")
check "| head: top ended before the time-out (${rc[0]})" test "${rc[0]}" -ne 124
check "| head: the first lines" grep -q "^sluice top" "$T/head"

# --pid: the port found from the job's sockets.
timeout 20 "$S" top --pid "$job" --once --interval 0.3 >"$T/pid" 2>&1
check "--pid: exit 0" test $? -eq 0
check "--pid: found port $port" grep -q "127.0.0.1:$port/metrics" "$T/pid"
timeout 20 "$S" top --pid $$ --once >"$T/nopid" 2>&1
check "--pid of a process without metrics: exit 1" test $? -eq 1
check "--pid of a process without metrics: says so" grep -q "serves no sluice metrics" "$T/nopid"

# Full screen under tmux.
tm new-session -d -s top -x 100 -y 30 \
  "TERM=xterm $S top --port $port --interval 0.5; echo TOP-EXITED rc=\$?; sleep 600"
pane() { tm capture-pane -p -t top >"$T/pane" 2>/dev/null; }
second_frame() { pane && grep -q "^samples/s" "$T/pane" && ! grep -q "rates: the job's last" "$T/pane"; }
check "tmux: a frame with rates within 10 s" until_ok 10 second_frame
check "tmux: throughput > 0 ($(rate_of "$T/pane"))" test "$(rate_of "$T/pane")" -gt 0
check "tmux: the job's knobs" grep -q "$knobs" "$T/pane"
check "tmux: the status line" grep -q "q quits" "$T/pane"
check "tmux: alive" tm has-session -t top
tm resize-window -t top -x 50 -y 12
# Redrawn, not cut by tmux: the busy bar is drawn for 50 columns (10 wide).
narrow() { pane && [ "$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$T/pane")" -le 50 ] && grep -q "^sluice top" "$T/pane" && grep -Eq '^decode .*\[[# ]{10}\]' "$T/pane"; }
check "tmux: redrawn within 50 columns after a resize" until_ok 5 narrow
tm resize-window -t top -x 120 -y 40
wide() { pane && grep -q "^decisions" "$T/pane" && grep -q "^samples/s" "$T/pane"; }
check "tmux: redrawn larger" until_ok 5 wide
check "tmux: still running after the resizes" not_grep "TOP-EXITED" "$T/pane"
tm send-keys -t top q
exited() { pane && grep -q "TOP-EXITED rc=0" "$T/pane"; }
check "tmux: q quits with exit 0" until_ok 5 exited
check "tmux: main screen back (no frame left)" not_grep "q quits" "$T/pane"

# Ctrl-Z in a shell: the shell's screen back while stopped; fg redraws.
tm new-session -d -s sh -x 100 -y 30 "bash --norc --noprofile -i"
tm send-keys -t sh "PS1='PROMPT$ '; TERM=xterm $S top --port $port --interval 0.5" Enter
shpane() { tm capture-pane -p -t sh >"$T/sh" 2>/dev/null; }
drawn() { shpane && grep -q "q quits" "$T/sh"; }
stopped() { shpane && grep -q "Stopped" "$T/sh" && ! grep -q "q quits" "$T/sh"; }
check "ctrl-z: drawn" until_ok 10 drawn
tm send-keys -t sh C-z
check "ctrl-z: stopped, the shell's screen back" until_ok 5 stopped
tm send-keys -t sh "fg" Enter
check "ctrl-z: fg draws again" until_ok 5 drawn
tm send-keys -t sh q
tm send-keys -t sh 'echo TOP-EXITED rc=$?' Enter
shexit() { shpane && grep -q "^TOP-EXITED rc=0" "$T/sh"; }
check "ctrl-z: q after fg quits with exit 0" until_ok 5 shexit

# The job ends while top watches: a last line, exit 0.
timeout 30 "$S" top --port "$port" --interval 0.2 >"$T/end" 2>&1 &
top_pid=$!
sleep 1
kill "$job"; wait "$job" 2>/dev/null; job=
wait "$top_pid"
check "job ended: exit 0" test $? -eq 0
check "job ended: says so" grep -q "^sluice top: the job at 127.0.0.1:$port/metrics has ended" "$T/end"

# Nothing there: exit 1, said; a bad command line: exit 2.
timeout 20 "$S" top --port "$port" --once >"$T/none" 2>&1
check "nothing listening: exit 1" test $? -eq 1
check "nothing listening: says so" grep -q "no job serves metrics there" "$T/none"
"$S" top >/dev/null 2>&1
check "no target: exit 2" test $? -eq 2
"$S" top --port 1 --url http://127.0.0.1:1/metrics >/dev/null 2>&1
check "two targets: exit 2" test $? -eq 2

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
