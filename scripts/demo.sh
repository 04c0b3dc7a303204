#!/usr/bin/env bash
# One command from a fresh clone: set everything up, then compile, load, run and check every
# kernel (CPU, and CUDA when a GPU is present) and print the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${MLLM_KERNEL_VENV:-.venv}/bin/python" -m mllm_kernel demo "$@"
