#!/usr/bin/env bash
# Simulator validation (issue 4): calibrate a profile from ONE real run,
# then predict the throughput of other configurations and compare with
# real runs of them. The machine is shared and its foreign load changes
# from second to second, so each prediction is made three ways:
#   sim_env  the background measured during the run it predicts: the
#            foreign demand `sluice calibrate` reads from that run's
#            telemetry (other processes' CPU over the share of a core our
#            threads got). Environment only: the run's throughput and its
#            stage costs are not used; the costs come from the profile.
#   sim_probe  the background from a load probe before and after the run
#            (ncpu busy processes for 1 s; each one's share s of a core
#            gives E = ncpu x (1/s - 1)); (c)'s busy process is added as
#            its nominal 1 core. Fully independent of the run.
#   sim_0    no background at all ((c): its nominal 1 core only).
# The error of medians is reported for sim_env (the target) and sim_probe.
#
#   bench/sim_validate.sh [DATA] [REPS]     (env SLUICE, EPOCHS, OUT)
# Prints one line per run and a summary: median measured vs median
# simulated per configuration, and the error of the medians.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
S=${SLUICE:-$ROOT/build-sim/sluice}
DATA=${1:-$ROOT/../shared/data/imagenet-sample}
REPS=${2:-3}
EPOCHS=${EPOCHS:-5}
OUT=${OUT:-$(mktemp -d /tmp/sim_validate.XXXXXX)}
NCPU=$(nproc)
[ -x "$S" ] || { echo "no sluice binary at $S (set SLUICE)"; exit 1; }
[ -d "$DATA" ] || { echo "no data at $DATA"; exit 1; }
command -v python3 >/dev/null || { echo "python3 needed for the load probe"; exit 1; }
mkdir -p "$OUT"
jget() { sed -n 's/.*"'"$1"'": \("\{0,1\}\)\([^",}]*\)\1.*/\2/p' | tail -1; }

# Foreign demand in cores' worth of busy threads (>= 0).
probe() {
  local f=$OUT/probe.$$ i
  for ((i = 0; i < NCPU; i++)); do
    python3 -c 'import time
t0 = time.time(); c0 = time.process_time()
while time.time() - t0 < 1.0: pass
print((time.process_time() - c0) / (time.time() - t0))' >"$f.$i" &
  done
  wait
  cat "$f".* | awk -v n="$NCPU" '{ s += $1; k++ } END {
    s /= k; if (s > 0.999) s = 0.999; if (s < 0.05) s = 0.05;
    e = n * (1 / s - 1); printf "%.3f\n", (e < 0.05 ? 0 : e) }'
  rm -f "$f".*
}

STEP_B=100 # consumer demand 640 img/s: paces 2 threads on a quiet machine
STEP_D=40
LAT_E=5        # emulated storage (the engine's throttle): 1 reader, 5 ms
BW_F=20000000  # emulated storage: 20 MB/s shared by 4 readers
CONFIGS=${CONFIGS:-a b c d e f}
config_args() { # name -> sluice run args (without data)
  case $1 in
    a) echo "--threads 1 --prefetch 2" ;;
    b) echo "--threads 2 --prefetch 4 --step-ms $STEP_B" ;;
    c) echo "--threads 2 --prefetch 4" ;;
    d) echo "--threads 2 --prefetch 1 --step-ms $STEP_D" ;;
    e) echo "--threads 2 --read-threads 1 --prefetch 4 --read-latency-ms $LAT_E" ;;
    f) echo "--threads 2 --read-threads 4 --prefetch 4 --read-bw $BW_F" ;;
  esac
}
sim_storage() { # name -> the same storage for the simulator
  case $1 in
    e) echo "--storage-latency-ms $LAT_E" ;;
    f) echo "--storage-bw $BW_F" ;;
  esac
}
describe() {
  case $1 in
    a) echo "1 thread, prefetch 2 (calibration config)" ;;
    b) echo "2 threads, prefetch 4, --step-ms $STEP_B" ;;
    c) echo "2 threads, prefetch 4, + busy process" ;;
    d) echo "2 threads, prefetch 1, --step-ms $STEP_D (held out)" ;;
    e) echo "2 threads, 1 reader, --read-latency-ms $LAT_E (held out)" ;;
    f) echo "2 threads, 4 readers, --read-bw $BW_F (held out)" ;;
  esac
}

echo "# $(date -u '+%F %H:%M') UTC  $(uname -n)  ncpu $NCPU  load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# data $DATA, $EPOCHS epochs per run, $REPS reps, sluice $S"

# 1. Calibrate from one run of (a), twice as long as the others.
E0=$(probe)
"$S" run "$DATA" --policy static --threads 1 --prefetch 2 --epochs "$((2 * EPOCHS))" \
  --telemetry "$OUT/calib.jsonl" --json >"$OUT/calib.out" 2>/dev/null \
  || { echo "calibration run failed"; exit 1; }
"$S" calibrate "$OUT/calib.jsonl" -o "$OUT/profile.json" --json >"$OUT/calib.fit" \
  || { echo "calibrate failed"; exit 1; }
echo "# calibration run: $(jget samples_per_s <"$OUT/calib.out") img/s, probe E $E0;" \
  "fit: $(cat "$OUT/calib.fit")"
SAMPLES=$((EPOCHS * $(jget samples <"$OUT/calib.out") / (2 * EPOCHS)))

# 2. Validation runs, configurations interleaved.
printf '%-4s %-3s %6s %6s %8s %8s %8s %8s %7s %7s\n' cfg rep E_env E_probe measured sim_env sim_probe sim_0 err_env err_prb
: >"$OUT/runs.txt"
for ((r = 1; r <= REPS; r++)); do
  for c in $CONFIGS; do
    args=$(config_args "$c")
    e1=$(probe)
    busy=
    if [ "$c" = c ]; then
      python3 -c 'while True: pass' &
      busy=$!
      sleep 0.3
    fi
    # shellcheck disable=SC2086
    "$S" run "$DATA" --policy static $args --epochs "$EPOCHS" --json \
      --telemetry "$OUT/run.$c.$r.jsonl" >"$OUT/run.$c.$r.out" 2>/dev/null
    [ -n "$busy" ] && { kill "$busy"; wait "$busy" 2>/dev/null; }
    e2=$(probe)
    meas=$(jget samples_per_s <"$OUT/run.$c.$r.out")
    ebg=$(awk -v a="$e1" -v b="$e2" 'BEGIN { printf "%.3f", (a + b) / 2 }')
    extra=0
    [ "$c" = c ] && extra=1
    step=()
    case $c in b) step=(--step-ms $STEP_B) ;; d) step=(--step-ms $STEP_D) ;; esac
    sim() { # interference -> simulated img/s
      # shellcheck disable=SC2086
      "$S" simulate --profile "$OUT/profile.json" --policy static \
        $(echo "$args" | sed 's/--step-ms [0-9.]*//; s/--read-latency-ms [0-9.]*//; s/--read-bw [0-9.]*//') \
        "${step[@]}" $(sim_storage "$c") \
        --samples "$SAMPLES" --interfere "$1" --seed "$r" --json | jget samples_per_s
    }
    # shellcheck disable=SC2046
    eenv=$("$S" calibrate "$OUT/run.$c.$r.jsonl" -o "$OUT/env.$c.$r.json" \
      $(sim_storage "$c") --json | jget foreign_demand)
    senv=$(sim "${eenv:-0}")
    sbg=$(sim "$(awk -v e="$ebg" -v x="$extra" 'BEGIN { print e + x }')")
    snom=$(sim "$extra")
    err=$(awk -v s="$senv" -v m="$meas" 'BEGIN { printf "%+.1f%%", 100 * (s - m) / m }')
    erp=$(awk -v s="$sbg" -v m="$meas" 'BEGIN { printf "%+.1f%%", 100 * (s - m) / m }')
    printf '%-4s %-3s %6s %6s %8s %8s %8s %8s %7s %7s\n' "$c" "$r" "$eenv" "$ebg" "$meas" "$senv" "$sbg" "$snom" "$err" "$erp"
    echo "$c $r $eenv $ebg $meas $senv $sbg $snom" >>"$OUT/runs.txt"
  done
done

# 3. Medians per configuration.
echo
echo "| config | measured img/s (median [min..max]) | sim_env | error | sim_probe | error | sim_0 | E_env (cores) | E_probe |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
worst=0
for c in $CONFIGS; do
  line=$(awk -v c="$c" '$1 == c' "$OUT/runs.txt" | python3 -c '
import sys, statistics as st
rows = [list(map(float, l.split()[2:])) for l in sys.stdin if l.strip()]
ee, ep, m, se, sp, s0 = zip(*rows)
med = st.median
er = lambda s: 100 * (med(s) - med(m)) / med(m)
print(f"{med(m):.0f} [{min(m):.0f}..{max(m):.0f}] | {med(se):.0f} | {er(se):+.1f}% | {med(sp):.0f} | {er(sp):+.1f}% | {med(s0):.0f} | {med(ee):.2f} [{min(ee):.2f}..{max(ee):.2f}] | {med(ep):.2f}")')
  echo "| $(describe "$c") | $line |"
  w=$(echo "$line" | awk -F'|' '{ gsub(/[ %+-]/, "", $3); print $3 }')
  worst=$(awk -v a="$worst" -v b="$w" 'BEGIN { print (b > a ? b : a) }')
done
echo
echo "largest |error of medians| (sim_env): ${worst}%  (target <= 15%)  load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "files: $OUT"
