#!/usr/bin/env bash
# Ctrl-C (SIGINT), SIGTERM or SIGHUP during `sluice pack` stops it
# cleanly, in every output format: exit 130 / 143 / 129, "interrupted
# (SIG...)" and "OUT is as it was" said, and nothing left behind: no
# staging folder beside OUT, no .tmp file, no finished .tar / .tfrecord
# that a later run or verify would take for the whole pack (the old code
# left all three). A pack into an existing pack (--force) keeps the old
# one whole. make-dataset stopped removes the images it wrote.
set -uo pipefail
. "$(dirname "$0")/lib.sh" pack_interrupt
set -m # background jobs with SIGINT as it is, not ignored (as in a terminal)

# 3000 links to one photo, re-encoded small (--max-side): a pack of
# several seconds, stopped after one.
"$S" make-dataset --synthetic "$T/one" --images 1 --classes 1 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
python3 - "$T" <<'PY'
import glob, os, sys
t = sys.argv[1]
src = glob.glob(t + "/one/*/*.jpg")[0]
for c in range(2):
    os.makedirs(f"{t}/src/c{c}")
    for i in range(1500):
        os.link(src, f"{t}/src/c{c}/{i:05d}.jpg")
PY

# pack_signal SIG OUT ARGS...: packs $T/src into $T/parent/OUT in a fresh
# $T/parent, sends SIG after 1 s; sets rc and late (seconds to the exit).
pack_signal() {
  local sig=$1 out=$2; shift 2
  mkdir -p "$T/parent"
  "$S" pack "$T/src" "$T/parent/$out" --max-side 48 --shard-size 64K "$@" \
    >"$T/out" 2>"$T/err" &
  local pid=$!
  sleep 1
  local t0=$(date +%s%N)
  kill -"$sig" "$pid"
  wait "$pid"; rc=$?
  late=$(( ($(date +%s%N) - t0) / 1000000000 ))
}

for fmt in sluice webdataset tfrecord; do
  for sig in INT TERM; do
    rm -rf "$T/parent"
    pack_signal "$sig" out --format "$fmt"
    want=$([ "$sig" = INT ] && echo 130 || echo 143)
    check "$fmt SIG$sig: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$fmt SIG$sig: out within 5 s (${late} s)" test "$late" -le 5
    check "$fmt SIG$sig: says interrupted" grep -q "interrupted (SIG$sig)" "$T/err"
    check "$fmt SIG$sig: says OUT is as it was" grep -q "is as it was" "$T/err"
    left=$(cd "$T/parent" && find . -mindepth 1 | head -5 | tr '\n' ' ')
    check "$fmt SIG$sig: nothing left in the parent (${left:-empty})" test -z "$left"
  done
done

# SIGHUP (the terminal or the ssh session gone) stops it the same way (was:
# killed where it stood, the staging folder left).
# Skipped when this shell was started with SIGHUP ignored (nohup): sluice
# keeps an ignored signal ignored.
ign=$(awk '/^SigIgn:/ {print $2}' /proc/$$/status 2>/dev/null)
if [ -n "$ign" ] && (( 16#$ign & 1 )); then
  echo "skip SIGHUP: ignored here (nohup)"
else
  rm -rf "$T/parent"
  pack_signal HUP out
  check "SIGHUP: exit 129 (got $rc)" test "$rc" -eq 129
  check "SIGHUP: says interrupted" grep -q "interrupted (SIGHUP)" "$T/err"
  left=$(cd "$T/parent" && find . -mindepth 1 | head -5 | tr '\n' ' ')
  check "SIGHUP: nothing left in the parent (${left:-empty})" test -z "$left"
  # ... and stops a run, --state written.
  "$S" run "$T/src" --batch 8 --size 32 --step-ms 50 --quiet --state "$T/st" \
    >/dev/null 2>"$T/err" &
  pid=$!; sleep 1; kill -HUP "$pid"; wait "$pid"; rc=$?
  check "run SIGHUP: exit 129 (got $rc)" test "$rc" -eq 129
  check "run SIGHUP: says where it stopped" grep -q "interrupted (SIGHUP) at epoch 0" "$T/err"
  check "run SIGHUP: --state written" test -s "$T/st"
fi

# --force over a finished pack: interrupted, the old pack stays whole.
rm -rf "$T/parent"; mkdir -p "$T/parent"
"$S" pack "$T/one" "$T/parent/out" >/dev/null 2>&1
check "a small pack to replace" test -s "$T/parent/out/sluice-manifest.txt"
pack_signal INT out --force
check "--force SIGINT: exit 130 (got $rc)" test "$rc" -eq 130
"$S" verify "$T/parent/out" >"$T/vout" 2>&1
check "--force SIGINT: the old pack verifies" test $? -eq 0
check "--force SIGINT: the old pack's 1 record" grep -q "verified 1 records" "$T/vout"
left=$(cd "$T/parent" && find . -mindepth 1 -maxdepth 1 ! -name out | head -5 | tr '\n' ' ')
check "--force SIGINT: no staging folder (${left:-none})" test -z "$left"

# make-dataset, stopped: the images it wrote are removed, a folder that
# was there keeps what it held (was: a part of the set left, which a run
# takes for the whole).
rm -rf "$T/md"; mkdir -p "$T/md/keep"; echo x >"$T/md/keep/f"
"$S" make-dataset --synthetic "$T/md" --images 20000 >/dev/null 2>"$T/err" &
pid=$!; sleep 1; kill -INT "$pid"; wait "$pid"; rc=$?
check "make-dataset SIGINT: exit 130 (got $rc)" test "$rc" -eq 130
check "make-dataset SIGINT: says interrupted" grep -q "interrupted (SIGINT)" "$T/err"
left=$(cd "$T/md" && find . -mindepth 1 | sort | tr '\n' ' ')
check "make-dataset SIGINT: only what was there (${left:-empty})" test "$left" = "./keep ./keep/f "

# pack --text, stopped the same way (when built with text).
python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(3000000):
        f.write("document %d with a few words in it\n" % i)
' "$T/corpus.txt"
rm -rf "$T/parent"; mkdir -p "$T/parent"
"$S" pack --text "$T/corpus.txt" -o "$T/parent/tx" --codec zstd-dict \
  --shard-size 1M >"$T/out" 2>"$T/err" &
pid=$!; sleep 1; kill -TERM "$pid"; wait "$pid"; rc=$?
if grep -q "built without" "$T/err"; then
  echo "skip text: $(head -1 "$T/err")"
elif [ "$rc" -eq 0 ]; then
  echo "skip text: the pack finished within 1 s"
else
  check "text SIGTERM: exit 143 (got $rc)" test "$rc" -eq 143
  check "text SIGTERM: says interrupted" grep -q "interrupted (SIGTERM)" "$T/err"
  left=$(cd "$T/parent" && find . -mindepth 1 | head -5 | tr '\n' ' ')
  check "text SIGTERM: nothing left (${left:-empty})" test -z "$left"
fi

echo "pack_interrupt: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
