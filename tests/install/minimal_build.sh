#!/usr/bin/env bash
# An images-only build: configures the tree with the optional components off
# (-DSL_TEXT=OFF -DSL_PROMETHEUS=OFF -DSL_NIFTI=OFF -DSL_TFRECORD=OFF, no
# Python, no tests) in WORK, builds the shared library and the CLI only, and
# checks that
#   - libsluice.so does not link PCRE2, utf8proc, libmicrohttpd, libnifti2
#     or protobuf-c;
#   - it exports exactly the symbols of the full build FULL_LIB (one ABI
#     whatever the components: what is off fails with SL_EUNSUPPORTED);
#   - version.h and sluice.pc say what was left out;
#   - the CLI's text commands and --metrics-port say "built without".
#   minimal_build.sh SRC_DIR WORK CC WERROR FULL_LIB
# WORK is kept between runs, so that a rerun is an incremental build.
set -euo pipefail
src=$1 work=$2 cc=$3 werror=$4 full=$5
mkdir -p "$work"
cmake -S "$src" -B "$work/build" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=Debug -DSL_WERROR="$werror" \
  -DSL_TEXT=OFF -DSL_PROMETHEUS=OFF -DSL_NIFTI=OFF -DSL_TFRECORD=OFF -DSL_CURL=OFF -DSL_PYTHON=OFF -DSL_BUILD_TESTS=OFF \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j "$(nproc)" --target sluice_shared sluice_cli \
  >"$work/build.log" 2>&1 || { tail -50 "$work/build.log"; exit 1; }
lib=$work/build/libsluice.so
fail() { echo "minimal build: $*"; exit 1; }

for f in "$lib" "$work/build/sluice"; do
  needed=$(readelf -d "$f" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
  echo "$(basename "$f") NEEDED: $(tr '\n' ' ' <<<"$needed")"
  if grep -iE 'pcre2|utf8proc|microhttpd|nifti|znz|protobuf-c|curl|xml2' <<<"$needed"; then
    fail "$f links an optional component's library"
  fi
done

syms() { nm -D --defined-only "$1" | awk 'NF >= 3 && $3 ~ /^sl_/ {print $3}' | sort; }
if ! diff <(syms "$full") <(syms "$lib") >"$work/syms.diff"; then
  cat "$work/syms.diff"
  fail "exported symbols differ from the full build's ($full): a public function needs a stub (src/*/off/)"
fi

grep -qx '#define SL_HAVE_TEXT 0' "$work/build/include/sluice/version.h" ||
  fail "version.h does not say SL_HAVE_TEXT 0"
grep -qx '#define SL_HAVE_PROMETHEUS 0' "$work/build/include/sluice/version.h" ||
  fail "version.h does not say SL_HAVE_PROMETHEUS 0"
grep -qx '#define SL_HAVE_NIFTI 0' "$work/build/include/sluice/version.h" ||
  fail "version.h does not say SL_HAVE_NIFTI 0"
grep -qx '#define SL_HAVE_TFRECORD 0' "$work/build/include/sluice/version.h" ||
  fail "version.h does not say SL_HAVE_TFRECORD 0"
grep -qx '#define SL_HAVE_CURL 0' "$work/build/include/sluice/version.h" ||
  fail "version.h does not say SL_HAVE_CURL 0"
req=$(grep '^Requires.private:' "$work/build/sluice.pc")
if grep -qE 'pcre2|utf8proc|microhttpd|zlib|protobuf-c' <<<"$req"; then
  fail "sluice.pc: $req"
fi

# The CLI says what is missing.
cli=$work/build/sluice
data=$work/data
printf 'hello world\nsecond document\n' >"$work/docs.txt"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n' >"$work/vocab.txt"
expect_off() { # WHAT PATTERN CMD...
  local what=$1 pat=$2 out
  shift 2
  if out=$("$@" 2>&1); then fail "$what succeeded in a build without it"; fi
  grep -q "$pat" <<<"$out" || { echo "$out"; fail "$what: no '$pat' message"; }
  echo "$what: $(grep -m1 "$pat" <<<"$out")"
}
expect_off tokenize "built without text support" \
  "$cli" tokenize --tokenizer wordpiece --vocab "$work/vocab.txt" "$work/docs.txt"
expect_off "run --task" "built without text support" \
  "$cli" run --task mlm "$work/docs.txt" --tokenizer wordpiece \
  --vocab "$work/vocab.txt"
[ -d "$data" ] || "$cli" make-dataset --synthetic "$data" --images 8 --classes 2 >/dev/null
expect_off "volume info" "built without NIfTI support" \
  "$cli" volume info "$src/fuzz/corpus/fuzz_nifti/i16_3d.nii"
expect_off "run --metrics-port" "built without the Prometheus endpoint" \
  "$cli" run "$data" --batch 4 --size 32 --metrics-port 1
printf '\0\0\0\0\0\0\0\0\x29\x03\x98\x07\xd8\xea\x82\xa2' >"$work/empty.tfrecord"
expect_off "run TFRecord" "built without TFRecord support" \
  "$cli" run "$work/empty.tfrecord" --batch 4 --size 32
expect_off "run URL" "built without libcurl" \
  "$cli" run "http://127.0.0.1:1/shard-{0..3}.tar" --batch 4 --size 32
out=$("$cli" run "$data" --batch 4 --size 32 2>&1) || { echo "$out";
  fail "run (images, no metrics port) failed"; }
echo "minimal build: ok (no PCRE2, utf8proc, libmicrohttpd, libnifti2, protobuf-c; same ABI)"
