#!/usr/bin/env bash
# e2e (issue 14 item 11): runs that used to succeed with a wrong result now
# fail clearly: a folder whose every file is bad under --on-error skip;
# --state / --resume with --unordered; resuming after the dataset changed;
# a state file with hostile fields (INT64_MIN epoch, junk). The library
# side of each: tests/unit/test_wrong_results.c.
set -uo pipefail
. "$(dirname "$0")/lib.sh" wrong_results

# Every sample bad, skipped: not an empty success (ordered and unordered).
mkdir -p "$T/bad/c0" "$T/bad/c1"
for i in 0 1 2; do
  echo junk >"$T/bad/c0/x$i.jpg"
  echo junk >"$T/bad/c1/y$i.jpg"
done
for mode in "" --unordered; do
  "$S" run "$T/bad" --on-error skip --batch 2 --size 32 --epochs 2 --quiet $mode >"$T/out" 2>&1
  rc=$?
  check "all skipped ${mode:-ordered}: exit $rc != 0" test $rc -ne 0
  check "all skipped ${mode:-ordered}: says so" grep -q "every sample was skipped" "$T/out"
done

"$S" make-dataset --synthetic "$T/ds" --images 40 --classes 2 --seed 3 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
common=(--batch 8 --size 32 --epochs 2 --seed 5 --quiet)

# --state / --resume need ordered delivery.
"$S" run "$T/ds" "${common[@]}" --unordered --stop-after 2 --state "$T/st" >"$T/out" 2>&1
rc=$?
check "--unordered --state refused (exit $rc)" test $rc -eq 2
check "... naming ordered delivery" grep -q "ordered delivery" "$T/out"
check "... and writing no state" test ! -e "$T/st"
"$S" run "$T/ds" "${common[@]}" --stop-after 2 --state "$T/st" >/dev/null 2>&1
check "an ordered --state is written" test -s "$T/st"
"$S" run "$T/ds" "${common[@]}" --unordered --resume "$T/st" >"$T/out" 2>&1
rc=$?
check "--unordered --resume refused (exit $rc)" test $rc -eq 2

# A changed dataset: the saved position would name other samples.
cp -r "$T/ds" "$T/ds2"
"$S" run "$T/ds2" "${common[@]}" --stop-after 2 --state "$T/st2" >/dev/null 2>&1
"$S" run "$T/ds2" "${common[@]}" --resume "$T/st2" >/dev/null 2>&1
check "resume on the same data works" test $? -eq 0
f=$(find "$T/ds2" -name '*.jpg' | sort | head -1)
cp "$f" "${f%.jpg}_added.jpg"
"$S" run "$T/ds2" "${common[@]}" --resume "$T/st2" >"$T/out" 2>&1
rc=$?
check "resume after adding a file refused (exit $rc)" test $rc -eq 2
check "... naming the sample counts" grep -q "40 samples" "$T/out"

# Hostile state files: every field is checked before it is used.
edit() { sed "s/^$1 .*/$1 $2/" "$T/st" >"$T/hostile"; }
for bad in "epoch -9223372036854775808" "epoch -1" "epoch 99999999999999999999" \
           "batch -9223372036854775808" "batch 1x"; do
  edit $bad
  "$S" run "$T/ds" "${common[@]}" --resume "$T/hostile" >"$T/out" 2>&1
  rc=$?
  check "state '$bad' refused (exit $rc)" test $rc -eq 2
  check "... as not a state file" grep -q "not a sluice state file" "$T/out"
done
edit batch 999 # well formed, but past the epoch (5 batches)
"$S" run "$T/ds" "${common[@]}" --resume "$T/hostile" >"$T/out" 2>&1
rc=$?
check "state batch 999 refused (exit $rc)" test $rc -ne 0
check "... as out of range" grep -q "outside" "$T/out"
{ cat "$T/st"; echo junk; } >"$T/hostile"
"$S" run "$T/ds" "${common[@]}" --resume "$T/hostile" >/dev/null 2>&1
check "state with trailing junk refused" test $? -eq 2

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
