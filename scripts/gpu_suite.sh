#!/usr/bin/env bash
# The validation run on a GPU machine: build every kernel, run every test, then the CUDA
# benchmarks. Logs go to $OUT (or ./gpu-logs). Usage:
#   bash scripts/gpu_suite.sh tests        # prebuild + the whole pytest suite
#   bash scripts/gpu_suite.sh benchmarks   # every CUDA benchmark, the call-overhead and load figures
#   bash scripts/gpu_suite.sh tuning       # norm, activation and KV-store shapes, quantizer variants, Nsight Compute on small tokens
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
  tuning)
    $PY benchmarks/tuning/tune_norm.py > "$LOG/tune_norm.txt" 2>&1
    $PY benchmarks/tuning/tune_quant.py > "$LOG/tune_quant.txt" 2>&1
    $PY benchmarks/tuning/tune_act.py > "$LOG/tune_act.txt" 2>&1
    $PY benchmarks/tuning/tune_kv.py > "$LOG/tune_kv.txt" 2>&1
    if command -v ncu > /dev/null; then
      ncu --profile-from-start off --section SpeedOfLight --section LaunchStats --section Occupancy \
        --section WarpStateStats -f -o "$LOG/small" $PY benchmarks/tuning/profile_small.py > "$LOG/ncu.txt" 2>&1
      ncu --import "$LOG/small.ncu-rep" --page details > "$LOG/ncu_details.txt" 2>&1
      grep -E "^  [a-z_]|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Block Size|Grid Size" \
        "$LOG/ncu_details.txt" > "$LOG/ncu_summary.txt"
    fi
    for f in tune_norm tune_quant tune_act tune_kv ncu_summary; do echo "== $f"; tail -150 "$LOG/$f.txt" 2>/dev/null; done
    ;;
esac
