#!/usr/bin/env bash
# Configures, builds and runs the C++ unit tests and header checks (tests/cpp) through ctest.
#
#   tests/cpp/run.sh [extra ctest arguments]
#   tests/cpp/run.sh -R TensorMatcher     # a subset
#   tests/cpp/run.sh -LE nvcc             # without the (minutes-long) nvcc header checks
#
# Build dir: build/cpp-tests under the repository root (override with MLLM_KERNEL_CPP_BUILD_DIR).
# Builds with at most 2 jobs (MLLM_KERNEL_CPP_JOBS, default 1). Uses the first python3 on PATH
# (override with PYTHON) to locate tvm-ffi. Exits non-zero when configuring, building or any
# test fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${MLLM_KERNEL_CPP_BUILD_DIR:-$repo/build/cpp-tests}"
jobs="${MLLM_KERNEL_CPP_JOBS:-1}"
python="${PYTHON:-$(command -v python3)}"

generator=()
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  # Ninja when available; a build dir keeps the generator it was first configured with.
  if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi
fi

cmake -S "$here" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DPython3_EXECUTABLE="$python"
cmake --build "$build" -j "$jobs"
cd "$build"
ctest --output-on-failure "$@"
