#!/usr/bin/env bash
# Sets up everything mllm-kernel needs on a fresh machine: system packages (installed with
# apt-get when run as root on Debian/Ubuntu, otherwise listed for you to install), a virtual
# environment in .venv with PyTorch, apache-tvm-ffi, pytest and this package (editable).
#
#   bash scripts/setup.sh            # then: source .venv/bin/activate
#
# Variables: MLLM_KERNEL_TORCH (pip spec for PyTorch, default torch==2.13.0 with a fallback to
# the newest torch), MLLM_KERNEL_VENV (default .venv), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${MLLM_KERNEL_VENV:-.venv}
TORCH_SPEC=${MLLM_KERNEL_TORCH:-torch==2.13.0}

# --- system packages: what is missing, by the file or command that proves it is there ---------
need=()
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
[ -f /usr/include/hwy/highway.h ] || [ -n "${MLLM_KERNEL_HWY_ROOT:-}" ] || need+=(libhwy-dev)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing system packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "setup: missing system packages: ${need[*]}" >&2
    echo "setup: install them with: sudo apt-get install ${need[*]}" >&2
    echo "setup: (or on Fedora: dnf install gcc-c++ cmake highway-devel gtest-devel pkgconf)" >&2
    exit 1
  fi
fi

# --- the CUDA compiler: the toolkit when present, else PyPI's wheels (compile-only machines) ----
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDA_HOME:-}" ]; then
  echo "setup: no CUDA toolkit found; CUDA kernels will not compile (CPU kernels work)." >&2
  echo "setup: install the CUDA toolkit, or the PyPI wheels nvidia-cuda-nvcc, nvidia-cuda-runtime," >&2
  echo "setup: nvidia-cuda-cccl into one folder and point CUDA_HOME at it." >&2
fi

# --- Python environment -------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip >/dev/null
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install -q "$TORCH_SPEC" || "$PY" -m pip install -q torch
fi
"$PY" -m pip install -q -e ".[dev]"
# CUTLASS's C++ headers for the GEMM kernels: the wheel's Python side (and its dependencies) is
# not used, so it is installed without them.
"$PY" -m pip install -q --no-deps "nvidia-cutlass==4.2.0.0"
"$PY" - <<'PY'
import torch, tvm_ffi, mllm_kernel
print(f"setup: ready (python {__import__('sys').version.split()[0]}, torch {torch.__version__}, "
      f"tvm-ffi {tvm_ffi.__version__}, mllm-kernel {mllm_kernel.__version__})")
PY
