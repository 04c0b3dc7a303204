"""The CUDA device properties the wrappers read on every call to pick a kernel or a plan,
cached per device index (they do not change while a process runs)."""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=None)
def capability(index: int) -> tuple[int, int]:
    """The compute capability of CUDA device ``index``."""
    return torch.cuda.get_device_capability(index)


@functools.lru_cache(maxsize=None)
def sm_count(index: int) -> int:
    """The streaming multiprocessors of CUDA device ``index``."""
    return torch.cuda.get_device_properties(index).multi_processor_count
