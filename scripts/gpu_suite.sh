#!/usr/bin/env bash
# The validation run on a GPU machine: build every kernel, run every test, then the CUDA
# benchmarks. Logs go to $OUT (or ./gpu-logs). Usage:
#   bash scripts/gpu_suite.sh tests        # prebuild + the whole pytest suite
#   bash scripts/gpu_suite.sh benchmarks   # every CUDA benchmark, the call-overhead and load figures
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
    (cd benchmarks && $PY run_all_cuda.py) > "$LOG/bench_cuda.txt" 2>&1
    (cd benchmarks && $PY bench_quant.py && $PY bench_kv_cache.py) > "$LOG/bench_quant_kv.txt" 2>&1
    (cd benchmarks && $PY bench_call_overhead.py) > "$LOG/call_overhead.txt" 2>&1
    $PY benchmarks/bench_ffi_call.py --device cuda > "$LOG/ffi_call.txt" 2>&1
    $PY benchmarks/bench_jit_load.py --samples 10 > "$LOG/jit_load.txt" 2>&1
    $PY -m mllm_kernel demo > "$LOG/demo.txt" 2>&1
    for f in bench_cuda bench_quant_kv call_overhead ffi_call jit_load demo; do echo "== $f"; tail -25 "$LOG/$f.txt"; done
    ;;
esac
