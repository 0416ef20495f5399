#!/usr/bin/env bash
# What the CLI says around a command: `sluice help CMD` is CMD's help; a
# mistyped command or option gets one line naming it (and the likely one)
# and a pointer to --help, not the whole usage; pack and index print file
# names with their control bytes escaped (\x1b), never raw.
set -uo pipefail
. "$(dirname "$0")/lib.sh" cli_messages

"$S" make-dataset --synthetic "$T/ds" --images 8 --classes 2 --seed 1 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }

# help CMD
for cmd in run pack index; do
  "$S" "$cmd" --help >"$T/want" 2>&1
  "$S" help "$cmd" >"$T/got" 2>&1; rc=$?
  check "help $cmd: rc 0 ($rc), as $cmd --help" test "$rc" -eq 0
  check "help $cmd: the same text" cmp -s "$T/want" "$T/got"
done
"$S" --help run >"$T/got" 2>&1
check "--help run: run's help" grep -q "^usage: sluice run SOURCE" "$T/got"
"$S" help >"$T/got" 2>&1
check "help: the commands" grep -q "^usage: sluice COMMAND" "$T/got"
"$S" help bogus >"$T/out" 2>"$T/err"; rc=$?
check "help bogus: rc 2 ($rc)" test "$rc" -eq 2
check "help bogus: names it" grep -q "unknown command 'bogus'" "$T/err"
check "help bogus: nothing on stdout" test ! -s "$T/out"
"$S" rnu >/dev/null 2>"$T/err"; rc=$?
check "rnu: rc 2, did you mean run" test "$rc" -eq 2 -a "$(head -1 "$T/err")" = \
  "sluice: unknown command 'rnu'; did you mean 'run'?"

# usage_error NAME WANT-LINE-1 CMD...: rc 2, two lines: WANT, then the
# pointer to the command's --help.
usage_error() {
  local name=$1 want=$2 sub=$3; shift 2
  "$S" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  check "$name: rc 2 ($rc)" test "$rc" -eq 2
  check "$name: '$want'" test "$(head -1 "$T/err")" = "$want"
  check "$name: then see 'sluice $sub --help', and no more ($(wc -l <"$T/err") lines)" \
    test "$(sed -n 2p "$T/err")" = "see 'sluice $sub --help'" -a "$(wc -l <"$T/err")" -eq 2
}
usage_error "run --bogus" "sluice run: unknown option '--bogus'" run "$T/ds" --bogus
usage_error "run --bogus=3" "sluice run: unknown option '--bogus'" run "$T/ds" --bogus=3
usage_error "run --siez 3" "sluice run: unknown option '--siez'; did you mean --size?" run "$T/ds" --siez 3
usage_error "bench --epohcs 2" "sluice bench: unknown option '--epohcs'; did you mean --epochs?" bench "$T/ds" --epohcs 2
usage_error "run --cache-d 1" "sluice run: ambiguous option '--cache-d': --cache-decoded, --cache-dir, --cache-disk" run "$T/ds" --cache-d 1
usage_error "run -z" "sluice run: unknown option '-z'" run "$T/ds" -z
usage_error "run --size" "sluice run: a value is missing after the option '--size'" run "$T/ds" --size
usage_error "run A B" "sluice run: expected one SOURCE" run "$T/ds" "$T/ds"
usage_error "pack --bogus" "sluice pack: unknown option '--bogus'" pack "$T/ds" "$T/p" --bogus
usage_error "index --bogus" "sluice index: unknown option '--bogus'" index x.tar --bogus
# a bad value names the range: bounded above, (0, max]; open above, > 0
bad_value() {
  local name=$1 want=$2; shift 2
  "$S" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  check "$name: rc 2 ($rc), '$want'" test "$rc" -eq 2 -a "$(head -1 "$T/err")" = "$want"
}
bad_value "analyze --step-ms 0" "sluice analyze: bad value '0' for --step-ms (a number in (0, 1000000000])" analyze "$T/ds" --step-ms 0
bad_value "run --duration 0" "sluice run: bad value '0' for --duration (a number > 0)" run "$T/ds" --duration 0
# --set: a value the knob can never take fails before the run, naming the
# knob and its range on this loader (it was ignored, exit 0)
for set in 2:threads=999 2:prefetch=0; do # the range depends on the machine
  "$S" run "$T/ds" --set "$set" >"$T/out" 2>"$T/err"; rc=$?
  k=${set#2:}; k=${k%=*}
  check "run --set $set: rc 2 ($rc), names knob and range" test "$rc" -eq 2 -a \
    -n "$(head -1 "$T/err" | grep -E "^sluice run: --set $set: $k = -?[0-9]+ is outside [0-9]+\.\.[0-9]+ on this loader$")"
done
bad_value "run --set 1:step-ms=-5" "sluice run: bad value '1:step-ms=-5' for --set (K:KNOB=V)" run "$T/ds" --set 1:step-ms=-5
bad_value "run --set 1:gpu-share=1001" "sluice run: bad value '1:gpu-share=1001' for --set (K:KNOB=V)" run "$T/ds" --set 1:gpu-share=1001
"$S" run "$T/ds" --batch 4 --set 1:threads=2 --set 1:io-depth=-1 --quiet >/dev/null 2>"$T/err"
check "run --set in range (and -1, the default): rc 0" test $? -eq 0
check "run --set that all applied: no warning" test -z "$(grep warning "$T/err")"
# gpu-share too, where the loader has no GPU stage (its range is 0..0,
# settled at create): before the run, naming why (it exited 0 after a
# run-time message)
if "$S" run "$T/ds" --batch 4 --epochs 1 2>&1 >/dev/null | grep -q "placement: CPU"; then
  "$S" run "$T/ds" --batch 4 --set 1:gpu-share=10 >"$T/out" 2>"$T/err"; rc=$?
  check "run --set 1:gpu-share=10 without a GPU stage: rc 2 ($rc), before the run" \
    test "$rc" -eq 2 -a ! -s "$T/out" -a \
    -n "$(head -1 "$T/err" | grep -E "^sluice run: --set 1:gpu-share=10: gpu-share = 10 is outside 0\.\.0 on this loader \(the GPU stage is not in use: .+\)$")"
fi
# a set that never comes due (the run is 2 batches) is named at the end
"$S" run "$T/ds" --batch 4 --epochs 1 --set 100:threads=1 --set 1:prefetch=3 \
  --quiet >/dev/null 2>"$T/err"; rc=$?
check "run --set 100:threads=1 on 2 batches: rc 0 ($rc), warned by name" \
  test "$rc" -eq 0 -a "$(grep warning "$T/err")" = \
  "sluice run: warning: --set 100:threads=1 never applied: the run ended after 2 batches"
"$S" run >/dev/null 2>"$T/err"; rc=$?
check "run alone: rc 2 and its usage" test "$rc" -eq 2 -a "$(grep -c -- '--' "$T/err")" -gt 20

# raw NAME FILE: FILE holds no raw ESC or CR, and the escaped \x1b.
raw() {
  check "$1: no raw control bytes" bash -c "! LC_ALL=C grep -q \$'[\\x1b\\r]' '$2'"
  check "$1: the name escaped" grep -qF 'a\x1b[2K\x0db' "$2"
}
bad=$'a\x1b[2K\rb'
mkdir -p "$T/src/c"
cp "$(find "$T/ds" -name '*.jpg' | head -1)" "$T/src/c/ok.jpg"
printf 'not an image' >"$T/src/c/$bad.jpg"
"$S" pack "$T/src" "$T/p1" --jpeg-quality 50 >"$T/out" 2>&1
check "pack, lossy, a bad file: fails" test $? -eq 1
raw "pack, lossy" "$T/out"
"$S" pack "$T/src" "$T/p2" --jpeg-quality 50 --on-error skip >"$T/out" 2>&1
raw "pack, lossy, skipped" "$T/out"
"$S" pack "$T/src" "$T/$bad" --format webdataset >"$T/out" 2>&1
raw "pack into OUT" "$T/out"
rm -f "$T/src/c/$bad.jpg"
"$S" pack "$T/src" "$T/w" --format webdataset >/dev/null 2>&1
head -c 1000 "$T/w/shard-000000.tar" >"$T/$bad.tar"
"$S" index "$T/$bad.tar" >"$T/out" 2>&1
check "index, damaged: rc 1" test $? -eq 1
raw "index, damaged" "$T/out"
"$S" index "$T/missing-$bad.tar" >"$T/out" 2>&1
raw "index, missing" "$T/out"
"$S" index "$T/$bad.foo" >"$T/out" 2>&1
raw "index, not a format" "$T/out"

# --json with a damaged file whose name is not UTF-8 (Latin-1 é): the line
# is valid JSON (UTF-8, no lone surrogate) naming the file, its byte as
# \xe9.
if command -v python3 >/dev/null; then
  mkdir -p "$T/l1/c"
  cp "$T/src/c/ok.jpg" "$T/l1/c/ok.jpg"
  printf 'not an image' >"$T/l1/c/caf"$'\xe9'".jpg"
  "$S" run "$T/l1" --json >"$T/out" 2>/dev/null
  check "run --json, a damaged Latin-1 name: rc 1" test $? -eq 1
  check "run --json, a damaged Latin-1 name: valid JSON naming the file" \
    python3 -c '
import json, os, sys
m = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))["message"]
assert "caf\\xe9.jpg" in m, m' "$T/out"
else
  echo "skip: --json with a Latin-1 name (no python3)"
fi

# Every command's error lines start "sluice CMD: " (verify, inspect,
# tokenize and make-dataset printed a bare "CMD: ", pack "pack: ").
: >"$T/afile"
run_error() {
  local name=$1 want=$2; shift 2
  "$S" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  check "$name: fails ($rc), first line starts '$want'" \
    test "$rc" -ne 0 -a "$(head -1 "$T/err" | cut -c1-${#want})" = "$want"
}
run_error "verify, no such folder" "sluice verify: $T/none" verify "$T/none"
run_error "inspect, no such file" "sluice inspect: " inspect "$T/none.sls"
run_error "make-dataset, under a file" "sluice make-dataset: cannot create" \
  make-dataset --synthetic "$T/afile/under" --images 2 --classes 1
run_error "tokenize, no vocabulary" "sluice tokenize: " tokenize --tokenizer gpt2 \
  --vocab "$T/none.json" "$T/none.txt"
run_error "pack, under a file" "sluice pack: " pack "$T/ds" "$T/afile/x/out"
run_error "index, no such file" "sluice index: " index "$T/none.tar"

echo "cli_messages: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
