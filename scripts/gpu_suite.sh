#!/usr/bin/env bash
# The validation run on a GPU machine: build every kernel, run every test, then the CUDA
# benchmarks. Logs go to $OUT (or ./gpu-logs). Usage:
#   bash scripts/gpu_suite.sh tests        # prebuild + the whole pytest suite
#   bash scripts/gpu_suite.sh benchmarks [PARTS]  # every CUDA benchmark (or --only PARTS), results into
#                                                  # benchmarks/results/cuda.json; then benchmarks/report.py
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${OUT:-gpu-logs}
mkdir -p "$LOG"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}

case "${1:-tests}" in
  tests)
    $PY -m mllm_kernel show-env > "$LOG/show-env.txt" 2>&1
    $PY -m mllm_kernel prebuild --jobs "$(nproc)" > "$LOG/prebuild.txt" 2>&1 || { tail -40 "$LOG/prebuild.txt"; exit 1; }
    tail -1 "$LOG/prebuild.txt"
    $PY -m pytest -q -p no:cacheprovider tests > "$LOG/pytest.txt" 2>&1
    status=$?
    grep -E "^(FAILED|ERROR)" "$LOG/pytest.txt" | head -20
    tail -1 "$LOG/pytest.txt"
    exit $status
    ;;
  benchmarks)
    $PY -m mllm_kernel prebuild --device cuda --jobs "$(nproc)" > "$LOG/prebuild.txt" 2>&1
    only=${2:+--only $2}
    $PY benchmarks/run_all_cuda.py $only --json benchmarks/results/cuda.json > "$LOG/bench_cuda.txt" 2>&1
    status=$?
    cp benchmarks/results/cuda.json "$LOG/cuda.json"
    tail -60 "$LOG/bench_cuda.txt"
    exit $status
    ;;
esac
