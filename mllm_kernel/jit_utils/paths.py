"""Where the package's headers and kernel sources live, and where compiled modules are cached."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
#: The header library: ``#include <mllm_kernel/tensor.hpp>`` resolves here.
INCLUDE_DIR = PACKAGE_DIR / "include"
#: Per-target Highway bodies: ``#include <mllm_kernel/cpu/add_constant.hpp>``.
CPU_INCLUDE_DIR = PACKAGE_DIR / "cpu" / "include"
CPU_CSRC_DIR = PACKAGE_DIR / "cpu" / "csrc"
CUDA_CSRC_DIR = PACKAGE_DIR / "cuda" / "csrc"

CACHE_DIR_ENV = "MLLM_KERNEL_CACHE_DIR"


def cache_root() -> Path:
    """The cache folder: ``$MLLM_KERNEL_CACHE_DIR`` or ``~/.cache/mllm_kernel``."""
    override = os.environ.get(CACHE_DIR_ENV)
    return Path(override).expanduser() if override else Path("~/.cache/mllm_kernel").expanduser()
