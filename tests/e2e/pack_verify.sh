#!/usr/bin/env bash
# e2e: pack a small ImageFolder of real JPEGs with each codec, inspect and
# verify it; then damage a record and truncate a shard, and check that
# verify finds both and names them. Needs $SLUICE, $SL_SHARED_DATA and
# $SL_TEST_TMP (ctest sets them).
set -euo pipefail

SLUICE=${SLUICE:?SLUICE must name the sluice binary}
mkdir -p "${SL_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${SL_TEST_TMP:-/tmp}/e2e-pack-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
SAMPLE=${SL_SHARED_DATA:-}/imagenet-sample
EXT=JPEG
if [ -z "${SL_SHARED_DATA:-}" ] || [ ! -d "$SAMPLE" ]; then
    # No real photos here: generated ones exercise the same paths.
    echo "note: no ImageNet sample at ${SAMPLE}; using generated JPEGs"
    SAMPLE=$WORK/generated
    EXT=jpg
    "$SLUICE" make-dataset --synthetic "$SAMPLE" --images 21 --classes 21 >/dev/null 2>&1
fi

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# Runs "$@", capturing stdout+stderr in $OUT and the exit status in $RC
# (set -e would stop at the non-zero statuses we want to see).
run() {
    set +e
    OUT=$("$@" 2>&1)
    RC=$?
    set -e
}

# 21 JPEGs over 3 classes: files of the first 21 class folders, dealt out.
SRC=$WORK/src
mkdir -p "$SRC/cat" "$SRC/dog" "$SRC/eel"
i=0
for f in "$SAMPLE"/*/*."$EXT"; do
    [ $i -lt 21 ] || break
    case $((i % 3)) in
    0) cls=cat ;;
    1) cls=dog ;;
    *) cls=eel ;;
    esac
    cp "$f" "$SRC/$cls/"
    i=$((i + 1))
done
[ $i -eq 21 ] || { echo "SKIP: only $i images in $SAMPLE"; exit 77; }
mkdir -p "$SRC/eel/deeper"
cp "$SRC/cat/$(ls "$SRC/cat" | head -1)" "$SRC/eel/deeper/copy.jpg"
echo "not an image" > "$SRC/dog/notes.txt" # ignored by the scan

# ---- usage errors: exit 2
run "$SLUICE" pack
[ $RC -eq 2 ] || fail "pack without arguments: exit $RC"
run "$SLUICE" pack "$SRC" "$WORK/x" --codec gzip
[ $RC -eq 2 ] || fail "pack --codec gzip: exit $RC"
run "$SLUICE" pack "$SRC" "$WORK/x" --shard-size 12Q
[ $RC -eq 2 ] || fail "pack --shard-size 12Q: exit $RC"
run "$SLUICE" verify
[ $RC -eq 2 ] || fail "verify without arguments: exit $RC"
run "$SLUICE" inspect
[ $RC -eq 2 ] || fail "inspect without arguments: exit $RC"

# ---- each codec: pack, inspect, verify clean
for codec in none lz4 zstd; do
    out=$WORK/out-$codec
    run "$SLUICE" pack "$SRC" "$out" --codec "$codec" --shard-size 1M
    [ $RC -eq 0 ] || fail "pack --codec $codec: exit $RC: $OUT"
    grep -q "packed 22 records (3 classes)" <<<"$OUT" ||
        fail "pack summary: $OUT"
    [ "$(cat "$out/classes.txt")" = "$(printf 'cat\ndog\neel')" ] ||
        fail "classes.txt: $(cat "$out/classes.txt")"
    nshards=$(ls "$out"/shard-*.sls | wc -l)
    [ "$nshards" -ge 2 ] || fail "expected several 1M shards, got $nshards"
    for s in "$out"/shard-*.sls; do
        size=$(stat -c %s "$s")
        [ "$size" -le 1048576 ] || fail "$s is $size bytes, over 1M"
    done
    ls -a "$out" | grep -q '\.tmp' && fail "temp files left in $out"

    run "$SLUICE" inspect "$out/shard-00000.sls"
    [ $RC -eq 0 ] || fail "inspect: exit $RC: $OUT"
    # JPEG bytes rarely shrink: records that do not are kept raw ("none").
    grep -Eq "codecs: *(none|$codec) \(" <<<"$OUT" ||
        fail "inspect codec: $OUT"
    grep -q "cat/" <<<"$OUT" || fail "inspect names: $OUT"
    run "$SLUICE" inspect --records "$out/shard-00000.sls"
    [ $RC -eq 0 ] || fail "inspect --records: exit $RC"

    run "$SLUICE" verify "$out"
    [ $RC -eq 0 ] || fail "verify clean $codec: exit $RC: $OUT"
    grep -q "verified 22 records in $nshards shards: 0 damaged" <<<"$OUT" ||
        fail "verify summary: $OUT"
    # DIR/ (a shell's completion) names DIR/shard-..., not DIR//shard-...
    run "$SLUICE" verify "$out/"
    [ $RC -eq 0 ] || fail "verify $out/: exit $RC: $OUT"
    grep -q "^ok $out/shard-00000.sls: " <<<"$OUT" || fail "verify DIR/ names: $OUT"
    grep -q '//' <<<"$OUT" && fail "verify DIR/ doubles a slash: $OUT"
    run "$SLUICE" verify "$out/shard-00001.sls"
    [ $RC -eq 0 ] || fail "verify one shard: exit $RC: $OUT"
done

# Missing folders above OUT are made, as mkdir -p makes them (README's
# `sluice pack --volumes kits19/data packs/kits19/` in a fresh folder); a
# folder that cannot be made is named as given, with the cause, never as
# the temp folder beside it.
run "$SLUICE" pack "$SRC" "$WORK/new/deeper/out/"
[ $RC -eq 0 ] || fail "pack into missing parents: exit $RC: $OUT"
[ -f "$WORK/new/deeper/out/shard-00000.sls" ] || fail "no pack in new/deeper/out"
touch "$WORK/afile"
run "$SLUICE" pack "$SRC" "$WORK/afile/sub/out"
[ $RC -eq 1 ] || fail "pack under a file: exit $RC: $OUT"
grep -q "^sluice pack: $WORK/afile/sub/out: .*Not a directory" <<<"$OUT" ||
    fail "pack under a file: the folder given and the cause: $OUT"
grep -q 'tmp-' <<<"$OUT" && fail "pack under a file names a temp path: $OUT"

# Packing into a folder that holds shards needs --force, which also removes
# shards left over from the earlier pack.
run "$SLUICE" pack "$SRC" "$WORK/out-none"
[ $RC -eq 1 ] || fail "pack over old shards without --force: exit $RC"
run "$SLUICE" pack "$SRC" "$WORK/out-none" --force
[ $RC -eq 0 ] || fail "pack --force: exit $RC: $OUT"
[ "$(ls "$WORK/out-none"/*.sls | wc -l)" -eq 1 ] ||
    fail "stale shards left: $(ls "$WORK/out-none")"

# ---- damage: flip one byte inside record 2 of the first shard
out=$WORK/out-none
shard=$out/shard-00000.sls
line=$("$SLUICE" inspect --records "$shard" | awk '$1 == "2" {print}')
offset=$(echo "$line" | awk '{print $4}')
stored=$(echo "$line" | awk '{print $5}')
name=$(echo "$line" | awk '{print $NF}')
[ -n "$offset" ] && [ -n "$name" ] || fail "no record 2 in: $line"
pos=$((offset + stored / 2))
old=$(od -An -tu1 -j "$pos" -N1 "$shard" | tr -d ' ')
printf "$(printf '\\%03o' $((old ^ 0x55)))" |
    dd of="$shard" bs=1 seek="$pos" conv=notrunc status=none
run "$SLUICE" verify "$out"
[ $RC -eq 1 ] || fail "verify after a flipped byte: exit $RC: $OUT"
grep -q "shard-00000.sls: record 2 ($name): checksum mismatch" <<<"$OUT" ||
    fail "verify did not name record 2 ($name): $OUT"
grep -q "verified 22 records in 1 shards: 1 damaged" <<<"$OUT" ||
    fail "verify summary after damage: $OUT"

# ---- truncation: cut the end off a zstd shard
out=$WORK/out-zstd
truncate -s -100 "$out/shard-00001.sls"
run "$SLUICE" verify "$out"
[ $RC -eq 1 ] || fail "verify after truncation: exit $RC: $OUT"
grep -q "shard-00001.sls: truncated" <<<"$OUT" ||
    fail "verify did not report the truncated shard: $OUT"
grep -q "unreadable shard" <<<"$OUT" || fail "summary: $OUT"

# ---- an unreadable file: fail by default, skip on request
ln -s "$WORK/nowhere.jpg" "$SRC/dog/broken.jpg"
run "$SLUICE" pack "$SRC" "$WORK/out-broken"
[ $RC -eq 1 ] || fail "pack with an unreadable file: exit $RC"
grep -q "dog/broken.jpg" <<<"$OUT" || fail "unreadable file not named: $OUT"
run "$SLUICE" pack "$SRC" "$WORK/out-skip" --on-error skip --codec lz4
[ $RC -eq 0 ] || fail "pack --on-error skip: exit $RC: $OUT"
grep -q "skipped 1 unreadable file" <<<"$OUT" || fail "skip count: $OUT"
run "$SLUICE" verify "$WORK/out-skip"
[ $RC -eq 0 ] || fail "verify of the skip pack: exit $RC: $OUT"

echo "PASS: pack/inspect/verify"
