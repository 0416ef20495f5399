#!/usr/bin/env bash
# e2e: a pack is whole or refused (issue 14 item 8). `sluice pack` writes
# into a folder beside OUT and renames it into place with a manifest; the
# loader and `sluice verify` check a pack against it. A shard deleted, a
# stray shard from another pack, a shard swapped for another pack's, or a
# classes.txt from elsewhere: refused, naming the pack and the shard. A
# re-pack that fails (or is killed) leaves the old pack as it was; one that
# succeeds leaves no old shard behind; the next pack removes a killed
# one's temp folder. Older packs (no manifest) are read
# when their numbering has no gap.
set -uo pipefail
. "$(dirname "$0")/lib.sh" pack_manifest

"$S" make-dataset --synthetic "$T/src" --images 60 --classes 3 --seed 1 >/dev/null 2>&1
"$S" make-dataset --synthetic "$T/other" --images 40 --classes 4 --seed 2 >/dev/null 2>&1
# Another tree whose last class has a file that cannot be read: a pack of
# it fails after it has written several shards.
cp -r "$T/other" "$T/broken"
last=$(ls "$T/broken" | tail -1)
ln -s "$T/nowhere.jpg" "$T/broken/$last/zzz.jpg"

RUN=(--batch 8 --size 32 --epochs 1 --json --quiet)
run_pack() { "$S" run "$1" "${RUN[@]}" >"$T/out" 2>"$T/err"; }
# Every file of folder $1 with its checksum, sorted.
sums() { (cd "$1" && md5sum $(ls -A) 2>/dev/null); }
refused() { # what dir needle: run and verify both refuse, naming needle
  local what=$1 dir=$2 needle=$3
  run_pack "$dir"
  check "$what: run refuses" test $? -ne 0
  check "$what: run names it ($needle)" grep -qF -- "$needle" "$T/err"
  "$S" verify "$dir" --quiet >"$T/vout" 2>&1
  check "$what: verify exits 1" test $? -eq 1
  check "$what: verify names it" grep -qF -- "$needle" "$T/vout"
}

"$S" pack "$T/src" "$T/A" --shard-size 100K >/dev/null 2>&1
check "pack: exit 0" test $? -eq 0
"$S" pack "$T/other" "$T/B" --shard-size 100K >/dev/null 2>&1
nA=$(ls "$T/A"/*.sls | wc -l)
check "pack: several shards ($nA)" test "$nA" -ge 3
check "pack: manifest written" test -f "$T/A/sluice-manifest.txt"
check "pack: no temp folder left" test -z "$(ls -A "$T" | grep '^\.')"
run_pack "$T/A"
check "complete pack: run exit 0" test $? -eq 0
check "complete pack: 60 samples" test "$(jget samples <"$T/out")" = 60
"$S" verify "$T/A" >"$T/vout" 2>&1
check "complete pack: verify exit 0" test $? -eq 0

# A shard deleted (an unfinished copy, a lost file).
cp -r "$T/A" "$T/missing"
rm "$T/missing/shard-00001.sls"
refused "shard deleted" "$T/missing" "shard-00001.sls is missing"

# A stray shard of another pack, numbered next.
cp -r "$T/A" "$T/extra"
cp "$T/B/shard-00000.sls" "$T/extra/$(printf 'shard-%05d.sls' "$nA")"
refused "stray shard" "$T/extra" "$(printf 'shard-%05d.sls' "$nA") is not part of this pack"

# A shard swapped for another pack's (old and new shards mixed).
cp -r "$T/A" "$T/mixed"
cp "$T/B/shard-00001.sls" "$T/mixed/shard-00001.sls"
refused "shard from another pack" "$T/mixed" "mixed/shard-00001.sls: not the shard"

# classes.txt of another pack.
cp -r "$T/A" "$T/cls"
cp "$T/B/classes.txt" "$T/cls/classes.txt"
refused "classes.txt of another pack" "$T/cls" "classes.txt is not the one"

# A re-pack that fails midway leaves the old pack exactly as it was.
cp -r "$T/A" "$T/re"
before=$(sums "$T/re")
"$S" pack "$T/broken" "$T/re" --force --shard-size 100K >/dev/null 2>"$T/err"
check "failed re-pack: exit 1" test $? -eq 1
check "failed re-pack: names the file" grep -q "zzz.jpg" "$T/err"
check "failed re-pack: old pack untouched" test "$(sums "$T/re")" = "$before"
check "failed re-pack: no temp folder left" test -z "$(ls -A "$T" | grep '^\.')"
run_pack "$T/re"
check "failed re-pack: old pack still reads" test $? -eq 0

# A re-pack that succeeds: the new pack alone, no old shard or class.
"$S" pack "$T/other" "$T/re" --force --shard-size 100K >/dev/null 2>&1
check "re-pack --force: exit 0" test $? -eq 0
check "re-pack --force: the new shards alone" test "$(ls "$T/re")" = "$(ls "$T/B")"
check "re-pack --force: its classes" cmp -s "$T/re/classes.txt" "$T/B/classes.txt"
"$S" verify "$T/re" >"$T/vout" 2>&1
check "re-pack --force: verify exit 0" test $? -eq 0
check "re-pack --force: no temp folder left" test -z "$(ls -A "$T" | grep '^\.')"

# A pack killed midway: OUT is the old pack or the new one, never a mix.
for c in "$T/src"/*; do # 8 copies of each image: a pack of a few seconds
  mkdir -p "$T/bigsrc/${c##*/}"
  for i in 1 2 3 4 5 6 7 8; do
    for f in "$c"/*; do cp "$f" "$T/bigsrc/${c##*/}/$i-${f##*/}"; done
  done
done
"$S" pack "$T/src" "$T/killed" --shard-size 100K >/dev/null 2>&1
"$S" pack "$T/bigsrc" "$T/killed" --force --shard-size 20K >/dev/null 2>&1 &
pid=$!
sleep 0.2
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"$S" verify "$T/killed" --quiet >"$T/vout" 2>&1
check "killed re-pack: OUT verifies clean" test $? -eq 0
# The next pack into the same OUT removes a killed one's temp folder.
dead=$(sh -c 'echo $$')
mkdir -p "$T/.killed.tmp-$dead" && cp "$T/A/shard-00000.sls" "$T/.killed.tmp-$dead/"
"$S" pack "$T/src" "$T/killed" --force --shard-size 100K >/dev/null 2>&1
check "next pack: exit 0" test $? -eq 0
check "next pack: killed packs' temp folders removed" test -z "$(ls -A "$T" | grep '^\.')"

# Packing into a folder that holds other files: refused, files kept.
mkdir "$T/mine" && echo keep >"$T/mine/notes.txt"
"$S" pack "$T/src" "$T/mine" >/dev/null 2>"$T/err"
check "foreign folder: refused" test $? -eq 1
check "foreign folder: names the file" grep -q "notes.txt" "$T/err"
check "foreign folder: file kept" test "$(cat "$T/mine/notes.txt")" = keep

# Older packs (no manifest): read when numbered without gaps.
cp -r "$T/A" "$T/legacy"
rm "$T/legacy/sluice-manifest.txt"
run_pack "$T/legacy"
check "older pack: run exit 0" test $? -eq 0
"$S" verify "$T/legacy" >"$T/vout" 2>&1
check "older pack: verify exit 0" test $? -eq 0
check "older pack: verify notes the missing manifest" grep -q "no sluice-manifest.txt" "$T/vout"
rm "$T/legacy/shard-00001.sls"
refused "older pack with a gap" "$T/legacy" "shard-00001.sls is missing"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
