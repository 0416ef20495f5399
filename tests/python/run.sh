#!/usr/bin/env bash
# Runs the Python tests in the project venv; skips (77) if there is none.
#   run.sh PYTHON [PYTEST_ARGS...]
py=$1
if [ ! -x "$py" ]; then
  echo "SKIP: no project venv ($py); run scripts/install-deps --python"
  exit 77
fi
cd "$(dirname "$0")"
"$py" -m pytest -q -rs . "${@:2}" # then --ignore=FILE...
rc=$?
[ $rc -eq 5 ] && { echo "SKIP: no Python tests collected"; exit 77; }
exit $rc
