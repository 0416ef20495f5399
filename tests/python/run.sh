#!/usr/bin/env bash
# One Python test file in the project venv: the ctest test python.<file>
# (tests/CMakeLists.txt registers one per tests/python/test_*.py; `ctest -L
# python` runs them all).
#   run.sh PYTHON FILE
# Exit 77 (ctest: skipped) when there is no venv, when pytest collected
# nothing (exit 5: a module-level skip, e.g. a framework not installed) or
# when every test of the file skipped; the reason is printed either way
# (pytest -rs). Each file runs in a fresh interpreter: what one file leaves
# in the process (TensorFlow's or Ray's threads, loaders with threads and
# io_uring rings) must not be there when another file's tests fork workers
# (torch DataLoader, sluice's generic mode): a fork of a process with other
# threads running can deadlock in the child.
py=$1 f=$2
if [ ! -x "$py" ]; then
  echo "SKIP: no project venv ($py); run scripts/install-deps --python"
  exit 77
fi
cd "$(dirname "$0")" || exit 1
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$py" -m pytest -q -rs "$f" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 5 ]; then
  echo "SKIP: $f: no test collected (the reason is above)"
  exit 77
fi
# pytest -q's last line, e.g. "3 skipped in 1.20s" or "1 skipped, 2 warnings in 0.90s"
if [ "$rc" -eq 0 ] && tail -n 1 "$log" | grep -Eq '^[0-9]+ skipped(, [0-9]+ warnings?)? in '; then
  echo "SKIP: $f: every test skipped (the reasons are above)"
  exit 77
fi
exit "$rc"
