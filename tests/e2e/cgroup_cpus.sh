#!/usr/bin/env bash
# End-to-end test of a CPU quota (a container's `--cpus 1`, a Kubernetes
# CPU limit): the process's affinity mask holds every CPU, its cgroup gives
# it time for one. sluice's defaults (decode threads, the budgets) and its
# telemetry's ncpu_usable go by the quota, not the mask; the stream is the
# same. Needs root and a writable cgroup v1 cpu controller (or cgroup v2
# with the cpu controller enabled for children) and two CPUs; skipped,
# with the reason, elsewhere.
set -uo pipefail
. "$(dirname "$0")/lib.sh" cgroup_cpus
if [ "$(nproc)" -lt 2 ]; then echo "skip: $(nproc) CPU: a quota of one changes nothing"; exit 77; fi
g=
if [ -w /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] || [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
  g=/sys/fs/cgroup/cpu/sluice-e2e-$$
  mkdir "$g" 2>/dev/null && echo 100000 >"$g/cpu.cfs_period_us" &&
    echo 100000 >"$g/cpu.cfs_quota_us" 2>/dev/null || g=
elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  g=/sys/fs/cgroup/sluice-e2e-$$
  mkdir "$g" 2>/dev/null && echo "100000 100000" >"$g/cpu.max" 2>/dev/null || g=
fi
if [ -z "$g" ]; then
  echo "skip: no writable cgroup CPU controller here (not root, or none mounted)"; exit 77
fi
trap 'rmdir "$g" 2>/dev/null; rm -rf "$T"' EXIT
"$S" make-dataset --synthetic "$T/ds" --images 64 --classes 2 >/dev/null 2>&1 \
  || { echo "FAIL make-dataset"; exit 1; }
run=("$S" run "$T/ds" --batch 8 --size 32 --digest --json)
free=$("${run[@]}" --telemetry "$T/free.jsonl" 2>/dev/null | tail -1)
quota=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$g" \
  "${run[@]}" --telemetry "$T/quota.jsonl" 2>/dev/null | tail -1)
echo "without the quota: $free"
echo "with a 1-CPU quota: $quota"
check "default threads: the CPUs ($(nproc)) without a quota" \
  [ "$(jget threads <<<"$free")" = "$(nproc)" ]
check "default threads: 1 under a 1-CPU quota (the mask holds $(nproc))" \
  [ "$(jget threads <<<"$quota")" = 1 ]
d=$(jget digest <<<"$free")
same() { [ -n "$d" ] && [ "$d" = "$(jget digest <<<"$quota")" ]; }
check "the stream is the same ($d)" same
check "telemetry says ncpu_usable 1 under the quota" \
  grep -q '"ncpu_usable": 1[,}]' "$T/quota.jsonl"
check "telemetry says ncpu_usable $(nproc) without" \
  grep -q "\"ncpu_usable\": $(nproc)[,}]" "$T/free.jsonl"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
