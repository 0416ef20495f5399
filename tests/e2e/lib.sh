# The preamble the e2e scripts share; sourced, not run (tests/CMakeLists.txt
# leaves it out of the tests). After `set -uo pipefail`:
#   . "$(dirname "$0")/lib.sh" NAME [optional]
# gives
#   S      the sluice binary, $SLUICE: required (the script fails without
#          it), or with `optional` a skip (exit 77) when it is not there
#   T      a fresh temp folder e2e-NAME.XXXXXX under $SL_TEST_TMP (/tmp),
#          removed on exit
#   ok / bad / check WHAT CMD...   print and count results ($passes, $fails)
#   jget KEY   the value of KEY in the last matching line of JSON on stdin
if [ "${2:-}" = optional ]; then
  S=${SLUICE:-}
  if [ -z "$S" ] || [ ! -x "$S" ]; then echo "skip: no sluice CLI (SLUICE=$S)"; exit 77; fi
else
  S=${SLUICE:?SLUICE must name the sluice binary}
fi
T=$(mktemp -d "${SL_TEST_TMP:-/tmp}/e2e-$1.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0; passes=0
ok()   { passes=$((passes+1)); echo "ok   $*"; }
bad()  { fails=$((fails+1)); echo "FAIL $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
jget() { sed -n 's/.*"'"$1"'": \("\{0,1\}\)\([^",}]*\)\1.*/\2/p' | tail -1; }
