#!/usr/bin/env bash
# e2e: what an ImageFolder listing leaves out is said on the CLI (a
# robustness probe's findings): files in a format sluice does not decode
# (one warning from run and pack, not a skip); a folder whose path passes
# PATH_MAX (a bad entry: named, counted under skip); control bytes of a
# file name escaped on stderr. And `sluice index` exits 1 on a damaged
# file (its sidecar still written), as verify does; its --out DIR is made
# with the folders above it. Needs $SLUICE.
set -uo pipefail
. "$(dirname "$0")/lib.sh" folder_listing

"$S" make-dataset --synthetic "$T/ds" --images 16 --classes 2 >/dev/null 2>&1 ||
  { echo "FAIL make-dataset"; exit 1; }
img="$T/ds/class_000/img_00000.jpg"
run() { "$S" run "$@" --batch 4 --size 32 --json 2>&1; }

# Formats torchvision lists that sluice does not decode: one warning.
for e in webp bmp tif; do cp "$img" "$T/ds/class_001/x.$e"; done
cp "$img" "$T/ds/class_001/y.gif" # torchvision ignores .gif too
out=$(run "$T/ds")
check "foreign formats: one warning naming the first" grep -qxF \
  "warning: 3 files in a format sluice does not decode (.bmp 1, .tif 1, .webp 1; JPEG and PNG only) left out, the first: $T/ds/class_001/x.bmp" <<<"$out"
check "foreign formats: 16 samples, not skips" \
  test "$(jget samples <<<"$out") $(jget errors_skipped <<<"$out")" = "16 0"
out=$("$S" pack "$T/ds" "$T/pk" 2>&1)
check "pack: the warning" grep -q "^sluice pack: warning: 3 files in a format sluice does not decode" <<<"$out"
rm -f "$T/ds/class_001/"x.* "$T/ds/class_001/y.gif"

# A folder whose path is PATH_MAX or longer.
mkdir -p "$T/r/c" && cp "$img" "$T/r/c/ok.jpg"
(
  cd "$T/r/c" || exit 1
  D=$(printf 'D%.0s' {1..250})
  for _ in {1..17}; do mkdir "$D" && cd "$D" || exit 1; done
  cp "$img" deep.jpg
)
out=$(run "$T/r")
check "PATH_MAX folder: fails, named" grep -q "DDDD: cannot open folder: File name too long" <<<"$out"
out=$(run "$T/r" --on-error skip)
check "PATH_MAX folder: listed under skip" grep -q "^skipped: $T/r/c/DDDD.*: cannot open folder: File name too long (a path of [0-9]* bytes; left out)" <<<"$out"
check "PATH_MAX folder: 1 sample, 1 skipped" \
  test "$(jget samples <<<"$out") $(jget errors_skipped <<<"$out")" = "1 1"

# Control bytes in a file name: escaped, never printed raw.
mkdir -p "$T/ctl/c" && cp "$img" "$T/ctl/c/ok.jpg"
echo "not an image" >"$T/ctl/c/"$'a\x1b[2K\rfake line\nb.jpg'
out=$(run "$T/ctl" --on-error skip)
check "control bytes: escaped in the skip" grep -qF 'skipped: epoch 0: '"$T"'/ctl/c/a\x1b[2K\x0dfake line\x0ab.jpg: not a JPEG or PNG' <<<"$out"
check "control bytes: no ESC or CR on stderr" test "$(tr -dc '\033\r' <<<"$out" | wc -c)" = 0
out=$(run "$T/ctl")
check "control bytes: escaped in the error" grep -qF 'a\x1b[2K\x0dfake line\x0ab.jpg: not a JPEG or PNG' <<<"$out"
check "control bytes: no ESC or CR in the error" test "$(tr -dc '\033\r' <<<"$out" | wc -c)" = 0

# sluice index: 0 on clean files, 1 on damage (the sidecar still written).
"$S" pack "$T/ds" "$T/wds" --format webdataset >/dev/null 2>&1
mkdir "$T/idx"
cp "$T/wds/shard-000000.tar" "$T/idx/good.tar"
cp "$T/wds/shard-000000.tar" "$T/idx/cut.tar"
truncate -s $(($(stat -c %s "$T/idx/cut.tar") / 2)) "$T/idx/cut.tar"
"$S" index "$T/idx/good.tar" >/dev/null 2>&1
check "index: clean file, exit 0" test $? -eq 0
# --out DIR: missing folders above DIR are made (mkdir -p, as pack makes
# OUT's); one that cannot be made is named as given.
"$S" index "$T/idx/good.tar" --out "$T/idx/new/a/b/" >/dev/null 2>&1
check "index --out: missing parents made, exit 0 ($?)" test $? -eq 0
check "index --out: the sidecar in new/a/b" test -s "$T/idx/new/a/b/good.tar.slidx"
out=$("$S" index "$T/idx/good.tar" --out "$T/idx/good.tar/x/y" 2>&1)
rc=$?
check "index --out under a file: exit 1 ($rc)" test $rc -eq 1
check "index --out under a file: named as given" grep -qxF \
  "sluice index: $T/idx/good.tar/x/y: cannot create: Not a directory" <<<"$out"
out=$("$S" index "$T/idx/good.tar" --out "$T/idx/good.tar" 2>&1)
check "index --out at a file: not taken as a folder" grep -qxF \
  "sluice index: $T/idx/good.tar: cannot create: Not a directory" <<<"$out"
out=$("$S" index "$T/idx/{good,cut}.tar" 2>&1)
rc=$?
check "index: damaged file, exit 1 ($rc)" test $rc -eq 1
check "index: says which" grep -q "cut.tar: .*damaged: " <<<"$out"
check "index: and how many" grep -q "^sluice index: 1 of 2 files damaged" <<<"$out"
check "index: the damaged file's sidecar written" test -s "$T/idx/cut.tar.slidx"
# A sample whose class is not a number: a bad sample, not a cut file.
mkdir "$T/lab" && cp "$img" "$T/lab/0001.jpg" && printf x >"$T/lab/0001.cls"
cp "$img" "$T/lab/0002.jpg" && printf 1 >"$T/lab/0002.cls"
tar --format=ustar -cf "$T/idx/lab.tar" -C "$T/lab" 0001.jpg 0001.cls 0002.jpg 0002.cls
out=$("$S" index "$T/idx/lab.tar" 2>&1)
rc=$?
check "index: a bad sample, exit 1 ($rc)" test $rc -eq 1
check "index: a bad sample, counted" grep -q "lab.tar: 2 samples (1 bad)" <<<"$out"

echo "folder_listing: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
