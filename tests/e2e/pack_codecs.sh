#!/usr/bin/env bash
# e2e: `sluice pack --codec` none / lz4 / zstd / zstd-dict / auto give the
# same loaded stream (digest) on JPEGs, and the same records on text
# (verify, and the LM digest where a GPT-2 vocabulary is at hand); auto
# picks none on JPEGs and a zstd codec on text and says so per shard; a
# corrupt dictionary is an error naming the shard; lossy packing
# (--max-side, --jpeg-quality) reports a sane PSNR and stores images of
# that side. Needs $SLUICE; uses $SL_SHARED_DATA when present.
set -uo pipefail
. "$(dirname "$0")/lib.sh" pack_codecs

"$S" make-dataset --synthetic "$T/ds" --images 60 --classes 3 --seed 2 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }

# --- images: every codec, one stream
common=(--batch 8 --size 32 --epochs 1 --seed 4 --threads 2 --json --quiet --digest)
ref=
for c in none lz4 zstd zstd-dict auto; do
  if ! out=$("$S" pack "$T/ds" "$T/img-$c" --codec "$c" --shard-size 64K 2>&1); then
    bad "pack --codec $c: $out"; continue
  fi
  d=$("$S" run "$T/img-$c" "${common[@]}" 2>/dev/null | jget digest)
  if [ -z "$ref" ]; then ref=$d; check "digest of --codec none ($d)" test -n "$d"
  else check "--codec $c: same stream as none" test "$d" = "$ref"; fi
  if [ "$c" = auto ]; then
    n=$(grep -c '^  shard-[0-9]*\.sls: ' <<<"$out")
    nn=$(grep -c '^  shard-[0-9]*\.sls: none ' <<<"$out")
    check "auto reports every shard ($n)" test "$n" -gt 1
    check "auto picks none on JPEGs ($nn of $n)" test "$nn" = "$n"
    check "auto's choices in pack-info.txt" test "$(grep -c '^codec shard-' "$T/img-$c/pack-info.txt")" = "$n"
  fi
done

# --- text: records compress; zstd-dict and auto must shrink them
corpus=$T/corpus.txt
if [ -n "${SL_SHARED_DATA:-}" ] && [ -f "$SL_SHARED_DATA/text/wikitext-2-raw-test.txt" ]; then
  corpus=$SL_SHARED_DATA/text/wikitext-2-raw-test.txt
else
  echo "note: no shared wikitext; using generated text"
  for i in $(seq 1 3000); do
    echo "$i: the river runs under the old bridge while sluice packs record $((i * 7 % 101)) of every shard"
  done >"$corpus"
fi
for c in none zstd zstd-dict auto; do
  if ! "$S" pack --text "$corpus" -o "$T/txt-$c" --codec "$c" --auto-max-decode 1000 2>"$T/txt-$c.err"; then
    bad "pack --text --codec $c: $(cat "$T/txt-$c.err")"; continue
  fi
  check "text --codec $c verifies" "$S" verify "$T/txt-$c" --quiet
done
size() { stat -c %s "$1"/shard-00000.sls; }
check "zstd-dict shard smaller than zstd ($(size "$T/txt-zstd-dict") < $(size "$T/txt-zstd"))" \
  test "$(size "$T/txt-zstd-dict")" -lt "$(size "$T/txt-zstd")"
check "auto picks a zstd codec on text ($(grep shard- "$T/txt-auto.err" | head -1))" \
  grep -q 'shard-00000.sls: zstd' "$T/txt-auto.err"
"$S" inspect "$T/txt-zstd-dict/shard-00000.sls" >"$T/insp" 2>&1
check "zstd-dict shard is format 1.1" grep -q '^version:  1.1' "$T/insp"
check "inspect shows the shard's dictionary ($(grep '^dictionary' "$T/insp"))" \
  grep -Eq '^dictionary: [1-9][0-9]* bytes \(zstd dictionary ID [1-9][0-9]*\)' "$T/insp"
"$S" inspect "$T/txt-zstd/shard-00000.sls" >"$T/insp-zstd" 2>&1
check "a shard without a dictionary shows none" bash -c "! grep -q '^dictionary' '$T/insp-zstd'"
V=${SL_SHARED_DATA:-}/vocab
if [ -f "$V/gpt2-encoder.json" ]; then
  LM=(--task lm --tokenizer gpt2 --vocab "$V/gpt2-encoder.json" --merges "$V/gpt2-vocab.bpe" --seq-len 128 --batch 4 --json --quiet --digest)
  d0=$("$S" bench "$T/txt-none" "${LM[@]}" 2>/dev/null | jget digest)
  for c in zstd zstd-dict auto; do
    d=$("$S" bench "$T/txt-$c" "${LM[@]}" 2>/dev/null | jget digest)
    check "text --codec $c: same LM stream as none ($d)" test -n "$d" -a "$d" = "$d0"
  done
else
  echo "note: no GPT-2 vocabulary; text streams checked by verify only"
fi

# --- a corrupt dictionary: a clear error naming the shard, no crash
sh=$T/txt-zstd-dict/shard-00000.sls
printf '\xff\xff\xff\xff' | dd of="$sh" bs=1 seek=200 conv=notrunc status=none
out=$("$S" verify "$T/txt-zstd-dict" 2>&1); rc=$?
check "corrupt dictionary fails verify (rc $rc)" test "$rc" -ne 0 -a "$rc" -lt 128
check "the error names the shard and the dictionary" grep -q 'shard-00000.sls: corrupt dictionary' <<<"$out"

# --- lossy packing
out=$("$S" pack "$T/ds" "$T/lossy" --max-side 40 --jpeg-quality 80 2>&1) || bad "lossy pack: $out"
line=$(grep '^lossy:' <<<"$out")
mean=$(sed -n 's/.*PSNR mean \([0-9.]*\) dB.*/\1/p' <<<"$line")
min=$(sed -n 's/.*min \([0-9.]*\) dB.*/\1/p' <<<"$line")
check "PSNR reported ($line)" test -n "$mean" -a -n "$min"
check "PSNR in a sane range (20..60 dB: mean $mean, min $min)" \
  awk -v m="$mean" -v n="$min" 'BEGIN { exit !(m >= 20 && m <= 60 && n >= 15 && n <= m) }'
check "PSNR in pack-info.txt" grep -q '^lossy max_side 40 jpeg_quality 80 .*psnr_mean_db' "$T/lossy/pack-info.txt"
# every stored image's longer side is 40 (the generated ones are larger)
if ! command -v file >/dev/null; then echo "note: no file(1); image sides not checked"; else
"$S" inspect "$T/lossy/shard-00000.sls" --records >"$T/recs" 2>&1
sides=0; n=0
while read -r idx lab codec off stored raw sum name; do
  [[ "$idx" =~ ^[0-9]+$ ]] || continue
  dd if="$T/lossy/shard-00000.sls" of="$T/one.jpg" bs=1 skip="$off" count="$stored" status=none
  dims=$(file -b "$T/one.jpg" | grep -o ', [0-9]*x[0-9]*,' | tr -d ', ')
  w=${dims%x*}; h=${dims#*x}
  n=$((n + 1))
  [ "$(( w > h ? w : h ))" = 40 ] && sides=$((sides + 1))
done <"$T/recs"
check "stored images have max side 40 ($sides of $n)" test "$n" -gt 0 -a "$sides" = "$n"
fi
d=$("$S" run "$T/lossy" "${common[@]}" 2>/dev/null | jget digest)
check "lossy pack loads ($d)" test -n "$d"

echo "pack_codecs: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
