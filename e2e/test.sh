#!/usr/bin/env bash
# `make test`: every tier but bench, on the local real control plane. Exits non-zero when any
# check fails or when pytest collected no test (exit 5). The cluster is torn down even on failure.
#   e2e/test.sh              static checks, then every test but the long fault scenarios
#   e2e/test.sh ARGS...      no static checks; pytest ARGS on a fresh cluster (`make faults`)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH="$ROOT/.venv/bin:$PATH"

if [ $# -eq 0 ]; then
  echo "== static checks"
  make --no-print-directory lint
  set -- tests e2e -m "not long"  # the long fault scenarios run in `make faults`
fi

echo "== image"
# built or reused (cache keyed by its inputs); the chart tier runs the operator from it
make --no-print-directory image

echo "== local control plane"
e2e/toolchain.sh >/dev/null
# The cluster goes down whatever happened; if anything is left running, that fails the run too.
trap 'code=$?; e2e/cluster.sh down || code=1; exit $code' EXIT
e2e/cluster.sh up >/dev/null
eval "$(e2e/cluster.sh env)"

echo "== tests"
set +e
pytest -p no:cacheprovider "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$code"
