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


PREBUILT_PATH_ENV = "MLLM_KERNEL_PREBUILT_PATH"
DISABLE_JIT_ENV = "MLLM_KERNEL_DISABLE_JIT"


def prebuilt_dirs() -> list[Path]:
    """The read-only folders of prebuilt modules, searched before the cache:
    ``$MLLM_KERNEL_PREBUILT_PATH``, ``:``-separated (empty when unset)."""
    value = os.environ.get(PREBUILT_PATH_ENV, "")
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]


def jit_disabled() -> bool:
    """Whether ``$MLLM_KERNEL_DISABLE_JIT`` forbids compiling (prebuilt and cached modules only)."""
    return os.environ.get(DISABLE_JIT_ENV, "").strip().lower() in ("1", "true", "yes", "on")
