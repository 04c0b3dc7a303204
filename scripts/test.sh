#!/usr/bin/env bash
# One command from a fresh clone: set everything up, then run the Python tests (pytest) and the
# C++ tests (GoogleTest and header checks through ctest). Fails when any test fails or none ran.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY="${MLLM_KERNEL_VENV:-.venv}/bin/python"
status=0
"$PY" -m pytest -q -p no:cacheprovider tests "$@" || status=$?
if [ "$status" = 5 ]; then echo "test: pytest collected no tests" >&2; exit 1; fi
[ "$status" = 0 ] || exit "$status"
PYTHON="$PY" bash tests/cpp/run.sh
