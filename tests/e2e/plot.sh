#!/usr/bin/env bash
# End-to-end tests of `sluice plot`: a hand-written telemetry file (null
# values, a malformed line, a panel with no data), one from a real short
# run and one with a scheduler decision (smoothed rates, --raw), each drawn to SVG and PNG; runs compared (each run's mean,
# labels, the GPU share panel where a run has a stage); temp files removed; the errors (missing
# file, empty file, bad extension, an output that cannot be written,
# --labels miscounted, gnuplot absent) exit non-zero and say why.
set -uo pipefail
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "SKIP: gnuplot not installed"
  exit 77
fi
. "$(dirname "$0")/lib.sh" plot

is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
is_svg() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$1" 2>/dev/null
  else
    grep -q "<svg" "$1" && grep -q "</svg>" "$1"
  fi
}

# Our own temp files go to TMPDIR: it must be empty again after each plot.
mkdir -p "$T/tmp"
export TMPDIR=$T/tmp

# Hand-written: nulls, a value absent, a malformed line, a blank line, and no
# queue_depth at all (that panel is drawn empty, not an error).
cat > "$T/hand.jsonl" <<'JL'
{"t": 0.1, "samples_per_s": 100.5, "stall_fraction": 0.5, "cpu_self": 0.2, "cpu_other": 0.1, "cpu_total": 0.3, "knobs": {"read_threads": 1, "decode_threads": 2, "prefetch": 4}}
{"t": 0.2, "samples_per_s": null, "stall_fraction": 0.25, "cpu_self": null, "cpu_other": 0.1, "cpu_total": 0.35, "knobs": {"read_threads": 1, "decode_threads": 2, "prefetch": 4}}
{"t": 0.3, "samples_per_s": 300, "stall_fra
{"t": 0.4, "samples_per_s": 250e0, "stall_fraction": 0, "cpu_core": [0.5, null], "gpu": null, "knobs": {"read_threads": 2, "decode_threads": 1, "prefetch": 2}}

{"t": 0.5, "samples_per_s": 260, "stall_fraction": 0.1, "cpu_self": 0.25, "cpu_other": 0.05, "cpu_total": 0.3, "knobs": {"read_threads": 2, "decode_threads": 1, "prefetch": 2}}
JL

for ext in svg png; do
  "$S" plot "$T/hand.jsonl" -o "$T/hand.$ext" --title "hand's file" >"$T/hand.$ext.out" 2>"$T/hand.$ext.err"
  check "hand $ext: exit 0" test $? -eq 0
  check "hand $ext: non-empty" test -s "$T/hand.$ext"
  check "hand $ext: says what it wrote" grep -q "wrote $T/hand.$ext" "$T/hand.$ext.out"
  check "hand $ext: counts the malformed line" grep -q "skipped 1 malformed line (first: line 3)" "$T/hand.$ext.err"
  check "hand $ext: temp files removed" test -z "$(ls -A "$TMPDIR")"
done
check "hand png: PNG magic" is_png "$T/hand.png"
check "hand svg: well-formed XML" is_svg "$T/hand.svg"

# A real short run's telemetry.
"$S" make-dataset --synthetic "$T/ds" --images 64 --classes 2 >/dev/null 2>&1 \
  || { echo "make-dataset failed"; exit 1; }
"$S" run "$T/ds" --batch 16 --size 64 --epochs 3 --telemetry "$T/run.jsonl" \
  --telemetry-ms 20 --quiet >/dev/null 2>&1
check "run: telemetry written" test -s "$T/run.jsonl"
for ext in svg png; do
  "$S" plot "$T/run.jsonl" -o "$T/run.$ext" >"$T/run.$ext.out" 2>"$T/run.$ext.err"
  check "run $ext: exit 0" test $? -eq 0
  check "run $ext: non-empty" test -s "$T/run.$ext"
  check "run $ext: no malformed lines" test ! -s "$T/run.$ext.err"
done
check "run png: PNG magic" is_png "$T/run.png"
check "run svg: well-formed XML" is_svg "$T/run.svg"
check "run svg: has the panels" grep -q "knob value" "$T/run.svg"
"$S" plot <(cat "$T/run.jsonl") -o "$T/piped.svg" >/dev/null 2>&1
check "telemetry through a pipe: drawn" is_svg "$T/piped.svg"
# No room for the whole picture (a file-size limit here, a full disk in
# use): gnuplot exits 0 with it cut short; plot fails and removes it
# (was: "wrote PATH", exit 0, a truncated SVG / PNG).
for ext in svg png; do
  (ulimit -f 8; exec "$S" plot "$T/run.jsonl" -o "$T/cut.$ext") >/dev/null 2>"$T/cut.err"
  rc=$?
  check "cut short $ext: exit 1 (got $rc)" test $rc -eq 1
  check "cut short $ext: says so" grep -q "cut.$ext: the picture gnuplot wrote was cut short" "$T/cut.err"
  check "cut short $ext: no picture left" test ! -e "$T/cut.$ext"
done
"$S" plot "$T/run.jsonl" -o "$T/RUN.PNG" >/dev/null 2>&1
check "upper-case extension accepted" is_png "$T/RUN.PNG"
check "temp files removed after the run plots" test -z "$(ls -A "$TMPDIR")"

# Smoothed rates, the raw points on request, and the scheduler's decisions
# marked on the knob panel and listed with their reasons.
cat > "$T/dec.jsonl" <<'JL'
{"t": 0.1, "interval_s": 0.1, "samples_per_s": 640, "stall_fraction": 1, "batches_total": 1, "knobs": {"read_threads": 1, "decode_threads": 2, "prefetch": 4}}
{"t": 0.2, "interval_s": 0.1, "samples_per_s": 1280, "stall_fraction": 0, "batches_total": 3, "knobs": {"read_threads": 1, "decode_threads": 3, "prefetch": 4}, "decisions_total": 1, "decision": {"knob": "decode_threads", "from": 2, "to": 3, "reason": "consumer waits 55 pct of the time: decode_threads plus one"}}
{"t": 0.3, "interval_s": 0.1, "samples_per_s": 640, "stall_fraction": 1, "batches_total": 4, "knobs": {"read_threads": 1, "decode_threads": 3, "prefetch": 4}}
JL
"$S" plot "$T/dec.jsonl" -o "$T/dec.svg" >/dev/null 2>"$T/dec.err"
check "decisions: exit 0" test $? -eq 0
check "decisions: listed" grep -q "decisions (1):" "$T/dec.svg"
check "decisions: the reason shown" grep -q "consumer waits 55 pct of the time: decode_threads plus one" "$T/dec.svg"
check "smoothed by default: no raw points" eval '! grep -q "samples_per_s (raw)" "$T/dec.svg"'
"$S" plot "$T/dec.jsonl" -o "$T/raw.svg" --raw >/dev/null 2>&1
check "--raw: raw points drawn too" grep -q "samples_per_s (raw)" "$T/raw.svg"
check "--raw: well-formed XML" is_svg "$T/raw.svg"
check "temp files removed after the decision plots" test -z "$(ls -A "$TMPDIR")"

# The cache: the codec's run-time changes listed with the decisions, the
# disk tier's hit rate per interval and the stored / raw share drawn (a
# series with no value is left out of the legend, so its name says it is).
cat > "$T/cache.jsonl" <<'JL'
{"t": 0.1, "interval_s": 0.1, "samples_per_s": 500, "stall_fraction": 0.5, "knobs": {"read_threads": 1, "decode_threads": 2, "prefetch": 4}, "cache": {"hits_total": 0, "misses_total": 50, "hit_rate": 0, "bytes": 1000, "raw_bytes": 1000, "entries": 4, "limit_bytes": 5000, "codec": "none", "codec_choices": 0, "disk": {"hits_total": 0, "misses_total": 50, "bytes": 0, "entries": 0, "limit_bytes": 9000, "errors_total": 0, "admitting": 1}}}
{"t": 0.2, "interval_s": 0.1, "samples_per_s": 500, "stall_fraction": 0.5, "knobs": {"read_threads": 1, "decode_threads": 2, "prefetch": 4}, "cache": {"hits_total": 0, "misses_total": 100, "hit_rate": 0, "bytes": 1800, "raw_bytes": 2000, "entries": 8, "limit_bytes": 5000, "codec": "lz4", "codec_choices": 1, "disk": {"hits_total": 10, "misses_total": 90, "bytes": 0, "entries": 0, "limit_bytes": 9000, "errors_total": 0, "admitting": 1}}}
{"t": 0.3, "interval_s": 0.1, "samples_per_s": 500, "stall_fraction": 0.5, "knobs": {"read_threads": 1, "decode_threads": 2, "prefetch": 4}, "cache": {"hits_total": 20, "misses_total": 130, "hit_rate": 0.4, "bytes": 2600, "raw_bytes": 3000, "entries": 12, "limit_bytes": 5000, "codec": "lz4", "codec_choices": 1, "disk": {"hits_total": 40, "misses_total": 90, "bytes": 0, "entries": 0, "limit_bytes": 9000, "errors_total": 0, "admitting": 1}}}
JL
"$S" plot "$T/cache.jsonl" -o "$T/cache.svg" >/dev/null 2>"$T/cache.err"
check "cache: exit 0" test $? -eq 0
check "cache: the codec change listed" grep -qF "cache_codec none -> lz4: the cache's run-time codec choice (1 so far)" "$T/cache.svg"
check "cache: the change counted with the decisions" grep -q "decisions (1):" "$T/cache.svg"
check "cache: disk tier hit rate drawn" grep -q "disk tier hit rate" "$T/cache.svg"
check "cache: stored / raw drawn" grep -q "cache stored / raw bytes" "$T/cache.svg"
check "cache: well-formed XML" is_svg "$T/cache.svg"

# Runs compared: two files over each other, each run's mean rate in its
# legend (hand.jsonl has no interval: no mean), the GPU share panel only
# where a run has a stage, labels from --labels or the files' names.
cat > "$T/gpu.jsonl" <<'JL'
{"t": 0.5, "interval_s": 0.5, "samples_per_s": 400, "stall_fraction": 0.2, "cpu_self": 0.5, "cpu_other": 0.4, "placement": {"gpu_share": 0}}
{"t": 1.0, "interval_s": 0.5, "samples_per_s": 600, "stall_fraction": 0, "cpu_self": 0.3, "cpu_other": 0.4, "placement": {"gpu_share": 500}}
JL
"$S" plot "$T/dec.jsonl" "$T/gpu.jsonl" -o "$T/cmp.svg" --labels "before,after" >"$T/cmp.out" 2>"$T/cmp.err"
check "compare: exit 0" test $? -eq 0
check "compare: well-formed XML" is_svg "$T/cmp.svg"
check "compare: says what it wrote" grep -q "wrote $T/cmp.svg" "$T/cmp.out"
# dec.jsonl: 640 x 0.1 + 1280 x 0.1 + 640 x 0.1 over 0.3 s; gpu.jsonl: 500/s
check "compare: each run's mean rate" grep -q "before (mean 853/s)" "$T/cmp.svg"
check "compare: the other's" grep -q "after (mean 500/s)" "$T/cmp.svg"
check "compare: the GPU share panel" grep -q "GPU share (%)" "$T/cmp.svg"
check "compare: default title names the runs" grep -q "sluice telemetry compared: before, after" "$T/cmp.svg"
"$S" plot "$T/dec.jsonl" "$T/hand.jsonl" -o "$T/cmp2.png" >/dev/null 2>"$T/cmp2.err"
check "compare without a stage: exit 0" test $? -eq 0
check "compare without a stage: PNG magic" is_png "$T/cmp2.png"
check "compare: a file's malformed line named" grep -q "hand.jsonl: skipped 1 malformed line" "$T/cmp2.err"
SLUICE_PLOT_KEEP=1 "$S" plot "$T/dec.jsonl" "$T/hand.jsonl" -o "$T/cmp3.svg" >/dev/null 2>&1
check "compare: no GPU share panel without a stage" eval '! grep -q "GPU share" "$T/cmp3.svg"'
check "compare: labels default to the files' names" grep -q "hand.jsonl" "$T/cmp3.svg"
check "compare: a table a run kept" test "$(grep -l '^# t samples_per_s' "$TMPDIR"/* | wc -l)" -eq 2
rm -f "$TMPDIR"/*
check "temp files removed after the comparisons" test -z "$(ls -A "$TMPDIR")"

# Errors: non-zero exit, a message naming the cause, no picture left behind.
err() { # err NAME WANT_RC PATTERN -- ARGS...
  local name=$1 want=$2 pat=$3; shift 4
  "$S" plot "$@" >/dev/null 2>"$T/err.txt"
  local rc=$?
  check "$name: exit $want (got $rc)" test $rc -eq "$want"
  check "$name: says '$pat'" grep -qi -- "$pat" "$T/err.txt"
}
err "missing file" 1 "cannot open $T/nope.jsonl" -- "$T/nope.jsonl" -o "$T/x.svg"
# A FIFO no one writes, given as the telemetry file: empty at once (was:
# waited for a writer for ever); a device is refused; a pipe is read.
mkfifo "$T/fifo.jsonl"
timeout 10 "$S" plot "$T/fifo.jsonl" -o "$T/x.svg" >/dev/null 2>"$T/err.txt"
rc=$?
check "a FIFO without a writer: exit 1 (got $rc; 124: hung)" test $rc -eq 1
check "a FIFO without a writer: says why" grep -q "fifo.jsonl: no valid telemetry lines" "$T/err.txt"
timeout 10 "$S" plot /dev/zero -o "$T/x.svg" >/dev/null 2>"$T/err.txt"
rc=$?
check "/dev/zero: exit 1 (got $rc; 124: hung)" test $rc -eq 1
check "/dev/zero: says why" grep -q "/dev/zero: not a regular file (character device)" "$T/err.txt"
: > "$T/empty.jsonl"
err "empty file" 1 "no valid telemetry lines" -- "$T/empty.jsonl" -o "$T/x.svg"
head -c 5000 /dev/urandom | tr -d '\n' > "$T/junk.jsonl"; printf '\n[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n{"t": null}\n' >> "$T/junk.jsonl"
# A member of the wrong type makes the line malformed (sl_snapshot_parse).
printf '{"t": 1, "stall_fraction": "high"}\n' >> "$T/junk.jsonl"
err "only junk" 1 "skipped 4 malformed lines" -- "$T/junk.jsonl" -o "$T/x.svg"
err "bad extension" 2 "name it .svg or .png" -- "$T/run.jsonl" -o "$T/x.jpg"
err "no extension" 2 "unknown output type" -- "$T/run.jsonl" -o "$T/x"
err "no -o" 2 "no output given" -- "$T/run.jsonl"
err "output folder missing" 1 "$T/nodir/x.svg: cannot write: No such file or directory" -- "$T/run.jsonl" -o "$T/nodir/x.svg"
mkdir -p "$T/adir.svg"
err "output a folder" 1 "$T/adir.svg: cannot write: Is a directory" -- "$T/run.jsonl" -o "$T/adir.svg"
check "output refused: no temp file left" test -z "$(ls -A "$TMPDIR")"
err "labels, too few" 2 "gives 1 name for 2 files" -- "$T/run.jsonl" "$T/dec.jsonl" -o "$T/x.svg" --labels a
err "labels, one file" 2 "names files compared" -- "$T/run.jsonl" -o "$T/x.svg" --labels a
err "raw compared" 2 "draws one file" -- "$T/run.jsonl" "$T/dec.jsonl" -o "$T/x.svg" --raw
err "compared, one missing" 1 "cannot open $T/nope.jsonl" -- "$T/run.jsonl" "$T/nope.jsonl" -o "$T/x.svg"
err "compared, one empty" 1 "empty.jsonl: no valid telemetry lines" -- "$T/run.jsonl" "$T/empty.jsonl" -o "$T/x.svg"
err "nine compared" 2 "expected" -- "$T/run.jsonl" "$T/run.jsonl" "$T/run.jsonl" "$T/run.jsonl" "$T/run.jsonl" "$T/run.jsonl" "$T/run.jsonl" "$T/run.jsonl" "$T/run.jsonl" -o "$T/x.svg"
check "no picture left by the errors" test ! -e "$T/x.svg" -a ! -e "$T/x.jpg"
PATH=/nonexistent "$S" plot "$T/run.jsonl" -o "$T/y.svg" >/dev/null 2>"$T/err.txt"
check "gnuplot absent: exit 1" test $? -eq 1
check "gnuplot absent: names the package" grep -q "gnuplot-nox" "$T/err.txt"
check "temp files removed after the errors" test -z "$(ls -A "$TMPDIR")"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
