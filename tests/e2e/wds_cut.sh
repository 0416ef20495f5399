#!/usr/bin/env bash
# e2e: a WebDataset tar cut short (sluice pack --format webdataset, 8
# samples 000000000..7, each .jpg then .cls) delivers every sample whose
# members the file still holds whole, what Python's tarfile reads before
# the cut; the cut is listed as a loss ("(the rest of the file lost)")
# where the file shows it. Cuts: inside 005.jpg's data and inside its
# header (sample 004 whole: before the fix it was lost too, 4 samples for
# 5), exactly at 005.jpg's header (nothing shows a loss), inside 004.cls's
# header (004 a bad sample: no label, as at that header exactly). The same
# from `run`, `inspect` and `index`, with and without the sidecar index
# (NAME.slidx), and over HTTP (nginx) with and without it when sluice has
# libcurl and nginx is installed.
set -uo pipefail
. "$(dirname "$0")/lib.sh" wds_cut
PY=$(command -v python3) || { echo "skip: no python3"; exit 77; }

"$S" make-dataset --synthetic "$T/ds" --images 8 --classes 4 >/dev/null 2>&1 ||
  { echo "FAIL make-dataset"; exit 1; }
"$S" pack "$T/ds" "$T/wds" --format webdataset >/dev/null 2>&1
W="$T/wds/shard-000000.tar"
check "packed one tar" test -s "$W"

# NAME OFFSET: where each cut goes (from the tar's own layout).
"$PY" - "$W" >"$T/cuts" <<'PYEOF'
import sys, tarfile
m = {x.name: x for x in tarfile.open(sys.argv[1]).getmembers()}
j5, c4 = m["000000005.jpg"], m["000000004.cls"]
print("in-005.jpg-data", j5.offset_data + j5.size // 2)
print("in-005.jpg-header", j5.offset + 200)
print("at-005.jpg-header", j5.offset)
print("in-004.cls-header", c4.offset + 300)
PYEOF
check "cut offsets found" test "$(wc -l <"$T/cuts")" = 4

# Samples whose .jpg and .cls tarfile reads whole before the cut.
whole() {
  "$PY" - "$1" <<'PYEOF'
import sys, tarfile
got = {}
try:
    with tarfile.open(sys.argv[1], "r|") as t:
        for x in t:
            t.extractfile(x).read()
            k, _, s = x.name.partition(".")
            got.setdefault(k, set()).add(s)
except (tarfile.ReadError, EOFError):
    pass
print(sum(1 for v in got.values() if {"jpg", "cls"} <= v))
PYEOF
}
run() { "$S" run "$1" --batch 2 --size 32 --epochs 1 --json --on-error skip 2>&1; }

mkdir -p "$T/www"
while read -r name off; do
  C="$T/www/$name.tar"
  head -c "$off" "$W" >"$C"
  want=$(whole "$C")
  lost=1; [ "$name" = at-005.jpg-header ] && lost=0
  for side in without with; do
    [ $side = with ] && "$S" index "$C" >/dev/null 2>&1
    [ $side = with ] && check "$name: index wrote the sidecar" test -s "$C.slidx"
    out=$(run "$C")
    check "$name ($off), $side sidecar: run delivers the $want samples tarfile reads whole" \
      test "$(jget samples <<<"$out")" = "$want"
    if [ $lost = 1 ]; then
      check "$name, $side sidecar: the cut listed as a loss" \
        grep -q "skipped: .*$name.tar: tar header at offset .*(the rest of the file lost)" <<<"$out"
    fi
    n=$("$S" inspect "$C" | sed -n 's/^samples: *\([0-9]*\).*/\1/p')
    bad=$("$S" inspect "$C" | sed -n 's/^samples: *[0-9]* (\([0-9]*\) bad).*/\1/p')
    check "$name, $side sidecar: inspect counts them ($n, $bad bad)" test "$((n - bad))" = "$want"
  done
  [ "$name" = in-005.jpg-data ] && check "$name: 5 samples (004 whole)" test "$want" = 5
  [ "$name" = in-004.cls-header ] && check "$name: 004 a bad sample" test "$bad" = 1
done <"$T/cuts"

# Over HTTP: the same from the sidecar and from the walk.
if "$S" run http://127.0.0.1:1/x.tar --batch 1 2>&1 | grep -q "built without libcurl" ||
  [ ! -x "$(command -v nginx || echo /usr/sbin/nginx)" ]; then
  echo "skip: the HTTP checks (no libcurl in sluice, or no nginx)"
else
  . "$(dirname "$0")/lib_http.sh"
  nginx_start '$bytes_sent'
  mkdir -p "$T/aside"
  while read -r name off; do
    want=$(whole "$T/www/$name.tar")
    for side in with without; do
      [ $side = without ] && mv "$T/www/$name.tar.slidx" "$T/aside/"
      out=$(run "$N/$name.tar")
      check "http: $name, $side sidecar: run delivers $want" \
        test "$(jget samples <<<"$out")" = "$want"
      [ $side = with ] && check "http: $name: the sidecar was used" \
        test -z "$(grep 'sidecar index not used' <<<"$out")"
    done
  done <"$T/cuts"
fi

echo "wds_cut: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
