#!/usr/bin/env bash
# Runs the Python tests in the project venv; skips (77) if there is none.
#   run.sh PYTHON [--ignore=FILE...]
# Each test file runs in a fresh interpreter: what one file leaves in the
# process (TensorFlow's or Ray's threads, loaders with threads and
# io_uring rings) must not be there when another file's tests fork
# workers (torch DataLoader, sluice's generic mode): a fork of a process
# with other threads running can deadlock in the child. A file that runs
# past 15 minutes fails instead of holding the run.
py=$1
if [ ! -x "$py" ]; then
  echo "SKIP: no project venv ($py); run scripts/install-deps --python"
  exit 77
fi
cd "$(dirname "$0")"
ignore=" ${*:2} "
files=0; failed=()
for f in test_*.py; do
  case "$ignore" in *" --ignore=$f "*) continue ;; esac
  timeout 900 "$py" -m pytest -q -rs "$f"
  rc=$?
  [ $rc -eq 5 ] && continue # nothing collected in this file
  files=$((files + 1))
  [ $rc -eq 0 ] || failed+=("$f (exit $rc)")
done
[ $files -eq 0 ] && { echo "SKIP: no Python tests collected"; exit 77; }
echo "python: $files files, $((files - ${#failed[@]})) passed, ${#failed[@]} failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
