#!/usr/bin/env bash
# e2e: `sluice volume info` prints a NIfTI file's header facts (NIfTI-1 and
# -2, .nii and .nii.gz; --ras, --stats) and fails naming the file and the
# cause for a truncated one; `sluice volume list` lists a KiTS19-layout
# folder and a list file, and refuses a case without its label unless
# --unlabeled; `sluice pack --volumes` packs the folder (zstd) into a pack
# that `volume list`, `inspect` and `verify` read, refusing a case without
# its label unless --unlabeled or whose label's shape is not its image's,
# and leaving OUT as it was on failure.
# Files: the fuzz seed corpus (written with nibabel). Skips
# (77) in a build without NIfTI support.
set -uo pipefail
. "$(dirname "$0")/lib.sh" volume_cli
C=${SL_ROOT:?SL_ROOT must name the source tree}/fuzz/corpus/fuzz_nifti

if "$S" volume info "$C/i16_3d.nii" 2>&1 | grep -q "built without NIfTI"; then
  echo "skip: sluice built without NIfTI support"; exit 77
fi
"$S" volume info "$C/i16_3d.nii" >"$T/out" 2>&1
check "info: exit 0" test $? -eq 0
check "info: shape" grep -q "^shape: *3 x 4 x 2$" "$T/out"
check "info: dtype" grep -q "^dtype: *int16 (NIfTI datatype 4)" "$T/out"
check "info: orientation" grep -q "^orientation: LAS$" "$T/out"
check "info: sform" grep -q "^affine: *from the sform" "$T/out"
"$S" volume info --ras --stats "$C/i16_3d.nii" >"$T/ras" 2>&1
check "info --ras: RAS" grep -q "^orientation: RAS$" "$T/ras"
check "info --stats: values" grep -q "^values: .*(24 voxels)" "$T/ras"
"$S" volume info "$C/n2_u8.nii.gz" "$C/f64_4d_qform.nii.gz" >"$T/two" 2>&1
check "info: NIfTI-2 gzip" grep -q "^format: *NIfTI-2 (gzip)" "$T/two"
check "info: 4-D from the qform" grep -q "^affine: *from the qform" "$T/two"
"$S" volume info "$C/trunc.nii" >"$T/bad" 2>&1
check "info truncated: exit 1" test $? -eq 1
check "info truncated: names the file and the cause" \
  grep -q "trunc.nii: truncated, or a header that lies" "$T/bad"
"$S" volume info >/dev/null 2>&1
check "info without a file: usage (2)" test $? -eq 2

mkdir -p "$T/kits/case_00000" "$T/kits/case_00001"
cp "$C/i16_3d.nii" "$T/kits/case_00000/imaging.nii"
cp "$C/i16_3d.nii" "$T/kits/case_00000/segmentation.nii"
cp "$C/n2_u8.nii.gz" "$T/kits/case_00001/imaging.nii.gz"
"$S" volume list "$T/kits" >"$T/list" 2>&1
check "list: missing label refused" test $? -eq 1
check "list: names the case" grep -q "case_00001: no label volume" "$T/list"
"$S" volume list --unlabeled "$T/kits" >"$T/list" 2>"$T/err"
check "list --unlabeled: 2 cases" grep -q "^2 cases, 1 with a label" "$T/err"
check "list --unlabeled: no label shown as -" grep -q "^case_00001	.*	-$" "$T/list"
printf 'kits/case_00000/imaging.nii kits/case_00000/segmentation.nii\n' >"$T/cases.txt"
"$S" volume list "$T/cases.txt" >"$T/list" 2>"$T/err"
check "list file: 1 case" grep -q "^1 cases, 1 with a label" "$T/err"
# a NUL byte is refused, named, not taken as the end of the list
printf 'kits/case_00000/imaging.nii kits/case_00000/segmentation.nii\n\0x\nmissing.nii b\n' >"$T/nul.txt"
"$S" volume list "$T/nul.txt" >"$T/list" 2>"$T/err"
check "list file: NUL byte refused" test $? -eq 1
check "list file: NUL byte named" grep -q "nul.txt:2: NUL byte" "$T/err"

"$S" pack --volumes "$T/kits" "$T/pack" >"$T/pack.out" 2>&1
check "pack --volumes: missing label refused" test $? -eq 1
check "pack --volumes: names the case" grep -q "case_00001: no label volume" "$T/pack.out"
check "pack --volumes: OUT left as it was" test ! -e "$T/pack"
"$S" pack --volumes --unlabeled "$T/kits" "$T/pack" >"$T/pack.out" 2>&1
check "pack --volumes --unlabeled: exit 0" test $? -eq 0
check "pack --volumes: zstd" grep -q "packed 2 volume cases into 1 shard(s) .*\[codec zstd\]" "$T/pack.out"
"$S" volume list --unlabeled "$T/pack" >"$T/list" 2>"$T/err"
check "list pack: 2 cases, 1 labelled" grep -q "^2 cases, 1 with a label" "$T/err"
check "list pack: packed label" grep -q "^case_00000	(packed)	(packed)$" "$T/list"
"$S" inspect "$T/pack/shard-00000.sls" >"$T/insp" 2>&1
check "inspect: records" grep -q "^records:  2$" "$T/insp"
"$S" verify "$T/pack" >"$T/ver" 2>&1
check "verify: clean" grep -q "0 damaged" "$T/ver"

# A label whose shape is not its image's: refused at pack time, naming both
printf '%s %s\n' "$C/i16_3d.nii" "$C/n2_u8.nii.gz" >"$T/mismatch.txt"
"$S" pack --volumes "$T/mismatch.txt" "$T/pack2" >"$T/pack2.out" 2>&1
check "pack --volumes: label shape mismatch refused" test $? -eq 1
check "pack --volumes: both shapes named" \
  grep -q "n2_u8.nii.gz: the label is .* its image (.*i16_3d.nii) 3 x 4 x 2" "$T/pack2.out"

# A label that cannot be read: the message names the label, not its image
printf '%s %s\n' "$C/i16_3d.nii" "$C/trunc.nii" >"$T/badlabel.txt"
"$S" pack --volumes "$T/badlabel.txt" "$T/pack3" >"$T/pack3.out" 2>&1
check "pack --volumes: unreadable label refused" test $? -eq 1
check "pack --volumes: the label named" grep -q "trunc.nii: truncated" "$T/pack3.out"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
