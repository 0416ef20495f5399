#!/usr/bin/env bash
# e2e: WebDataset and TFRecord from the CLI alone (no Python): an
# ImageFolder packed with --format webdataset and --format tfrecord, run
# through a brace pattern, gives the folder's digest (same samples, order,
# pixels, labels), with the global permutation, a shuffle buffer and a
# resume; inspect reports format and counts; a truncated shard and a
# damaged record fail naming file and sample, and under --on-error skip are
# listed. Needs $SLUICE (ctest sets it).
set -uo pipefail
. "$(dirname "$0")/lib.sh" formats

"$S" make-dataset --synthetic "$T/ds" --images 40 --classes 4 >/dev/null 2>&1 ||
  { echo "FAIL make-dataset"; exit 1; }
run() { "$S" run "$@" --batch 8 --size 32 --seed 3 --epochs 2 --digest --json --quiet 2>&1; }
want=$(run "$T/ds" | jget digest)
check "folder digest ($want)" test -n "$want"

check "pack --format webdataset" "$S" pack "$T/ds" "$T/wds" --format webdataset --shard-size 600K
check "pack --format tfrecord" "$S" pack "$T/ds" "$T/tfr" --format tfrecord --shard-size 1M
# Missing folders above OUT are made (mkdir -p), for both formats.
check "pack --format webdataset: missing parents made" \
  "$S" pack "$T/ds" "$T/new/w/out/" --format webdataset
check "pack --format tfrecord: missing parents made" \
  "$S" pack "$T/ds" "$T/new/t/out" --format tfrecord
check "webdataset pack under new/w/out" test -f "$T/new/w/out/shard-000000.tar"
nw=$(ls "$T/wds" | grep -c '\.tar$'); nt=$(ls "$T/tfr" | grep -c '\.tfrecord$')
check "several shards ($nw tar, $nt tfrecord)" test "$nw" -ge 3 -a "$nt" -ge 2
last=$(printf '%06d' $((nw - 1))); lastt=$(printf '%05d' $((nt - 1)))
W="$T/wds/shard-{000000..$last}.tar"
R="$T/tfr/data-{00000..$lastt}.tfrecord"
check "webdataset digest = folder" test "$(run "$W" | jget digest)" = "$want"
check "tfrecord digest = folder" test "$(run "$R" | jget digest)" = "$want"
check "tfrecord: prefix digest = folder" test "$(run "tfrecord:$R" | jget digest)" = "$want"

# Shuffle buffer: deterministic, another order, resumable.
sb1=$(run "$W" --shuffle-buffer 5 | jget digest)
check "shuffle buffer: same twice" test "$(run "$W" --shuffle-buffer 5 --read-threads 3 | jget digest)" = "$sb1"
check "shuffle buffer: another order" test "$sb1" != "$want"
"$S" run "$W" --batch 8 --size 32 --seed 3 --epochs 2 --shuffle-buffer 5 \
  --stop-after 7 --state "$T/st" --digest --json --quiet >/dev/null 2>&1
check "shuffle buffer: resumed = whole" \
  test "$("$S" run "$W" --batch 8 --size 32 --seed 3 --epochs 2 --shuffle-buffer 5 \
          --resume "$T/st" --digest --json --quiet 2>&1 | jget digest)" = "$sb1"

out=$("$S" inspect "$W")
check "inspect: format" grep -q "format:   webdataset" <<<"$out"
check "inspect: 40 samples" grep -q "samples:  40 (0 bad)" <<<"$out"
out=$("$S" inspect "$R")
check "inspect: tfrecord" grep -q "format:   tfrecord" <<<"$out"

# Damage: a shard cut short; a record's data byte flipped.
mkdir "$T/bad"
cp "$T"/wds/*.tar "$T/bad/"
sz=$(stat -c %s "$T/bad/shard-000001.tar")
truncate -s $((sz / 2 + 100)) "$T/bad/shard-000001.tar"
B="$T/bad/shard-{000000..$last}.tar"
out=$("$S" run "$B" --batch 8 --size 32 2>&1)
check "truncated shard fails, named" grep -q "shard-000001.tar: tar header at offset .*truncated" <<<"$out"
out=$("$S" run "$B" --batch 8 --size 32 --on-error skip 2>&1)
check "truncated shard: skipped and listed" grep -q "skipped: .*shard-000001.tar.*(the rest of the file lost)" <<<"$out"
cp "$T/tfr/data-00000.tfrecord" "$T/one.tfrecord"
printf '\xff' | dd of="$T/one.tfrecord" bs=1 seek=40 conv=notrunc 2>/dev/null
out=$("$S" run "$T/one.tfrecord" --batch 8 --size 32 2>&1)
check "bad record CRC fails, named" grep -q "one.tfrecord: record 0 at offset 0: data CRC mismatch" <<<"$out"
out=$("$S" run "$T/one.tfrecord" --batch 8 --size 32 --on-error skip 2>&1)
check "bad record: skipped and listed" grep -q "skipped: epoch 0: .*record 0 .*data CRC mismatch" <<<"$out"
out=$("$S" run "$T/wds/missing-{0..1}.tar" --batch 8 2>&1)
check "missing shard named" grep -q "missing-0.tar" <<<"$out"

# Local sluice shards by a brace pattern: the pack's stream; a missing one
# is named; a pattern over the expansion limit says so (not "No such file").
check "pack --format sluice" "$S" pack "$T/ds" "$T/sls" --shard-size 600K
ns=$(ls "$T/sls" | grep -c '\.sls$')
P="$T/sls/shard-{00000..$(printf '%05d' $((ns - 1)))}.sls"
check "sluice shards by a brace pattern ($ns): digest = pack" \
  test "$(run "$P" | jget digest)" = "$(run "$T/sls" | jget digest)"
out=$("$S" run "$T/sls/shard-{00000..$(printf '%05d' "$ns")}.sls" --batch 8 2>&1)
check "sluice shards by a brace pattern: a missing one named" \
  grep -q "shard-$(printf '%05d' "$ns").sls: cannot open" <<<"$out"
for ext in tar sls; do
  out=$("$S" run "$T/x-{0000000..9999999}.$ext" --batch 8 2>&1)
  check "a .$ext pattern over the limit: named" grep -q "expands to more than 1048576 names" <<<"$out"
done

echo "formats: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
