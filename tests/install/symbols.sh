#!/usr/bin/env bash
# The exported dynamic symbols of libsluice.so are the public API only:
# every one starts with sl_, none with sl__ (internal names; test hooks
# belong to the testing header and are not exported).
#   symbols.sh LIBSLUICE_SO
set -euo pipefail
lib=$1
syms=$(nm -D --defined-only "$lib" | awk 'NF >= 3 {print $3}' |
       grep -vxE '_init|_fini|_edata|_end|__bss_start' || true)
[ -n "$syms" ] || { echo "symbols: no exported symbols in $lib?"; exit 1; }
bad=$(grep -vE '^sl_' <<<"$syms" || true)
internal=$(grep -E '^sl__' <<<"$syms" || true)
if [ -n "$bad$internal" ]; then
  echo "symbols: $lib exports names outside the public API:"
  printf '  %s\n' $bad $internal
  exit 1
fi
echo "symbols: $(wc -l <<<"$syms") exported, all sl_*, none sl__*"
