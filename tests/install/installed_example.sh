#!/usr/bin/env bash
# examples/stream.c against the *installed* library: `cmake --install` of
# this build into a temporary prefix, then stream.c built twice, once with
# pkg-config (sluice.pc) and once as a CMake project (find_package(sluice),
# sluice::sluice), each run on a small synthetic dataset.
#   installed_example.sh SRC_DIR BUILD_DIR WORK CC
set -euo pipefail
src=$1 build=$2 work=$3 cc=$4
fail() { echo "installed example: $*"; exit 1; }
rm -rf "$work/prefix" "$work"/example-* "$work/stream-pc"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install failed"; }

# What is installed: public headers (never the testing header), the
# generated version.h, sluice.pc and the CMake package.
inc=$prefix/include/sluice
[ -f "$inc/sluice.h" ] && [ -f "$inc/version.h" ] || fail "headers missing in $inc"
[ ! -e "$inc/testing.h" ] || fail "sluice/testing.h is installed"
[ ! -e "$inc/version.h.in" ] || fail "version.h.in is installed"
pc=$(find "$prefix" -name sluice.pc)
cfg=$(find "$prefix" -name sluiceConfig.cmake)
[ -n "$pc" ] && [ -n "$cfg" ] || fail "sluice.pc or sluiceConfig.cmake not installed"

# Every installed header, alone and together, compiles for strict older
# consumers: C89 and (where there is a C++ compiler) C++98, -pedantic
# -Werror (a comma after an enum's last member failed both).
hdrs=$work/headers.c
{ for h in "$inc"/*.h; do echo "#include <sluice/$(basename "$h")>"; done
  echo 'int main(void) { return 0; }'; } >"$hdrs"
"$cc" -std=c89 -pedantic -Werror -Wall -I"$prefix/include" -fsyntax-only "$hdrs" ||
  fail "the installed headers do not compile as C89 -pedantic"
if command -v c++ >/dev/null; then
  c++ -std=c++98 -pedantic -Werror -Wall -I"$prefix/include" -fsyntax-only -x c++ "$hdrs" ||
    fail "the installed headers do not compile as C++98 -pedantic"
fi

data=$work/data
[ -d "$data" ] || "$build/sluice" make-dataset --synthetic "$data" --images 48 \
  --classes 3 >/dev/null

check_run() { # NAME BINARY [env...]
  local name=$1 bin=$2 out
  shift 2
  out=$(env "$@" "$bin" "$data" 3 16 32 2>&1) || { echo "$out"; fail "$name: stream failed"; }
  echo "$out" | sed "s/^/  $name: /"
  grep -qx 'batch 2: 16 x 3 x 32 x 32 uint8' <<<"$out" || fail "$name: no third batch"
  grep -q '^3 batches, 48 samples' <<<"$out" || fail "$name: no summary"
}

# 1. pkg-config
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs sluice) || fail "pkg-config sluice failed"
pkg-config --static --libs sluice >/dev/null || fail "pkg-config --static: a Requires.private module is missing"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror "$src/examples/stream.c" $flags \
  -o "$work/stream-pc" || fail "cc with \$(pkg-config --cflags --libs sluice) failed"
check_run pkg-config "$work/stream-pc" LD_LIBRARY_PATH="$(pkg-config --variable=libdir sluice)"

# 2. CMake package, sluice::sluice (the imported target carries the include
#    path and the library's location, which CMake writes into the RPATH),
#    then sluice::sluice_static (its dependencies found again by the
#    package); the static binary must not need libsluice.so.
cmake_example() { # NAME STATIC
  local dir=$work/example-static-$2
  cmake -S "$src/examples" -B "$dir" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" \
    -DSTREAM_STATIC="$2" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; fail "$1: find_package(sluice) failed"; }
  cmake --build "$dir" >"$dir.build.log" 2>&1 ||
    { cat "$dir.build.log"; fail "$1: build against the package failed"; }
  check_run "$1" "$dir/stream"
}
cmake_example sluice::sluice OFF
cmake_example sluice::sluice_static ON
if readelf -d "$work/example-static-ON/stream" | grep -q 'libsluice\.so'; then
  fail "sluice::sluice_static: the binary links libsluice.so"
fi
echo "installed example: ok"
